//! What each access pattern of the example model reads, and what a request can never make it read.

use cqrs_model::{KeyValue, Model, SortOp};

fn s(text: &str) -> KeyValue {
    KeyValue::S(text.into())
}

const MAX: char = '\u{10FFFF}';

#[test]
fn every_example_pattern_plans_a_query() {
    let model = Model::example();
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("products", &[]),
        ("orders", &[]),
        ("products_by_price", &[("category", "tools")]),
        ("orders_of_user", &[("userId", "u1")]),
        ("orders_by_status", &[("status", "PENDING")]),
        ("user_of_order", &[("orderId", "o1")]),
        ("order_with_items", &[("orderId", "o1")]),
        ("items_of_order", &[("orderId", "o1")]),
        ("orders_of_product", &[("productId", "p1")]),
        ("auth_of_provider", &[("provider", "sso")]),
        ("settings", &[("category", "mail")]),
        ("master_data", &[("category", "unit")]),
        ("events_of_month", &[("at", "2024-01")]),
        ("readings_of_sensor", &[("sensorId", "s1")]),
        ("stores_in_region", &[("country", "US"), ("region", "CA")]),
    ];
    assert_eq!(cases.len(), model.patterns().len(), "a case per pattern");
    for (name, params) in cases {
        let q = model
            .query(name, "t1", params)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(q.pattern.name, *name);
        assert!(!q.partitions.is_empty());
    }
}

#[test]
fn the_tenant_always_comes_from_the_caller() {
    let model = Model::example();
    let q = model
        .query("orders_of_user", "t2", &[("userId", "u1")])
        .unwrap();
    assert_eq!(q.partitions, [vec![s("USER#t2#u1")]]);
    let e = model
        .query(
            "orders_of_user",
            "t2",
            &[("userId", "u1"), ("tenant", "t1")],
        )
        .unwrap_err();
    assert_eq!(e.param, "tenant");
    // A common entity's partition is `common`'s for every caller.
    let q = model
        .query("auth_of_provider", "t2", &[("provider", "sso")])
        .unwrap();
    assert_eq!(q.partitions, [vec![s("USER#common")]]);
    assert_eq!(q.sort.unwrap().op, SortOp::BeginsWith("sso#".into()));
}

#[test]
fn sharded_partitions_are_one_per_shard() {
    let model = Model::example();
    let q = model
        .query("orders_by_status", "t1", &[("status", "PAID")])
        .unwrap();
    assert!(q.is_sharded());
    let expected: Vec<Vec<KeyValue>> = (0..10)
        .map(|i| vec![s(&format!("STATUS#t1#PAID#SHARD#{i}"))])
        .collect();
    assert_eq!(q.partitions, expected);
    // gsi2's sort key is `{createdAt}#{orderId}`: no literal prefix, no condition.
    assert_eq!(q.sort, None);
    // An enum value outside the model is refused before any read.
    assert_eq!(
        model
            .query("orders_by_status", "t1", &[("status", "LOST")])
            .unwrap_err()
            .param,
        "status"
    );
}

#[test]
fn a_sort_prefix_ends_on_a_whole_part() {
    let model = Model::example();
    let q = model
        .query("items_of_order", "t1", &[("orderId", "1")])
        .unwrap();
    let op = q.sort.clone().unwrap().op;
    assert_eq!(op, SortOp::BeginsWith("ORDER_ITEM#1#".into()));
    assert!(q.in_range(&[s("ORDER_ITEM#1#001")]));
    assert!(!q.in_range(&[s("ORDER_ITEM#10#001")]));
    // Every part given: one item.
    let q = model
        .query(
            "items_of_order",
            "t1",
            &[("orderId", "1"), ("itemId", "001")],
        )
        .unwrap();
    assert_eq!(q.sort.unwrap().op, SortOp::Equal(s("ORDER_ITEM#1#001")));
    // A later part without the one before it names the missing one.
    let q = model
        .query("items_of_order", "t1", &[("itemId", "001")])
        .unwrap_err();
    assert_eq!(q.param, "itemId");
    assert!(q.message.contains("orderId"), "{q}");
}

#[test]
fn ranges_bound_the_first_open_part() {
    let model = Model::example();
    let reading = model.entity("reading").unwrap();
    let pk = [s("SENSOR#t1#s1")];
    let at = |t: &str| [s(&format!("READING#{t}"))];
    let q = model
        .query(
            "readings_of_sensor",
            "t1",
            &[
                ("sensorId", "s1"),
                ("from", "2024-01-15T10:00:00Z"),
                ("to", "2024-01-15T11:00:00Z"),
            ],
        )
        .unwrap();
    assert_eq!(
        q.sort.clone().unwrap().op,
        SortOp::Between(
            "READING#2024-01-15T10:00:00.000Z".into(),
            format!("READING#2024-01-15T11:00:00.000Z{MAX}")
        )
    );
    assert_eq!(
        q.matches(reading, &pk, &at("2024-01-15T10:00:00.000Z")),
        Some(0)
    );
    assert_eq!(
        q.matches(reading, &pk, &at("2024-01-15T11:00:00.000Z")),
        Some(0)
    );
    assert_eq!(
        q.matches(reading, &pk, &at("2024-01-15T11:00:00.001Z")),
        None
    );
    assert_eq!(
        q.matches(reading, &pk, &at("2024-01-15T09:59:59.999Z")),
        None
    );
    // Another sensor's partition never matches.
    assert_eq!(
        q.matches(
            reading,
            &[s("SENSOR#t1#s2")],
            &at("2024-01-15T10:30:00.000Z")
        ),
        None
    );

    // A shortened period holds all of it.
    let q = model
        .query(
            "readings_of_sensor",
            "t1",
            &[("sensorId", "s1"), ("to", "2024-01-15")],
        )
        .unwrap();
    assert_eq!(
        q.matches(reading, &pk, &at("2024-01-15T23:59:59.999Z")),
        Some(0)
    );
    assert_eq!(
        q.matches(reading, &pk, &at("2024-01-16T00:00:00.000Z")),
        None
    );
    let q = model
        .query(
            "readings_of_sensor",
            "t1",
            &[("sensorId", "s1"), ("before", "2024-01-15")],
        )
        .unwrap();
    assert_eq!(
        q.matches(reading, &pk, &at("2024-01-14T23:59:59.999Z")),
        Some(0)
    );
    assert_eq!(
        q.matches(reading, &pk, &at("2024-01-15T00:00:00.000Z")),
        None
    );

    // The pattern allows ranges only: readAt is the range's target, not a prefix.
    let e = model
        .query(
            "readings_of_sensor",
            "t1",
            &[("sensorId", "s1"), ("readAt", "2024-01-15T10:00:00Z")],
        )
        .unwrap_err();
    assert_eq!(e.param, "readAt");
}

#[test]
fn bad_ranges_name_the_parameter() {
    let model = Model::example();
    let base = ("sensorId", "s1");
    for (params, bad) in [
        (vec![base, ("from", "yesterday")], "from"),
        (vec![base, ("from", "2024-13")], "from"),
        (vec![base, ("to", "2024-02-30")], "to"),
        (
            vec![base, ("from", "2024-02-01"), ("to", "2024-01-01")],
            "from",
        ),
        (
            vec![base, ("from", "2024-01-01"), ("after", "2024-01-02")],
            "from",
        ),
        (
            vec![base, ("to", "2024-01-01"), ("before", "2024-01-02")],
            "to",
        ),
        (vec![base, ("limit", "3")], "limit"),
        (vec![base, ("sensorId", "s2")], "sensorId"),
    ] {
        let e = model
            .query("readings_of_sensor", "t1", &params)
            .unwrap_err();
        assert_eq!(e.param, bad, "{params:?}: {e}");
    }
    // A complete sort key has nothing left to bound.
    let e = model
        .query(
            "items_of_order",
            "t1",
            &[("orderId", "o1"), ("itemId", "001"), ("from", "002")],
        )
        .unwrap_err();
    assert_eq!(e.param, "from");
    // A value that would break the key.
    for bad in ["a#b", "a@b", ""] {
        let e = model
            .query("orders_of_user", "t1", &[("userId", bad)])
            .unwrap_err();
        assert_eq!(e.param, "userId", "{bad:?}");
    }
}

#[test]
fn a_bucketed_partition_takes_a_timestamp_or_its_period() {
    let model = Model::example();
    for at in ["2024-01", "2024-01-15T10:30:00Z"] {
        let q = model.query("events_of_month", "t1", &[("at", at)]).unwrap();
        assert_eq!(q.partitions, [vec![s("LOG#t1#2024-01")]]);
        assert_eq!(q.sort, None, "the month does not narrow the sort key");
    }
    let q = model
        .query(
            "events_of_month",
            "t1",
            &[("at", "2024-01"), ("from", "2024-01-10")],
        )
        .unwrap();
    assert_eq!(
        q.sort.unwrap().op,
        SortOp::Between("2024-01-10".into(), MAX.to_string())
    );
}

#[test]
fn collections_read_the_shared_partition() {
    let model = Model::example();
    let q = model
        .query("order_with_items", "t1", &[("orderId", "o1")])
        .unwrap();
    assert_eq!(q.partitions, [vec![s("ORDER#t1#o1")]]);
    assert_eq!(q.sort, None, "USER# and ITEM# share no prefix");
    let order = model.entity("order").unwrap();
    let item = model.entity("order_item").unwrap();
    let product = model.entity("product").unwrap();
    let pk = [s("ORDER#t1#o1")];
    assert_eq!(q.matches(order, &pk, &[s("USER#u1")]), Some(0));
    assert_eq!(q.matches(item, &pk, &[s("ITEM#001")]), Some(0));
    assert_eq!(q.matches(product, &pk, &[s("ITEM#001")]), None);
}

#[test]
fn native_multi_attribute_keys_follow_dynamodb_rules() {
    let model = Model::example();
    let q = model
        .query(
            "stores_in_region",
            "t1",
            &[("country", "us"), ("region", "ca"), ("city", "Oakland")],
        )
        .unwrap();
    assert_eq!(q.partitions, [vec![s("t1"), s("US"), s("CA")]]);
    // City fixed: equality on locCity; locStoreId is open and unbounded.
    assert_eq!(q.sort_equal, [s("Oakland")]);
    assert_eq!(q.sort, None);
    assert!(q.in_range(&[s("Oakland"), s("st1")]));
    assert!(!q.in_range(&[s("Oaklandia"), s("st1")]));
    // Every partition attribute is required.
    let e = model
        .query("stores_in_region", "t1", &[("country", "US")])
        .unwrap_err();
    assert_eq!(e.param, "region");
}

#[test]
fn fingerprints_bind_pattern_parameters_and_tenant() {
    let model = Model::example();
    let a = model
        .query("orders_of_user", "t1", &[("userId", "u1")])
        .unwrap();
    let same = model
        .query("orders_of_user", "t1", &[("userId", "u1")])
        .unwrap();
    let other_user = model
        .query("orders_of_user", "t1", &[("userId", "u2")])
        .unwrap();
    let other_tenant = model
        .query("orders_of_user", "t2", &[("userId", "u1")])
        .unwrap();
    assert_eq!(a.fingerprint(), same.fingerprint());
    assert_ne!(a.fingerprint(), other_user.fingerprint());
    assert_ne!(a.fingerprint(), other_tenant.fingerprint());
    assert_eq!(
        a.entity_of_table_key("ORDER#t1", "ORDER#o1")
            .map(|e| e.name.as_str()),
        Some("order")
    );
    assert!(a.entity_of_table_key("ORDER#t2", "ORDER#o1").is_none());
    assert!(a.entity_of_table_key("PRODUCT#t1", "p1").is_none());
}
