//! PostgreSQL for tests and the local stack: Debian's server binaries (installed with apt where
//! they are missing), a throwaway cluster started on 127.0.0.1 in the background, found again from
//! another process, and stopped, in the manner of [`crate::dynamodb_local`].
//!
//! Each instance is one `postgres` server (its postmaster leads its own process group) with a fresh
//! data folder `<state>/postgres-<port>/`, recorded in the state folder as `postgres-<port>.pid`
//! beside `postgres-<port>.log`. Any number of instances can run from one state folder; each is found
//! and stopped by its port, and a pid file is believed only while its pid is the postmaster of that
//! very data folder (a reused pid is not). The cluster trusts every connection (user `postgres`,
//! no password), listens on 127.0.0.1 only, and does not sync to disk: it is for tests.
//!
//! `initdb` and `postgres` refuse to run as root: when this process is root, they run as the system
//! user `postgres` (which Debian's package creates), the data folder is theirs, and a data folder
//! that user could not reach (the state folder under a folder only root may enter, such as `/root`)
//! is put in the temporary folder instead, `<state>/postgres-<port>` then being a link to it.
//!
//! ```no_run
//! use cqrs_local_stack::postgres::{self, Install};
//! # fn main() -> Result<(), cqrs_local_stack::postgres::Error> {
//! let install = Install::new();
//! install.ensure()?;
//! let instance = postgres::start(&install, ".local/test".as_ref(), None)?;
//! println!("{}", instance.url()); // postgres://postgres@127.0.0.1:<a free port>/postgres
//! postgres::stop(".local/test".as_ref(), instance.port)?;
//! # Ok(()) }
//! ```

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::dynamodb_local::{
    FirstSignal, apt_install, free_port, io, is_live, port_busy, stop_group, stop_group_with, tail,
};

/// Where Debian installs PostgreSQL's server, one folder per major version.
pub const DEBIAN_ROOT: &str = "/usr/lib/postgresql";

/// The programs [`Install::bin_dir`] requires in a version's `bin` folder (`psql` is taken from
/// there too when it is, else from Debian's newest version or the `PATH`: the npm package of
/// [`crate::postgres_npm`] has none).
const PROGRAMS: [&str; 3] = ["initdb", "pg_ctl", "postgres"];

/// Why PostgreSQL could not be installed, started or stopped: the crate's one error for the
/// servers it runs ([`crate::dynamodb_local::Error`]).
///
/// ```
/// let error = cqrs_local_stack::postgres::Error::PortInUse(5432);
/// assert_eq!(error.to_string(), "127.0.0.1:5432 is already in use");
/// ```
pub use crate::dynamodb_local::Error;

fn say(message: &str) {
    eprintln!("[postgres] {message}");
}

/// Where PostgreSQL's server is (or will be) installed: Debian's folder of versions.
///
/// ```
/// let install = cqrs_local_stack::postgres::Install::new();
/// assert_eq!(install.root, std::path::Path::new("/usr/lib/postgresql"));
/// if let Some(bin) = install.bin_dir() {
///     assert!(bin.join("postgres").is_file());
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Install {
    /// The folder of versions: the programs are in `<root>/<major>/bin`.
    pub root: PathBuf,
}

impl Default for Install {
    fn default() -> Self {
        Install {
            root: PathBuf::from(DEBIAN_ROOT),
        }
    }
}

impl Install {
    /// Debian's folder, [`DEBIAN_ROOT`].
    ///
    /// ```
    /// let install = cqrs_local_stack::postgres::Install::new();
    /// assert_eq!(install.root, std::path::Path::new(cqrs_local_stack::postgres::DEBIAN_ROOT));
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// The `bin` folder of the highest major version that has `initdb`, `pg_ctl` and `postgres`,
    /// if any.
    ///
    /// ```
    /// let install = cqrs_local_stack::postgres::Install { root: "/nowhere".into() };
    /// assert!(install.bin_dir().is_none());
    /// ```
    pub fn bin_dir(&self) -> Option<PathBuf> {
        std::fs::read_dir(&self.root)
            .ok()?
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let major = entry.file_name().to_str()?.parse::<u32>().ok()?;
                let bin = entry.path().join("bin");
                PROGRAMS
                    .iter()
                    .all(|program| bin.join(program).is_file())
                    .then_some((major, bin))
            })
            .max_by_key(|(major, _)| *major)
            .map(|(_, bin)| bin)
    }

    /// Installs the Debian package `postgresql` (through `sudo` unless root) when no version's
    /// programs are there, and returns their `bin` folder. Does nothing but look when they are.
    ///
    /// ```no_run
    /// let bin = cqrs_local_stack::postgres::Install::new().ensure().unwrap();
    /// assert!(bin.join("initdb").is_file());
    /// ```
    pub fn ensure(&self) -> Result<PathBuf, Error> {
        if let Some(bin) = self.bin_dir() {
            return Ok(bin);
        }
        say("the PostgreSQL server is not installed; installing postgresql");
        apt_install(&["postgresql"])?;
        // Debian's package creates a cluster of its own and starts it where it can (port 5432): it
        // is not ours to leave running. Its clusters stay, stopped.
        if let Ok(output) = Command::new("pg_lsclusters").arg("--no-header").output() {
            for line in String::from_utf8_lossy(&output.stdout).lines() {
                let fields: Vec<&str> = line.split_whitespace().collect();
                if let [version, cluster, _, "online", ..] = fields.as_slice() {
                    say(&format!(
                        "stopping the cluster {version}/{cluster} the package started"
                    ));
                    let _ = Command::new("pg_ctlcluster")
                        .args([*version, *cluster, "stop"])
                        .status();
                }
            }
        }
        self.bin_dir().ok_or_else(|| {
            Error::Missing(format!(
                "no <major>/bin with {} under {} after installing postgresql",
                PROGRAMS.join(", "),
                self.root.display()
            ))
        })
    }
}

/// A running PostgreSQL server.
///
/// ```
/// let instance = cqrs_local_stack::postgres::Instance { pid: 1, port: 5432 };
/// assert_eq!(instance.port, 5432);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instance {
    /// Its postmaster (the leader of its process group).
    pub pid: u32,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Instance {
    /// Its connection URL: user `postgres` (no password), database `postgres`.
    ///
    /// ```
    /// let instance = cqrs_local_stack::postgres::Instance { pid: 1, port: 5432 };
    /// assert_eq!(instance.url(), "postgres://postgres@127.0.0.1:5432/postgres");
    /// ```
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

fn pid_file(state: &Path, port: u16) -> PathBuf {
    state.join(format!("postgres-{port}.pid"))
}

/// `<state>/postgres-<port>`: the data folder, or a link to it.
fn data_link(state: &Path, port: u16) -> PathBuf {
    state.join(format!("postgres-{port}"))
}

/// The log file of the instance on `port` started from `state` (`initdb`'s output, then the
/// server's).
///
/// ```
/// let log = cqrs_local_stack::postgres::log_file("/tmp/s".as_ref(), 5432);
/// assert_eq!(log, std::path::Path::new("/tmp/s/postgres-5432.log"));
/// ```
pub fn log_file(state: &Path, port: u16) -> PathBuf {
    state.join(format!("postgres-{port}.log"))
}

/// The data folder of the instance on `port` of `state`: where `<state>/postgres-<port>` leads
/// (the state folder made absolute, links resolved), whether or not it exists.
fn data_dir(state: &Path, port: u16) -> PathBuf {
    let state = std::fs::canonicalize(state)
        .or_else(|_| std::path::absolute(state))
        .unwrap_or_else(|_| state.to_path_buf());
    let link = data_link(&state, port);
    match std::fs::read_link(&link) {
        Ok(target) => state.join(target),
        Err(_) => link,
    }
}

/// What the postmaster's command line holds: `-D <its data folder>`, whole, so that a pid is
/// known to be this instance's server (not another cluster's, not a program named `postgres…`).
fn marker(data: &Path) -> String {
    format!("-D\0{}\0", data.display())
}

/// Removes `<state>/postgres-<port>` and the data folder it leads to.
fn remove_data(state: &Path, port: u16) -> Result<(), Error> {
    let link = data_link(state, port);
    let remove = |path: &Path| match std::fs::remove_dir_all(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(io(path)(error)),
        _ => Ok(()),
    };
    match std::fs::symlink_metadata(&link) {
        Ok(meta) if meta.file_type().is_symlink() => {
            remove(&data_dir(state, port))?;
            std::fs::remove_file(&link).map_err(io(&link))
        }
        Ok(_) => remove(&link),
        Err(_) => Ok(()),
    }
}

/// The system user the server runs as when this process is root: `postgres`'s uid and gid, from
/// `/etc/passwd`. `None` when not root (the programs run as this process's user).
fn server_user() -> Result<Option<(u32, u32)>, Error> {
    if !rustix::process::geteuid().is_root() {
        return Ok(None);
    }
    let passwd = Path::new("/etc/passwd");
    let text = std::fs::read_to_string(passwd).map_err(io(passwd))?;
    text.lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            match fields.as_slice() {
                ["postgres", _, uid, gid, ..] => Some((uid.parse().ok()?, gid.parse().ok()?)),
                _ => None,
            }
        })
        .map(Some)
        .ok_or_else(|| {
            Error::Missing(
                "running as root, and there is no user postgres in /etc/passwd to run the server \
                 as (the Debian package postgresql creates it)"
                    .into(),
            )
        })
}

/// Whether the user `uid` (primary group `gid`) may enter `dir` and every folder above it, by
/// their modes (conservatively: supplementary groups and ACLs are not counted).
fn reachable(dir: &Path, uid: u32, gid: u32) -> bool {
    dir.ancestors().all(|folder| {
        let Ok(meta) = std::fs::metadata(folder) else {
            return false;
        };
        let mode = meta.mode();
        if meta.uid() == uid {
            mode & 0o100 != 0
        } else if meta.gid() == gid {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        }
    })
}

/// Creates the empty data folder for `port` (mode 0700, the server user's when root): in `state`,
/// or, when that user could not reach `state`, in the temporary folder with a link in `state`.
fn make_data_dir(state: &Path, port: u16, user: Option<(u32, u32)>) -> Result<PathBuf, Error> {
    remove_data(state, port)?;
    let link = data_link(state, port);
    let data = match user {
        Some((uid, gid)) if !reachable(state, uid, gid) => {
            let outside =
                std::env::temp_dir().join(format!("cqrs-postgres-{port}-{}", std::process::id()));
            if !reachable(outside.parent().unwrap_or(Path::new("/")), uid, gid) {
                return Err(Error::Missing(format!(
                    "the user postgres (uid {uid}) can reach neither {} nor {}",
                    state.display(),
                    std::env::temp_dir().display()
                )));
            }
            let _ = std::fs::remove_dir_all(&outside);
            std::fs::create_dir(&outside).map_err(io(&outside))?;
            std::os::unix::fs::symlink(&outside, &link).map_err(io(&link))?;
            say(&format!(
                "the user postgres cannot enter {}: the data folder is {}",
                state.display(),
                outside.display()
            ));
            outside
        }
        _ => {
            std::fs::create_dir(&link).map_err(io(&link))?;
            link
        }
    };
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).map_err(io(&data))?;
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(&data, Some(uid), Some(gid)).map_err(io(&data))?;
    }
    Ok(data)
}

/// A command for one of the server's programs: as the server user when root, in `/` (a folder it
/// can enter), with a locale that exists everywhere and no `PG*` settings of this environment.
fn program(bin: &Path, name: &str, user: Option<(u32, u32)>) -> Command {
    let mut command = Command::new(bin.join(name));
    command.current_dir("/").env("LC_ALL", "C.UTF-8");
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(|key| key.starts_with("PG")) {
            command.env_remove(key);
        }
    }
    if let Some((uid, gid)) = user {
        command.uid(uid).gid(gid).env("HOME", "/");
    }
    command
}

/// The `psql` to ask a server of `bin` with: `bin`'s, else that of Debian's newest version, else
/// the one on the `PATH` (any client version talks to any server's `select 1`).
fn psql(bin: &Path) -> PathBuf {
    [Some(bin.to_path_buf()), Install::new().bin_dir()]
        .into_iter()
        .flatten()
        .map(|bin| bin.join("psql"))
        .find(|psql| psql.is_file())
        .unwrap_or_else(|| PathBuf::from("psql"))
}

/// Whether the server on `port` answers `select 1` (through [`psql`], over TCP).
fn answers_query(bin: &Path, port: u16) -> bool {
    let psql = psql(bin);
    let (dir, name) = (
        psql.parent().unwrap_or(Path::new("")),
        psql.file_name().unwrap_or_default(),
    );
    program(dir, &name.to_string_lossy(), None)
        .args(["-X", "-q", "-t", "-A", "-c", "select 1", "-d"])
        .arg(format!(
            "host=127.0.0.1 port={port} user=postgres dbname=postgres connect_timeout=2"
        ))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|output| output.status.success() && output.stdout.trim_ascii() == b"1")
}

/// Starts a fresh PostgreSQL cluster on 127.0.0.1:`port` or, when `port` is `None`, on a free
/// port (up to three tries, should another process take the port first). A data folder of an
/// earlier instance on that port is removed first. Returns once the server accepts a query; it
/// keeps running after this process exits, until [`stop`]. Its pid file, log and data folder are
/// in `state`.
///
/// ```no_run
/// use cqrs_local_stack::postgres::{self, Install};
/// let state = std::path::Path::new("/tmp/my-tests");
/// let instance = postgres::start(&Install::new(), state, Some(15432)).unwrap();
/// assert_eq!(instance.url(), "postgres://postgres@127.0.0.1:15432/postgres");
/// postgres::stop(state, instance.port).unwrap();
/// ```
pub fn start(install: &Install, state: &Path, port: Option<u16>) -> Result<Instance, Error> {
    let bin = install.bin_dir().ok_or_else(|| {
        Error::Missing(format!(
            "the PostgreSQL server is not installed under {} (Install::ensure)",
            install.root.display()
        ))
    })?;
    let user = server_user()?;
    std::fs::create_dir_all(state).map_err(io(state))?;
    let state = std::fs::canonicalize(state).map_err(io(state))?;
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
            None => free_port().map_err(io(&state))?,
        };
        match start_on(&bin, &state, port, user) {
            Ok(instance) => return Ok(instance),
            Err(error) => last = Some(error),
        }
    }
    Err(last.expect("at least one attempt"))
}

fn start_on(
    bin: &Path,
    state: &Path,
    port: u16,
    user: Option<(u32, u32)>,
) -> Result<Instance, Error> {
    let started = Instant::now();
    let pid_path = pid_file(state, port);
    let _ = std::fs::remove_file(&pid_path);
    let data = make_data_dir(state, port, user)?;
    let log_path = log_file(state, port);
    let log = std::fs::File::create(&log_path).map_err(io(&log_path))?;
    let clone = |log: &std::fs::File| log.try_clone().map_err(io(&log_path));

    let initdb = program(bin, "initdb", user)
        .arg("-D")
        .arg(&data)
        .args([
            "--username=postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
            "--no-instructions",
        ])
        .stdin(Stdio::null())
        .stdout(clone(&log)?)
        .stderr(clone(&log)?)
        .status();
    match initdb {
        Ok(status) if status.success() => {}
        failed => {
            let detail = match failed {
                Ok(status) => status.to_string(),
                Err(error) => error.to_string(),
            };
            let _ = remove_data(state, port);
            return Err(Error::Command {
                command: format!("initdb -D {}", data.display()),
                detail: format!("{detail}: {}", tail(&log_path, 20)),
            });
        }
    }
    // Trust, but only this machine: the socket in the data folder and 127.0.0.1 (the only address
    // the server listens on).
    let hba = data.join("pg_hba.conf");
    std::fs::write(
        &hba,
        "local all all trust\nhost all all 127.0.0.1/32 trust\n\
         local replication all trust\nhost replication all 127.0.0.1/32 trust\n",
    )
    .map_err(io(&hba))?;
    let initialised = started.elapsed();

    // The socket's path must fit in a sockaddr_un (107 bytes); when it would not, TCP only.
    let socket_dir = if data.as_os_str().len() + "/.s.PGSQL.65535".len() <= 107 {
        data.clone()
    } else {
        PathBuf::new()
    };
    let mut child = program(bin, "postgres", user)
        .arg("-D")
        .arg(&data)
        .arg("-p")
        .arg(port.to_string())
        .arg("-k")
        .arg(&socket_dir)
        .args([
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ])
        .stdin(Stdio::null())
        .stdout(clone(&log)?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(|e| Error::Missing(format!("{}: {e}", bin.join("postgres").display())))?;
    let pid = child.id();
    std::fs::write(&pid_path, format!("{pid}\n")).map_err(io(&pid_path))?;
    let timeout = Duration::from_secs(
        std::env::var("PG_LOCAL_TIMEOUT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(30),
    );
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let _ = std::fs::remove_file(&pid_path);
            let _ = remove_data(state, port);
            return Err(Error::NotStarted {
                server: "PostgreSQL",
                port,
                detail: format!("it exited ({status}): {}", tail(&log_path, 20)),
            });
        }
        if port_busy(port) && answers_query(bin, port) {
            say(&format!(
                "ready on 127.0.0.1:{port} in {} ms (initdb {} ms; pid {pid}, log {})",
                started.elapsed().as_millis(),
                initialised.as_millis(),
                log_path.display()
            ));
            return Ok(Instance { pid, port });
        }
        if started.elapsed() > timeout {
            stop_group(pid, &marker(&data), Duration::from_secs(5));
            let _ = child.wait();
            let _ = std::fs::remove_file(&pid_path);
            let _ = remove_data(state, port);
            return Err(Error::NotStarted {
                server: "PostgreSQL",
                port,
                detail: format!("no answer after {timeout:?}: {}", tail(&log_path, 20)),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The instances started from `state` that are still running, by port. A pid file whose process
/// is gone, or is not the server of that port's data folder, is removed.
///
/// ```
/// let state = std::env::temp_dir().join("cqrs-postgres-doc-running-nothing");
/// assert!(cqrs_local_stack::postgres::running(&state).is_empty());
/// ```
pub fn running(state: &Path) -> Vec<Instance> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(state) else {
        return found;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(port) = name
            .to_str()
            .and_then(|n| n.strip_prefix("postgres-"))
            .and_then(|n| n.strip_suffix(".pid"))
            .and_then(|n| n.parse::<u16>().ok())
        else {
            continue;
        };
        let pid = std::fs::read_to_string(entry.path())
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok());
        match pid {
            Some(pid) if is_live(pid, &marker(&data_dir(state, port))) => {
                found.push(Instance { pid, port })
            }
            // A pid file of a process that is gone (or whose pid now names another program).
            _ => {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    found.sort_by_key(|instance| instance.port);
    found
}

/// Stops the instance on `port` started from `state` (its whole process group; returns once the
/// postmaster is gone and the port free), and removes its pid file and data folder. Returns
/// whether one was running; stopping one that is not is not an error. Other instances, of this
/// state folder or not, keep running.
///
/// ```
/// let state = std::env::temp_dir().join("cqrs-postgres-doc-stop-nothing");
/// assert!(!cqrs_local_stack::postgres::stop(&state, 5432).unwrap());
/// ```
pub fn stop(state: &Path, port: u16) -> Result<bool, Error> {
    let path = pid_file(state, port);
    let pid = match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<u32>().ok(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(io(&path)(error)),
    };
    let marker = marker(&data_dir(state, port));
    // Fast shutdown: clients still connected (a test's) are disconnected, not waited for.
    let stopped = pid.is_some_and(|pid| {
        stop_group_with(
            pid,
            &marker,
            Duration::from_secs(10),
            FirstSignal::Interrupt,
        )
    });
    if let Some(pid) = pid.filter(|_| stopped) {
        reap(pid);
    }
    let _ = std::fs::remove_file(&path);
    remove_data(state, port)?;
    if stopped {
        say(&format!("stopped the instance on 127.0.0.1:{port}"));
    }
    Ok(stopped)
}

/// Collects the exit status of `pid` when it is a child of this process (one [`start`] spawned),
/// so that it does not stay a zombie while this process runs; nothing for any other pid.
fn reap(pid: u32) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG);
    }
}

/// A cluster of one test or bench: started (the server installed first where missing) under a
/// fresh folder of the system's temporary folder, and stopped, its folder removed, when dropped,
/// also when the test fails.
///
/// ```no_run
/// let pg = cqrs_local_stack::postgres::Throwaway::start("my-test").unwrap();
/// println!("{}", pg.url()); // postgres://postgres@127.0.0.1:<a free port>/postgres
/// // ... the cluster stops here, when `pg` is dropped.
/// ```
#[derive(Debug)]
pub struct Throwaway {
    state: PathBuf,
    instance: Instance,
}

impl Throwaway {
    /// Starts a cluster whose state folder's name begins with `name`.
    ///
    /// ```no_run
    /// let pg = cqrs_local_stack::postgres::Throwaway::start("chaos").unwrap();
    /// # let _ = pg;
    /// ```
    pub fn start(name: &str) -> Result<Throwaway, Error> {
        let install = Install::new();
        install.ensure()?;
        Self::start_with(name, &install)
    }

    /// Starts a cluster of the server installed at `install` (installed already: nothing is
    /// installed here), such as a version of [`crate::postgres_npm`].
    ///
    /// ```no_run
    /// use cqrs_local_stack::{postgres::Throwaway, postgres_npm};
    /// let install = postgres_npm::ensure(".local".as_ref(), postgres_npm::VERSION_17).unwrap();
    /// let pg = Throwaway::start_with("pg17", &install).unwrap();
    /// # let _ = pg;
    /// ```
    pub fn start_with(name: &str, install: &Install) -> Result<Throwaway, Error> {
        let unique = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let state = std::env::temp_dir().join(format!("{name}-{}-{unique}", std::process::id()));
        let instance = start(install, &state, None)?;
        Ok(Throwaway { state, instance })
    }

    /// The running server.
    ///
    /// ```no_run
    /// let pg = cqrs_local_stack::postgres::Throwaway::start("x").unwrap();
    /// assert!(pg.instance().port > 0);
    /// ```
    pub fn instance(&self) -> Instance {
        self.instance
    }

    /// Its connection URL ([`Instance::url`]).
    ///
    /// ```no_run
    /// let pg = cqrs_local_stack::postgres::Throwaway::start("x").unwrap();
    /// assert!(pg.url().starts_with("postgres://postgres@127.0.0.1:"));
    /// ```
    pub fn url(&self) -> String {
        self.instance.url()
    }

    /// Its state folder (pid file, log, and the data folder or a link to it).
    ///
    /// ```no_run
    /// let pg = cqrs_local_stack::postgres::Throwaway::start("x").unwrap();
    /// let log = cqrs_local_stack::postgres::log_file(pg.state(), pg.instance().port);
    /// # let _ = log;
    /// ```
    pub fn state(&self) -> &Path {
        &self.state
    }

    /// Turns TLS on, for a test of a client that must use or verify it: a certificate authority
    /// made for the test by `openssl` (Debian's package) signs a server certificate for
    /// `localhost` only; the key and certificate go into the data folder, owned by the server's
    /// user; `hba_first` (lines of `pg_hba.conf`, such as `hostnossl all all all reject`) goes
    /// before the cluster's own lines, where the first match wins. Returns once the server says
    /// `ssl` is `on`, with the folder (in the state folder, removed with it) holding the
    /// authority's certificate, `ca.crt`.
    ///
    /// ```no_run
    /// # async fn example() {
    /// let pg = cqrs_local_stack::postgres::Throwaway::start("tls").unwrap();
    /// let certificates = pg.enable_tls("hostnossl all all all reject\n").await.unwrap();
    /// let ca = std::fs::read(certificates.join("ca.crt")).unwrap();
    /// # let _ = ca;
    /// # }
    /// ```
    pub async fn enable_tls(&self, hba_first: &str) -> Result<PathBuf, Error> {
        let failed = |command: &str, detail: String| Error::Command {
            command: command.to_string(),
            detail,
        };
        let (admin, connection) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .map_err(|e| failed("connecting to the cluster", e.to_string()))?;
        tokio::spawn(connection);
        let show = |setting: &'static str| {
            let admin = &admin;
            async move {
                admin
                    .query_one(&format!("SHOW {setting}"), &[])
                    .await
                    .map(|row| row.get::<_, String>(0))
                    .map_err(|e| failed(&format!("SHOW {setting}"), e.to_string()))
            }
        };
        let data = PathBuf::from(show("data_directory").await?);
        let hba = PathBuf::from(show("hba_file").await?);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        let owner = std::fs::metadata(&data).map_err(io(&data))?;
        let work = self.state.join("tls");
        std::fs::create_dir_all(&work).map_err(io(&work))?;
        test_certificates(&work)?;
        for file in ["server.key", "server.crt"] {
            let target = data.join(format!("test-{file}"));
            std::fs::copy(work.join(file), &target).map_err(io(&target))?;
            std::os::unix::fs::chown(&target, Some(owner.uid()), Some(owner.gid()))
                .map_err(io(&target))?;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600))
                .map_err(io(&target))?;
        }
        let old = std::fs::read_to_string(&hba).map_err(io(&hba))?;
        std::fs::write(&hba, format!("{hba_first}{old}")).map_err(io(&hba))?;
        // One statement at a time: ALTER SYSTEM refuses a transaction block.
        for statement in [
            "ALTER SYSTEM SET ssl_cert_file = 'test-server.crt'",
            "ALTER SYSTEM SET ssl_key_file = 'test-server.key'",
            "ALTER SYSTEM SET ssl = on",
            "SELECT pg_reload_conf()",
        ] {
            admin
                .batch_execute(statement)
                .await
                .map_err(|e| failed(statement, e.to_string()))?;
        }
        let started = Instant::now();
        while show("ssl").await? != "on" {
            if started.elapsed() > Duration::from_secs(10) {
                return Err(failed(
                    "turning TLS on",
                    "the server did not say ssl = on within 10 s".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(work)
    }
}

/// Makes, in `dir`, a certificate authority (`ca.crt`, `ca.key`) and a server certificate it
/// signed for `localhost` only (`server.crt`, `server.key`), with `openssl`.
fn test_certificates(dir: &Path) -> Result<(), Error> {
    let openssl = |args: &[&str]| -> Result<(), Error> {
        let output = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .map_err(|e| Error::Missing(format!("openssl (Debian's openssl package): {e}")))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(Error::Command {
                command: format!("openssl {}", args.join(" ")),
                detail: String::from_utf8_lossy(&output.stderr).into_owned(),
            })
        }
    };
    let days = ["-days", "2"];
    openssl(
        &[
            &["req", "-x509", "-newkey", "rsa:2048", "-nodes"][..],
            &days,
            &[
                "-subj",
                "/CN=cqrs test CA",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
            ],
        ]
        .concat(),
    )?;
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ])?;
    let extensions = dir.join("san.ext");
    std::fs::write(&extensions, "subjectAltName=DNS:localhost\n").map_err(|source| Error::Io {
        path: extensions.clone(),
        source,
    })?;
    openssl(
        &[
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-extfile",
                "san.ext",
                "-out",
                "server.crt",
            ][..],
            &days,
        ]
        .concat(),
    )
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        let _ = stop(&self.state, self.instance.port);
        let _ = std::fs::remove_dir_all(&self.state);
    }
}
