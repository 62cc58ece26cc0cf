//! The local stack of a service (`cqrs dev`): DynamoDB Local with streams, the tables of the
//! service's `template.yaml`, its functions under `cargo lambda watch` behind one base URL on
//! 127.0.0.1, and the stream mapping that feeds the command table's stream to data-sync. When the
//! service has a `sql-sync` binary (the relational read model), also a PostgreSQL of its own and a
//! second mapping: the data table's stream into sql-sync. When it has an `event-publisher` binary
//! (the change feed), also moto's server (SNS and SQS) with the feed's topic and each consumer's
//! queues ([`crate::events`]), a third mapping (the data table's stream into the publisher: DynamoDB
//! Local's streams have no reader limit) and one SQS mapping per consumer of `model.toml`, each a
//! process of its own, as Lambda runs one event source mapping per function: a consumer whose
//! mapping fails or is slow holds no other, and each has its own log (`sqs-mapper-<name>.log`).
//!
//! Every process it starts is recorded in the state folder (`<name>.pid`, `<name>.log`), in its own
//! process group, so that [`down`] (another process, later) stops them all, and a failed [`Dev::up`]
//! stops what it had started.
//!
//! ```no_run
//! # async fn example() -> Result<(), cqrs_local_stack::dev::DevError> {
//! use cqrs_local_stack::dev::{Dev, down};
//! let dev = Dev::new(std::env::current_dir().unwrap(), vec!["cqrs".into(), "dev".into(), "stream-mapper".into()]);
//! let stack = dev.up().await?;
//! println!("{}", stack.api);
//! down(&dev.state)?;
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::dynamodb_local::{self, Install, answers_http, is_live, port_busy, stop_group, tail};

/// What the command line of the functions' process holds.
const FUNCTIONS_MARKER: &str = "watch";
/// What the command line of the stream mapper's process holds.
const MAPPER_MARKER: &str = "stream-mapper";
/// What the command line of a consumer's SQS mapping process holds.
const SQS_MAPPER_MARKER: &str = "sqs-mapper";
/// The stream mappers' process names (pid and log files), in the order they start.
const STREAM_MAPPERS: [&str; 3] = ["stream-mapper", "sql-mapper", "events-mapper"];
/// The prefix of a consumer's SQS mapping process name (`sqs-mapper-<consumer>`).
const SQS_MAPPER_PREFIX: &str = "sqs-mapper-";
/// The change feed's publisher: its binary and function, fed by the data table's stream.
const PUBLISHER: &str = "event-publisher";

/// Why the local stack did not come up, or could not be stopped.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    /// DynamoDB Local could not be installed or started.
    #[error(transparent)]
    DynamoDbLocal(#[from] dynamodb_local::Error),
    /// The stack of this state folder is running already.
    #[error("the local stack of {0} is already running (cqrs dev down stops it)")]
    AlreadyRunning(PathBuf),
    /// A step failed.
    #[error("{0}")]
    Step(String),
}

/// The settings of a local stack.
#[derive(Debug, Clone)]
pub struct Dev {
    /// The service's folder: its `Cargo.toml` (whose `[package.metadata.lambda.watch.router]` routes
    /// the HTTP API) and `template.yaml`.
    pub root: PathBuf,
    /// Logs, pid files, the functions' environment (default `<root>/.local/dev`).
    pub state: PathBuf,
    /// Where DynamoDB Local is installed (default `<root>/.local/dynamodb-local`).
    pub install: Install,
    /// The HTTP API's port on 127.0.0.1 (default 9000).
    pub api_port: u16,
    /// DynamoDB Local's port (default 8000; `None`: a free one).
    pub dynamodb_port: Option<u16>,
    /// The template's `Prefix` parameter for the tables' names (default `local`).
    pub prefix: String,
    /// Rebuild and restart a function when its code changes (default true).
    pub reload: bool,
    /// The function fed by the command table's stream (default `data-sync`).
    pub sync_function: String,
    /// The `cargo-lambda` program (default: `<root>/.venv/bin/cargo-lambda` when it exists, else
    /// `cargo-lambda` on PATH).
    pub cargo_lambda: PathBuf,
    /// The stream mapper's command; the table, the API's base URL and the function are appended
    /// (`cqrs dev stream-mapper`).
    pub mapper: Vec<OsString>,
    /// `RUST_LOG` of the functions (default `info`).
    pub rust_log: String,
    /// The function fed by the data table's stream, the relational read model's (default
    /// `sql-sync` when the service has `src/bin/sql-sync.rs`, else none): with it, a PostgreSQL of
    /// the stack's own runs too, and the functions get its `SQL_URL`.
    pub sql_function: Option<String>,
    /// PostgreSQL's port (default: a free one).
    pub postgres_port: Option<u16>,
    /// moto's server program, when the stack runs the change feed (default:
    /// `<root>/.venv/bin/moto_server` when the service has `src/bin/event-publisher.rs`, else
    /// none): with it, moto runs, the data table's stream feeds `event-publisher`, and each
    /// consumer of `model.toml` gets its queues and its SQS mapping.
    pub moto: Option<PathBuf>,
    /// A consumer's SQS mapping command; the queue's URL, the API's base URL and the consumer's
    /// function are appended (`cqrs dev sqs-mapper`; default: [`Dev::mapper`] with its last word
    /// `sqs-mapper`).
    pub sqs_mapper: Vec<OsString>,
}

/// A stack that is up.
#[derive(Debug, Clone)]
pub struct Stack {
    /// The HTTP API's base URL.
    pub api: String,
    /// DynamoDB Local's endpoint.
    pub dynamodb: String,
    /// The tables' names by logical id.
    pub tables: HashMap<String, String>,
    /// What was done, one line per table and process.
    pub lines: Vec<String>,
}

impl Dev {
    /// The defaults for the service in `root`, the stream mapper run as `mapper`.
    ///
    /// ```
    /// let dev = cqrs_local_stack::dev::Dev::new("/srv/shop".into(), vec!["cqrs".into()]);
    /// assert_eq!(dev.api_port, 9000);
    /// assert_eq!(dev.state, std::path::Path::new("/srv/shop/.local/dev"));
    /// ```
    pub fn new(root: PathBuf, mapper: Vec<OsString>) -> Self {
        let venv = root.join(".venv/bin/cargo-lambda");
        let mut sqs_mapper = mapper.clone();
        if let Some(last) = sqs_mapper.last_mut() {
            *last = SQS_MAPPER_MARKER.into();
        }
        Dev {
            state: root.join(".local/dev"),
            install: Install::new(root.join(".local/dynamodb-local")),
            api_port: 9000,
            dynamodb_port: Some(8000),
            prefix: "local".into(),
            reload: true,
            sync_function: "data-sync".into(),
            cargo_lambda: if venv.is_file() {
                venv
            } else {
                "cargo-lambda".into()
            },
            mapper,
            rust_log: "info".into(),
            sql_function: root
                .join("src/bin/sql-sync.rs")
                .is_file()
                .then(|| "sql-sync".to_string()),
            postgres_port: None,
            moto: root
                .join("src/bin/event-publisher.rs")
                .is_file()
                .then(|| crate::moto::server_program(&root.join(".venv"))),
            sqs_mapper,
            root,
        }
    }

    /// The template's path.
    fn template(&self) -> PathBuf {
        self.root.join("template.yaml")
    }

    /// The consumers `model.toml` declares, each with its binary.
    fn consumers(&self) -> Result<Vec<cqrs_model::ConsumerFunction>, DevError> {
        let path = self.root.join("model.toml");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| DevError::Step(format!("{}: {e}", path.display())))?;
        let model = cqrs_model::Model::parse(&text)
            .map_err(|e| DevError::Step(format!("{}: {e}", path.display())))?;
        for consumer in model.consumers() {
            let binary = format!("src/bin/{}.rs", consumer.name);
            if !self.root.join(&binary).is_file() {
                return Err(DevError::Step(format!(
                    "model.toml declares [consumers.{}], but {binary} is missing (its function: cqrs_consumer::run)",
                    consumer.name
                )));
            }
        }
        Ok(model.consumers().to_vec())
    }

    /// Brings the stack up and returns once the API answers; everything keeps running in the
    /// background until [`down`]. When a step fails, what it started is stopped again.
    pub async fn up(&self) -> Result<Stack, DevError> {
        if pid_of(&self.state, "functions", FUNCTIONS_MARKER).is_some() {
            return Err(DevError::AlreadyRunning(self.state.clone()));
        }
        std::fs::create_dir_all(&self.state)
            .map_err(|e| DevError::Step(format!("{}: {e}", self.state.display())))?;
        let result = self.start().await;
        if result.is_err() {
            let _ = down(&self.state);
        }
        result
    }

    async fn start(&self) -> Result<Stack, DevError> {
        let mut lines = Vec::new();
        if port_busy(self.api_port) {
            return Err(DevError::Step(format!(
                "127.0.0.1:{} is in use: give the API another port (--api-port)",
                self.api_port
            )));
        }
        let specs = cqrs_testkit::template::load_template(self.template())
            .map_err(|e| DevError::Step(e.to_string()))?;
        self.install.ensure()?;
        let instance = dynamodb_local::start(&self.install, &self.state, self.dynamodb_port)?;
        let dynamodb = instance.endpoint();
        lines.push(format!("DynamoDB Local   {dynamodb}"));

        // Build first, so that a compile error shows here, not as the first request's answer.
        run_step(
            Command::new("cargo")
                .args(["build", "--bins"])
                .current_dir(&self.root),
            "cargo build --bins",
        )?;

        let (table_lines, tables) = crate::stack::create_tables(&dynamodb, &specs, &self.prefix)
            .await
            .map_err(DevError::Step)?;
        lines.extend(table_lines);

        let mut env = self.environment(&dynamodb, &tables);
        if self.sql_function.is_some() {
            let install = crate::postgres::Install::new();
            install
                .ensure()
                .map_err(|e| DevError::Step(e.to_string()))?;
            let postgres = crate::postgres::start(&install, &self.state, self.postgres_port)
                .map_err(|e| DevError::Step(e.to_string()))?;
            lines.push(format!("PostgreSQL       {}", postgres.url()));
            env.push(("SQL_URL".into(), postgres.url()));
        }
        let feed = match &self.moto {
            Some(program) => {
                let consumers = self.consumers()?;
                let moto = crate::moto::start(program, &self.state, None)?;
                let endpoint = moto.endpoint();
                lines.push(format!("moto (SNS, SQS)  {endpoint}"));
                let feed = crate::events::Feed::create(&endpoint, &self.prefix, &consumers)
                    .await
                    .map_err(DevError::Step)?;
                lines.extend(feed.lines());
                env.extend(feed.functions_env());
                let path = self.state.join(crate::events::EVENTS_ENV);
                std::fs::write(&path, feed.env_file())
                    .map_err(|e| DevError::Step(format!("{}: {e}", path.display())))?;
                Some(feed)
            }
            None => None,
        };
        let env_file = self.state.join("functions.env");
        let text: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        std::fs::write(&env_file, text)
            .map_err(|e| DevError::Step(format!("{}: {e}", env_file.display())))?;

        let api = format!("http://127.0.0.1:{}", self.api_port);
        let mut watch = Command::new(&self.cargo_lambda);
        watch.args(["lambda", "watch"]);
        if !self.reload {
            watch.arg("--ignore-changes");
        }
        watch
            .args(["-A", "127.0.0.1", "-P", &self.api_port.to_string()])
            .arg("--env-file")
            .arg(&env_file)
            .current_dir(&self.root);
        let mut functions = spawn(&self.state, "functions", &mut watch)?;
        lines.push(format!(
            "functions        {api} (cargo lambda watch, pid {})",
            functions.id()
        ));
        let deadline = Instant::now() + Duration::from_secs(120);
        while !answers_http(self.api_port) {
            if !matches!(functions.try_wait(), Ok(None)) || Instant::now() > deadline {
                return Err(DevError::Step(format!(
                    "cargo lambda watch did not answer on {api}:\n{}",
                    tail(&self.state.join("functions.log"), 30)
                )));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }

        let (program, args) = self
            .mapper
            .split_first()
            .ok_or_else(|| DevError::Step("no stream mapper command".into()))?;
        // Each mapping a process of its own; all are checked once, a second after they started.
        let mut started: Vec<(String, Child, String)> = Vec::new();
        let mut stream_mapping =
            |name: &str, table: &str, function: &str, failures: &str| -> Result<(), DevError> {
                let mut command = Command::new(program);
                command
                    .args(args)
                    .arg(table)
                    .arg(&api)
                    .arg(function)
                    .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                    .env("CQRS_TEMPLATE", self.template())
                    .env("STREAM_FAILURES_FILE", self.state.join(failures))
                    .current_dir(&self.root);
                let child = spawn(&self.state, name, &mut command)?;
                started.push((
                    name.to_string(),
                    child,
                    format!("stream mapping   {table} stream -> {function}"),
                ));
                Ok(())
            };
        let table = |id: &str| {
            tables
                .get(id)
                .ok_or_else(|| DevError::Step(format!("template.yaml has no {id}")))
        };
        stream_mapping(
            STREAM_MAPPERS[0],
            table(cqrs_testkit::template::COMMAND_TABLE)?,
            &self.sync_function,
            "stream-failures.jsonl",
        )?;
        if let Some(function) = &self.sql_function {
            stream_mapping(
                STREAM_MAPPERS[1],
                table(cqrs_testkit::template::DATA_TABLE)?,
                function,
                "sql-stream-failures.jsonl",
            )?;
        }
        if let Some(feed) = &feed {
            stream_mapping(
                STREAM_MAPPERS[2],
                table(cqrs_testkit::template::DATA_TABLE)?,
                PUBLISHER,
                "events-stream-failures.jsonl",
            )?;
            let (program, args) = self
                .sqs_mapper
                .split_first()
                .ok_or_else(|| DevError::Step("no SQS mapper command".into()))?;
            for consumer in &feed.consumers {
                let name = format!("{SQS_MAPPER_PREFIX}{}", consumer.name);
                let mut command = Command::new(program);
                command
                    .args(args)
                    .arg(&consumer.queue_url)
                    .arg(&api)
                    .arg(&consumer.name)
                    .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                    .current_dir(&self.root);
                let child = spawn(&self.state, &name, &mut command)?;
                let queue = consumer.queue_url.rsplit('/').next().unwrap_or_default();
                started.push((
                    name,
                    child,
                    format!("queue mapping    {queue} -> {}", consumer.name),
                ));
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        for (name, mut child, line) in started {
            if !matches!(child.try_wait(), Ok(None)) {
                return Err(DevError::Step(format!(
                    "the {name} process stopped:\n{}",
                    tail(&self.state.join(format!("{name}.log")), 30)
                )));
            }
            lines.push(format!("{line} (pid {})", child.id()));
        }
        Ok(Stack {
            api,
            dynamodb,
            tables,
            lines,
        })
    }

    /// The functions' environment: DynamoDB Local, dummy credentials (nothing reaches AWS), each
    /// table's name under the variable the template gives the functions (`CommandTable`:
    /// `COMMAND_TABLE`), local callers (`x-tenant-code`, `x-user-id`, `x-roles` headers).
    fn environment(
        &self,
        dynamodb: &str,
        tables: &HashMap<String, String>,
    ) -> Vec<(String, String)> {
        let mut env = vec![
            (
                "AWS_ENDPOINT_URL_DYNAMODB".to_string(),
                dynamodb.to_string(),
            ),
            ("AWS_REGION".into(), "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID".into(), "local".into()),
            ("AWS_SECRET_ACCESS_KEY".into(), "local".into()),
            ("CALLER_MODE".into(), "local".into()),
            ("RUST_LOG".into(), self.rust_log.clone()),
        ];
        let mut names: Vec<_> = tables.iter().collect();
        names.sort();
        env.extend(
            names
                .into_iter()
                .map(|(id, name)| (env_name(id), name.clone())),
        );
        env
    }
}

/// The environment variable a table's logical id is handed to the functions as.
///
/// ```
/// assert_eq!(cqrs_local_stack::dev::env_name("CommandTable"), "COMMAND_TABLE");
/// assert_eq!(cqrs_local_stack::dev::env_name("SequencesTable"), "SEQUENCES_TABLE");
/// ```
pub fn env_name(logical_id: &str) -> String {
    let mut out = String::new();
    for (i, c) in logical_id.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

fn run_step(command: &mut Command, name: &str) -> Result<(), DevError> {
    match command.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(DevError::Step(format!("{name}: {s}"))),
        Err(e) => Err(DevError::Step(format!("{name}: {e}"))),
    }
}

fn spawn(state: &Path, name: &str, command: &mut Command) -> Result<Child, DevError> {
    let log_path = state.join(format!("{name}.log"));
    let log = std::fs::File::create(&log_path)
        .map_err(|e| DevError::Step(format!("{}: {e}", log_path.display())))?;
    let err = log
        .try_clone()
        .map_err(|e| DevError::Step(format!("{}: {e}", log_path.display())))?;
    let child = command
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| DevError::Step(format!("{name}: {:?}: {e}", command.get_program())))?;
    let pid_path = state.join(format!("{name}.pid"));
    std::fs::write(&pid_path, format!("{}\n", child.id()))
        .map_err(|e| DevError::Step(format!("{}: {e}", pid_path.display())))?;
    Ok(child)
}

fn pid_of(state: &Path, name: &str, marker: &str) -> Option<u32> {
    let pid = std::fs::read_to_string(state.join(format!("{name}.pid")))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    is_live(pid, marker).then_some(pid)
}

/// Stops the stack of `state`: the stream mapper, the functions, and every DynamoDB Local started
/// from that folder. Returns what it stopped; nothing running is not an error.
///
/// ```
/// let stopped = cqrs_local_stack::dev::down("/nonexistent/state".as_ref()).unwrap();
/// assert!(stopped.is_empty());
/// ```
pub fn down(state: &Path) -> Result<Vec<String>, DevError> {
    let mut stopped = Vec::new();
    let _ = std::fs::remove_file(state.join(crate::events::EVENTS_ENV));
    let processes = STREAM_MAPPERS
        .iter()
        .map(|name| (name.to_string(), MAPPER_MARKER))
        .chain(
            sqs_mappers(state)
                .into_iter()
                .map(|name| (name, SQS_MAPPER_MARKER)),
        )
        .chain([("functions".to_string(), FUNCTIONS_MARKER)]);
    for (name, marker) in processes {
        let name = name.as_str();
        if let Some(pid) = pid_of(state, name, marker)
            && stop_group(pid, marker, Duration::from_secs(5))
        {
            stopped.push(format!("{name} (pid {pid})"));
        }
        let _ = std::fs::remove_file(state.join(format!("{name}.pid")));
    }
    for instance in dynamodb_local::running(state) {
        if dynamodb_local::stop(state, instance.port)? {
            stopped.push(format!("DynamoDB Local on 127.0.0.1:{}", instance.port));
        }
    }
    for instance in crate::postgres::running(state) {
        if crate::postgres::stop(state, instance.port).map_err(|e| DevError::Step(e.to_string()))? {
            stopped.push(format!("PostgreSQL on 127.0.0.1:{}", instance.port));
        }
    }
    for instance in crate::moto::running(state) {
        if crate::moto::stop(state, instance.port)? {
            stopped.push(format!("moto on 127.0.0.1:{}", instance.port));
        }
    }
    Ok(stopped)
}

/// The names of the consumers' SQS mapping processes started from `state` (their pid files).
fn sqs_mappers(state: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(state)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let file = entry.file_name().into_string().ok()?;
            let name = file.strip_suffix(".pid")?;
            name.starts_with(SQS_MAPPER_PREFIX)
                .then(|| name.to_string())
        })
        .collect();
    names.sort();
    names
}

/// What of the stack of `state` is running: each process and its pid, if it runs.
///
/// ```
/// let status = cqrs_local_stack::dev::status("/nonexistent/state".as_ref());
/// assert!(status.iter().all(|(_, pid)| pid.is_none()));
/// ```
pub fn status(state: &Path) -> Vec<(String, Option<u32>)> {
    let mut out = vec![(
        "functions".to_string(),
        pid_of(state, "functions", FUNCTIONS_MARKER),
    )];
    for name in STREAM_MAPPERS {
        out.push((name.to_string(), pid_of(state, name, MAPPER_MARKER)));
    }
    for name in sqs_mappers(state) {
        let pid = pid_of(state, &name, SQS_MAPPER_MARKER);
        out.push((name, pid));
    }
    for instance in crate::moto::running(state) {
        out.push((
            format!("moto (127.0.0.1:{})", instance.port),
            Some(instance.pid),
        ));
    }
    for instance in crate::postgres::running(state) {
        out.push((
            format!("postgres (127.0.0.1:{})", instance.port),
            Some(instance.pid),
        ));
    }
    let running = dynamodb_local::running(state);
    if running.is_empty() {
        out.push(("dynamodb-local".into(), None));
    }
    for instance in running {
        out.push((
            format!("dynamodb-local (127.0.0.1:{})", instance.port),
            Some(instance.pid),
        ));
    }
    out
}

/// Prints the stack's logs (the functions', the mappings') as they grow, each line tagged with its
/// source, until `until` completes (Ctrl-C, say).
pub async fn follow_logs(state: &Path, until: impl std::future::Future<Output = ()>) {
    use std::io::{Read, Seek, SeekFrom};
    tokio::pin!(until);
    // By log name: how far it was read, and the start of a line not complete yet.
    let mut read: HashMap<String, (u64, String)> = HashMap::new();
    loop {
        let names = ["functions"]
            .into_iter()
            .chain(STREAM_MAPPERS)
            .map(str::to_string)
            .chain(sqs_mappers(state));
        for name in names {
            let Ok(mut file) = std::fs::File::open(state.join(format!("{name}.log"))) else {
                continue;
            };
            let (offset, partial) = read.entry(name.clone()).or_default();
            if file.seek(SeekFrom::Start(*offset)).is_err() {
                continue;
            }
            let mut bytes = Vec::new();
            if let Ok(count) = file.read_to_end(&mut bytes) {
                *offset += count as u64;
                partial.push_str(&String::from_utf8_lossy(&bytes));
                while let Some(end) = partial.find('\n') {
                    let line: String = partial.drain(..=end).collect();
                    print!("{name:>13} | {line}");
                }
            }
        }
        tokio::select! {
            _ = &mut until => return,
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}
