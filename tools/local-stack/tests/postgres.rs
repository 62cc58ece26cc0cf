//! PostgreSQL's processes, for real: throwaway clusters of one state folder started on a free port
//! and on a chosen one, both answering a query, found again, each stopped by its port (its port free
//! and its data folder gone once `stop` returns) while the other keeps answering; a chosen port that
//! is in use refused; a pid file whose pid is another program (this test, or the server of another
//! port) never believed, and stopping an instance that is not running not an error. As root, the
//! servers run as the user `postgres`, also from a state folder that user cannot enter.
//!
//! Installs Debian's `postgresql` package when its server is missing (nothing when it is there).
//! Run with `--nocapture` to see how long each start took.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cqrs_local_stack::dynamodb_local::{free_port, is_live, port_busy};
use cqrs_local_stack::postgres::{self, Install, Instance};

fn install() -> Install {
    let install = Install::new();
    install.ensure().expect("the PostgreSQL server installs");
    install
}

/// A state folder of its own (inside `top`, which is removed afterwards); every instance it started
/// is stopped on drop, also when an assertion fails.
struct State {
    dir: PathBuf,
    top: PathBuf,
}

impl State {
    fn new(name: &str) -> Self {
        let top = std::env::temp_dir().join(format!("cqrs-postgres-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&top);
        State {
            dir: top.join("state"),
            top,
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        for instance in postgres::running(&self.dir) {
            let _ = postgres::stop(&self.dir, instance.port);
        }
        let _ = std::fs::remove_dir_all(&self.top);
    }
}

/// `select 1` through psql over TCP, as the tests of a service would connect.
fn answers(port: u16) -> bool {
    let output = Command::new("psql")
        .args(["-X", "-h", "127.0.0.1", "-p"])
        .arg(port.to_string())
        .args(["-U", "postgres", "-d", "postgres", "-tAc", "select 1"])
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .expect("psql runs");
    output.status.success() && String::from_utf8_lossy(&output.stdout).trim() == "1"
}

fn timed_start(install: &Install, state: &Path, port: Option<u16>) -> Instance {
    let started = Instant::now();
    let instance = postgres::start(install, state, port).expect("the cluster starts");
    println!(
        "cluster on 127.0.0.1:{} ready in {} ms (initdb included)",
        instance.port,
        started.elapsed().as_millis()
    );
    instance
}

#[test]
fn two_clusters_each_stopped_by_its_port() {
    let install = install();
    let state = State::new("two");
    let a = timed_start(&install, &state.dir, None);
    let chosen = free_port().unwrap();
    let b = timed_start(&install, &state.dir, Some(chosen));
    assert_eq!(b.port, chosen);
    assert_ne!(a.port, b.port);
    assert!(answers(a.port) && answers(b.port));
    assert_eq!(
        b.url(),
        format!("postgres://postgres@127.0.0.1:{chosen}/postgres")
    );
    assert!(state.dir.join(format!("postgres-{}", b.port)).exists());
    assert!(postgres::log_file(&state.dir, b.port).is_file());

    let mut expected = vec![a, b];
    expected.sort_by_key(|i| i.port);
    assert_eq!(
        postgres::running(&state.dir),
        expected,
        "both found from their pid files"
    );

    // A chosen port that is taken is refused, and nothing is started or removed.
    let taken = postgres::start(&install, &state.dir, Some(a.port));
    assert!(
        matches!(taken, Err(postgres::Error::PortInUse(port)) if port == a.port),
        "{taken:?}"
    );
    assert_eq!(postgres::running(&state.dir).len(), 2);
    assert!(answers(a.port));

    // a's pid filed under another port: a live server, but not that port's: not believed, and
    // stopping that port does not touch a.
    let other = free_port().unwrap();
    let pid_file = state.dir.join(format!("postgres-{other}.pid"));
    std::fs::write(&pid_file, format!("{}\n", a.pid)).unwrap();
    assert_eq!(postgres::running(&state.dir), expected);
    assert!(!pid_file.exists(), "the pid file is removed");
    std::fs::write(&pid_file, format!("{}\n", a.pid)).unwrap();
    assert!(!postgres::stop(&state.dir, other).unwrap());
    assert!(answers(a.port));

    assert!(postgres::stop(&state.dir, b.port).unwrap(), "b was running");
    assert!(!port_busy(b.port), "b's port is free once stop returns");
    assert!(!is_live(b.pid, ""), "b's postmaster is gone");
    assert!(
        !state.dir.join(format!("postgres-{}", b.port)).exists(),
        "b's data folder is removed"
    );
    assert!(answers(a.port), "a keeps answering");
    assert_eq!(postgres::running(&state.dir), vec![a]);

    // Stopping again, or a port nothing of this folder ran on: not an error, nothing stopped.
    assert!(!postgres::stop(&state.dir, b.port).unwrap());
    assert!(!postgres::stop(&state.dir, free_port().unwrap()).unwrap());
    assert!(answers(a.port));

    // A port is started afresh: b's port again, an empty cluster.
    let again = timed_start(&install, &state.dir, Some(b.port));
    assert!(answers(again.port));
    assert!(postgres::stop(&state.dir, again.port).unwrap());

    assert!(postgres::stop(&state.dir, a.port).unwrap());
    assert!(!port_busy(a.port));
    assert!(postgres::running(&state.dir).is_empty());
}

#[test]
fn a_pid_file_of_another_program_is_not_believed() {
    let state = State::new("stale");
    std::fs::create_dir_all(&state.dir).unwrap();
    // This test's own pid: a live process (whose name even holds "postgres"), not a server.
    let port = free_port().unwrap();
    let pid_file = state.dir.join(format!("postgres-{port}.pid"));
    std::fs::write(&pid_file, format!("{}\n", std::process::id())).unwrap();
    assert!(postgres::running(&state.dir).is_empty());
    assert!(!pid_file.exists(), "the stale pid file is removed");

    // Stop never signals it.
    std::fs::write(&pid_file, format!("{}\n", std::process::id())).unwrap();
    assert!(!postgres::stop(&state.dir, port).unwrap());
    std::thread::sleep(Duration::from_millis(50));
    assert!(!pid_file.exists());
}

#[test]
fn a_state_folder_the_server_user_cannot_enter() {
    use std::os::unix::fs::PermissionsExt;

    let install = install();
    let state = State::new("private");
    // Only its owner may enter the top folder: as root, the user postgres may not.
    std::fs::create_dir_all(&state.dir).unwrap();
    std::fs::set_permissions(&state.top, std::fs::Permissions::from_mode(0o700)).unwrap();
    let instance = timed_start(&install, &state.dir, None);
    assert!(answers(instance.port));
    assert_eq!(postgres::running(&state.dir), vec![instance]);

    let link = state.dir.join(format!("postgres-{}", instance.port));
    let root = rustix::process::geteuid().is_root();
    let data = if root {
        let data = std::fs::read_link(&link).expect("a link to a data folder postgres can reach");
        assert!(data.is_dir() && !data.starts_with(&state.top), "{data:?}");
        data
    } else {
        link.clone()
    };

    assert!(postgres::stop(&state.dir, instance.port).unwrap());
    assert!(!port_busy(instance.port));
    assert!(!data.exists(), "the data folder is removed");
    assert!(std::fs::symlink_metadata(&link).is_err(), "and its link");
}
