//! Read semantics made exact, against DynamoDB Local:
//!
//! - an item whose `ttl` has passed is hidden from every read as soon as it passes (DynamoDB deletes
//!   it only within days): the latest state, partitions, versions, patterns, settings; pages stay
//!   full;
//! - a pattern's cursor is never followed by an empty page: a page that ends where the pattern ends
//!   answers a null cursor (a table, a GSI, a 10-shard fan-out, and the exact filter dropping the
//!   last entries the key condition reads);
//! - numbers in native number sort keys are merged across shards by exact decimal order.

mod common;

use std::collections::BTreeMap;

use common::*;
use cqrs_caller::CallerMode;
use cqrs_item::{Item, Number, Value as ItemValue};
use cqrs_model::{ItemView, KeyValue, Model, ValueRef};
use cqrs_query_handler::App;
use cqrs_store::{Store, Tables};
use serde_json::{Value, json};

/// Long past (2001-09-09): an expiry that has passed.
const PAST: i64 = 1_000_000_000;
/// Far ahead (2096-10-02): an expiry that has not.
const FUTURE: i64 = 4_000_000_000;

fn at(i: usize) -> String {
    format!(
        "2024-01-{:02}T{:02}:{:02}:{:02}.000Z",
        1 + i / 3600 % 28,
        i / 60 % 24,
        i % 60,
        i * 7 % 60
    )
}

fn order(i: usize, user: &str) -> Item {
    entity_item(
        "order",
        "t1",
        json!({"orderId": format!("o{i:04}"), "userId": user, "status": "PENDING", "totalCents": i}),
        &at(i),
        1,
    )
}

fn product(i: usize) -> Item {
    entity_item(
        "product",
        "t1",
        json!({"productId": format!("p{i:02}"), "category": "tools", "priceCents": i}),
        &at(i),
        1,
    )
}

fn expiring(mut item: Item, ttl: Option<i64>) -> Item {
    item.ttl = ttl;
    item
}

/// Reads a listing to its end in pages of `limit`; asserts every page before the last is full and
/// that no page after a non-null cursor is empty. Returns the pages' items.
async fn pages(h: &Harness, target: &str, limit: usize) -> Vec<Vec<Value>> {
    let mut pages: Vec<Vec<Value>> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            None => format!("{target}&limit={limit}"),
            Some(c) => format!("{target}&limit={limit}&cursor={c}"),
        };
        let answer = h.get(&USER_T1, &url).await;
        assert_eq!(answer.status, 200, "{url}: {}", answer.body);
        let items = answer.items().clone();
        assert!(items.len() <= limit, "{url}: over the limit");
        if !pages.is_empty() {
            assert!(
                !items.is_empty(),
                "{target} in pages of {limit}: page {} after a non-null cursor is empty",
                pages.len() + 1
            );
        }
        cursor = answer.cursor();
        if cursor.is_some() {
            assert_eq!(items.len(), limit, "{url}: a page before the last is full");
        }
        pages.push(items);
        if cursor.is_none() {
            return pages;
        }
        assert!(pages.len() < 1000, "the cursors never end");
    }
}

fn attr(items: &[Vec<Value>], name: &str) -> Vec<String> {
    items
        .iter()
        .flatten()
        .map(|i| i["attributes"][name].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn expired_items_are_hidden_from_every_read() {
    let h = Harness::new().await;
    // Products p00..p08: p00, p03, p06 and the last two expired; p01 expires far ahead.
    let expired = |i: usize| [0, 3, 6, 7, 8].contains(&i);
    let products: Vec<Item> = (0..9)
        .map(|i| {
            let ttl = if expired(i) {
                Some(PAST)
            } else if i == 1 {
                Some(FUTURE)
            } else {
                None
            };
            expiring(product(i), ttl)
        })
        .collect();
    h.put_all(&products).await;
    let mut failures = Vec::new();

    // The latest state.
    let gone = h.get(&USER_T1, "/items/PRODUCT%23t1/p00").await;
    if gone.status != 404 {
        failures.push(format!("GET an expired item: {}", gone.status));
    }
    let live = h.get(&USER_T1, "/items/PRODUCT%23t1/p01").await;
    assert_eq!(live.status, 200, "{}", live.body);
    // Read-your-writes from the command table: an expired command version is as absent.
    let mut command = expiring(version_item("PRODUCT#t1", "p00", 1, false), Some(PAST));
    command.entity = Some("product".into());
    h.put_command(&command).await;
    let gone = h
        .get(&USER_T1, "/items/PRODUCT%23t1/p00?minVersion=1")
        .await;
    if gone.status != 404 {
        failures.push(format!(
            "GET an expired item with minVersion: {}",
            gone.status
        ));
    }

    // A partition, in pages of 2: full pages, no expired item, no empty last page.
    let want: Vec<String> = ["p01", "p02", "p04", "p05"].map(String::from).to_vec();
    let listed = pages(&h, "/items/PRODUCT%23t1?order=asc", 2).await;
    let got: Vec<String> = listed
        .iter()
        .flatten()
        .map(|i| i["sk"].as_str().unwrap().to_string())
        .collect();
    if got != want {
        failures.push(format!("GET /items/PRODUCT#t1: {got:?}"));
    }

    // A table pattern.
    let listed = pages(&h, "/query/products?order=asc", 2).await;
    let got = attr(&listed, "productId");
    if got != want {
        failures.push(format!("GET /query/products: {got:?}"));
    }

    // A 10-shard index pattern: every third order expired, and the last ones.
    let orders: Vec<Item> = (0..30)
        .map(|i| {
            let ttl = (i % 3 == 0 || i >= 27).then_some(PAST);
            expiring(order(i, "alice"), ttl)
        })
        .collect();
    let want: Vec<String> = (0..30)
        .filter(|i| !(i % 3 == 0 || *i >= 27))
        .map(|i| format!("o{i:04}"))
        .collect();
    h.put_all(&orders).await;
    for target in [
        "/query/orders_by_status?status=PENDING",
        "/query/orders_of_user?userId=alice&order=asc",
    ] {
        let listed = pages(&h, target, 6).await;
        let got = attr(&listed, "orderId");
        if got != want {
            failures.push(format!("GET {target}: {got:?}"));
        }
    }

    // Versions: 1 (no ttl), 2 (expired), 3 (far ahead), 4 (expired), 5 (no ttl).
    for v in 1..=5 {
        let ttl = match v {
            2 | 4 => Some(PAST),
            3 => Some(FUTURE),
            _ => None,
        };
        h.put_history(&expiring(version_item("PRODUCT#t1", "pv", v, false), ttl))
            .await;
    }
    let listed = pages(&h, "/items/PRODUCT%23t1/pv/versions?order=desc", 2).await;
    let versions: Vec<i64> = listed
        .iter()
        .flatten()
        .map(|i| i["version"].as_i64().unwrap())
        .collect();
    if versions != [5, 3, 1] {
        failures.push(format!("GET versions: {versions:?}"));
    }
    let gone = h.get(&USER_T1, "/items/PRODUCT%23t1/pv/versions/2").await;
    if gone.status != 404 {
        failures.push(format!("GET an expired version: {}", gone.status));
    }
    let live = h.get(&USER_T1, "/items/PRODUCT%23t1/pv/versions/3").await;
    assert_eq!(live.status, 200, "{}", live.body);
    // Every version expired: no versions.
    h.put_history(&expiring(
        version_item("PRODUCT#t1", "pw", 1, false),
        Some(PAST),
    ))
    .await;
    let none = h.get(&USER_T1, "/items/PRODUCT%23t1/pw/versions").await;
    if none.status != 404 {
        failures.push(format!(
            "GET versions, all expired: {} {}",
            none.status, none.body
        ));
    }

    // Settings: the tenant's expired value is absent, so common's applies; both expired: 404.
    let setting = |tenant: &str, value: &str, ttl| {
        expiring(
            entity_item(
                "setting",
                tenant,
                json!({"category": "ui", "code": "theme", "value": value}),
                &at(1),
                1,
            ),
            ttl,
        )
    };
    h.put_all(&[
        setting("t1", "dark", Some(PAST)),
        setting("common", "light", None),
    ])
    .await;
    let answer = h.get(&USER_T1, "/settings/ui/theme").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    if answer.body["source"] != "common" {
        failures.push(format!(
            "GET /settings/ui/theme with an expired tenant value: source {}",
            answer.body["source"]
        ));
    }
    h.put_all(&[setting("common", "light", Some(PAST))]).await;
    let answer = h.get(&USER_T1, "/settings/ui/theme").await;
    if answer.status != 404 {
        failures.push(format!(
            "GET /settings/ui/theme, both expired: {} {}",
            answer.status, answer.body["item"]["attributes"]
        ));
    }

    for failure in &failures {
        println!("shown although expired: {failure}");
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test]
async fn a_cursor_is_never_followed_by_an_empty_page() {
    let h = Harness::new().await;
    let products: Vec<Item> = (0..12).map(product).collect();
    let orders: Vec<Item> = (0..40).map(|i| order(i, "bob")).collect();
    h.put_all(&products).await;
    h.put_all(&orders).await;
    // Settings of categories s and t, then u: `before=u` reads u's too (the key condition cannot
    // express an exclusive bound) and the exact filter drops them, at the end of the read.
    let mut settings = Vec::new();
    for (c, category) in ["s", "t", "u"].iter().enumerate() {
        for code in 0..4 {
            settings.push(entity_item(
                "setting",
                "t1",
                json!({"category": category, "code": format!("c{code}"), "value": "v"}),
                &at(c * 4 + code),
                1,
            ));
        }
    }
    h.put_all(&settings).await;
    let product_ids: Vec<String> = (0..12).map(|i| format!("p{i:02}")).collect();
    let order_ids: Vec<String> = (0..40).map(|i| format!("o{i:04}")).collect();
    let setting_codes: Vec<String> = ["s", "t"]
        .iter()
        .flat_map(|c| (0..4).map(move |code| format!("{c}/c{code}")))
        .collect();
    for limit in [1, 2, 4, 6, 12] {
        let listed = pages(&h, "/query/products?order=asc", limit).await;
        assert_eq!(
            attr(&listed, "productId"),
            product_ids,
            "products / {limit}"
        );
    }
    for limit in [4, 5, 8, 10, 20, 40] {
        for target in [
            "/query/orders_of_user?userId=bob&order=asc",
            "/query/orders_by_status?status=PENDING",
        ] {
            let listed = pages(&h, target, limit).await;
            assert_eq!(attr(&listed, "orderId"), order_ids, "{target} / {limit}");
        }
    }
    for limit in [1, 2, 4, 8] {
        let listed = pages(&h, "/query/settings?before=u", limit).await;
        let got: Vec<String> = listed
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
        assert_eq!(got, setting_codes, "settings before=u / {limit}");
    }
}

/// A sharded native multi-attribute index whose sort key is a native number.
const NUMBER_MODEL: &str = r#"
[indexes.byamount]
pk = [{ name = "amTenant", type = "S" }, { name = "amShard", type = "N" }]
sk = [{ name = "amAmount", type = "N" }]
projection = "all"

[entities.payment]
pk = "PAYMENT#{tenant}"
sk = "{paymentId}"
id = "paymentId"
attributes.paymentId = { type = "string", max = 26 }
attributes.amount = { type = "number", required = true }
indexes.byamount = { pk = ["{tenant}", "{shard:10}"], sk = ["{amount}"] }

[patterns.payments_by_amount]
entity = "payment"
index = "byamount"
description = "payments by amount, over 10 shards"
"#;

/// A handler serving `model` on fresh tables whose data table has the model's indexes.
async fn harness_with(model: Model) -> Harness {
    let mut tables = cqrs_testkit::fresh_tables().await;
    let yaml = format!(
        "Resources:\n  DataTable:\n    Type: AWS::DynamoDB::Table\n    Properties:\n      BillingMode: PAY_PER_REQUEST\n{}",
        model.data_table_yaml()
    );
    let specs = cqrs_testkit::template::parse_template(&yaml).expect("the model's data table");
    let data = format!("{}-model", tables.data);
    cqrs_testkit::tables::create_table(&tables.client, &specs[0], &data)
        .await
        .expect("the model's data table is created");
    tables.data = data;
    let store = Store::new(
        tables.client.clone(),
        Tables::new(
            &tables.command,
            &tables.data,
            &tables.history,
            &tables.idempotency,
        ),
    );
    Harness {
        app: App::with_model(store, CallerMode::Jwt, model),
        tables,
    }
}

/// The data-table item of a payment, keys derived by `model`.
fn payment(model: &Model, id: &str, amount: &str) -> (Item, String) {
    let attrs = [
        ("paymentId", ValueRef::Str(id)),
        ("amount", ValueRef::Num(amount)),
    ];
    let keys = model
        .entity("payment")
        .unwrap()
        .derive(&ItemView {
            tenant: "t1",
            created_at: "2024-01-15T10:30:00.000Z",
            attributes: &attrs,
        })
        .unwrap();
    let shard = keys.index["amShard"].as_str().to_string();
    let mut item = version_item(&keys.pk, &keys.sk, 1, false);
    item.item_type = "PAYMENT".into();
    item.attributes =
        cqrs_item::parse_json(&format!(r#"{{"paymentId": "{id}", "amount": {amount}}}"#))
            .unwrap()
            .as_map()
            .unwrap()
            .clone();
    item.entity = Some("payment".into());
    item.model_revision = Some(model.revision().to_string());
    item.index_keys = keys
        .index
        .into_iter()
        .map(|(name, value)| match value {
            KeyValue::S(s) => (name, ItemValue::String(s)),
            KeyValue::N(n) => (name, ItemValue::Number(Number::parse(&n).unwrap())),
        })
        .collect();
    (item.into_data_item(), shard)
}

#[tokio::test]
async fn sharded_number_sort_keys_merge_in_exact_decimal_order() {
    let model = Model::parse(NUMBER_MODEL).expect("the test model checks");
    let h = harness_with(model.clone()).await;
    // Pairs an f64 cannot tell apart, smaller first; the larger of each pair is put on a lower
    // shard than the smaller, so a tie broken by shard puts it first.
    let pairs = [
        ("-12345678901234567890.2", "-12345678901234567890.1"),
        ("9007199254740992", "9007199254740993"),
        ("12345678901234567890.1", "12345678901234567890.2"),
        (
            "12345678901234567890123456789012345678",
            "12345678901234567890123456789012345679",
        ),
        (
            "1.00000000000000000000000000000000000E+125",
            "1.00000000000000000000000000000000001E+125",
        ),
    ];
    let mut next_id = 0;
    let mut fresh = |amount: &str, shard_ok: &dyn Fn(u32) -> bool| loop {
        let id = format!("pay{next_id:04}");
        next_id += 1;
        let (item, shard) = payment(&model, &id, amount);
        let shard: u32 = shard.parse().unwrap();
        if shard_ok(shard) {
            return (id, item, shard);
        }
    };
    let mut items = Vec::new();
    let mut want = Vec::new();
    for (small, large) in pairs {
        let (small_id, small_item, small_shard) = fresh(small, &|s| s > 0);
        let (large_id, large_item, _) = fresh(large, &|s| s < small_shard);
        items.extend([small_item, large_item]);
        want.extend([small_id, large_id]);
    }
    h.put_all(&items).await;
    let mut got = Vec::new();
    for limit in [1, 3, 10] {
        let listed = pages(&h, "/query/payments_by_amount?order=asc", limit).await;
        got = attr(&listed, "paymentId");
        println!("pages of {limit}: {got:?}");
        assert_eq!(got, want, "ascending, pages of {limit}");
        let listed = pages(&h, "/query/payments_by_amount?order=desc", limit).await;
        let mut reversed = attr(&listed, "paymentId");
        reversed.reverse();
        assert_eq!(reversed, want, "descending, pages of {limit}");
    }
    let amounts: BTreeMap<String, String> = items
        .iter()
        .map(|i| {
            (
                i.attributes["paymentId"].as_str().unwrap().to_string(),
                i.attributes["amount"].as_number().unwrap().to_string(),
            )
        })
        .collect();
    println!(
        "amounts in answer order: {:?}",
        got.iter().map(|id| &amounts[id]).collect::<Vec<_>>()
    );
}
