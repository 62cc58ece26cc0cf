//! `GET /items/{pk}` against DynamoDB Local: prefix and range reads over the six key patterns of
//! the key guide (as the example model builds their keys), order, limits, and pagination that visits every item exactly once.

mod common;

use std::collections::BTreeSet;

use chrono::{Duration, TimeZone, Utc};
use common::{Harness, SYSTEM_ADMIN, USER_T1, USER_T2, enc, model_keys, qv};

/// `sk` of every item of one page of `GET /items/{pk}?{query}`.
async fn list(h: &Harness, pk: &str, query: &str) -> Vec<String> {
    let a = h
        .get(&USER_T1, &format!("/items/{}?{query}", enc(pk)))
        .await;
    assert_eq!(a.status, 200, "{pk}?{query}: {}", a.body);
    assert_eq!(a.cursor(), None, "{pk}?{query}: one page expected");
    a.sks()
}

#[tokio::test]
async fn simple_entities_by_range_and_order() {
    let h = Harness::new().await;
    let mut keys = Vec::new();
    for _ in 0..6 {
        let (pk, sk) = model_keys("product", "t1", &[("productId", &cqrs_keys::new_ulid())]);
        h.seed_data(&pk, &sk, false).await;
        keys.push(sk);
    }
    keys.sort();
    assert_eq!(list(&h, "PRODUCT#t1", "").await, keys);
    let mut desc = keys.clone();
    desc.reverse();
    assert_eq!(list(&h, "PRODUCT#t1", "order=desc").await, desc);
    // Inclusive range, both ends.
    let query = format!("skFrom={}&skTo={}", keys[1], keys[4]);
    assert_eq!(list(&h, "PRODUCT#t1", &query).await, keys[1..=4]);
    assert_eq!(
        list(&h, "PRODUCT#t1", &format!("{query}&order=desc")).await,
        desc[1..=4]
    );
    // One bound only.
    assert_eq!(
        list(&h, "PRODUCT#t1", &format!("skFrom={}", keys[4])).await,
        keys[4..]
    );
    assert_eq!(
        list(&h, "PRODUCT#t1", &format!("skTo={}", keys[1])).await,
        keys[..=1]
    );
    // An empty range that is still a valid one.
    assert!(list(&h, "PRODUCT#t1", "skFrom=0&skTo=00").await.is_empty());
}

#[tokio::test]
async fn orders_and_their_items_by_prefix() {
    let h = Harness::new().await;
    let order = |id: &str| model_keys("order", "t1", &[("orderId", id)]).1;
    let item =
        |id: &str, item: &str| model_keys("order_item", "t1", &[("orderId", id), ("itemId", item)]);
    let (o1, o10, o2) = (
        order("01HXORDER1"),
        order("01HXORDER10"),
        order("01HXORDER2"),
    );
    for sk in [&o1, &o10, &o2] {
        h.seed_data("ORDER#t1", sk, false).await;
    }
    let mut o1_items = Vec::new();
    for n in ["001", "002", "003"] {
        let (pk, sk) = item("01HXORDER1", n);
        h.seed_data(&pk, &sk, false).await;
        o1_items.push(sk);
    }
    let (pk, sk) = item("01HXORDER10", "001");
    h.seed_data(&pk, &sk, false).await;

    // The items of one order, not those of an order whose id starts with the same text.
    let prefix = "ORDER_ITEM#01HXORDER1#".to_string();
    assert_eq!(
        list(&h, "ORDER#t1", &format!("skPrefix={}", qv(&prefix))).await,
        o1_items
    );
    // Orders only (`ORDER#`, not `ORDER_ITEM#`).
    assert_eq!(
        list(&h, "ORDER#t1", "skPrefix=ORDER%23").await,
        [o1.clone(), o10.clone(), o2.clone()]
    );
    assert_eq!(
        list(&h, "ORDER#t1", "skPrefix=ORDER%23&order=desc").await,
        [o2, o10, o1]
    );
    assert_eq!(list(&h, "ORDER#t1", "").await.len(), 7);
}

#[tokio::test]
async fn users_and_user_tenant_links_in_common_by_prefix() {
    let h = Harness::new().await;
    let mut sso = Vec::new();
    for (provider, user) in [
        ("local", "alice"),
        ("sso", "bob"),
        ("sso", "carol"),
        ("oauth", "dave"),
    ] {
        let (pk, sk) = model_keys(
            "user_auth",
            "common",
            &[("provider", provider), ("userId", user)],
        );
        h.seed_data(&pk, &sk, false).await;
        if provider == "sso" {
            sso.push(sk);
        }
    }
    let mut t1_links = Vec::new();
    for (tenant, user) in [
        ("t1", "alice"),
        ("t1", "bob"),
        ("t10", "carol"),
        ("t2", "dave"),
    ] {
        let (pk, sk) = model_keys(
            "user_tenant",
            "common",
            &[("tenantCode", tenant), ("userId", user)],
        );
        h.seed_data(&pk, &sk, false).await;
        if tenant == "t1" {
            t1_links.push(sk);
        }
    }
    // Every tenant's users and links: a global system_admin reads them (`read = "system_admin"`
    // in model.toml), a tenant does not (tests/common_readers.rs tries every route).
    let a = h
        .get(&SYSTEM_ADMIN, "/items/USER%23common?skPrefix=sso%23")
        .await;
    assert_eq!((a.status, a.sks()), (200, sso));
    let a = h
        .get(&SYSTEM_ADMIN, "/items/USER_TENANT%23common?skPrefix=t1%23")
        .await;
    assert_eq!((a.status, a.sks()), (200, t1_links));
    h.get(&USER_T2, "/items/USER%23common?skPrefix=sso%23")
        .await
        .assert_problem(403, None);
}

#[tokio::test]
async fn master_data_by_kind_and_category() {
    let h = Harness::new().await;
    let mut categories = Vec::new();
    for (kind, category, code) in [
        ("setting", "notification", "email_template"),
        ("master_data", "product_category", "electronics"),
        ("master_data", "product_category", "books"),
        ("master_data", "product_categoryx", "other"),
        ("master_copy", "backup", "2024-01-01"),
    ] {
        let (pk, sk) = model_keys(kind, "t1", &[("category", category), ("code", code)]);
        h.seed_data(&pk, &sk, false).await;
        if category == "product_category" {
            categories.push(sk);
        }
    }
    categories.sort();
    assert_eq!(
        list(&h, "MASTER#t1", "skPrefix=DATA%23product_category%23").await,
        categories
    );
    assert_eq!(list(&h, "MASTER#t1", "skPrefix=DATA%23").await.len(), 3);
    assert_eq!(
        list(&h, "MASTER#t1", "skPrefix=SETTING%23").await,
        ["SETTING#notification#email_template"]
    );
}

#[tokio::test]
async fn a_time_series_by_time_range() {
    let h = Harness::new().await;
    let start = Utc.with_ymd_and_hms(2024, 1, 14, 22, 0, 0).unwrap();
    let mut keys = Vec::new();
    for i in 0..12 {
        let ts = start + Duration::hours(i * 3);
        let event = format!("evt{i:03}");
        let (pk, sk) = model_keys(
            "log",
            "t1",
            &[("at", &ts.to_rfc3339()), ("eventId", &event)],
        );
        assert_eq!(pk, "LOG#t1#2024-01");
        h.seed_data(&pk, &sk, false).await;
        keys.push(sk);
    }
    let pk = "LOG#t1#2024-01";
    // Exact keys as bounds: both are included.
    assert_eq!(
        list(
            &h,
            pk,
            &format!("skFrom={}&skTo={}", qv(&keys[2]), qv(&keys[6]))
        )
        .await,
        keys[2..=6]
    );
    // A whole day: from its first instant to just after its last.
    let day: Vec<String> = keys
        .iter()
        .filter(|k| k.starts_with("2024-01-15"))
        .cloned()
        .collect();
    assert_eq!(day.len(), 8);
    assert_eq!(
        list(&h, pk, "skFrom=2024-01-15&skTo=2024-01-15T%7E").await,
        day
    );
    assert_eq!(list(&h, pk, "skPrefix=2024-01-15T").await, day);
    let mut newest_first = day.clone();
    newest_first.reverse();
    assert_eq!(
        list(&h, pk, "skPrefix=2024-01-15T&order=desc&limit=8").await,
        newest_first
    );
}

/// 80 items, `I000` to `I079`, in the data table: every third one (`i % 3 == 1`) soft-deleted, and
/// a run of 25 deleted ones in the middle (`I030` to `I054`). Returns the sort keys of the live
/// ones and of all, ascending.
async fn seed_mixed(h: &Harness, pk: &str) -> (Vec<String>, Vec<String>) {
    let mut live = Vec::new();
    let mut all = Vec::new();
    for i in 0..80 {
        let sk = format!("I{i:03}");
        let deleted = i % 3 == 1 || (30..55).contains(&i);
        h.seed_data(pk, &sk, deleted).await;
        if !deleted {
            live.push(sk.clone());
        }
        all.push(sk);
    }
    (live, all)
}

#[tokio::test]
async fn pages_visit_every_item_exactly_once_in_both_orders() {
    let h = Harness::new().await;
    let (live, all) = seed_mixed(&h, "PRODUCT#t1").await;
    assert_eq!(live.len(), 36);
    for limit in [1, 3, 7, 36, 100] {
        for (order, include_deleted) in [
            ("asc", false),
            ("desc", false),
            ("asc", true),
            ("desc", true),
        ] {
            let target = format!(
                "/items/PRODUCT%23t1?order={order}&limit={limit}&includeDeleted={include_deleted}"
            );
            let pages = h.all_pages(&USER_T1, &target, limit).await;
            let seen: Vec<String> = pages.concat();
            let mut expected = if include_deleted {
                all.clone()
            } else {
                live.clone()
            };
            if order == "desc" {
                expected.reverse();
            }
            // Every item once, in order (so no duplicates and none skipped) ...
            assert_eq!(seen, expected, "{target}");
            // ... and no empty last page when the listing ends on a full one.
            assert_eq!(pages.len(), expected.len().div_ceil(limit), "{target}");
            assert_eq!(seen.iter().collect::<BTreeSet<_>>().len(), seen.len());
        }
    }
}

#[tokio::test]
async fn pages_of_a_prefix_with_deleted_items_and_a_changing_limit() {
    let h = Harness::new().await;
    seed_mixed(&h, "PRODUCT#t1").await;
    h.seed_data("PRODUCT#t1", "J000", false).await;
    // `I02` covers I020 to I029, of which I022, I025 and I028 are deleted.
    let expected: Vec<String> = (20..30)
        .filter(|i| i % 3 != 1)
        .map(|i| format!("I{i:03}"))
        .collect();
    let pages = h
        .all_pages(&USER_T1, "/items/PRODUCT%23t1?skPrefix=I02&limit=2", 2)
        .await;
    assert_eq!(pages.concat(), expected);

    // The limit may change from page to page; the cursor still continues right after the last item.
    let first = h.get(&USER_T1, "/items/PRODUCT%23t1?limit=2").await;
    assert_eq!(first.sks(), ["I000", "I002"]);
    let cursor = first.cursor().unwrap();
    let second = h
        .get(
            &USER_T1,
            &format!("/items/PRODUCT%23t1?limit=4&cursor={cursor}"),
        )
        .await;
    assert_eq!(second.sks(), ["I003", "I005", "I006", "I008"]);
    // A full page after a run of 25 deleted items: I029 then the next live ones after I054.
    let a = h
        .get(&USER_T1, "/items/PRODUCT%23t1?skFrom=I029&limit=3")
        .await;
    assert_eq!(a.sks(), ["I029", "I056", "I057"]);
}

#[tokio::test]
async fn the_default_page_is_20_and_limits_out_of_range_are_400() {
    let h = Harness::new().await;
    for i in 0..25 {
        h.seed_data("PRODUCT#t1", &format!("P{i:02}"), false).await;
    }
    let a = h.get(&USER_T1, "/items/PRODUCT%23t1").await;
    assert_eq!(a.items().len(), 20);
    assert!(a.cursor().is_some());
    let a = h.get(&USER_T1, "/items/PRODUCT%23t1?limit=100").await;
    assert_eq!((a.items().len(), a.cursor()), (25, None));
    assert_eq!(
        a.body.as_object().unwrap().len(),
        2,
        "items and cursor only"
    );
    for bad in ["0", "101", "-1", "abc", "1.0", "1e2", "%20"] {
        h.get(&USER_T1, &format!("/items/PRODUCT%23t1?limit={bad}"))
            .await
            .assert_problem(400, Some("limit"));
    }
}

#[tokio::test]
async fn contradictory_or_malformed_range_parameters_are_400() {
    let h = Harness::new().await;
    h.seed_data("PRODUCT#t1", "P1", false).await;
    for (query, field) in [
        ("skPrefix=a&skFrom=a", "skPrefix"),
        ("skPrefix=a&skTo=b", "skPrefix"),
        ("skPrefix=a&skFrom=a&skTo=b", "skPrefix"),
        ("skFrom=b&skTo=a", "skFrom"),
        ("order=up", "order"),
        ("order=ASC", "order"),
        ("skPrefix=", "skPrefix"),
        ("skPrefix=a%00", "skPrefix"),
        ("minVersion=1", "minVersion"),
        ("cursor=", "cursor"),
    ] {
        h.get(&USER_T1, &format!("/items/PRODUCT%23t1?{query}"))
            .await
            .assert_problem(400, Some(field));
    }
}

#[tokio::test]
async fn an_empty_partition_is_an_empty_listing() {
    let h = Harness::new().await;
    let a = h.get(&USER_T1, "/items/PRODUCT%23t1").await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body, serde_json::json!({"items": [], "cursor": null}));
}
