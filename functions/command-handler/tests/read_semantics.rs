//! Read semantics of the command handler against DynamoDB Local:
//!
//! - a base version whose `ttl` has passed (DynamoDB deletes expired items only within days) is as
//!   absent as on the query side ([`cqrs_item::Item::is_expired`]): a `PATCH` has nothing to merge
//!   into, whether the expired base is the command row or the data table's item;
//! - a number attribute with a `width` holds it wherever the attribute is used: in a string key
//!   template, in a native multi-attribute index key, or in no key at all.

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::*;
use cqrs_caller::CallerMode;
use cqrs_command_handler::App;
use cqrs_item::Item;
use cqrs_store::{Store, Tables};
use serde_json::{Value, json};

/// Long past (2001-09-09): an expiry that has passed.
const PAST: i64 = 1_000_000_000;
/// Far ahead (2096-10-02): an expiry that has not.
const FUTURE: i64 = 4_000_000_000;

#[tokio::test]
async fn a_patch_on_an_expired_command_row_finds_nothing_to_merge_into() {
    let h = Harness::new().await;
    let pk = "PRODUCT#t1";
    // Live: a PATCH merges into version 1.
    let mut live = command(pk, "live", 0);
    live["ttl"] = json!(FUTURE);
    assert_eq!(h.post(&USER_T1, live).await.0, 202);
    let (status, body) = h
        .patch(
            &USER_T1,
            json!({"pk": pk, "sk": "live", "version": 1, "attributes": {"b": 2}}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let merged = h.versions(pk, "live").await.pop().unwrap();
    assert_eq!(merged.attributes["a"].as_i64(), Some(1));

    // Expired, its command row still there (not deleted yet): nothing to merge into.
    let mut expired = command(pk, "gone", 0);
    expired["ttl"] = json!(PAST);
    assert_eq!(h.post(&USER_T1, expired).await.0, 202);
    let (status, body) = h
        .patch(
            &USER_T1,
            json!({"pk": pk, "sk": "gone", "version": 1, "attributes": {"b": 2}}),
        )
        .await;
    println!("PATCH on an expired command row: {status} {body}");
    assert_eq!(status, 404, "an expired base is merged into: {body}");
    assert_eq!(h.versions(pk, "gone").await.len(), 1, "nothing written");
}

#[tokio::test]
async fn a_patch_on_an_expired_data_table_base_finds_nothing_to_merge_into() {
    let h = Harness::new().await;
    let pk = "PRODUCT#t1";
    // The command row is gone, the data table still holds the expired version: the fallback to
    // the data table agrees, nothing to merge into.
    let (status, body) = patch_data_table_only(&h, pk, "data-only", PAST).await;
    println!("PATCH on an expired data-table base: {status} {body}");
    assert_eq!(
        status, 404,
        "an expired data-table item is merged into: {body}"
    );
    // The same data-table fallback with a live item merges.
    let (status, body) = patch_data_table_only(&h, pk, "data-live", FUTURE).await;
    assert_eq!(status, 202, "{body}");
}

/// Creates `pk`/`sk` with `ttl`, leaves its version only in the data table (its command row
/// deleted) and PATCHes version 1: the answer.
async fn patch_data_table_only(h: &Harness, pk: &str, sk: &str, ttl: i64) -> (u16, Value) {
    let mut create = command(pk, sk, 0);
    create["ttl"] = json!(ttl);
    assert_eq!(h.post(&USER_T1, create).await.0, 202);
    let row = h.versions(pk, sk).await.pop().unwrap();
    put(h, &h.tables.data, &row.clone().into_data_item()).await;
    h.tables
        .client
        .delete_item()
        .table_name(&h.tables.command)
        .key("pk", AttributeValue::S(pk.into()))
        .key("sk", AttributeValue::S(row.sk.clone()))
        .send()
        .await
        .unwrap();
    h.patch(
        &USER_T1,
        json!({"pk": pk, "sk": sk, "version": 1, "attributes": {"b": 2}}),
    )
    .await
}

async fn put(h: &Harness, table: &str, item: &Item) {
    h.tables
        .client
        .put_item()
        .table_name(table)
        .set_item(Some(item.to_attributes().unwrap()))
        .send()
        .await
        .unwrap();
}

/// A model with a number of `width = 6` in a string key template, one in a native multi-attribute
/// index key, and one in no key at all.
const WIDTH_MODEL: &str = r#"
[indexes.byfee]
pk = [{ name = "feeTenant", type = "S" }]
sk = [{ name = "feeAmount", type = "N" }, { name = "feeId", type = "S" }]

[indexes.gsi1]
pk = "gsi1pk"
sk = "gsi1sk"

[entities.charge]
pk = "CHARGE#{tenant}"
sk = "{chargeId}"
id = "chargeId"
attributes.chargeId = { type = "string", max = 26 }
attributes.rank = { type = "number", width = 6 }
attributes.fee = { type = "number", width = 6 }
attributes.tip = { type = "number", width = 6 }
indexes.byfee = { pk = ["{tenant}"], sk = ["{fee}", "{chargeId}"] }
indexes.gsi1 = { pk = "RANK#{tenant}", sk = "{rank}#{chargeId}" }
"#;

async fn width_harness() -> Harness {
    let mut h = Harness::new().await;
    let model = cqrs_model::Model::parse(WIDTH_MODEL).expect("the test model checks");
    let store = Store::new(
        h.tables.client.clone(),
        Tables::new(
            &h.tables.command,
            &h.tables.data,
            &h.tables.history,
            &h.tables.idempotency,
        ),
    );
    h.app = App::new(store, CallerMode::Jwt, model);
    h
}

#[tokio::test]
async fn a_number_wider_than_its_width_is_refused_wherever_it_is_used() {
    let h = width_harness().await;
    let charge = |id: &str, attributes: serde_json::Value| {
        let mut attributes = attributes;
        attributes["chargeId"] = json!(id);
        json!({"entity": "charge", "version": 0, "attributes": attributes})
    };
    // Within the width: accepted everywhere.
    let (status, body) = h
        .post(
            &USER_T1,
            charge("c0", json!({"rank": 999999, "fee": 999999, "tip": 0})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    // Too wide, negative or not whole: a 400 naming the attribute, whichever key it is in.
    for (attr, value) in [
        ("rank", json!(1000000)),
        ("fee", json!(1000000)),
        ("tip", json!(1000000)),
        ("fee", json!(-5)),
        ("tip", json!(-5)),
        ("fee", json!(1.5)),
        ("tip", json!(1.5)),
    ] {
        let mut attributes = json!({"rank": 1, "fee": 1, "tip": 1});
        attributes[attr] = value.clone();
        let (status, body) = h.post(&USER_T1, charge("c1", attributes)).await;
        println!("{attr} = {value}: {status} {}", body["detail"]);
        assert_eq!(status, 400, "{attr} = {value} accepted: {body}");
        assert_eq!(body["field"], format!("attributes.{attr}"), "{body}");
    }
    // A PATCH that makes the merged item too wide is refused the same way.
    let (status, body) = h
        .patch(
            &USER_T1,
            json!({"pk": "CHARGE#t1", "sk": "c0", "version": 1, "attributes": {"tip": 1234567}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["field"], "attributes.tip", "{body}");
}
