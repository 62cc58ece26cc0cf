//! `GET /items/{pk}/{sk}/versions` and `.../versions/{v}` against DynamoDB Local: history in
//! numeric version order (past version 9, where string order differs), paging, one version.

mod common;

use common::{Harness, USER_T1, version_item};
use serde_json::json;

fn versions(a: &common::Answer) -> Vec<i64> {
    a.items()
        .iter()
        .map(|i| i["version"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn the_history_is_newest_first_in_numeric_order() {
    let h = Harness::new().await;
    h.seed("ORDER#t1", "ORDER#o1", 12, true).await;
    // An item whose base starts with the same text is another item.
    h.seed("ORDER#t1", "ORDER#o10", 2, false).await;
    h.seed("ORDER#t1", "ORDER#o", 1, false).await;

    let a = h
        .get(&USER_T1, "/items/ORDER%23t1/ORDER%23o1/versions")
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(versions(&a), (1..=12).rev().collect::<Vec<_>>());
    assert_eq!(a.cursor(), None);
    // History items as stored: `sk@version`, the soft delete included.
    assert_eq!(a.items()[0]["sk"], "ORDER#o1@12");
    assert_eq!(a.items()[0]["isDeleted"], true);
    assert_eq!(
        a.items()[3],
        serde_json::to_value(version_item("ORDER#t1", "ORDER#o1", 9, false)).unwrap()
    );
    let a = h
        .get(&USER_T1, "/items/ORDER%23t1/ORDER%23o1/versions?order=asc")
        .await;
    assert_eq!(versions(&a), (1..=12).collect::<Vec<_>>());
}

#[tokio::test]
async fn history_pages_visit_every_version_once() {
    let h = Harness::new().await;
    h.seed("PRODUCT#t1", "P1", 23, false).await;
    for (order, expected) in [
        ("desc", (1..=23).rev().collect::<Vec<i64>>()),
        ("asc", (1..=23).collect()),
    ] {
        for limit in [1, 5, 10, 23] {
            let target = format!("/items/PRODUCT%23t1/P1/versions?order={order}&limit={limit}");
            let pages = h.all_pages(&USER_T1, &target, limit).await;
            let seen: Vec<i64> = pages
                .concat()
                .iter()
                .map(|sk| sk.rsplit_once('@').unwrap().1.parse().unwrap())
                .collect();
            assert_eq!(seen, expected, "{target}");
            assert_eq!(pages.len(), 23usize.div_ceil(limit), "{target}");
        }
    }
    let first = h
        .get(&USER_T1, "/items/PRODUCT%23t1/P1/versions?limit=5")
        .await;
    assert_eq!(versions(&first), [23, 22, 21, 20, 19]);
    let cursor = first.cursor().unwrap();
    let next = h
        .get(
            &USER_T1,
            &format!("/items/PRODUCT%23t1/P1/versions?limit=3&cursor={cursor}"),
        )
        .await;
    assert_eq!(versions(&next), [18, 17, 16]);
}

#[tokio::test]
async fn items_sharing_an_id_across_partitions_keep_their_own_history() {
    let h = Harness::new().await;
    // Both ids are `LOG#t1#2024-01#X`.
    h.seed("LOG#t1#2024-01", "X", 3, false).await;
    h.seed("LOG#t1", "2024-01#X", 2, false).await;
    let a = h
        .get(&USER_T1, "/items/LOG%23t1%232024-01/X/versions")
        .await;
    assert_eq!(versions(&a), [3, 2, 1]);
    assert!(a.items().iter().all(|i| i["pk"] == "LOG#t1#2024-01"));
    let pages = h
        .all_pages(&USER_T1, "/items/LOG%23t1/2024-01%23X/versions?limit=1", 1)
        .await;
    assert_eq!(pages.concat(), ["2024-01#X@2", "2024-01#X@1"]);
}

#[tokio::test]
async fn an_item_without_history_is_404() {
    let h = Harness::new().await;
    h.seed_data("PRODUCT#t1", "ONLY_DATA", false).await;
    h.get(&USER_T1, "/items/PRODUCT%23t1/ONLY_DATA/versions")
        .await
        .assert_problem(404, None);
    h.get(&USER_T1, "/items/PRODUCT%23t1/P1/versions?limit=0")
        .await
        .assert_problem(400, Some("limit"));
    h.get(&USER_T1, "/items/PRODUCT%23t1/P1/versions?skPrefix=a")
        .await
        .assert_problem(400, Some("skPrefix"));
}

#[tokio::test]
async fn one_version_with_its_etag() {
    let h = Harness::new().await;
    h.seed("PRODUCT#t1", "P1", 11, false).await;
    let a = h.get(&USER_T1, "/items/PRODUCT%23t1/P1/versions/10").await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.body,
        serde_json::to_value(version_item("PRODUCT#t1", "P1", 10, false)).unwrap()
    );
    assert_eq!(a.header("etag"), Some("\"10\""));
    let a = h
        .get_with(
            &USER_T1,
            "/items/PRODUCT%23t1/P1/versions/10",
            &[("if-none-match", "\"10\"")],
        )
        .await;
    assert_eq!((a.status, a.body.clone()), (304, serde_json::Value::Null));
    h.get(&USER_T1, "/items/PRODUCT%23t1/P1/versions/12")
        .await
        .assert_problem(404, None);
    h.get(&USER_T1, "/items/PRODUCT%23t1/P2/versions/1")
        .await
        .assert_problem(404, None);
    for bad in [
        "0",
        "-1",
        "abc",
        "1.0",
        "%2B1",
        "1e1",
        "99999999999999999999",
    ] {
        h.get(&USER_T1, &format!("/items/PRODUCT%23t1/P1/versions/{bad}"))
            .await
            .assert_problem(400, Some("v"));
    }
    h.get(&USER_T1, "/items/PRODUCT%23t1/P1/versions/1?limit=1")
        .await
        .assert_problem(400, Some("limit"));
    let a = h.get(&USER_T1, "/items/PRODUCT%23t1/P1/versions/011").await;
    assert_eq!((a.status, a.body["version"].clone()), (200, json!(11)));
}
