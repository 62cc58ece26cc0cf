//! `GET /query/{pattern}` against DynamoDB Local: every example pattern, the 10-shard fan-out read
//! to the end in both orders, items moving between pages, a stale index (a store double), tenant
//! attacks on parameters and cursors, and bad requests.
//!
//! Items are written into the data table as data-sync projects them (keys and index keys computed
//! by the entity model from the whole item), many at a time, so a thousand items cost little.

mod common;

use std::collections::BTreeSet;

use common::*;
use cqrs_item::Item;
use cqrs_model::KeyValue;
use cqrs_query_handler::pattern::{self, EntrySource, PageRequest};
use cqrs_store::StoreError;
use cqrs_store::entries::{Entry, EntryPage, EntryQuery};
use cqrs_store::query::Order;
use serde_json::{Value, json};

fn at(i: usize) -> String {
    format!(
        "2024-01-{:02}T{:02}:{:02}:{:02}.000Z",
        1 + i / 3600 % 28,
        i / 60 % 24,
        i % 60,
        i * 7 % 60
    )
}

fn order(tenant: &str, i: usize, status: &str, user: &str) -> Item {
    entity_item(
        "order",
        tenant,
        json!({"orderId": format!("o{i:04}"), "userId": user, "status": status, "totalCents": i}),
        &at(i),
        1,
    )
}

/// Reads a pattern to the end; returns each page's `orderId`s (or `sk`s).
async fn read_all(h: &Harness, caller: &As, target: &str, limit: usize) -> Vec<Vec<Value>> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            None => format!("{target}&limit={limit}"),
            Some(c) => format!("{target}&limit={limit}&cursor={c}"),
        };
        let answer = h.get(caller, &url).await;
        assert_eq!(answer.status, 200, "{url}: {}", answer.body);
        let items = answer.items().clone();
        assert!(items.len() <= limit);
        cursor = answer.cursor();
        if cursor.is_some() {
            assert_eq!(items.len(), limit, "{url}: a page before the last is full");
        }
        pages.push(items);
        if cursor.is_none() {
            break;
        }
        assert!(pages.len() < 1000, "the cursors never end");
    }
    pages
}

fn ids(items: &[Value], attr: &str) -> Vec<String> {
    items
        .iter()
        .map(|i| {
            i["attributes"][attr]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The model is loaded by the first pattern request, not at start nor by an item read, and only
/// once: every later request reads the same model.
#[tokio::test]
async fn the_model_is_loaded_once_by_the_first_pattern_request() {
    let h = Harness::new().await;
    h.seed_data("PRODUCT#t1", "p1", false).await;
    assert!(!h.app.model_is_loaded());
    let read = h.get(&USER_T1, "/items/PRODUCT%23t1/p1").await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    assert!(!h.app.model_is_loaded(), "an item read loaded the model");
    let answer = h.get(&USER_T1, "/query/products").await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    assert!(h.app.model_is_loaded());
    let first = h.app.model().expect("the repository's model.toml checks");
    assert_eq!(first, &cqrs_model::Model::example());
    let again = h.get(&USER_T1, "/query/products").await;
    assert_eq!(again.status, 200, "{:?}", again.body);
    assert!(std::ptr::eq(first, h.app.model().expect("loaded")));
}

#[tokio::test]
async fn every_example_pattern_answers_its_items() {
    let h = Harness::new().await;
    let mut items = vec![
        entity_item(
            "product",
            "t1",
            json!({"productId": "p1", "category": "tools", "priceCents": 500}),
            &at(1),
            1,
        ),
        entity_item(
            "product",
            "t1",
            json!({"productId": "p2", "category": "tools", "priceCents": 90}),
            &at(2),
            1,
        ),
        entity_item(
            "product",
            "t1",
            json!({"productId": "p3", "category": "toys", "priceCents": 100}),
            &at(3),
            1,
        ),
        entity_item(
            "product",
            "t2",
            json!({"productId": "p1", "category": "tools", "priceCents": 1}),
            &at(3),
            1,
        ),
        order("t1", 1, "PENDING", "alice"),
        order("t1", 2, "PAID", "alice"),
        order("t1", 3, "DELIVERED", "bob"),
        order("t2", 4, "PENDING", "alice"),
        entity_item(
            "order_item",
            "t1",
            json!({"orderId": "o0001", "itemId": "001", "productId": "p1", "quantity": 2}),
            &at(5),
            1,
        ),
        entity_item(
            "order_item",
            "t1",
            json!({"orderId": "o0001", "itemId": "002", "productId": "p2", "quantity": 1}),
            &at(6),
            1,
        ),
        entity_item(
            "order_item",
            "t1",
            json!({"orderId": "o00010", "itemId": "001", "productId": "p1", "quantity": 9}),
            &at(7),
            1,
        ),
        entity_item(
            "user_auth",
            "common",
            json!({"provider": "sso", "userId": "alice"}),
            &at(8),
            1,
        ),
        entity_item(
            "user_auth",
            "common",
            json!({"provider": "local", "userId": "bob"}),
            &at(9),
            1,
        ),
        entity_item(
            "setting",
            "t1",
            json!({"category": "mail", "code": "smtp"}),
            &at(10),
            1,
        ),
        entity_item(
            "master_data",
            "t1",
            json!({"category": "unit", "code": "kg"}),
            &at(11),
            1,
        ),
        entity_item(
            "log",
            "t1",
            json!({"at": "2024-01-10T00:00:00Z", "eventId": "e1", "kind": "x"}),
            &at(12),
            1,
        ),
        entity_item(
            "log",
            "t1",
            json!({"at": "2024-01-20T00:00:00Z", "eventId": "e2", "kind": "x"}),
            &at(13),
            1,
        ),
        entity_item(
            "log",
            "t1",
            json!({"at": "2024-02-01T00:00:00Z", "eventId": "e3", "kind": "x"}),
            &at(14),
            1,
        ),
        entity_item(
            "store",
            "t1",
            json!({"storeId": "s1", "country": "us", "region": "ca", "city": "Oakland"}),
            &at(15),
            1,
        ),
        entity_item(
            "store",
            "t1",
            json!({"storeId": "s2", "country": "US", "region": "CA", "city": "Berkeley"}),
            &at(16),
            1,
        ),
        entity_item(
            "store",
            "t1",
            json!({"storeId": "s3", "country": "US", "region": "WA", "city": "Seattle"}),
            &at(17),
            1,
        ),
        entity_item(
            "store",
            "t2",
            json!({"storeId": "s4", "country": "US", "region": "CA", "city": "Fresno"}),
            &at(18),
            1,
        ),
    ];
    for (i, minute) in [(1, "00"), (2, "30"), (3, "59")] {
        items.push(entity_item(
            "reading",
            "t1",
            json!({"sensorId": "s1", "readAt": format!("2024-01-15T10:{minute}:00Z"), "value": i}),
            &at(20 + i),
            1,
        ));
    }
    h.put_all(&items).await;

    let sks = |answer: &Answer| answer.sks();
    let expect = |target: &'static str, want: Vec<&'static str>| (target, want);
    for (target, want) in [
        expect("/query/products", vec!["p1", "p2", "p3"]),
        expect("/query/products_by_price?category=tools", vec!["p2", "p1"]),
        expect(
            "/query/products_by_price?category=tools&order=desc",
            vec!["p1", "p2"],
        ),
        expect(
            "/query/orders_of_user?userId=alice",
            vec!["ORDER#o0001", "ORDER#o0002"],
        ),
        expect(
            "/query/orders_of_user?userId=alice&order=desc",
            vec!["ORDER#o0002", "ORDER#o0001"],
        ),
        expect(
            "/query/orders_by_status?status=PENDING",
            vec!["ORDER#o0001"],
        ),
        expect("/query/orders_by_status?status=DELIVERED", vec![]),
        expect("/query/user_of_order?orderId=o0003", vec!["ORDER#o0003"]),
        expect(
            "/query/items_of_order?orderId=o0001",
            vec!["ORDER_ITEM#o0001#001", "ORDER_ITEM#o0001#002"],
        ),
        expect(
            "/query/items_of_order?orderId=o0001&itemId=002",
            vec!["ORDER_ITEM#o0001#002"],
        ),
        expect(
            "/query/orders_of_product?productId=p1",
            vec!["ORDER_ITEM#o0001#001", "ORDER_ITEM#o00010#001"],
        ),
        expect("/query/settings?category=mail", vec!["SETTING#mail#smtp"]),
        expect(
            "/query/master_data?category=unit&code=kg",
            vec!["DATA#unit#kg"],
        ),
        expect(
            "/query/events_of_month?at=2024-01",
            vec!["2024-01-10T00:00:00.000Z#e1", "2024-01-20T00:00:00.000Z#e2"],
        ),
        expect(
            "/query/events_of_month?at=2024-01&from=2024-01-15",
            vec!["2024-01-20T00:00:00.000Z#e2"],
        ),
        expect(
            "/query/readings_of_sensor?sensorId=s1",
            vec![
                "READING#2024-01-15T10:00:00.000Z",
                "READING#2024-01-15T10:30:00.000Z",
                "READING#2024-01-15T10:59:00.000Z",
            ],
        ),
        expect(
            "/query/readings_of_sensor?sensorId=s1&after=2024-01-15T10:00:00Z&to=2024-01-15T10:30:00Z",
            vec!["READING#2024-01-15T10:30:00.000Z"],
        ),
        expect(
            "/query/readings_of_sensor?sensorId=s1&from=2024-01-15T10:30:00Z&order=desc",
            vec![
                "READING#2024-01-15T10:59:00.000Z",
                "READING#2024-01-15T10:30:00.000Z",
            ],
        ),
        expect(
            "/query/stores_in_region?country=US&region=CA",
            vec!["s2", "s1"],
        ),
        expect(
            "/query/stores_in_region?country=us&region=ca&city=Oakland",
            vec!["s1"],
        ),
    ] {
        let answer = h.get(&USER_T1, target).await;
        assert_eq!(answer.status, 200, "{target}: {}", answer.body);
        assert_eq!(sks(&answer), want, "{target}");
        assert_eq!(answer.cursor(), None, "{target}");
        for item in answer.items() {
            assert!(
                item["entity"].is_string(),
                "{target}: every item names its entity"
            );
        }
    }

    // Every tenant's users (`read = "system_admin"`): a global system_admin's pattern.
    let answer = h
        .get(&SYSTEM_ADMIN, "/query/auth_of_provider?provider=sso")
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(sks(&answer), ["sso#alice"]);

    // A collection: the order and its items in one page, each tagged with its entity.
    let answer = h
        .get(&USER_T1, "/query/order_with_items?orderId=o0001")
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let entities: Vec<&str> = answer
        .items()
        .iter()
        .map(|i| i["entity"].as_str().unwrap())
        .collect();
    assert_eq!(
        entities,
        ["order_item", "order_item", "order"],
        "ITEM# sorts before USER#"
    );
    println!(
        "access patterns: {} patterns of the example model answered exactly; collection order_with_items: 1 order + 2 items in one page",
        model().patterns().len()
    );
}

#[tokio::test]
async fn ten_shards_read_in_pages_of_seven_return_every_item_once_in_order() {
    let h = Harness::new().await;
    let orders: Vec<Item> = (0..1000).map(|i| order("t1", i, "PENDING", "u")).collect();
    // Noise the pattern must never return: another status, another tenant.
    let noise: Vec<Item> = (1000..1100)
        .map(|i| {
            order(
                if i % 2 == 0 { "t2" } else { "t1" },
                i,
                if i % 2 == 0 { "PENDING" } else { "PAID" },
                "u",
            )
        })
        .collect();
    h.put_all(&orders).await;
    h.put_all(&noise).await;
    let mut expected: Vec<(String, String)> = orders
        .iter()
        .map(|o| {
            (
                o.index_keys["gsi2sk"].as_str().unwrap().to_string(),
                o.attributes["orderId"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    expected.sort();
    let shards: BTreeSet<String> = orders
        .iter()
        .map(|o| o.index_keys["gsi2pk"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        shards.len(),
        10,
        "the thousand orders spread over all 10 shards"
    );
    for order in [Order::Ascending, Order::Descending] {
        let param = match order {
            Order::Ascending => "asc",
            Order::Descending => "desc",
        };
        let pages = read_all(
            &h,
            &USER_T1,
            &format!("/query/orders_by_status?status=PENDING&order={param}"),
            7,
        )
        .await;
        let got: Vec<String> = pages.iter().flat_map(|p| ids(p, "orderId")).collect();
        let mut want: Vec<String> = expected.iter().map(|(_, id)| id.clone()).collect();
        if order == Order::Descending {
            want.reverse();
        }
        assert_eq!(got.len(), 1000);
        assert_eq!(got, want, "{param}: every item once, in sort key order");
        println!(
            "fan-out: 1000 orders on 10 shards, {} pages of 7 ({param}), every item once, in order",
            pages.len()
        );
    }

    // Read amplification of the same pattern, through the reader itself.
    let plan = model()
        .query("orders_by_status", "t1", &[("status", "PENDING")])
        .unwrap();
    let (mut entries, mut returned, mut queries, mut pages, mut cursor) = (0, 0, 0, 0, None);
    loop {
        let page = pattern::read_page(
            &h.app.store,
            model(),
            &plan,
            PageRequest {
                order: Order::Ascending,
                limit: 20,
                include_deleted: false,
                live_at: None,
                cursor,
            },
        )
        .await
        .unwrap();
        entries += page.stats.entries;
        queries += page.stats.queries;
        pages += 1;
        returned += page.items.len();
        cursor = page.cursor;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(returned, 1000);
    let amplification = entries as f64 / returned as f64;
    println!(
        "fan-out read amplification: {entries} index entries read for {returned} items (pages of 20): {amplification:.2}, {:.1} queries per page",
        queries as f64 / pages as f64
    );
    assert!(amplification <= 2.0, "{amplification}");
}

#[tokio::test]
async fn items_moved_between_pages_leave_the_others_exactly_once() {
    let h = Harness::new().await;
    let orders: Vec<Item> = (0..120).map(|i| order("t1", i, "PENDING", "u")).collect();
    h.put_all(&orders).await;
    let target = "/query/orders_by_status?status=PENDING&limit=10";
    let first = h.get(&USER_T1, target).await;
    assert_eq!(first.status, 200);
    let mut seen: Vec<String> = ids(first.items(), "orderId");
    let mut cursor = first.cursor();
    // Between pages: every third order not yet seen moves to PAID (a PATCH of its status), and
    // new orders arrive.
    let moved: BTreeSet<String> = (0..120)
        .map(|i| format!("o{i:04}"))
        .filter(|id| !seen.contains(id))
        .step_by(3)
        .collect();
    let mut changes: Vec<Item> = orders
        .iter()
        .filter(|o| moved.contains(o.attributes["orderId"].as_str().unwrap()))
        .map(|o| {
            let i: usize = o.attributes["orderId"].as_str().unwrap()[1..]
                .parse()
                .unwrap();
            let mut paid = order("t1", i, "PAID", "u");
            paid.version = 2;
            paid
        })
        .collect();
    changes.extend((500..530).map(|i| order("t1", i, "PENDING", "u")));
    h.put_all(&changes).await;
    while let Some(c) = cursor {
        let answer = h.get(&USER_T1, &format!("{target}&cursor={c}")).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        seen.extend(ids(answer.items(), "orderId"));
        cursor = answer.cursor();
    }
    let unmoved: Vec<String> = (0..120)
        .map(|i| format!("o{i:04}"))
        .filter(|id| !moved.contains(id))
        .collect();
    for id in &unmoved {
        assert_eq!(seen.iter().filter(|s| *s == id).count(), 1, "{id} once");
    }
    for id in &moved {
        assert!(
            !seen.contains(id),
            "{id} moved to PAID before its page: not listed as PENDING"
        );
    }
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no item twice");
    println!(
        "moves between pages: {} orders moved PENDING -> PAID between pages, {} unmoved listed exactly once, 0 duplicates",
        moved.len(),
        unmoved.len()
    );
}

/// A store whose index lags: its first query of each shard also returns entries of items that
/// have since moved or been deleted.
struct StaleIndex<'a> {
    store: &'a cqrs_store::Store,
    stale: Vec<Entry>,
}

impl EntrySource for StaleIndex<'_> {
    async fn query_entries(&self, query: &EntryQuery) -> Result<EntryPage, StoreError> {
        let mut page = self.store.query_entries(query).await?;
        if query.start.is_none() {
            let partition = &query.equal[0].1;
            let mut extra: Vec<Entry> = self
                .stale
                .iter()
                .filter(|e| e.key.get(&query.equal[0].0) == Some(partition))
                .cloned()
                .collect();
            extra.extend(page.entries);
            extra.sort_by(|a, b| a.key["gsi2sk"].cmp(&b.key["gsi2sk"]));
            page.entries = extra;
        }
        Ok(page)
    }

    async fn get_data_items(
        &self,
        keys: &[(String, String)],
    ) -> Result<std::collections::HashMap<(String, String), Item>, StoreError> {
        self.store.get_data_items(keys).await
    }
}

#[tokio::test]
async fn a_stale_index_never_shows_an_item_that_left_the_pattern() {
    let h = Harness::new().await;
    let orders: Vec<Item> = (0..30).map(|i| order("t1", i, "PENDING", "u")).collect();
    h.put_all(&orders).await;
    // The index still holds o0003 as PENDING; the table says PAID. o0004 is soft-deleted (and
    // still PENDING, so in the real index too).
    let entry_of = |item: &Item| Entry {
        key: ["pk", "sk", "gsi2pk", "gsi2sk"]
            .iter()
            .map(|k| {
                let v = match *k {
                    "pk" => item.pk.clone(),
                    "sk" => item.sk.clone(),
                    other => item.index_keys[other].as_str().unwrap().to_string(),
                };
                (k.to_string(), KeyValue::S(v))
            })
            .collect(),
        item: None,
    };
    let stale = vec![entry_of(&orders[3])];
    let mut paid = order("t1", 3, "PAID", "u");
    paid.version = 2;
    let mut deleted = orders[4].clone();
    deleted.version = 2;
    deleted.is_deleted = true;
    h.put_all(&[paid, deleted]).await;
    let source = StaleIndex {
        store: &h.app.store,
        stale,
    };
    let plan = model()
        .query("orders_by_status", "t1", &[("status", "PENDING")])
        .unwrap();
    // One page of 30 through the stale index: the order ids and what the read cost.
    let read = |include_deleted: bool| {
        let (source, plan) = (&source, &plan);
        async move {
            let request = PageRequest {
                order: Order::Ascending,
                limit: 30,
                include_deleted,
                live_at: None,
                cursor: None,
            };
            let page = pattern::read_page(source, model(), plan, request)
                .await
                .unwrap();
            let ids: Vec<String> = page
                .items
                .iter()
                .map(|i| i.attributes["orderId"].as_str().unwrap().to_string())
                .collect();
            (ids, page.stats)
        }
    };
    let (got, stats) = read(false).await;
    assert!(
        !got.contains(&"o0003".to_string()),
        "moved to PAID: left out"
    );
    assert!(!got.contains(&"o0004".to_string()), "deleted: left out");
    // Every other order is there: left-out entries do not shorten the page.
    assert_eq!(got.len(), 28);
    assert!(stats.stale >= 1, "{stats:?}");
    // With includeDeleted the deleted one is back, the moved one is not.
    let (got, _) = read(true).await;
    assert!(got.contains(&"o0004".to_string()) && !got.contains(&"o0003".to_string()));
    assert_eq!(got.len(), 29);
    println!(
        "stale index: 1 stale entry (moved to PAID) and 1 deleted item served by the index, 0 shown; includeDeleted shows the deleted one only"
    );
}

#[tokio::test]
async fn no_parameter_or_cursor_reaches_another_tenant() {
    let h = Harness::new().await;
    let mut items: Vec<Item> = (0..40).map(|i| order("t1", i, "PENDING", "u")).collect();
    items.extend((100..140).map(|i| order("t2", i, "PENDING", "u")));
    h.put_all(&items).await;
    let mut cross = 0;
    let mut refused = 0;
    // `tenant` as a parameter.
    for target in [
        "/query/orders_by_status?status=PENDING&tenant=t2",
        "/query/orders_of_user?userId=u&tenant=t2",
    ] {
        let answer = h.get(&USER_T1, target).await;
        answer.assert_problem(400, Some("tenant"));
        refused += 1;
    }
    // A cursor of t1 replayed by t2, and one of another pattern or parameter set.
    let answer = h
        .get(&USER_T1, "/query/orders_by_status?status=PENDING&limit=5")
        .await;
    let cursor = answer.cursor().unwrap();
    for (caller, target) in [
        (
            &USER_T2,
            format!("/query/orders_by_status?status=PENDING&limit=5&cursor={cursor}"),
        ),
        (
            &USER_T1,
            format!("/query/orders_by_status?status=PAID&limit=5&cursor={cursor}"),
        ),
        (
            &USER_T1,
            format!("/query/orders_of_user?userId=u&limit=5&cursor={cursor}"),
        ),
        (
            &USER_T1,
            format!("/query/orders_by_status?status=PENDING&order=desc&cursor={cursor}"),
        ),
    ] {
        let answer = h.get(caller, &target).await;
        answer.assert_problem(400, Some("cursor"));
        refused += 1;
    }
    // Forged cursors: right pattern, parameters and tenant fingerprint, positions elsewhere.
    let plan_t2 = model()
        .query("orders_by_status", "t2", &[("status", "PENDING")])
        .unwrap();
    let t1_key = |i: usize| {
        let o = &items[i];
        ["pk", "sk", "gsi2sk"]
            .iter()
            .map(|k| {
                let v = match *k {
                    "pk" => o.pk.clone(),
                    "sk" => o.sk.clone(),
                    other => o.index_keys[other].as_str().unwrap().to_string(),
                };
                (k.to_string(), KeyValue::S(v))
            })
            .collect::<cqrs_store::entries::EntryKey>()
    };
    let mut positions = pattern::PatternCursor::start(10);
    positions.shards[0] = pattern::ShardPosition::After(t1_key(0));
    let forged = cqrs_query_handler::cursor::encode_pattern(&plan_t2, Order::Ascending, &positions);
    let answer = h
        .get(
            &USER_T2,
            &format!("/query/orders_by_status?status=PENDING&cursor={forged}"),
        )
        .await;
    answer.assert_problem(400, Some("cursor"));
    refused += 1;
    // Every page t2 reads holds t2's items only, and t2 gets every one of its 40 (a loop over
    // empty pages would find no cross-tenant item too).
    let mut seen = 0;
    for page in read_all(&h, &USER_T2, "/query/orders_by_status?status=PENDING", 7).await {
        cross += page.iter().filter(|i| i["tenantCode"] != "t2").count();
        seen += page.len();
    }
    assert_eq!(
        (cross, seen),
        (0, 40),
        "t2 reads its 40 orders and nothing else"
    );
    println!(
        "pattern tenant attacks: {refused} refused (tenant parameter, replayed and forged cursors), 0 cross-tenant items"
    );
}

#[tokio::test]
async fn bad_pattern_requests_are_400s_naming_the_parameter() {
    let h = Harness::new().await;
    for (target, field) in [
        ("/query/nope", "pattern"),
        ("/query/orders_by_status", "status"),
        ("/query/orders_by_status?status=LOST", "status"),
        ("/query/orders_by_status?status=PENDING&color=red", "color"),
        ("/query/orders_of_user?userId=a%23b", "userId"),
        ("/query/orders_of_user?userId=u&limit=0", "limit"),
        ("/query/orders_of_user?userId=u&order=sideways", "order"),
        ("/query/orders_of_user?userId=u&cursor=bm9wZQ", "cursor"),
        ("/query/items_of_order?itemId=001", "itemId"),
        (
            "/query/readings_of_sensor?sensorId=s1&from=yesterday",
            "from",
        ),
        (
            "/query/readings_of_sensor?sensorId=s1&from=2024-02-01&to=2024-01-01",
            "from",
        ),
        ("/query/stores_in_region?country=US", "region"),
        ("/query/products?includeDeleted=maybe", "includeDeleted"),
    ] {
        let answer = h.get(&USER_T1, target).await;
        answer.assert_problem(400, Some(field));
    }
    assert_eq!(h.get(&USER_T1, "/query/").await.status, 404);
    assert_eq!(h.get(&USER_T1, "/query/a/b").await.status, 404);
}

/// Review hole 2 through HTTP: an upper bound keeps every setting whose category is at most it, also
/// a category that is a proper prefix of the bound followed by a character below `#` (`ui` is at
/// most `ui x`, and its key `SETTING#ui#…` sorts above `SETTING#ui x…`). The key condition reads a
/// little more than the bound (`SETTING#ui!#…` too) and the exact filter drops it: pages before the
/// last are still full, and the order is the key order.
#[tokio::test]
async fn an_upper_bound_keeps_categories_that_are_proper_prefixes_of_it() {
    let h = Harness::new().await;
    let categories = ["u", "ui", "ui x", "ui x!", "ui!", "ui\"a", "uj", "ui$"];
    let mut items = Vec::new();
    for (c, category) in categories.iter().enumerate() {
        for code in 0..4 {
            items.push(entity_item(
                "setting",
                "t1",
                json!({"category": category, "code": format!("c{code}"), "value": "v"}),
                &at(c * 4 + code),
                1,
            ));
        }
    }
    h.put_all(&items).await;
    type Keep = fn(&str) -> bool;
    // `str` compares byte-wise, as DynamoDB compares keys.
    let cases: [(&str, Keep); 6] = [
        ("to=ui%20x", |c| c <= "ui x"),
        ("before=ui%20x", |c| c < "ui x"),
        ("to=ui", |c| c <= "ui"),
        ("from=ui&to=ui%20x", |c| ("ui"..="ui x").contains(&c)),
        ("after=u&before=ui%24", |c| c > "u" && c < "ui$"),
        ("to=ui%22", |c| c <= "ui\""),
    ];
    for (range, keep) in cases {
        let mut expected: Vec<(String, String)> = items
            .iter()
            .filter(|i| keep(i.attributes["category"].as_str().unwrap()))
            .map(|i| {
                (
                    i.sk.clone(),
                    format!(
                        "{}/{}",
                        i.attributes["category"].as_str().unwrap(),
                        i.attributes["code"].as_str().unwrap()
                    ),
                )
            })
            .collect();
        expected.sort();
        let expected: Vec<String> = expected.into_iter().map(|(_, name)| name).collect();
        assert!(!expected.is_empty(), "{range}");
        for limit in [1, 3, 100] {
            let pages = read_all(&h, &USER_T1, &format!("/query/settings?{range}"), limit).await;
            let got: Vec<String> = pages
                .iter()
                .flatten()
                .map(|i| {
                    format!(
                        "{}/{}",
                        i["attributes"]["category"].as_str().unwrap(),
                        i["attributes"]["code"].as_str().unwrap()
                    )
                })
                .collect();
            assert_eq!(got, expected, "{range} in pages of {limit}");
        }
    }
}

/// Review holes 3 and 4 through HTTP: crossed bounds are a 400 naming the lower one (not an empty
/// 200), and a pattern cursor whose position holds a key value of the wrong type or size is a 400
/// naming `cursor` (not DynamoDB's ValidationException as a 500).
#[tokio::test]
async fn crossed_bounds_and_forged_positions_are_400s() {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    let h = Harness::new().await;
    let mut items: Vec<Item> = (0..30).map(|i| order("t1", i, "PENDING", "u")).collect();
    items.push(entity_item(
        "setting",
        "t1",
        json!({"category": "ab", "code": "c", "value": "v"}),
        &at(1),
        1,
    ));
    h.put_all(&items).await;
    for (target, field) in [
        ("/query/settings?from=ab&to=a", "from"),
        ("/query/settings?after=ab&to=ab", "after"),
        ("/query/settings?from=b&before=b", "from"),
        (
            "/query/readings_of_sensor?sensorId=s1&after=2024-01&to=2024-01-15",
            "after",
        ),
    ] {
        h.get(&USER_T1, target)
            .await
            .assert_problem(400, Some(field));
    }

    let first = h
        .get(&USER_T1, "/query/orders_by_status?status=PENDING&limit=1")
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let cursor = first.cursor().expect("more than one page");
    let token: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&cursor).unwrap()).unwrap();
    let shard = token["s"]
        .as_array()
        .unwrap()
        .iter()
        .position(Value::is_object)
        .expect("a shard stands after an entry");
    let long = "9".repeat(1100);
    for (attr, value) in [
        ("gsi2sk", json!(["N", "1"])),
        ("gsi2sk", json!(["S", long])),
        ("sk", json!(["N", "1"])),
    ] {
        let mut forged = token.clone();
        forged["s"][shard][attr] = value.clone();
        let text = URL_SAFE_NO_PAD.encode(forged.to_string());
        let answer = h
            .get(
                &USER_T1,
                &format!("/query/orders_by_status?status=PENDING&limit=1&cursor={text}"),
            )
            .await;
        assert_eq!(answer.status, 400, "{attr} = {value}: {}", answer.body);
        answer.assert_problem(400, Some("cursor"));
    }
    // The genuine cursor still reads on.
    let next = h
        .get(
            &USER_T1,
            &format!("/query/orders_by_status?status=PENDING&limit=1&cursor={cursor}"),
        )
        .await;
    assert_eq!(next.status, 200, "{}", next.body);
}

/// Found by the conformance run on the generated per-pattern paths: an upper bound alone on a sort
/// template that starts with the bounded part (`products`: `{productId}`; `products_by_price`:
/// `{priceCents}#{productId}`; the native `locCity`) made the key condition `BETWEEN "" AND ...`,
/// and DynamoDB refuses an empty key value: a 500 instead of the items.
#[tokio::test]
async fn an_upper_bound_alone_on_a_leading_part_reads_from_the_start() {
    let h = Harness::new().await;
    let mut items = Vec::new();
    for (i, id) in ["0", "1", "2", "a"].iter().enumerate() {
        items.push(entity_item(
            "product",
            "t1",
            json!({"productId": id, "category": "books", "priceCents": i * 100}),
            &at(i),
            1,
        ));
    }
    for (i, city) in ["Austin", "Boston", "Chicago"].iter().enumerate() {
        items.push(entity_item(
            "store",
            "t1",
            json!({"storeId": format!("s{i}"), "country": "US", "region": "TX", "city": city}),
            &at(10 + i),
            1,
        ));
    }
    h.put_all(&items).await;
    let cases: [(&str, &str, &[&str]); 4] = [
        ("/query/products?to=1", "productId", &["0", "1"]),
        ("/query/products?before=1", "productId", &["0"]),
        (
            "/query/products_by_price?category=books&to=000000000100",
            "productId",
            &["0", "1"],
        ),
        (
            "/query/stores_in_region?country=US&region=TX&to=Boston",
            "city",
            &["Austin", "Boston"],
        ),
    ];
    for (target, attr, expected) in cases {
        for limit in [1, 100] {
            let pages = read_all(&h, &USER_T1, target, limit).await;
            let got: Vec<String> = pages
                .iter()
                .flatten()
                .map(|i| i["attributes"][attr].as_str().unwrap().to_string())
                .collect();
            assert_eq!(got, *expected, "{target} in pages of {limit}");
        }
    }
}
