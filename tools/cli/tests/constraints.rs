//! `cqrs verify --constraints` and `cqrs rebuild --constraints` against DynamoDB Local, run as the
//! binary an operator runs, on guard items the command handler (in-process) wrote for a small
//! lending library: drift planted by hand (a bounded group's guard item deleted, a bogus member
//! added to another, a unique value's claim deleted, an item removed as TTL removes it, its rows and
//! head without its guards) is found and named, exit 1; the rebuild repairs
//! it while 4 writers lend, return and add copies of their own; afterwards verify is clean and the
//! groups count what the data holds.

use std::process::{Command, Output};

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_caller::CallerMode;
use cqrs_command_handler::App;
use cqrs_store::{Store, Tables};
use cqrs_testkit::TestTables;
use cqrs_testkit::http_event::HttpApiRequest;
use serde_json::{Value, json};

/// The shared constrained library with a member that loans name (`loan.member`).
fn model() -> String {
    format!(
        "{}references.member = {{ entity = \"member\" }}\n\n[entities.member]\n\
         pk = \"MEMBER#{{tenant}}\"\nsk = \"{{memberId}}\"\n\
         attributes.memberId = {{ type = \"string\", required = true, max = 40 }}\n",
        cqrs_testkit::models::CONSTRAINED_LIBRARY
    )
}

/// Runs `cqrs <args>` on the tables of `t` with the test's model; answers the exit code, the
/// parsed JSON output (`Null` when it is not JSON) and the output.
fn cqrs(t: &TestTables, args: &[&str]) -> (i32, Value, Output) {
    let service = std::env::temp_dir().join(format!("cqrs-constraints-{}", t.data));
    std::fs::create_dir_all(&service).expect("a service folder");
    std::fs::write(service.join("model.toml"), model()).expect("model.toml");
    let output = Command::new(env!("CARGO_BIN_EXE_cqrs"))
        .current_dir(&service)
        .args(args)
        .args(["--endpoint-url", &cqrs_testkit::endpoint::endpoint()])
        .env("DATA_TABLE", &t.data)
        .env("HISTORY_TABLE", &t.history)
        .env("COMMAND_TABLE", &t.command)
        .env("IDEMPOTENCY_TABLE", &t.idempotency)
        .output()
        .expect("the cqrs binary runs");
    let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), json, output)
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

async fn library() -> (App, TestTables) {
    let tables = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        tables.client.clone(),
        Tables::new(
            &tables.command,
            &tables.data,
            &tables.history,
            &tables.idempotency,
        ),
    );
    let model = cqrs_model::Model::parse(&model()).expect("the test's model checks");
    (App::new(store, CallerMode::Jwt, model), tables)
}

/// Sends a command as a librarian of t1 until it is not a write conflict (which writes nothing).
async fn send(app: &App, method: &str, body: Value) -> (u16, Value) {
    loop {
        let request = HttpApiRequest::command(method, &body.to_string())
            .claims("librarian", "t1", "librarian")
            .request();
        let response = cqrs_command_handler::handle(app, request).await;
        let status = response.status().as_u16();
        let answer = match response.body() {
            lambda_http::Body::Text(text) => serde_json::from_str(text).unwrap_or(Value::Null),
            _ => Value::Null,
        };
        if answer["type"] != "urn:cqrs:problem:write-conflict" {
            return (status, answer);
        }
    }
}

async fn create(app: &App, entity: &str, attributes: Value) -> String {
    let (status, answer) = send(
        app,
        "POST",
        json!({"entity": entity, "version": 0, "attributes": attributes}),
    )
    .await;
    assert_eq!(status, 202, "{entity} {attributes}: {answer}");
    let sk = answer["sk"].as_str().expect("an sk");
    sk.split('@').next().unwrap().to_string()
}

fn member_key(member: &str) -> String {
    cqrs_keys::guard_key("t1", "loan", "loans_out", &[member.to_string()])
}

/// The guard items of the idempotency table whose key starts with `prefix`.
async fn guard_keys(t: &TestTables, prefix: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut pages = t
        .client
        .scan()
        .table_name(&t.idempotency)
        .consistent_read(true)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        for row in page.unwrap().items() {
            if let Some(AttributeValue::S(pk)) = row.get("pk")
                && pk.starts_with(prefix)
            {
                keys.push(pk.clone());
            }
        }
    }
    keys
}

/// One writer of its own member `w{n}`, `rounds` times: adds a copy with a copy number of its own,
/// lends it, returns it, lends it again (that loan stays out: one more per round).
async fn writer(app: &App, n: usize, rounds: usize) {
    let member = format!("w{n}");
    create(app, "member", json!({"memberId": member})).await;
    for round in 0..rounds {
        let copy = format!("w{n}-c{round}");
        create(
            app,
            "copy",
            json!({"copyId": copy, "isbn": "9780000000001", "copyNo": 100 * (n + 1) + round}),
        )
        .await;
        let out = json!({"memberId": member, "copyId": copy, "status": "out"});
        let loan = create(app, "loan", out.clone()).await;
        let back = json!({"entity": "loan", "version": 1,
            "attributes": {"loanId": loan, "status": "returned"}});
        let (status, answer) = send(app, "PATCH", back).await;
        assert_eq!(status, 202, "{answer}");
        create(app, "loan", out).await;
    }
}

#[tokio::test]
async fn drift_is_found_and_repaired_beside_four_writers_then_verify_is_clean() {
    let (app, t) = library().await;
    for member in ["m1", "m2", "m3"] {
        create(&app, "member", json!({"memberId": member})).await;
    }
    for (i, copy) in ["c1", "c2", "c3", "c4"].iter().enumerate() {
        create(
            &app,
            "copy",
            json!({"copyId": copy, "isbn": "9780000000001", "copyNo": i + 1}),
        )
        .await;
    }
    let mut loans = Vec::new();
    for (member, copy) in [("m1", "c1"), ("m1", "c2"), ("m2", "c3"), ("m3", "c4")] {
        let loan = create(
            &app,
            "loan",
            json!({"memberId": member, "copyId": copy, "status": "out"}),
        )
        .await;
        loans.push(loan);
    }
    assert_eq!(app.store.limit_members(&member_key("m1")).await.unwrap(), 2);

    // Clean as the command handler wrote it.
    let (code, _, output) = cqrs(&t, &["verify", "--constraints"]);
    assert_eq!(code, 0, "{}", text(&output));
    assert!(text(&output).contains("0 differences"), "{}", text(&output));

    // Drift: m1's group loses its guard item, m2's gains a member no item is, a copy number loses
    // its claim, and m3's loan goes as a TTL removal takes an item (its rows and head, no
    // transaction: its guard keeps its token).
    t.client
        .delete_item()
        .table_name(&t.idempotency)
        .key("pk", AttributeValue::S(member_key("m1")))
        .send()
        .await
        .unwrap();
    t.client
        .update_item()
        .table_name(&t.idempotency)
        .key("pk", AttributeValue::S(member_key("m2")))
        .update_expression("ADD m :bogus")
        .expression_attribute_values(
            ":bogus",
            AttributeValue::Ss(vec!["bogusbogusbogusbogus00".into()]),
        )
        .send()
        .await
        .unwrap();
    let gone = &loans[3];
    t.client
        .delete_item()
        .table_name(&t.command)
        .key("pk", AttributeValue::S("LOAN#t1".into()))
        .key("sk", AttributeValue::S(format!("{gone}@1")))
        .send()
        .await
        .unwrap();
    t.client
        .delete_item()
        .table_name(&t.idempotency)
        .key(
            "pk",
            AttributeValue::S(cqrs_keys::head_key("LOAN#t1", gone)),
        )
        .send()
        .await
        .unwrap();
    let claims = guard_keys(&t, "GUARD#t1#copy#copy_number#").await;
    assert_eq!(claims.len(), 4, "{claims:?}");
    t.client
        .delete_item()
        .table_name(&t.idempotency)
        .key("pk", AttributeValue::S(claims[0].clone()))
        .send()
        .await
        .unwrap();

    let (code, found, output) = cqrs(&t, &["verify", "--constraints", "--json"]);
    assert_eq!(code, 1, "{}", text(&output));
    assert_eq!(found["clean"], false, "{found}");
    let mut kinds: Vec<&str> = found["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "extra-member",
            "extra-member",
            "missing-member",
            "missing-member",
            "unclaimed"
        ],
        "{found}"
    );
    let (code, _, output) = cqrs(&t, &["verify", "--constraints"]);
    let said = text(&output);
    println!("{said}");
    assert_eq!(code, 1, "{said}");
    for expected in [
        "5 differences",
        "missing-member",
        "extra-member",
        "unclaimed",
        "loan.loans_out",
        "copy.copy_number",
        "`cqrs rebuild --constraints` repairs",
    ] {
        assert!(said.contains(expected), "{expected:?} in {said}");
    }

    // Another tenant's scope holds none of it.
    let (code, scoped, output) = cqrs(&t, &["verify", "--constraints", "--tenant", "t2", "--json"]);
    assert_eq!(
        (code, &scoped["clean"]),
        (0, &json!(true)),
        "{}",
        text(&output)
    );

    // The repair, beside 4 writers lending, returning and adding copies of their own.
    let rebuild = {
        let t = t.clone();
        tokio::task::spawn_blocking(move || cqrs(&t, &["rebuild", "--constraints", "--json"]))
    };
    futures::future::join_all((0..4).map(|n| writer(&app, n, 3))).await;
    let (code, repaired, output) = rebuild.await.unwrap();
    assert_eq!(code, 0, "{}", text(&output));
    assert_eq!(repaired["clean"], true, "{repaired}");
    // The four planted differences are among the repairs (what a writer's command did between
    // the repair's scans may be listed too).
    let fixed: Vec<String> = repaired["repaired"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| format!("{} {}", d["kind"], d["text"]))
        .collect();
    let count = |needle: &str| fixed.iter().filter(|f| f.contains(needle)).count();
    assert_eq!(
        count(r#"in group [\"m1\"] but not in its guard"#),
        2,
        "{fixed:#?}"
    );
    assert_eq!(count("bogusbogusbogusbogus00"), 1, "{fixed:#?}");
    assert!(count("counts an unknown item") >= 2, "{fixed:#?}");
    assert_eq!(count("is held by COPY#t1 / c"), 1, "{fixed:#?}");

    // Clean, and the groups count what the data holds.
    let (code, _, output) = cqrs(&t, &["verify", "--constraints"]);
    assert_eq!(code, 0, "{}", text(&output));
    assert_eq!(app.store.limit_members(&member_key("m1")).await.unwrap(), 2);
    assert_eq!(app.store.limit_members(&member_key("m2")).await.unwrap(), 1);
    assert_eq!(app.store.limit_members(&member_key("m3")).await.unwrap(), 0);
    for n in 0..4 {
        assert_eq!(
            app.store
                .limit_members(&member_key(&format!("w{n}")))
                .await
                .unwrap(),
            3,
            "writer {n} holds one loan out per round"
        );
    }
    // The repaired claim refuses a duplicate again.
    let (status, problem) = send(
        &app,
        "POST",
        json!({"entity": "copy", "version": 0, "attributes":
            {"copyId": "dup", "isbn": "9780000000001", "copyNo": 1}}),
    )
    .await;
    assert_eq!(status, 409, "{problem}");
}
