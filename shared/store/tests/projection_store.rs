//! The projection's batch writes against DynamoDB Local: every version of a batch into the history
//! table with `BatchGetItem` and `BatchWriteItem`, duplicates, replays and conflicts answered per
//! item as the one-row write answers them.

use cqrs_item::Item;
use cqrs_keys::add_sort_key_version;
use cqrs_store::projection::HistoryWrite;
use cqrs_store::{Store, StoreError, Tables};

async fn store() -> (Store, cqrs_testkit::TestTables) {
    let t = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        t.client.clone(),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    );
    (store, t)
}

fn version(base: &str, v: i64) -> Item {
    let mut item = Item::example();
    item.sk = add_sort_key_version(base, v);
    item.id = cqrs_keys::generate_id(&item.pk, base);
    item.version = v;
    item.name = format!("{base} v{v}");
    item
}

async fn history_count(t: &cqrs_testkit::TestTables) -> usize {
    let mut count = 0;
    let mut pages = t
        .client
        .scan()
        .table_name(&t.history)
        .consistent_read(true)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        count += page.unwrap().items().len();
    }
    count
}

#[tokio::test]
async fn a_batch_of_versions_lands_once_and_a_replay_is_already_present() {
    let (store, t) = store().await;
    // 260 versions: more than two BatchGetItem calls and ten BatchWriteItem calls.
    let items: Vec<Item> = (0..65)
        .flat_map(|n| (1..=4).map(move |v| version(&format!("P{n:03}"), v)))
        .collect();

    let first = store.put_history_batch(&items).await;
    assert_eq!(first.len(), items.len());
    assert!(
        first.iter().all(|r| matches!(r, Ok(HistoryWrite::Written))),
        "{first:?}"
    );
    assert_eq!(history_count(&t).await, items.len());
    // Each row is the version as given.
    for item in [&items[0], &items[259]] {
        let stored = store
            .get_history_version(&item.pk, item.base_sk(), item.version)
            .await;
        assert_eq!(stored.unwrap().as_ref(), Some(item));
    }

    let again = store.put_history_batch(&items).await;
    assert!(
        again
            .iter()
            .all(|r| matches!(r, Ok(HistoryWrite::AlreadyPresent))),
        "{again:?}"
    );
    assert_eq!(history_count(&t).await, items.len());
    println!(
        "history batch: {} versions written in one call, replayed: {} already present, {} rows",
        items.len(),
        again.len(),
        history_count(&t).await
    );
}

#[tokio::test]
async fn duplicates_go_once_and_other_content_under_a_stored_version_is_a_conflict() {
    let (store, t) = store().await;
    let mut planted = version("A", 2);
    planted.name = "written by something else".into();
    assert_eq!(
        store.put_history(&planted).await.unwrap(),
        HistoryWrite::Written
    );
    let mut other_twin = version("B", 1);
    other_twin.name = "same key, other content".into();
    let batch = vec![
        version("A", 1),
        version("A", 2), // other content already stored
        version("B", 1),
        version("B", 1), // a duplicate record
        other_twin,      // same key as B@1, other content, in the same batch
        version("C", 1),
    ];

    let answers = store.put_history_batch(&batch).await;

    assert!(matches!(answers[0], Ok(HistoryWrite::Written)));
    assert!(
        matches!(&answers[1], Err(StoreError::HistoryConflict { sk, .. }) if sk == "A@2"),
        "{:?}",
        answers[1]
    );
    assert!(matches!(answers[2], Ok(HistoryWrite::Written)));
    assert!(matches!(answers[3], Ok(HistoryWrite::AlreadyPresent)));
    assert!(matches!(
        answers[4],
        Err(StoreError::HistoryConflict { .. })
    ));
    assert!(matches!(answers[5], Ok(HistoryWrite::Written)));
    // The planted row stays; B@1 holds the first content.
    let a2 = store
        .get_history_version("PRODUCT#t1", "A", 2)
        .await
        .unwrap();
    assert_eq!(a2.unwrap().name, "written by something else");
    let b1 = store
        .get_history_version("PRODUCT#t1", "B", 1)
        .await
        .unwrap();
    assert_eq!(b1.unwrap().name, "B v1");
    assert_eq!(history_count(&t).await, 4);
}

#[tokio::test]
async fn an_empty_batch_answers_nothing() {
    let (store, _t) = store().await;
    assert!(store.put_history_batch(&[]).await.is_empty());
}

fn revised(base: &str, v: i64, revision: &str, gsi: &str) -> Item {
    let mut item = version(base, v);
    item.model_revision = Some(revision.into());
    item.index_keys
        .insert("gsi1pk".into(), cqrs_item::Value::from(gsi.to_string()));
    item
}

#[tokio::test]
async fn a_rebuild_rewrites_the_same_version_with_another_revision_never_an_older_one() {
    let (store, _t) = store().await;
    use cqrs_store::projection::DataWrite::{AlreadyCurrent, Written};
    let old = revised("R", 2, "aaaaaaaaaaaaaaaa", "OLD#1");
    assert_eq!(store.put_data_if_newer(&old).await.unwrap(), Written);

    // The same version with new index keys, computed by another model revision: rewritten.
    let new = revised("R", 2, "bbbbbbbbbbbbbbbb", "NEW#1");
    assert_eq!(store.put_data_revised(&new).await.unwrap(), Written);
    assert_eq!(store.put_data_revised(&new).await.unwrap(), AlreadyCurrent);
    // An older version, whatever its revision: refused.
    let older = revised("R", 1, "cccccccccccccccc", "OLDER#1");
    assert_eq!(
        store.put_data_revised(&older).await.unwrap(),
        AlreadyCurrent
    );
    // data-sync's replay of the version with the old revision does not put the old keys back.
    assert_eq!(store.put_data_if_newer(&old).await.unwrap(), AlreadyCurrent);
    let stored = store
        .get_data_item("PRODUCT#t1", "R")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.version, 2);
    assert_eq!(stored.model_revision.as_deref(), Some("bbbbbbbbbbbbbbbb"));
    assert_eq!(stored.index_keys["gsi1pk"], "NEW#1");

    // A stored item without a revision (written before the model) is rewritten too.
    let mut plain = version("S", 1);
    plain.model_revision = None;
    assert_eq!(store.put_data_if_newer(&plain).await.unwrap(), Written);
    let stamped = revised("S", 1, "bbbbbbbbbbbbbbbb", "NEW#2");
    assert_eq!(store.put_data_revised(&stamped).await.unwrap(), Written);
    // Without a revision, the rebuild's write is the strict one.
    assert_eq!(
        store.put_data_revised(&plain).await.unwrap(),
        AlreadyCurrent
    );
    println!(
        "model revision: same version rewritten with new index keys 2 of 2 times, older version \
         refused, stale-revision replay refused"
    );
}
