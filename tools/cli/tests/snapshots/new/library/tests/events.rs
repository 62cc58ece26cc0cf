//! The change feed over the running stack (`make dev-up`): a task written through `POST /commands`
//! leaves as a change event on the service's topic (`cqrs dev events`, which reads the stack's
//! local-only queue subscribed to it, shows it: its type, subject, version and tenant), and the
//! consumer task-audit (src/bin/task-audit.rs) handles it: its line about the task is in the
//! functions' log.
//!
//! Ignored by plain `cargo test`, as it needs the stack:
//! `make dev-up`, then `SERVICE_URL=http://127.0.0.1:9000 cargo test --test events -- --ignored`
//! (`CQRS`: the cqrs program, default `.local/cqrs/bin/cqrs`; `DEV_STATE_DIR`: the stack's state
//! folder, default `.local/dev`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cqrs_dynamo::testkit::Api;
use cqrs_dynamo::tokio;
use serde_json::{Value, json};

/// The service's folder (where `cqrs dev` runs).
fn service() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Stops the `cqrs dev events` this test started, also when an assertion fails.
struct Tail(std::process::Child);

impl Drop for Tail {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
#[ignore = "needs the running stack: make dev-up, then SERVICE_URL=... cargo test -- --ignored"]
async fn a_tasks_event_leaves_on_the_topic_and_task_audit_handles_it() {
    let api = Api::from_env("SERVICE_URL");
    let tenant = format!("ev{}", std::process::id());
    let task = json!({"entity": "task", "version": 0,
        "attributes": {"owner": "user-1", "title": "watch the feed", "status": "open"}});
    let sent = Instant::now();
    let (status, body) = api.call("POST", "/commands", &tenant, Some(task)).await;
    assert_eq!(status, 202, "{body}");
    let pk = body["pk"].as_str().unwrap();
    let sk = body["sk"].as_str().unwrap();
    let base_sk = sk.rsplit_once('@').map_or(sk, |(base, _)| base);
    let subject = format!("{pk}/{base_sk}");

    // `cqrs dev events --json`: every event since the stack came up that nobody read yet, this
    // task's among them.
    let cqrs = std::env::var_os("CQRS")
        .map(PathBuf::from)
        .unwrap_or_else(|| service().join(".local/cqrs/bin/cqrs"));
    let child = Command::new(&cqrs)
        .args(["dev", "events", "--json", "--timeout", "120"])
        .current_dir(service())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", cqrs.display()));
    let mut tail = Tail(child);
    let lines = BufReader::new(tail.0.stdout.take().unwrap()).lines();
    let event = lines
        .map(|line| serde_json::from_str::<Value>(&line.unwrap()).unwrap())
        .find(|event| event["subject"] == subject.as_str())
        .unwrap_or_else(|| panic!("cqrs dev events ended without an event of {subject}"));
    drop(tail);
    println!(
        "events: the task's event left on the topic {:?} after the command",
        sent.elapsed()
    );
    assert_eq!(event["type"], "task.created", "{event}");
    assert_eq!(event["itemversion"], 1, "{event}");
    assert_eq!(event["tenant"], tenant.as_str(), "{event}");
    assert_eq!(event["entity"], "task", "{event}");
    assert_eq!(event["data"]["version"], 1, "{event}");

    // task-audit saw it: its line names the task's subject (only a consumer's handler logs it).
    let state = std::env::var_os("DEV_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".local/dev"));
    let log = service().join(state).join("functions.log");
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().any(|line| line.contains(&subject)) {
            break;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(120),
            "no line about {subject} in {}",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "events: task-audit handled it {:?} after the command",
        sent.elapsed()
    );
}
