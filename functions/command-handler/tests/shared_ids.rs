//! Review finding, reproduced through the command API: `("ORDER#t1", "ORDER#o1")` (an order by
//! entity) and `("ORDER#t1#ORDER", "o1")` (a raw key) share the item id `ORDER#t1#ORDER#o1`. With
//! heads keyed by the id they shared one head: the second item's create was a 409 for an item that
//! never existed, its `-1` wrote version 2 "of the other item", and the order's own next version
//! became unwritable. Each item must have its own versions.

mod common;

use common::{Harness, USER_T1};
use serde_json::json;

#[tokio::test]
async fn two_items_that_share_an_id_keep_their_own_versions() {
    let h = Harness::new().await;
    let (status, order) = h
        .post(
            &USER_T1,
            json!({"entity": "order", "version": 0,
                   "attributes": {"orderId": "o1", "userId": "u1", "status": "PENDING"}}),
        )
        .await;
    assert_eq!(
        (status, order["version"].clone()),
        (202, json!(1)),
        "{order}"
    );
    assert_eq!(order["id"], "ORDER#t1#ORDER#o1");

    // The other item never existed: its create succeeds, at version 1.
    let (status, other) = h
        .post(
            &USER_T1,
            json!({"pk": "ORDER#t1#ORDER", "sk": "o1", "version": 0}),
        )
        .await;
    assert_eq!(
        (status, other["version"].clone()),
        (202, json!(1)),
        "{other}"
    );
    assert_eq!(other["id"], order["id"], "the two items share an id");
    let (status, other) = h
        .post(
            &USER_T1,
            json!({"pk": "ORDER#t1#ORDER", "sk": "o1", "version": -1}),
        )
        .await;
    assert_eq!(
        (status, other["version"].clone()),
        (202, json!(2)),
        "{other}"
    );

    // The order's version 1 is still its latest.
    let (status, patched) = h
        .patch(
            &USER_T1,
            json!({"pk": "ORDER#t1", "sk": "ORDER#o1", "version": 1,
                   "attributes": {"status": "PAID"}}),
        )
        .await;
    assert_eq!(
        (status, patched["version"].clone()),
        (202, json!(2)),
        "{patched}"
    );
    let versions = |pk: &'static str, sk: &'static str| {
        let h = &h;
        async move {
            h.versions(pk, sk)
                .await
                .iter()
                .map(|i| i.version)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(versions("ORDER#t1", "ORDER#o1").await, [1, 2]);
    assert_eq!(versions("ORDER#t1#ORDER", "o1").await, [1, 2]);
}
