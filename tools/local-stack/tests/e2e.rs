//! End to end through the running local stack (`cqrs dev up`): a command goes in over HTTP,
//! the stream mapping feeds it to data-sync, and the query API shows it; then an update, a patch,
//! the history, and the tenant wall; the relational read model; and the change feed: a command's
//! event leaves on the topic (a queue of the test's own, subscribed to it, receives it) and the
//! consumer `order-audit` handles it (its marker in the idempotency table).
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

/// The `KEY=value` lines of the file `name` of the stack's state folder (`functions.env`: the
/// functions' environment; `events.env`: where the change feed is).
fn state_env(name: &str) -> std::collections::HashMap<String, String> {
    let state =
        std::env::var("LOCAL_STACK_STATE").expect("LOCAL_STACK_STATE: the stack's state folder");
    let path = std::path::Path::new(&state).join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (the stack runs the change feed when the service has src/bin/event-publisher.rs)", path.display()))
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A FIFO queue of the test's own, subscribed raw to the stack's topic; its URL.
async fn own_subscription(
    sns: &aws_sdk_sns::Client,
    sqs: &aws_sdk_sqs::Client,
    topic: &str,
    name: &str,
) -> (String, String) {
    use aws_sdk_sqs::types::QueueAttributeName;
    let url = sqs
        .create_queue()
        .queue_name(format!("{name}.fifo"))
        .attributes(QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&QueueAttributeName::QueueArn]
        .clone();
    let subscription = sns
        .subscribe()
        .topic_arn(topic)
        .protocol("sqs")
        .endpoint(arn)
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .unwrap()
        .subscription_arn
        .unwrap();
    (url, subscription)
}

#[tokio::test]
#[ignore = "needs the running local stack: run through `make test`"]
async fn a_commands_event_leaves_on_the_topic_and_the_consumer_handles_it() {
    let api = api();
    let events = state_env("events.env");
    let functions = state_env("functions.env");
    let moto = &events["AWS_ENDPOINT_URL_SQS"];
    let (sns, sqs) = (
        cqrs_local_stack::moto::sns_client(moto),
        cqrs_local_stack::moto::sqs_client(moto),
    );
    let (queue, subscription) = own_subscription(
        &sns,
        &sqs,
        &events["EVENTS_TOPIC_ARN"],
        &format!("e2e-events-{}", std::process::id()),
    )
    .await;

    let user = format!("e2e-events-{}", std::process::id());
    let create = json!({"entity": "order", "version": 0,
                        "attributes": {"userId": user, "status": "PENDING", "totalCents": 990}});
    let sent = Instant::now();
    let (status, body) = api.call("POST", "/commands", "t1", Some(create)).await;
    assert_eq!(status, 202, "{body}");
    let pk = body["pk"].as_str().unwrap().to_string();
    let sk = body["sk"].as_str().unwrap();
    let base_sk = sk.rsplit_once('@').map_or(sk, |(base, _)| base).to_string();
    let subject = format!("{pk}/{base_sk}");

    // The queue of the test's own: every event of the stack since it subscribed, this one's
    // among them.
    let event = loop {
        assert!(
            sent.elapsed() < Duration::from_secs(120),
            "no event of {subject} on the topic"
        );
        let answer = sqs
            .receive_message()
            .queue_url(&queue)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        let mut found = None;
        for message in answer.messages.unwrap_or_default() {
            let event: serde_json::Value = serde_json::from_str(message.body().unwrap()).unwrap();
            sqs.delete_message()
                .queue_url(&queue)
                .receipt_handle(message.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
            if event["subject"] == subject.as_str() {
                found = Some(event);
            }
        }
        if let Some(event) = found {
            break event;
        }
    };
    println!(
        "e2e: the order's event left on the topic {:?} after the command",
        sent.elapsed()
    );
    assert_eq!(event["type"], "order.created", "{event}");
    assert_eq!(event["itemversion"], 1, "{event}");
    assert_eq!(event["tenant"], "t1", "{event}");
    assert_eq!(event["entity"], "order", "{event}");
    assert_eq!(
        event["source"],
        events["CQRS_EVENT_SOURCE"].as_str(),
        "{event}"
    );
    assert_eq!(event["data"]["version"], 1, "{event}");

    // The consumer order-audit handled it: its marker of the item is at version 1.
    let dynamodb = cqrs_testkit::endpoint::client_for(&functions["AWS_ENDPOINT_URL_DYNAMODB"])
        .await
        .unwrap();
    let key = cqrs_keys::consumer_marker_key("order-audit", &pk, &base_sk);
    let applied = loop {
        let item = dynamodb
            .get_item()
            .table_name(&functions["IDEMPOTENCY_TABLE"])
            .key(
                "pk",
                aws_sdk_dynamodb::types::AttributeValue::S(key.clone()),
            )
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item;
        let applied = item
            .as_ref()
            .and_then(|i| i.get("applied"))
            .and_then(|a| a.as_n().ok())
            .map(|n| n.to_string());
        if applied.is_some() {
            break applied;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(120),
            "order-audit never marked {key} ({subject})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "e2e: order-audit's marker of the order {:?} after the command",
        sent.elapsed()
    );
    assert_eq!(applied.as_deref(), Some("1"));

    sns.unsubscribe()
        .subscription_arn(subscription)
        .send()
        .await
        .unwrap();
    sqs.delete_queue().queue_url(queue).send().await.unwrap();
}
