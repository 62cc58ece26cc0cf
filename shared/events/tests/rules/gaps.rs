//! [`Gaps::Skip`]: a version missing from the history table under a `MODIFY` is reported once
//! per record and skipped; the versions that exist, and the item's later records, still make
//! their events (what the publisher needs to park the record and not hold the newest version).

use crate::common::{data, feed, product, record, row, summary};
use cqrs_events::{FeedError, Gaps, events_from_batch, events_from_batch_with};
use cqrs_item::Item;

#[tokio::test]
async fn skip_reports_the_gap_once_and_emits_the_versions_that_exist() {
    // History lacks versions 3 and 4 of P001: MODIFY 1 -> 6, then 6 -> 7.
    let history: Vec<Item> = [1, 2, 5, 6, 7]
        .into_iter()
        .map(|v| product("P001", v))
        .collect();
    let d = |v| data(&product("P001", v));
    let records = [
        record("MODIFY", Some(&d(1)), Some(&d(6)), 1, false),
        record("MODIFY", Some(&d(6)), Some(&d(7)), 2, false),
    ];
    let batch = events_from_batch_with(&feed(), &records, &history, Gaps::Skip).await;
    assert_eq!(
        batch
            .failures
            .iter()
            .map(|f| (f.position, &f.error))
            .collect::<Vec<_>>(),
        [(
            0,
            &FeedError::MissingVersion {
                pk: "PRODUCT#t1".into(),
                sk: "P001".into(),
                version: 3
            }
        )]
    );
    assert_eq!(
        summary(&batch.events),
        [
            row(2, "product.updated", Some(1), &["priceCents"]),
            row(5, "product.updated", Some(4), &["priceCents"]),
            row(6, "product.updated", Some(5), &["priceCents"]),
            row(7, "product.updated", Some(6), &["priceCents"]),
        ]
    );
    assert_eq!(batch.origins, [0, 0, 0, 1]);

    // Gaps::Stop (events_from_batch) is unchanged: the item stops at the gap.
    let stopped = events_from_batch(&feed(), &records, &history).await;
    assert_eq!(
        stopped
            .events
            .iter()
            .map(|e| e.itemversion)
            .collect::<Vec<_>>(),
        [2]
    );
}

#[tokio::test]
async fn skip_after_a_gap_at_the_newest_version_emits_the_records_own() {
    // MODIFY 1 -> 3 without version 2 in history: version 3 replaces 2, changed against 1.
    let history: Vec<Item> = [1, 3].into_iter().map(|v| product("P001", v)).collect();
    let records = [record(
        "MODIFY",
        Some(&data(&product("P001", 1))),
        Some(&data(&product("P001", 3))),
        1,
        false,
    )];
    let batch = events_from_batch_with(&feed(), &records, &history, Gaps::Skip).await;
    assert_eq!(batch.failures.len(), 1);
    assert_eq!(
        summary(&batch.events),
        [row(3, "product.updated", Some(2), &["priceCents"])]
    );
}
