//! The change log in the data table (`CHANGE_LOG_TABLE` set to it, which the README allows), read
//! through the generic routes, and the framework's own partitions, against DynamoDB Local.
//!
//! A tenant reads its own log and `common`'s, but an entry shows no more than the entity it logs
//! lets that reader see: an entry of a `read = "system_admin"` entity (every tenant's user links)
//! only to a global `system_admin`; and no entry ever shows an idempotency key (the `requestId`
//! that data-sync used to copy into the entry's attributes, stripped on read for entries already
//! stored). The partitions the framework keeps for its own records (`HEAD#…`, `HEADS#STATE`,
//! [`cqrs_keys::RESERVED_PK_PREFIXES`] other than the change log's) are served on no route.

mod common;

use common::{Answer, As, Harness, SYSTEM_ADMIN, USER_T1, enc};
use cqrs_data_sync::{Change, SyncTarget, change_log::ChangeLog};
use cqrs_item::Item;
use cqrs_store::projection::DataWrite;
use cqrs_testkit::http_event::HttpApiRequest;
use serde_json::{Value, json};

/// Tenant t3, without roles.
const USER_T3: As = As {
    user: "u3",
    tenant: "t3",
    roles: "",
};

/// Sends a command through the real command handler with an `Idempotency-Key`.
async fn command(h: &Harness, caller: &As, key: &str, body: Value) -> Value {
    let request = HttpApiRequest::command("POST", &body.to_string())
        .claims(caller.user, caller.tenant, caller.roles)
        .header("idempotency-key", key)
        .request();
    let response = cqrs_command_handler::handle(&h.command_app(), request).await;
    let status = response.status().as_u16();
    let text = match response.body() {
        lambda_http::Body::Text(text) => text.clone(),
        _ => String::new(),
    };
    assert_eq!(status, 202, "{body}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// Projects every command row as data-sync does, with the change log written into the data table.
async fn project(h: &Harness) {
    let store = h.app.store.clone();
    let log = ChangeLog::new(store.clone(), h.tables.data.clone());
    let rows = h
        .tables
        .client
        .scan()
        .table_name(&h.tables.command)
        .send()
        .await
        .unwrap();
    for (i, row) in rows.items().iter().enumerate() {
        let item = Item::from_attributes(row.clone()).unwrap();
        store.put_history(&item).await.unwrap();
        let data = store.put_data_if_newer(&item).await.unwrap();
        let change = Change {
            item,
            data,
            sequence_number: format!("{}", 100 + i),
            event_id: format!("event-{i}"),
            approximate_creation: chrono::Utc::now(),
        };
        log.apply(&change).await.unwrap();
    }
}

/// The change log's partition of `tenant` this month.
fn log_pk(tenant: &str) -> String {
    cqrs_keys::change_log_pk(tenant, &chrono::Utc::now()).unwrap()
}

/// Every change log entry stored in the data table, whoever may read it.
async fn stored_entries(h: &Harness) -> Vec<Item> {
    let rows = h
        .tables
        .client
        .scan()
        .table_name(&h.tables.data)
        .send()
        .await
        .unwrap();
    rows.items()
        .iter()
        .map(|row| Item::from_attributes(row.clone()).unwrap())
        .filter(|item| item.pk.starts_with("CQRS_CHANGE_LOG#"))
        .collect()
}

fn assert_no_key(answer: &Answer, keys: &[&str]) {
    let text = answer.body.to_string();
    for key in keys {
        assert!(
            !text.contains(key),
            "the idempotency key {key} is in the answer: {text}"
        );
    }
}

/// The reproduction of issue 36 (1): a system_admin links alice to t2 with `Idempotency-Key:
/// k-secret`; t3 may not read `USER_TENANT#common`, and may not read its entry in `common`'s log
/// either, on any route; `common`'s log still shows t3 the entries of what t3 may read.
#[tokio::test]
async fn an_entry_shows_no_more_than_its_entity_lets_the_reader_see() {
    let h = Harness::new().await;
    command(
        &h,
        &common::As {
            user: "root",
            tenant: "t1",
            roles: "system_admin",
        },
        "k-secret",
        json!({"entity": "user_tenant", "version": 0, "name": "Alice",
               "attributes": {"tenantCode": "t2", "userId": "alice"}}),
    )
    .await;
    command(
        &h,
        &SYSTEM_ADMIN,
        "k-theme",
        json!({"pk": "MASTER#common", "sk": "SETTING#app#theme", "version": 0, "name": "dark"}),
    )
    .await;
    project(&h).await;
    let pk = log_pk("common");
    let entries = stored_entries(&h).await;
    assert_eq!(entries.len(), 2, "{entries:?}");
    let alice = entries
        .iter()
        .find(|e| e.name == "Alice")
        .expect("alice's entry");

    // The entity itself: 403 to t3.
    h.get(&USER_T3, "/items/USER_TENANT%23common")
        .await
        .assert_problem(403, None);
    // Its log entry: not in the listing of common's log, 404 alone.
    let listing = h.get(&USER_T3, &format!("/items/{}", enc(&pk))).await;
    assert_eq!(listing.status, 200, "{}", listing.body);
    let text = listing.body.to_string();
    for leaked in ["Alice", "alice", "k-secret", "USER_TENANT"] {
        assert!(!text.contains(leaked), "{leaked} shown to t3: {text}");
    }
    // The setting's entry (everyone reads MASTER#common) is there, without any idempotency key.
    assert_eq!(listing.items().len(), 1, "{text}");
    assert_eq!(listing.items()[0]["attributes"]["pk"], "MASTER#common");
    assert_no_key(&listing, &["k-theme", "k-secret"]);
    let single = h
        .get(&USER_T3, &format!("/items/{}/{}", enc(&pk), enc(&alice.sk)))
        .await;
    single.assert_problem(404, None);
    assert!(!single.body.to_string().contains("Alice"));
    let versions = h
        .get(
            &USER_T3,
            &format!("/items/{}/{}/versions/1", enc(&pk), enc(&alice.sk)),
        )
        .await;
    assert!(!versions.body.to_string().contains("Alice"));

    // A global system_admin reads both entries, and no idempotency key in either.
    let admin = h.get(&SYSTEM_ADMIN, &format!("/items/{}", enc(&pk))).await;
    assert_eq!(admin.status, 200, "{}", admin.body);
    assert_eq!(admin.items().len(), 2, "{}", admin.body);
    assert!(admin.body.to_string().contains("Alice"));
    assert_no_key(&admin, &["k-theme", "k-secret"]);
    let single = h
        .get(
            &SYSTEM_ADMIN,
            &format!("/items/{}/{}", enc(&pk), enc(&alice.sk)),
        )
        .await;
    assert_eq!(single.status, 200, "{}", single.body);
    assert_eq!(single.body["attributes"]["sk"], "t2#alice@1");
    assert_no_key(&single, &["k-secret"]);
}

/// A tenant's own log stays readable, as the README documents it, with no idempotency key in it.
#[tokio::test]
async fn a_tenants_own_log_stays_readable_without_idempotency_keys() {
    let h = Harness::new().await;
    command(
        &h,
        &USER_T1,
        "k-own",
        json!({"pk": "PRODUCT#t1", "sk": "P001", "version": 0, "name": "mine"}),
    )
    .await;
    project(&h).await;
    let pk = log_pk("t1");
    let listing = h.get(&USER_T1, &format!("/items/{}", enc(&pk))).await;
    assert_eq!(listing.status, 200, "{}", listing.body);
    assert_eq!(listing.items().len(), 1, "{}", listing.body);
    let entry = &listing.items()[0];
    assert_eq!(entry["attributes"]["itemId"], "PRODUCT#t1#P001");
    assert_eq!(entry["attributes"]["sk"], "P001@1");
    assert_eq!(entry["name"], "mine");
    assert_no_key(&listing, &["k-own"]);
    // Another tenant: the tenant rules, as for any partition.
    h.get(&common::USER_T2, &format!("/items/{}", enc(&pk)))
        .await
        .assert_problem(403, None);
}

/// Entries written before this release hold the idempotency key in their attributes (and at the
/// top, as `requestId`): neither is shown on any route, to anyone.
#[tokio::test]
async fn an_idempotency_key_stored_in_an_older_entry_is_never_shown() {
    let h = Harness::new().await;
    let mut item = common::version_item("PRODUCT#t1", "P001", 1, false);
    item.request_id = "k-old".into();
    let change = Change {
        item,
        data: DataWrite::Written,
        sequence_number: "1".into(),
        event_id: "e-1".into(),
        approximate_creation: chrono::Utc::now(),
    };
    let mut entry = cqrs_data_sync::change_log::entry(&change).unwrap();
    // What data-sync wrote before: the key in the attributes and at the top.
    entry
        .attributes
        .insert("requestId".into(), cqrs_item::Value::from("k-old"));
    entry.request_id = "k-old".into();
    h.tables
        .client
        .put_item()
        .table_name(&h.tables.data)
        .set_item(Some(entry.to_attributes().unwrap()))
        .send()
        .await
        .unwrap();
    for caller in [&USER_T1, &SYSTEM_ADMIN] {
        let listing = h.get(caller, &format!("/items/{}", enc(&entry.pk))).await;
        assert_eq!(listing.status, 200, "{}", listing.body);
        assert_eq!(listing.items().len(), 1, "{}", listing.body);
        assert_no_key(&listing, &["k-old"]);
        let single = h
            .get(
                caller,
                &format!("/items/{}/{}", enc(&entry.pk), enc(&entry.sk)),
            )
            .await;
        assert_eq!(single.status, 200, "{}", single.body);
        assert_eq!(single.body["attributes"]["itemId"], "PRODUCT#t1#P001");
        assert_no_key(&single, &["k-old"]);
    }
}

/// `HEAD#…` and `HEADS#…` (where the heads and the heads state are kept) and any other reserved
/// partition but the change log's hold the framework's records: no read route serves them, to
/// any caller, even when an item sits under such a key in the data and history tables.
#[tokio::test]
async fn the_frameworks_own_partitions_are_served_on_no_route() {
    let h = Harness::new().await;
    for pk in ["HEAD#t1", "HEADS#STATE", "HEADS#t1"] {
        h.seed(pk, "P001", 1, false).await;
    }
    let mut refused = 0;
    for (caller, pk) in [
        (&USER_T1, "HEAD#t1"),
        (&SYSTEM_ADMIN, "HEAD#t1"),
        (&SYSTEM_ADMIN, "HEADS#STATE"),
        (&USER_T1, "HEADS#t1"),
    ] {
        let pk = enc(pk);
        for target in [
            format!("/items/{pk}"),
            format!("/items/{pk}/P001"),
            format!("/items/{pk}/P001?minVersion=1"),
            format!("/items/{pk}/P001/versions"),
            format!("/items/{pk}/P001/versions/1"),
        ] {
            let answer = h.get(caller, &target).await;
            assert!(
                answer.status == 403
                    && answer.body["detail"]
                        .as_str()
                        .is_some_and(|d| d.contains("the framework's own records")),
                "{} {target}: {} {}",
                caller.tenant,
                answer.status,
                answer.body
            );
            assert!(
                !answer.body.to_string().contains("P001 v1"),
                "{target}: {}",
                answer.body
            );
            refused += 1;
        }
    }
    assert_eq!(refused, 20);
}

/// An entry written under the legacy prefix (`LOG#<tenant>#<YYYY-MM>`, before `cqrs change-log
/// migrate` moved it) is an entry too: shown as the item it logs lets the reader see, without its
/// idempotency key.
#[tokio::test]
async fn a_legacy_entry_is_read_like_a_current_one() {
    let h = Harness::new().await;
    let mut item = common::version_item("USER_TENANT#common", "t2#alice", 1, false);
    item.name = "Alice".into();
    item.request_id = "k-legacy".into();
    let change = Change {
        item,
        data: DataWrite::Written,
        sequence_number: "1".into(),
        event_id: "e-1".into(),
        approximate_creation: chrono::Utc::now(),
    };
    let mut entry = cqrs_data_sync::change_log::entry(&change).unwrap();
    entry.pk = entry.pk.replacen("CQRS_CHANGE_LOG", "LOG", 1);
    entry.id = cqrs_keys::generate_id(&entry.pk, &entry.sk);
    entry.item_type = "LOG".into();
    entry
        .attributes
        .insert("requestId".into(), cqrs_item::Value::from("k-legacy"));
    entry.request_id = "k-legacy".into();
    assert!(cqrs_store::change_log::is_legacy_entry(&entry));
    h.tables
        .client
        .put_item()
        .table_name(&h.tables.data)
        .set_item(Some(entry.to_attributes().unwrap()))
        .send()
        .await
        .unwrap();
    let listing = h.get(&USER_T3, &format!("/items/{}", enc(&entry.pk))).await;
    assert_eq!(listing.status, 200, "{}", listing.body);
    assert_eq!(listing.items().len(), 0, "{}", listing.body);
    h.get(
        &USER_T3,
        &format!("/items/{}/{}", enc(&entry.pk), enc(&entry.sk)),
    )
    .await
    .assert_problem(404, None);
    let admin = h
        .get(&SYSTEM_ADMIN, &format!("/items/{}", enc(&entry.pk)))
        .await;
    assert_eq!(admin.items().len(), 1, "{}", admin.body);
    assert_eq!(admin.items()[0]["name"], "Alice");
    assert_no_key(&admin, &["k-legacy"]);
}
