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
//! group, SNS's own deduplication, `StartMessageMoveTask`, and any throughput limit (its `SendMessage`
//! also slows as its queue deepens: a deep local backlog is slow to fill); and it moves a
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
            "{} is missing: install moto {VERSION} into that .venv from requirements-tools.txt (a service's `make tools`, the framework's scripts/tools.sh)",
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

/// The `moto_server` to run: `MOTO_SERVER` when set, else the `.venv` of the current folder or of
/// the first folder above it that has one (a test runs in its package's folder, inside the
/// project); `None` when there is none.
///
/// ```
/// let found = cqrs_local_stack::moto::find_program();
/// assert!(found.is_none_or(|p| p.ends_with("moto_server")));
/// ```
pub fn find_program() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MOTO_SERVER") {
        return Some(PathBuf::from(path));
    }
    let here = std::env::current_dir().ok()?;
    here.ancestors()
        .map(|dir| server_program(&dir.join(".venv")))
        .find(|program| program.is_file())
}

/// A moto server of one test or bench: on a free port of 127.0.0.1, its files in a fresh folder of
/// the system's temporary folder, and stopped, its folder removed, when dropped, also when the test
/// fails.
///
/// ```no_run
/// let moto = cqrs_local_stack::moto::Throwaway::start("my-test").unwrap();
/// let sqs = moto.sqs(); // an SQS client on it (dummy credentials, us-east-1)
/// // ... the server stops here, when `moto` is dropped.
/// ```
#[derive(Debug)]
pub struct Throwaway {
    /// The running server.
    pub instance: Instance,
    state: PathBuf,
}

impl Throwaway {
    /// Starts one ([`find_program`], [`start`]); `name` names its folder.
    pub fn start(name: &str) -> Result<Self, Error> {
        let program = find_program().ok_or_else(|| {
            Error::Missing(format!(
                "no .venv/bin/moto_server here or above, and MOTO_SERVER is not set: scripts/tools.sh installs moto {VERSION}"
            ))
        })?;
        let state = std::env::temp_dir().join(format!("cqrs-moto-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&state);
        let instance = start(&program, &state, None)?;
        Ok(Throwaway { instance, state })
    }

    /// Its endpoint (`AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL_SNS`).
    pub fn endpoint(&self) -> String {
        self.instance.endpoint()
    }

    /// Its state folder (pid and log files).
    pub fn state(&self) -> &Path {
        &self.state
    }

    /// An SQS client on it.
    pub fn sqs(&self) -> aws_sdk_sqs::Client {
        sqs_client(&self.endpoint())
    }

    /// An SNS client on it.
    pub fn sns(&self) -> aws_sdk_sns::Client {
        sns_client(&self.endpoint())
    }
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        for instance in running(&self.state) {
            let _ = stop(&self.state, instance.port);
        }
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

/// The HTTP client of the local clients: hyper, plain HTTP to 127.0.0.1 (the system's roots for
/// anything else).
fn http() -> aws_sdk_sqs::config::SharedHttpClient {
    cqrs_store::client::http_client(cqrs_store::client::TlsRoots::System)
        .expect("the system's TLS roots load")
}

/// An SQS client on moto at `endpoint`: dummy credentials, region us-east-1, nothing else read
/// from the environment.
///
/// ```
/// let sqs = cqrs_local_stack::moto::sqs_client("http://127.0.0.1:5000");
/// assert_eq!(sqs.config().region().map(|r| r.as_ref()), Some("us-east-1"));
/// ```
pub fn sqs_client(endpoint: &str) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_sqs::config::Credentials::new(
                "local", "local", None, None, "moto",
            ))
            .http_client(http())
            .endpoint_url(endpoint)
            .build(),
    )
}

/// An SNS client on moto at `endpoint`, as [`sqs_client`].
///
/// ```
/// let sns = cqrs_local_stack::moto::sns_client("http://127.0.0.1:5000");
/// assert_eq!(sns.config().region().map(|r| r.as_ref()), Some("us-east-1"));
/// ```
pub fn sns_client(endpoint: &str) -> aws_sdk_sns::Client {
    aws_sdk_sns::Client::from_conf(
        aws_sdk_sns::Config::builder()
            .behavior_version(aws_sdk_sns::config::BehaviorVersion::latest())
            .region(aws_sdk_sns::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_sns::config::Credentials::new(
                "local", "local", None, None, "moto",
            ))
            .http_client(http())
            .endpoint_url(endpoint)
            .build(),
    )
}
