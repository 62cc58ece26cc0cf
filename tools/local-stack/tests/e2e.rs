//! End to end through the running local stack (`cqrs dev up`): a command goes in over HTTP,
//! the stream mapping feeds it to data-sync, and the query API shows it; then an update, a patch,
//! the history, and the tenant wall.
//!
//! Ignored by plain `cargo test`: the test command starts the stack and runs it with
//! `LOCAL_STACK_URL` set (`cargo test -p cqrs-local-stack --test e2e -- --ignored`).

use std::time::{Duration, Instant};

use cqrs_testkit::api::Api;
use serde_json::json;

fn api() -> Api {
    Api::from_env("LOCAL_STACK_URL")
}

#[tokio::test]
#[ignore = "needs the running local stack: run through `make test`"]
async fn a_command_travels_through_the_stream_to_the_query_api() {
    let api = api();
    // A fresh item per run, so the test also works against a stack a developer left running.
    let sk = format!("E2E{}", std::process::id());
    let item_path = format!("/items/PRODUCT%23t1/{sk}");

    let create = json!({"pk": "PRODUCT#t1", "sk": sk, "version": 0, "code": "E2E", "name": "first",
        "attributes": {"price": 100, "tags": {}}});
    let (status, body) = api.call("POST", "/commands", "t1", Some(create)).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["version"], 1);

    let (item, delay) = api
        .wait_for(&item_path, "t1", |s, b| s == 200 && b["version"] == 1)
        .await;
    println!("e2e: version 1 visible through the query API {delay:?} after the command");
    assert_eq!(item["name"], "first");
    assert_eq!(item["sk"], sk.as_str());
    assert_eq!(item["csk"], format!("{sk}@1"));

    let update = json!({"pk": "PRODUCT#t1", "sk": sk, "version": 1, "code": "E2E", "name": "second",
        "attributes": {"price": 120}});
    let (status, body) = api.call("POST", "/commands", "t1", Some(update)).await;
    assert_eq!((status, body["version"].clone()), (202, json!(2)), "{body}");
    let patch =
        json!({"pk": "PRODUCT#t1", "sk": sk, "version": -1, "attributes": {"colour": "red"}});
    let (status, body) = api.call("PATCH", "/commands", "t1", Some(patch)).await;
    assert_eq!((status, body["version"].clone()), (202, json!(3)), "{body}");

    let (item, delay) = api
        .wait_for(&item_path, "t1", |s, b| s == 200 && b["version"] == 3)
        .await;
    println!("e2e: version 3 visible {delay:?} after the patch");
    assert_eq!(item["name"], "second");
    assert_eq!(item["attributes"], json!({"price": 120, "colour": "red"}));

    let (history, _) = api
        .wait_for(&format!("{item_path}/versions"), "t1", |s, b| {
            s == 200 && b["items"].as_array().is_some_and(|i| i.len() == 3)
        })
        .await;
    let versions: Vec<i64> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["version"].as_i64().unwrap())
        .collect();
    assert_eq!(versions, [3, 2, 1], "history newest first");

    let (status, one) = api
        .call("GET", &format!("{item_path}/versions/1"), "t1", None)
        .await;
    assert_eq!((status, one["name"].clone()), (200, json!("first")));

    let (status, listing) = api
        .call("GET", "/items/PRODUCT%23t1?limit=100", "t1", None)
        .await;
    assert_eq!(status, 200, "{listing}");
    assert!(
        listing["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["sk"] == sk.as_str())
    );

    // Another tenant sees nothing of it.
    let (status, problem) = api.call("GET", &item_path, "t2", None).await;
    assert_eq!(status, 403, "{problem}");
    assert_eq!(problem["status"], 403);
}

#[tokio::test]
#[ignore = "needs the running local stack: run through `make test`"]
async fn an_entity_command_is_read_back_through_its_access_patterns() {
    let api = api();
    // A user of its own per run, so the patterns list only this run's order.
    let user = format!("e2e-{}", std::process::id());
    let create = json!({"entity": "order", "version": 0,
                        "attributes": {"userId": user, "status": "PENDING", "totalCents": 4200}});
    let (status, body) = api.call("POST", "/commands", "t1", Some(create)).await;
    assert_eq!(status, 202, "{body}");
    let order_id = body["sk"]
        .as_str()
        .unwrap()
        .trim_start_matches("ORDER#")
        .trim_end_matches("@1")
        .to_string();
    let by_user = format!("/query/orders_of_user?userId={user}");
    let (page, delay) = api
        .wait_for(&by_user, "t1", |status, body| {
            status == 200
                && body["items"]
                    .as_array()
                    .is_some_and(|items| items.len() == 1)
        })
        .await;
    assert_eq!(page["items"][0]["entity"], "order");
    println!("e2e: the order visible through /query/orders_of_user {delay:?} after the command");

    // The inverted index names its user; the status index (10 shards) holds it.
    let (status, owner) = api
        .call(
            "GET",
            &format!("/query/user_of_order?orderId={order_id}"),
            "t1",
            None,
        )
        .await;
    assert_eq!(status, 200, "{owner}");
    assert_eq!(owner["items"][0]["attributes"]["userId"], user.as_str());
    let mut cursor: Option<String> = None;
    let mut found = false;
    loop {
        let path = match &cursor {
            None => "/query/orders_by_status?status=PENDING&limit=100".to_string(),
            Some(c) => format!("/query/orders_by_status?status=PENDING&limit=100&cursor={c}"),
        };
        let (status, page) = api.call("GET", &path, "t1", None).await;
        assert_eq!(status, 200, "{page}");
        found |= page["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["attributes"]["orderId"] == order_id.as_str());
        cursor = page["cursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    assert!(found, "the order is in its status pattern");

    // The tenant comes from the caller: t2 sees none of it, and cannot ask for t1.
    let (status, other) = api.call("GET", &by_user, "t2", None).await;
    assert_eq!(
        (status, other["items"].as_array().map(Vec::len)),
        (200, Some(0))
    );
    let (status, problem) = api
        .call("GET", &format!("{by_user}&tenant=t1"), "t2", None)
        .await;
    assert_eq!((status, problem["field"].clone()), (400, json!("tenant")));
}

/// The stack's PostgreSQL (the relational read model), from its state folder.
async fn postgres() -> tokio_postgres::Client {
    let state =
        std::env::var("LOCAL_STACK_STATE").expect("LOCAL_STACK_STATE: the stack's state folder");
    let instance = cqrs_local_stack::postgres::running(state.as_ref())
        .into_iter()
        .next()
        .expect("the stack runs a PostgreSQL (the example service has a sql-sync function)");
    let (client, connection) = tokio_postgres::connect(&instance.url(), tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(connection);
    client
}

/// Polls the product's row in PostgreSQL (table `table`) until it has `version`; returns how long.
async fn row_at(client: &tokio_postgres::Client, table: &str, sk: &str, version: i64) -> Duration {
    let start = Instant::now();
    loop {
        let found: Option<i64> = client
            .query_opt(
                &format!(
                    r#"SELECT "version" FROM "{table}" WHERE "pk" = 'PRODUCT#t1' AND "sk" = $1"#
                ),
                &[&sk],
            )
            .await
            .ok()
            .flatten()
            .map(|row| row.get(0));
        if found == Some(version) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{table} {sk} never reached version {version}: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
#[ignore = "needs the running local stack: run through `make test`"]
async fn a_command_reaches_postgres_and_a_failing_postgres_leaves_data_sync_untouched() {
    let api = api();
    let sql = postgres().await;
    let sk = format!("SQL{}", std::process::id());
    let item_path = format!("/items/PRODUCT%23t1/{sk}");
    let create = json!({"pk": "PRODUCT#t1", "sk": sk, "version": 0, "name": "first",
        "attributes": {"priceCents": 100, "category": "tea"}});
    let (status, body) = api.call("POST", "/commands", "t1", Some(create)).await;
    assert_eq!(status, 202, "{body}");
    let lag = row_at(&sql, "product", &sk, 1).await;
    println!("e2e: version 1 in PostgreSQL {lag:?} after the command was accepted");

    // PostgreSQL refuses sql-sync's writes (its table is gone): data-sync goes on regardless.
    sql.batch_execute(r#"ALTER TABLE "product" RENAME TO "product_away""#)
        .await
        .unwrap();
    let update = json!({"pk": "PRODUCT#t1", "sk": sk, "version": 1, "name": "second",
        "attributes": {"priceCents": 120, "category": "tea"}});
    let (status, body) = api.call("POST", "/commands", "t1", Some(update)).await;
    assert_eq!(status, 202, "{body}");
    let (_, delay) = api
        .wait_for(&item_path, "t1", |s, b| s == 200 && b["version"] == 2)
        .await;
    println!(
        "e2e: with PostgreSQL failing, version 2 still in the data table {delay:?} after the command"
    );
    let stuck: i64 = sql
        .query_one(
            r#"SELECT "version" FROM "product_away" WHERE "pk" = 'PRODUCT#t1' AND "sk" = $1"#,
            &[&sk],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stuck, 1, "sql-sync could not write version 2");

    // PostgreSQL is back: the retried batch catches up.
    sql.batch_execute(r#"ALTER TABLE "product_away" RENAME TO "product""#)
        .await
        .unwrap();
    let caught_up = row_at(&sql, "product", &sk, 2).await;
    println!("e2e: version 2 in PostgreSQL {caught_up:?} after it was back");
}
