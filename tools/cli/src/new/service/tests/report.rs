//! `GET /tasks/report` over HTTP against the running stack (`make dev-up`): tasks written through
//! `POST /commands` reach the relational read model (data-sync, then sql-sync), and the report
//! answers the caller's tenant's tasks only, filtered, sorted and counted; a bad parameter is a 400
//! problem document.
//!
//! Ignored by plain `cargo test`, as it needs the stack:
//! `make dev-up`, then `SERVICE_URL=http://127.0.0.1:9000 cargo test --test report -- --ignored`.

use cqrs_dynamo::testkit::Api;
use cqrs_dynamo::tokio;
use serde_json::json;

#[tokio::test]
#[ignore = "needs the running stack: make dev-up, then SERVICE_URL=... cargo test -- --ignored"]
async fn the_report_reads_the_callers_tasks_from_postgres() {
    let api = Api::from_env("SERVICE_URL");
    // Tenants of this run's own: the counts start at zero.
    let (mine, theirs) = (
        format!("a{}", std::process::id()),
        format!("b{}", std::process::id()),
    );
    for (tenant, title, status) in [
        (&mine, "charlie", "open"),
        (&mine, "alpha", "open"),
        (&mine, "bravo", "done"),
        (&theirs, "delta", "open"),
    ] {
        let task = json!({"entity": "task", "version": 0,
            "attributes": {"owner": "user-1", "title": title, "status": status}});
        let (status, body) = api.call("POST", "/commands", tenant, Some(task)).await;
        assert_eq!(status, 202, "{body}");
    }

    let (open, delay) = api
        .wait_for("/tasks/report?status=open", &mine, |s, b| {
            s == 200 && b["count"] == 2
        })
        .await;
    println!("report: 2 open tasks from PostgreSQL {delay:?} after the commands");
    let titles: Vec<&str> = open["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["alpha", "charlie"], "sorted by title");

    let (all, _) = api
        .wait_for("/tasks/report", &mine, |s, b| s == 200 && b["count"] == 3)
        .await;
    assert_eq!(all["items"].as_array().unwrap().len(), 3);
    // The other tenant sees its own task only.
    let (other, _) = api
        .wait_for("/tasks/report", &theirs, |s, b| s == 200 && b["count"] == 1)
        .await;
    assert_eq!(other["items"][0]["title"], "delta");

    let (status, problem) = api
        .call("GET", "/tasks/report?sort=colour", &mine, None)
        .await;
    assert_eq!(
        (status, &problem["status"]),
        (400, &json!(400)),
        "{problem}"
    );
}
