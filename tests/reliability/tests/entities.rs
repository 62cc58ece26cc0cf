//! The entity model end to end against DynamoDB Local: commands by entity get their keys from the
//! model, every version carries the index keys computed from its whole item, data-sync projects
//! them, and queries on the data table's GSIs prove them: status moves between status partitions
//! on the same write shard, sparse removal when the condition turns false, a changed part of a
//! composite key keeps the others, native multi-attribute keys. Bad attribute values are 400s
//! naming the attribute, and nothing is written.

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_caller::CallerMode;
use cqrs_data_sync::DataSync;
use cqrs_testkit::TestTables;
use serde_json::{Value, json};

use common::{Caller, Req, Stack, T1, T2};

/// Delivers the command table's whole stream (at least `min` records) to data-sync, as Lambda
/// would; replays of earlier records are absorbed by the idempotent writes.
async fn project(tables: &TestTables, min: usize) {
    let records = tables.command_stream_records(min).await;
    let arn = tables.command_stream_arn().await;
    let event = cqrs_testkit::stream_event::lambda_event(&records, &arn).expect("a Lambda event");
    let sync = DataSync::new(common::store(tables));
    let response = sync.handle(event).await;
    assert!(
        response.batch_item_failures.is_empty(),
        "data-sync reported failures"
    );
}

/// The `sk` of every data-table item in index `index` whose key attribute `attr` is `value`.
async fn in_index(tables: &TestTables, index: &str, attr: &str, value: &str) -> Vec<String> {
    let page = tables
        .client
        .query()
        .table_name(&tables.data)
        .index_name(index)
        .key_condition_expression("#k = :v")
        .expression_attribute_names("#k", attr)
        .expression_attribute_values(":v", AttributeValue::S(value.into()))
        .send()
        .await
        .expect("index query");
    let mut sks: Vec<String> = page
        .items()
        .iter()
        .filter_map(|i| i.get("sk").and_then(|v| v.as_s().ok()).cloned())
        .collect();
    sks.sort();
    sks
}

/// Every shard of a status partition: (shard, sks).
async fn status_shards(tables: &TestTables, status: &str) -> Vec<(u32, Vec<String>)> {
    let mut found = Vec::new();
    for shard in 0..10 {
        let sks = in_index(
            tables,
            "gsi2",
            "gsi2pk",
            &format!("STATUS#t1#{status}#SHARD#{shard}"),
        )
        .await;
        if !sks.is_empty() {
            found.push((shard, sks));
        }
    }
    found
}

fn command(method: &str, body: Value) -> Req {
    Req::command(method, &body.to_string()).from(CallerMode::Local, T1)
}

#[tokio::test]
async fn index_keys_follow_every_version_through_the_projection() {
    let stack = Stack::new(CallerMode::Local).await;
    let tables = &stack.tables;

    // A create by entity: no pk/sk, no orderId; the server makes both.
    let created = stack
        .send(
            command(
                "POST",
                json!({"entity": "order", "version": 0,
                       "attributes": {"userId": "u1", "status": "PENDING", "totalCents": 129900}}),
            )
            .header("idempotency-key", "create-order-1"),
        )
        .await;
    assert_eq!(created.status, 202, "{}", created.text);
    assert_eq!(created.body["pk"], "ORDER#t1");
    let sk = created.body["sk"].as_str().unwrap().to_string();
    let base = sk.trim_end_matches("@1").to_string();
    let order_id = base.trim_start_matches("ORDER#").to_string();
    assert_eq!(order_id.len(), 26, "a ULID: {order_id}");
    project(tables, 1).await;

    // Orders of u1 (gsi1), the status index on one shard (gsi2), the inverted index (gsi3).
    assert_eq!(
        in_index(tables, "gsi1", "gsi1pk", "USER#t1#u1").await,
        vec![base.clone()]
    );
    let pending = status_shards(tables, "PENDING").await;
    assert_eq!(pending.len(), 1, "{pending:?}");
    let shard = pending[0].0;
    assert_eq!(
        in_index(tables, "gsi3", "gsi3pk", &format!("ORDER#t1#{order_id}")).await,
        vec![base.clone()]
    );

    // PATCH the status: the item moves to the PAID partition, on the same shard.
    let patch = |version: i64, attributes: Value| {
        command(
            "PATCH",
            json!({"pk": "ORDER#t1", "sk": base, "version": version, "attributes": attributes}),
        )
    };
    assert_eq!(
        stack.send(patch(1, json!({"status": "PAID"}))).await.status,
        202
    );
    project(tables, 2).await;
    assert!(status_shards(tables, "PENDING").await.is_empty());
    assert_eq!(
        status_shards(tables, "PAID").await,
        [(shard, vec![base.clone()])]
    );

    // A PATCH that changes one part of gsi1's composite key keeps the other (createdAt#orderId).
    let gsi1sk_before = data_item(tables, &base).await["gsi1sk"].clone();
    assert_eq!(
        stack.send(patch(2, json!({"userId": "u2"}))).await.status,
        202
    );
    project(tables, 3).await;
    assert!(
        in_index(tables, "gsi1", "gsi1pk", "USER#t1#u1")
            .await
            .is_empty()
    );
    assert_eq!(
        in_index(tables, "gsi1", "gsi1pk", "USER#t1#u2").await,
        vec![base.clone()]
    );
    assert_eq!(data_item(tables, &base).await["gsi1sk"], gsi1sk_before);

    // DELIVERED is outside the status index's condition: the keys go, the item leaves the index.
    assert_eq!(
        stack
            .send(patch(3, json!({"status": "DELIVERED"})))
            .await
            .status,
        202
    );
    project(tables, 4).await;
    for status in ["PENDING", "PAID", "DELIVERED"] {
        assert!(status_shards(tables, status).await.is_empty(), "{status}");
    }
    let item = data_item(tables, &base).await;
    assert!(!item.contains_key("gsi2pk") && !item.contains_key("gsi2sk"));
    assert_eq!(item["entity"], AttributeValue::S("order".into()));
    assert_eq!(item["version"], AttributeValue::N("4".into()));

    // Native multi-attribute keys: each attribute keeps its own value, upper-cased as declared.
    let store = stack
        .send(command(
            "POST",
            json!({"entity": "store", "version": 0,
                   "attributes": {"country": "us", "region": "ca", "city": "San Francisco"}}),
        ))
        .await;
    assert_eq!(store.status, 202, "{}", store.text);
    project(tables, 5).await;
    let page = tables
        .client
        .query()
        .table_name(&tables.data)
        .index_name("location")
        .key_condition_expression("locTenant = :t AND locCountry = :c AND locRegion = :r")
        .expression_attribute_values(":t", AttributeValue::S("t1".into()))
        .expression_attribute_values(":c", AttributeValue::S("US".into()))
        .expression_attribute_values(":r", AttributeValue::S("CA".into()))
        .send()
        .await
        .unwrap();
    assert_eq!(page.items().len(), 1);
    println!(
        "entity model: 5 versions projected (4 of an order, 1 store); status moved PENDING -> PAID on shard {shard}, left the index at DELIVERED; composite key kept its unchanged part; multi-attribute index answered"
    );
}

async fn data_item(
    tables: &TestTables,
    base: &str,
) -> std::collections::HashMap<String, AttributeValue> {
    tables
        .client
        .get_item()
        .table_name(&tables.data)
        .key("pk", AttributeValue::S("ORDER#t1".into()))
        .key("sk", AttributeValue::S(base.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .expect("the order in the data table")
}

#[tokio::test]
async fn bad_entity_commands_are_400s_naming_the_attribute_and_write_nothing() {
    let stack = Stack::new(CallerMode::Local).await;
    let seed = stack
        .send(command(
            "POST",
            json!({"entity": "order", "version": 0, "attributes": {"orderId": "o1", "userId": "u1", "status": "PAID"}}),
        ))
        .await;
    assert_eq!(seed.status, 202, "{}", seed.text);
    let before = stack.snapshot().await;
    let order =
        |attributes: Value| json!({"entity": "order", "version": 0, "attributes": attributes});
    let cases = [
        (json!({"entity": "invoice", "version": 0}), "entity"),
        (
            order(json!({"userId": "u1", "status": "LOST"})),
            "attributes.status",
        ),
        (order(json!({"status": "PAID"})), "attributes.userId"),
        (
            order(json!({"userId": "u#1", "status": "PAID"})),
            "attributes.userId",
        ),
        (
            order(json!({"userId": "", "status": "PAID"})),
            "attributes.userId",
        ),
        (
            order(json!({"orderId": "a#b", "userId": "u", "status": "PAID"})),
            "attributes.orderId",
        ),
        (
            order(json!({"userId": 7, "status": "PAID"})),
            "attributes.userId",
        ),
        (
            order(json!({"userId": "x".repeat(129), "status": "PAID"})),
            "attributes.userId",
        ),
        // Explicit keys that disagree with the attributes they are built from.
        (
            json!({"pk": "ORDER#t1", "sk": "ORDER#o2", "version": 0,
                   "attributes": {"orderId": "o3", "userId": "u1", "status": "PAID"}}),
            "attributes.orderId",
        ),
        // Keys given with an entity must be that entity's.
        (
            json!({"entity": "order", "pk": "ORDER#t1", "sk": "ORDER_ITEM#o1#1", "version": 0}),
            "sk",
        ),
        (
            json!({"entity": "order", "pk": "ORDER#t1", "version": 0}),
            "sk",
        ),
        // PATCH cannot move an item's own primary key: that is a new item.
        (
            json!({"pk": "ORDER#t1", "sk": "ORDER#o1", "version": 1, "attributes": {"orderId": "o9"}}),
            "attributes.orderId",
        ),
        // Numbers in keys: sort-preserving widths, no negatives.
        (
            json!({"entity": "product", "version": 0,
                   "attributes": {"category": "tea", "priceCents": -5}}),
            "attributes.priceCents",
        ),
        (
            json!({"entity": "product", "version": 0,
                   "attributes": {"category": "tea", "priceCents": 1234567890123u64}}),
            "attributes.priceCents",
        ),
    ];
    let total = cases.len();
    for (body, field) in cases {
        let method = if body["version"] == 1 {
            "PATCH"
        } else {
            "POST"
        };
        let answer = stack.send(command(method, body.clone())).await;
        assert_eq!(answer.status, 400, "{body}: {}", answer.text);
        assert_eq!(answer.body["field"], field, "{body}: {}", answer.text);
    }
    // A common entity is written by system_admin only.
    let common = stack
        .send(
            Req::command(
                "POST",
                &json!({"entity": "user_auth", "version": 0,
                        "attributes": {"provider": "sso", "userId": "abc"}})
                .to_string(),
            )
            .from(CallerMode::Local, T2),
        )
        .await;
    assert_eq!(common.status, 403, "{}", common.text);
    assert_eq!(
        stack.snapshot().await,
        before,
        "a refused command wrote something"
    );
    println!(
        "entity commands: {total} bad commands, {total} answered 400 naming the attribute, 1 common write refused 403, 0 written"
    );
}

/// Every `items[].attributes.orderId` of a pattern read to its end (pages of `limit`).
async fn read_pattern(stack: &Stack, who: common::Who, target: &str, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            None => format!("{target}&limit={limit}"),
            Some(c) => format!("{target}&limit={limit}&cursor={c}"),
        };
        let answer = stack
            .send(common::get(&url).from(CallerMode::Local, who))
            .await;
        assert_eq!(answer.status, 200, "{url}: {}", answer.text);
        for item in answer.body["items"].as_array().unwrap() {
            assert_eq!(item["entity"], "order");
            ids.push(item["attributes"]["orderId"].as_str().unwrap().to_string());
        }
        cursor = answer.body["cursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            return ids;
        }
    }
}

#[tokio::test]
async fn access_patterns_read_what_commands_wrote() {
    let stack = Stack::new(CallerMode::Local).await;
    let tables = &stack.tables;
    let mut created = Vec::new();
    for (who, count) in [(T1, 12), (T2, 3)] {
        for i in 0..count {
            let answer = stack
                .send(
                    Req::command(
                        "POST",
                        &json!({"entity": "order", "version": 0,
                                "attributes": {"userId": "alice", "status": "PENDING", "totalCents": i}})
                        .to_string(),
                    )
                    .from(CallerMode::Local, who),
                )
                .await;
            assert_eq!(answer.status, 202, "{}", answer.text);
            if who.tenant == "t1" {
                created.push(
                    answer.body["sk"]
                        .as_str()
                        .unwrap()
                        .trim_end_matches("@1")
                        .to_string(),
                );
            }
        }
    }
    project(tables, 15).await;
    let pending = read_pattern(&stack, T1, "/query/orders_by_status?status=PENDING", 5).await;
    assert_eq!(pending.len(), 12, "{pending:?}");
    // Four orders paid: they leave the PENDING pattern for the PAID one.
    for base in created.iter().take(4) {
        let answer = stack
            .send(command(
                "PATCH",
                json!({"pk": "ORDER#t1", "sk": base, "version": 1, "attributes": {"status": "PAID"}}),
            ))
            .await;
        assert_eq!(answer.status, 202, "{}", answer.text);
    }
    project(tables, 19).await;
    let pending = read_pattern(&stack, T1, "/query/orders_by_status?status=PENDING", 5).await;
    let paid = read_pattern(&stack, T1, "/query/orders_by_status?status=PAID", 5).await;
    assert_eq!((pending.len(), paid.len()), (8, 4));
    let newest_first = read_pattern(
        &stack,
        T1,
        "/query/orders_of_user?userId=alice&order=desc",
        5,
    )
    .await;
    let mut expected: Vec<String> = created
        .iter()
        .map(|sk| sk.trim_start_matches("ORDER#").to_string())
        .collect();
    expected.reverse();
    assert_eq!(
        newest_first, expected,
        "orders of a user, newest first (ULIDs follow creation)"
    );
    let t2 = read_pattern(&stack, T2, "/query/orders_of_user?userId=alice", 5).await;
    assert_eq!(t2.len(), 3, "t2 sees its own three orders, never t1's");
    println!(
        "access patterns end to end: 15 orders by command (12 t1, 3 t2), 4 paid by PATCH; PENDING 8, PAID 4, orders of alice newest first 12, t2 sees 3"
    );
}
