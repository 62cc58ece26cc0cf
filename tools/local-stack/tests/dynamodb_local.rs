//! DynamoDB Local's processes, for real: instances of one state folder started on a free port and on
//! a chosen one, found again, each stopped by its port while the other keeps answering; a chosen
//! port that is in use refused; a pid file whose process is gone (or whose pid another program
//! took) never believed, and stopping an instance that is not running not an error.
//!
//! Installs DynamoDB Local into the workspace's `.local/dynamodb-local` (what `make test` installs
//! before it runs the tests; nothing when it is there).

use std::path::PathBuf;
use std::time::Duration;

use cqrs_local_stack::dynamodb_local::{self, Install, answers_http, free_port, is_live};

fn install() -> Install {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let install = Install::new(root.join(".local/dynamodb-local"));
    install.ensure().expect("DynamoDB Local installs");
    install
}

/// A state folder of its own, removed afterwards; every instance it started is stopped on drop,
/// also when an assertion fails.
struct State(PathBuf);

impl State {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("cqrs-dynamodb-local-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        State(dir)
    }
}

impl Drop for State {
    fn drop(&mut self) {
        for instance in dynamodb_local::running(&self.0) {
            let _ = dynamodb_local::stop(&self.0, instance.port);
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn two_instances_each_stopped_by_its_port() {
    let install = install();
    let state = State::new("two");
    let a = dynamodb_local::start(&install, &state.0, None).expect("starts on a free port");
    let chosen = free_port().unwrap();
    let b = dynamodb_local::start(&install, &state.0, Some(chosen)).expect("starts on its port");
    assert_eq!(b.port, chosen);
    assert_ne!(a.port, b.port);
    assert!(answers_http(a.port) && answers_http(b.port));
    assert_eq!(b.endpoint(), format!("http://127.0.0.1:{chosen}"));

    let mut running = dynamodb_local::running(&state.0);
    running.sort_by_key(|i| i.port);
    let mut expected = vec![a, b];
    expected.sort_by_key(|i| i.port);
    assert_eq!(running, expected, "both found from their pid files");

    // A chosen port that is taken is refused, and nothing is started.
    let taken = dynamodb_local::start(&install, &state.0, Some(a.port));
    assert!(
        matches!(taken, Err(dynamodb_local::Error::PortInUse(port)) if port == a.port),
        "{taken:?}"
    );
    assert_eq!(dynamodb_local::running(&state.0).len(), 2);

    // What b listens on, by socket: once stop returns, b holds none of them (whatever another
    // program may do with the freed port: it would listen on a socket of its own).
    let held = dynamodb_local::listening_sockets_of(b.pid, b.port);
    assert!(!held.is_empty(), "b listens on its port");
    assert!(
        dynamodb_local::stop(&state.0, b.port).unwrap(),
        "b was running"
    );
    let still = dynamodb_local::listening_on(b.port);
    assert!(
        held.iter().all(|socket| !still.contains(socket)),
        "b's socket {held:?} still listens once stop returns ({} threads of pid {} left)",
        threads(b.pid),
        b.pid
    );
    assert_eq!(threads(b.pid), 0, "b's process is gone once stop returns");
    assert!(!is_live(b.pid, "DynamoDBLocal.jar"));
    assert!(answers_http(a.port), "a keeps answering");
    assert_eq!(dynamodb_local::running(&state.0), vec![a]);

    // Stopping again, or a port nothing of this folder ran on: not an error, nothing stopped.
    assert!(!dynamodb_local::stop(&state.0, b.port).unwrap());
    assert!(!dynamodb_local::stop(&state.0, free_port().unwrap()).unwrap());
    assert!(answers_http(a.port));

    assert!(dynamodb_local::stop(&state.0, a.port).unwrap());
    assert!(dynamodb_local::running(&state.0).is_empty());
}

#[test]
fn a_pid_file_of_another_program_is_not_believed() {
    let state = State::new("stale");
    std::fs::create_dir_all(&state.0).unwrap();
    // This test's own pid: a live process, but not a DynamoDB Local.
    let port = free_port().unwrap();
    let pid_file = state.0.join(format!("dynamodb-local-{port}.pid"));
    std::fs::write(&pid_file, format!("{}\n", std::process::id())).unwrap();
    assert!(dynamodb_local::running(&state.0).is_empty());
    assert!(!pid_file.exists(), "the stale pid file is removed");

    // Stop never signals it.
    std::fs::write(&pid_file, format!("{}\n", std::process::id())).unwrap();
    assert!(!dynamodb_local::stop(&state.0, port).unwrap());
    std::thread::sleep(Duration::from_millis(50));
    assert!(!pid_file.exists());
}

/// How many threads of `pid` have not exited (0 when it is gone; a zombie whose threads all
/// exited holds nothing).
fn threads(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter(|task| {
            std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
                !stat
                    .rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
            })
        })
        .count()
}
