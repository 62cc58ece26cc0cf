//! An item that returns after DynamoDB's TTL removed it (design39 2.5): the data table's stream
//! shows an `INSERT` of version `b > 1`; the versions below `b` that ended the previous life
//! (their `ttl` at or before the `INSERT`'s `ApproximateCreationDateTime`) or that the history
//! table no longer holds are not filled, and are no failure.

use crate::common::{data, feed, product, record, row, summary};
use cqrs_events::events_from_batch;
use cqrs_item::Item;

/// The records' `ApproximateCreationDateTime` (common::record): 2026-01-01T00:00:00Z.
const RECORD_TIME: i64 = 1_767_225_600;

/// Version `v` of P001 of a life that TTL ended before the records (`ttl` 100 s earlier).
fn expired(v: i64) -> Item {
    let mut item = product("P001", v);
    item.ttl = Some(RECORD_TIME - 100);
    item
}

#[tokio::test]
async fn an_insert_after_a_ttl_removal_does_not_refill_the_previous_life() {
    // History: v1..v3 of a life that TTL ended, then v4, the new life.
    let mut history: Vec<Item> = (1..=3).map(expired).collect();
    history.push(product("P001", 4));
    let records = [record(
        "INSERT",
        None,
        Some(&data(&product("P001", 4))),
        1,
        false,
    )];
    let batch = events_from_batch(&feed(), &records, &history).await;
    assert!(batch.failures.is_empty(), "{:?}", batch.failures);
    assert_eq!(
        summary(&batch.events),
        [row(
            4,
            "product.created",
            None,
            &["category", "priceCents", "productId"]
        )]
    );
}

#[tokio::test]
async fn an_insert_after_a_ttl_removal_fills_only_the_new_lifes_collapsed_versions() {
    // The new life is v4 and v5, collapsed by data-sync into one INSERT of v5.
    let mut history: Vec<Item> = (1..=3).map(expired).collect();
    history.extend((4..=5).map(|v| product("P001", v)));
    let records = [record(
        "INSERT",
        None,
        Some(&data(&product("P001", 5))),
        1,
        false,
    )];
    let batch = events_from_batch(&feed(), &records, &history).await;
    assert!(batch.failures.is_empty(), "{:?}", batch.failures);
    assert_eq!(
        summary(&batch.events),
        [
            row(
                4,
                "product.created",
                None,
                &["category", "priceCents", "productId"]
            ),
            row(5, "product.updated", Some(4), &["priceCents"]),
        ]
    );
    // Both carried by the one record; version 4 read from the history table.
    assert_eq!((batch.origins.as_slice(), batch.filled), (&[0, 0][..], 1));
}

#[tokio::test]
async fn under_an_insert_a_version_missing_from_history_stops_the_fill_without_failure() {
    // The previous life's rows are gone from history (TTL deleted them too): only v3 and v4.
    let history: Vec<Item> = (3..=4).map(|v| product("P001", v)).collect();
    let records = [record(
        "INSERT",
        None,
        Some(&data(&product("P001", 4))),
        1,
        false,
    )];
    let batch = events_from_batch(&feed(), &records, &history).await;
    assert!(batch.failures.is_empty(), "{:?}", batch.failures);
    assert_eq!(
        summary(&batch.events),
        [
            row(
                3,
                "product.created",
                None,
                &["category", "priceCents", "productId"]
            ),
            row(4, "product.updated", Some(3), &["priceCents"]),
        ]
    );
}

#[tokio::test]
async fn a_version_whose_ttl_is_still_ahead_is_filled() {
    // v1..v3 carry a ttl after the INSERT's time: the same life, filled as before.
    let history: Vec<Item> = (1..=4)
        .map(|v| {
            let mut item = product("P001", v);
            item.ttl = Some(RECORD_TIME + 86_400);
            item
        })
        .collect();
    let mut v4 = product("P001", 4);
    v4.ttl = Some(RECORD_TIME + 86_400);
    let records = [record("INSERT", None, Some(&data(&v4)), 1, false)];
    let batch = events_from_batch(&feed(), &records, &history).await;
    assert!(batch.failures.is_empty(), "{:?}", batch.failures);
    assert_eq!(
        batch
            .events
            .iter()
            .map(|e| e.itemversion)
            .collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
}

/// A history that counts the keys and reads it is asked for.
struct Counting {
    items: Vec<Item>,
    reads: std::sync::Mutex<Vec<usize>>,
}

impl cqrs_events::HistoryReader for Counting {
    fn read_versions<'a>(
        &'a self,
        keys: &'a [cqrs_events::HistoryKey],
    ) -> futures::future::BoxFuture<'a, Result<Vec<Item>, cqrs_store::StoreError>> {
        self.reads.lock().unwrap().push(keys.len());
        self.items.read_versions(keys)
    }
}

#[tokio::test]
async fn the_downward_fill_reads_one_window_when_the_previous_life_ends_in_it() {
    // v1..v249 ended by TTL, v250..v299 the new life, INSERT of v300 (collapsed).
    let history = Counting {
        items: (1..=299)
            .map(|v| {
                if v < 250 {
                    expired(v)
                } else {
                    product("P001", v)
                }
            })
            .collect(),
        reads: Default::default(),
    };
    let records = [record(
        "INSERT",
        None,
        Some(&data(&product("P001", 300))),
        1,
        false,
    )];
    let batch = events_from_batch(&feed(), &records, &history).await;
    assert!(batch.failures.is_empty(), "{:?}", batch.failures);
    let versions: Vec<i64> = batch.events.iter().map(|e| e.itemversion).collect();
    assert_eq!(versions, (250..=300).collect::<Vec<_>>());
    assert_eq!(batch.events[0].event_type, "product.created");
    assert_eq!(
        *history.reads.lock().unwrap(),
        [100],
        "one window of 100 keys"
    );
}

#[tokio::test]
async fn the_downward_fill_reads_further_windows_while_the_life_goes_on() {
    // One life of 300 versions, collapsed into an INSERT of v300: every version, three reads.
    let history = Counting {
        items: (1..=299).map(|v| product("P001", v)).collect(),
        reads: Default::default(),
    };
    let records = [record(
        "INSERT",
        None,
        Some(&data(&product("P001", 300))),
        1,
        false,
    )];
    let batch = events_from_batch(&feed(), &records, &history).await;
    assert!(batch.failures.is_empty(), "{:?}", batch.failures);
    let versions: Vec<i64> = batch.events.iter().map(|e| e.itemversion).collect();
    assert_eq!(versions, (1..=300).collect::<Vec<_>>());
    assert_eq!(batch.events[0].event_type, "product.created");
    assert_eq!(batch.events[1].data.previous_version, Some(1));
    assert_eq!(*history.reads.lock().unwrap(), [100, 100, 99]);
    assert_eq!(batch.filled, 299);
}
