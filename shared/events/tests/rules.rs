//! The change event's rules, without DynamoDB: the CloudEvents JSON, the id, created / updated /
//! deleted (soft, ttl) and a restore, `changed`, what never leaves, and a batch's order, fills
//! (from an in-memory history), duplicates and failures.

mod common;
// The feed's rules for gaps in the history table and for an item back after a TTL removal: in
// this binary, not binaries of their own.
#[path = "rules/gaps.rs"]
mod gaps;
#[path = "rules/ttl_return.rs"]
mod ttl_return;

use common::{data, feed, product, record, row, summary};
use cqrs_events::{
    ChangeEvent, FeedError, HistoryKey, HistoryReader, Removal, event_id, events_from_batch,
    ttl_removal_id,
};
use cqrs_item::{Item, Value};
use cqrs_store::StoreError;
use futures::future::{BoxFuture, FutureExt};

fn at() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-02-01T10:00:00Z")
        .unwrap()
        .to_utc()
}

#[test]
fn the_event_is_cloudevents_structured_json_with_the_fixed_members() {
    let feed = feed();
    let v1 = product("P001", 1);
    let mut v2 = product("P001", 2);
    v2.attributes
        .insert("labels".into(), Value::from(vec!["new"]));
    let event = feed
        .version_event(&data(&v2), Some(&data(&v1)), at())
        .unwrap();
    let json = serde_json::to_value(&event).unwrap();
    let mut members: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    members.sort();
    let mut expected = vec![
        "specversion",
        "id",
        "source",
        "type",
        "subject",
        "time",
        "datacontenttype",
        "dataschema",
        "tenant",
        "entity",
        "itemversion",
        "data",
    ];
    expected.sort();
    assert_eq!(members, expected, "no removal on an update");
    assert_eq!(json["specversion"], "1.0");
    assert_eq!(json["id"], event_id("PRODUCT#t1", "P001", 2));
    assert_eq!(json["source"], "urn:cqrs:shop");
    assert_eq!(json["type"], "product.updated");
    assert_eq!(json["subject"], "PRODUCT#t1/P001");
    assert_eq!(
        json["time"], "2026-01-01T00:00:02.000Z",
        "the version's updatedAt"
    );
    assert_eq!(json["datacontenttype"], "application/json");
    let revision = cqrs_model::Model::example().revision().to_string();
    assert_eq!(
        json["dataschema"],
        format!("urn:cqrs:events:product:{revision}")
    );
    assert_eq!(json["tenant"], "t1");
    assert_eq!(json["entity"], "product");
    assert_eq!(json["itemversion"], 2);
    let mut data_members: Vec<&str> = json["data"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    data_members.sort();
    assert_eq!(
        data_members,
        ["changed", "pk", "previousVersion", "sk", "state", "version"]
    );
    assert_eq!(json["data"]["pk"], "PRODUCT#t1");
    assert_eq!(json["data"]["sk"], "P001");
    assert_eq!(json["data"]["version"], 2);
    assert_eq!(json["data"]["previousVersion"], 1);
    assert_eq!(
        json["data"]["changed"],
        serde_json::json!(["labels", "priceCents"])
    );
    // The state is the item as GET /items/{pk}/{sk} answers it: the data table's form.
    assert_eq!(
        json["data"]["state"],
        serde_json::to_value(data(&v2)).unwrap()
    );
    assert_eq!(json["data"]["state"]["csk"], "P001@2");
    // And it reads back.
    let back: ChangeEvent = serde_json::from_value(json).unwrap();
    assert_eq!(back, event);
}

#[test]
fn the_id_is_22_base64url_characters_of_pk_sk_and_version() {
    let id = event_id("PRODUCT#t1", "P001", 7);
    assert_eq!(id.len(), 22);
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{id}"
    );
    // base64url(SHA-256("PRODUCT#t1\0P001\07")), first 22 characters.
    use base64::Engine as _;
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(b"PRODUCT#t1\0P001\x007");
    let full = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
    assert_eq!(id, full[..22]);
    assert_ne!(id, event_id("PRODUCT#t1", "P001", 8));
    assert_ne!(id, event_id("PRODUCT#t2", "P001", 7));
    assert_ne!(id, ttl_removal_id("PRODUCT#t1", "P001", 7));
}

#[test]
fn version_1_is_created_with_no_previous_version_and_every_attribute_changed() {
    let event = feed()
        .version_event(&data(&product("P001", 1)), None, at())
        .unwrap();
    assert_eq!(event.event_type, "product.created");
    assert_eq!(event.data.previous_version, None);
    assert_eq!(event.removal, None);
    assert_eq!(event.data.changed, ["category", "priceCents", "productId"]);
}

#[test]
fn a_soft_delete_is_deleted_soft_and_a_restore_is_updated() {
    let feed = feed();
    let v1 = product("P001", 1);
    let mut v2 = product("P001", 2);
    v2.is_deleted = true;
    let deleted = feed.version_event(&v2, Some(&v1), at()).unwrap();
    assert_eq!(deleted.event_type, "product.deleted");
    assert_eq!(deleted.removal, Some(Removal::Soft));
    assert_eq!(serde_json::to_value(&deleted).unwrap()["removal"], "soft");
    assert!(deleted.data.state.as_ref().unwrap().is_deleted);

    let mut v3 = product("P001", 3);
    v3.is_deleted = false;
    let restored = feed.version_event(&v3, Some(&v2), at()).unwrap();
    assert_eq!(restored.event_type, "product.updated");
    assert_eq!(restored.removal, None);
    assert_eq!(restored.data.previous_version, Some(2));
}

#[test]
fn a_ttl_removal_is_deleted_ttl_with_the_last_state_and_nothing_changed() {
    let last = data(&product("P001", 4));
    let event = feed().ttl_event(&last, at()).unwrap();
    assert_eq!(event.event_type, "product.deleted");
    assert_eq!(event.removal, Some(Removal::Ttl));
    assert_eq!(event.itemversion, 4);
    assert_eq!(event.data.state, Some(last));
    assert!(event.data.changed.is_empty());
    assert_eq!(event.id, ttl_removal_id("PRODUCT#t1", "P001", 4));
    assert_ne!(event.id, event_id("PRODUCT#t1", "P001", 4));
    assert_eq!(
        event.time, "2026-02-01T10:00:00.000Z",
        "when the removal was seen"
    );
}

#[test]
fn items_of_no_entity_and_the_frameworks_rows_never_leave() {
    let feed = feed();
    let mut none = data(&product("P001", 1));
    none.entity = None;
    assert!(
        feed.version_event(&none, None, at()).is_none(),
        "no entity attribute"
    );
    let mut unknown = data(&product("P001", 1));
    unknown.entity = Some("not_in_the_model".into());
    assert!(
        feed.version_event(&unknown, None, at()).is_none(),
        "unknown entity"
    );

    let framework = |pk: &str, sk: &str| {
        let mut item = data(&product("P001", 1));
        item.pk = pk.into();
        item.sk = sk.into();
        item
    };
    for item in [
        framework(
            "CQRS_CHANGE_LOG#t1#2026-01",
            "2026-01-01T00:00:00.000Z#0123456789abcdef-1",
        ),
        framework("HEAD#PRODUCT#t1@P001", "x"),
        framework("HEADS#t1", "x"),
    ] {
        assert!(
            feed.version_event(&item, None, at()).is_none(),
            "{}",
            item.pk
        );
        assert!(feed.ttl_event(&item, at()).is_none(), "{}", item.pk);
    }

    // A TTL policy: the example model declares an entity for it, it still never leaves.
    let mut policy = framework("MASTER#t1", "TTL#order");
    policy.entity = Some("ttl_policy".into());
    assert!(feed.model().entity("ttl_policy").is_some());
    assert!(feed.version_event(&policy, None, at()).is_none());
    // Other master data does.
    let mut setting = framework("MASTER#t1", "SETTING#ui#theme");
    setting.entity = Some("setting".into());
    assert_eq!(
        feed.version_event(&setting, None, at()).unwrap().event_type,
        "setting.created"
    );

    // A change log entry of an older release (LOG#, no entity) is no `log` item.
    let mut legacy = framework(
        "LOG#t1#2026-01",
        "2026-01-15T10:30:00.000Z#0123456789abcdef-3",
    );
    legacy.item_type = "LOG".into();
    legacy.source = "data-sync".into();
    legacy.entity = None;
    assert!(feed.version_event(&legacy, None, at()).is_none());
}

#[tokio::test]
async fn a_collapsed_insert_is_filled_from_version_1_in_order() {
    let history: Vec<Item> = (1..=3).map(|v| product("P001", v)).collect();
    let records = [record(
        "INSERT",
        None,
        Some(&data(&product("P001", 3))),
        1,
        false,
    )];
    let batch = events_from_batch(&feed(), &records, &history).await;
    assert!(batch.failures.is_empty(), "{:?}", batch.failures);
    assert_eq!(
        summary(&batch.events),
        [
            row(
                1,
                "product.created",
                None,
                &["category", "priceCents", "productId"]
            ),
            row(2, "product.updated", Some(1), &["priceCents"]),
            row(3, "product.updated", Some(2), &["priceCents"]),
        ]
    );
    // Filled versions are in the data table's form too.
    assert_eq!(batch.events[0].data.state, Some(data(&product("P001", 1))));
}

#[tokio::test]
async fn duplicated_and_replayed_records_yield_nothing_new_in_a_batch() {
    let history: Vec<Item> = (1..=4).map(|v| product("P001", v)).collect();
    let d = |v| data(&product("P001", v));
    let records = [
        record("INSERT", None, Some(&d(1)), 1, false),
        record("MODIFY", Some(&d(1)), Some(&d(3)), 2, false),
        // The same record again, and an older one replayed after it.
        record("MODIFY", Some(&d(1)), Some(&d(3)), 2, false),
        record("INSERT", None, Some(&d(1)), 1, false),
        record("MODIFY", Some(&d(3)), Some(&d(4)), 3, false),
    ];
    let batch = events_from_batch(&feed(), &records, &history).await;
    assert!(batch.failures.is_empty(), "{:?}", batch.failures);
    let versions: Vec<i64> = batch.events.iter().map(|e| e.itemversion).collect();
    assert_eq!(versions, [1, 2, 3, 4]);
    assert_eq!(batch.duplicates, 2);
    // Every id once.
    let ids: std::collections::HashSet<&str> = batch.events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), 4);
}

#[tokio::test]
async fn a_missing_history_version_is_a_failure_naming_the_item_and_version() {
    // History lacks version 3 of P001; P002 is complete.
    let history: Vec<Item> = [1, 2, 4]
        .into_iter()
        .map(|v| product("P001", v))
        .chain((1..=2).map(|v| product("P002", v)))
        .collect();
    let records = [
        record(
            "MODIFY",
            Some(&data(&product("P001", 1))),
            Some(&data(&product("P001", 5))),
            1,
            false,
        ),
        record("INSERT", None, Some(&data(&product("P002", 2))), 2, false),
        record(
            "MODIFY",
            Some(&data(&product("P001", 5))),
            Some(&data(&product("P001", 6))),
            3,
            false,
        ),
    ];
    let batch = events_from_batch(&feed(), &records, &history).await;
    assert_eq!(batch.failures.len(), 1, "{:?}", batch.failures);
    let failure = &batch.failures[0];
    assert_eq!(failure.position, 0);
    assert_eq!(
        failure.sequence_number.as_deref(),
        Some("000000000000000000001")
    );
    assert_eq!(
        failure.error,
        FeedError::MissingVersion {
            pk: "PRODUCT#t1".into(),
            sk: "P001".into(),
            version: 3
        }
    );
    assert_eq!(
        failure.error.to_string(),
        "version 3 of PRODUCT#t1 / P001 is not in the history table"
    );
    // P001 stops at its last event before the gap (version 2); its later record makes no event
    // (it would come out of order). P002 goes on.
    let got: Vec<(String, i64)> = batch
        .events
        .iter()
        .map(|e| (e.data.sk.clone(), e.itemversion))
        .collect();
    assert_eq!(
        got,
        [
            ("P001".to_string(), 2),
            ("P002".to_string(), 1),
            ("P002".to_string(), 2)
        ]
    );
}

struct Failing;

impl HistoryReader for Failing {
    fn read_versions<'a>(
        &'a self,
        _: &'a [HistoryKey],
    ) -> BoxFuture<'a, Result<Vec<Item>, StoreError>> {
        async { Err(StoreError::Throttled("slow down".into())) }.boxed()
    }
}

#[tokio::test]
async fn a_failed_history_read_fails_the_items_that_needed_it_only() {
    let records = [
        record("INSERT", None, Some(&data(&product("P001", 3))), 1, false),
        record("INSERT", None, Some(&data(&product("P002", 1))), 2, false),
    ];
    let batch = events_from_batch(&feed(), &records, &Failing).await;
    assert_eq!(batch.failures.len(), 1);
    assert!(
        matches!(&batch.failures[0].error, FeedError::History { sk, transient: true, .. } if sk == "P001"),
        "{:?}",
        batch.failures
    );
    assert_eq!(
        summary(&batch.events),
        [row(
            1,
            "product.created",
            None,
            &["category", "priceCents", "productId"]
        )]
    );
    assert_eq!(batch.events[0].data.sk, "P002");
}

#[tokio::test]
async fn removes_a_ttl_one_is_deleted_ttl_another_is_ignored() {
    let last = data(&product("P001", 2));
    let records = [
        record("REMOVE", Some(&last), None, 1, true),
        record("REMOVE", Some(&last), None, 1, true),
        record("REMOVE", Some(&data(&product("P002", 1))), None, 2, false),
    ];
    let batch = events_from_batch(&feed(), &records, &Vec::new()).await;
    assert!(batch.failures.is_empty());
    assert_eq!(
        batch.events.len(),
        1,
        "one TTL removal, its duplicate and an operator's delete make nothing"
    );
    assert_eq!(batch.events[0].event_type, "product.deleted");
    assert_eq!(batch.events[0].removal, Some(Removal::Ttl));
    assert_eq!(batch.events[0].data.state, Some(last));
    assert_eq!((batch.duplicates, batch.ignored), (1, 1));
}

#[tokio::test]
async fn malformed_records_fail_and_framework_rows_are_ignored() {
    let d1 = data(&product("P001", 1));
    let mut modify_without_old = record(
        "MODIFY",
        Some(&d1),
        Some(&data(&product("P001", 2))),
        1,
        false,
    );
    modify_without_old.change.old_image = Default::default();
    let mut unknown = record("INSERT", None, Some(&data(&product("P002", 1))), 2, false);
    unknown.event_name = "UPSERT".into();
    let mut log = d1.clone();
    log.pk = "CQRS_CHANGE_LOG#t1#2026-01".into();
    let records = [
        modify_without_old,
        unknown,
        record("INSERT", None, Some(&log), 3, false),
    ];
    let batch = events_from_batch(&feed(), &records, &Vec::new()).await;
    assert!(batch.events.is_empty());
    assert_eq!(batch.ignored, 1);
    let errors: Vec<String> = batch.failures.iter().map(|f| f.error.to_string()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].contains("MODIFY without its OldImage"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("unknown eventName \"UPSERT\""),
        "{errors:?}"
    );
}
