//! moto's server for the local stack's SNS and SQS: starting it on 127.0.0.1 in the background,
//! finding it again from another process, and stopping it, as [`crate::dynamodb_local`] does for
//! DynamoDB Local (pid and log files `moto-<port>.pid` / `.log` in a state folder, one process
//! group each, a pid believed only while it is a live `moto_server`).
//!
//! moto is the PyPI package `moto` (with `flask` and `flask-cors`, which its server needs), pinned
//! in `requirements-tools.txt` and installed into the project's `.venv` by `scripts/tools.sh`. What
//! the change events rely on, it emulates: SNS FIFO topics delivering to SQS FIFO queues with raw
//! delivery and the message group kept, a group held while one of its messages is in flight,
//! visibility timeouts, and dead-letter queues after `maxReceiveCount` (`tests/moto.rs` checks each
//! against a running server). What it does not: the five-minute deduplication window (a
//! deduplication id is forgotten once its message is deleted), `DeduplicationScope` per message
//! group, SNS's own deduplication, `StartMessageMoveTask`, and any throughput limit; and it moves a
//! message over its `maxReceiveCount` to the dead-letter queue at a later receive of its queue, not
//! when its last visibility timeout ends. Nothing in the framework relies on those: a consumer's
//! marker deduplicates, its runtime parks a poison event itself, and a redrive moves messages itself.
//!
//! ```no_run
//! use cqrs_local_stack::moto;
//! # fn main() -> Result<(), cqrs_local_stack::dynamodb_local::Error> {
//! let program = moto::server_program(".venv".as_ref());
//! let instance = moto::start(&program, ".local/test".as_ref(), None)?;
//! println!("{}", instance.endpoint()); // http://127.0.0.1:<a free port>: AWS_ENDPOINT_URL_SQS, _SNS
//! moto::stop(".local/test".as_ref(), instance.port)?;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::dynamodb_local::{Error, Instance, Server};

/// The `moto` version `requirements-tools.txt` pins (a test checks that they agree).
pub const VERSION: &str = "5.2.5";

/// moto's server, as this module starts and recognises it.
const MOTO: Server = Server {
    name: "moto",
    stem: "moto",
    marker: "moto_server",
    timeout_var: "MOTO_TIMEOUT",
};

/// The `moto_server` program of the virtual environment `venv` (the project's `.venv`).
///
/// ```
/// let program = cqrs_local_stack::moto::server_program(".venv".as_ref());
/// assert_eq!(program, std::path::Path::new(".venv/bin/moto_server"));
/// ```
pub fn server_program(venv: &Path) -> PathBuf {
    venv.join("bin").join("moto_server")
}

/// Starts moto's server (every service, in memory) on 127.0.0.1:`port` or, when `port` is `None`,
/// on a free port. Returns once it answers HTTP; it keeps running after this process exits, until
/// [`stop`]. Its pid file and log are in `state`.
///
/// ```
/// let missing = std::path::Path::new("/nonexistent/bin/moto_server");
/// let err = cqrs_local_stack::moto::start(missing, "/tmp".as_ref(), None).unwrap_err();
/// assert!(err.to_string().contains("scripts/tools.sh"));
/// ```
pub fn start(program: &Path, state: &Path, port: Option<u16>) -> Result<Instance, Error> {
    if !program.is_file() {
        return Err(Error::Missing(format!(
            "{} is missing: scripts/tools.sh installs moto {VERSION} (requirements-tools.txt)",
            program.display()
        )));
    }
    MOTO.start(state, port, |port| {
        let mut moto = Command::new(program);
        moto.args(["-H", "127.0.0.1", "-p"]).arg(port.to_string());
        moto
    })
}

/// The moto servers started from `state` that are still running, by port.
///
/// ```
/// assert!(cqrs_local_stack::moto::running("/nonexistent".as_ref()).is_empty());
/// ```
pub fn running(state: &Path) -> Vec<Instance> {
    MOTO.running(state)
}

/// Stops the server on `port` started from `state`; returns whether one was running (stopping one
/// that is not is not an error). It returns once the process has exited and its port is free.
///
/// ```
/// assert!(!cqrs_local_stack::moto::stop("/nonexistent".as_ref(), 1).unwrap());
/// ```
pub fn stop(state: &Path, port: u16) -> Result<bool, Error> {
    MOTO.stop(state, port)
}
