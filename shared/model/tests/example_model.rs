//! The example model (`model.toml`) reproduces the exact key strings of the mbc-cqrs-serverless key
//! guide (with its tenants: `tenant001`, `common`) and the key-design guide's patterns (written there
//! without tenants; the model adds the tenant segment after the prefix). Index keys follow the whole
//! item: status moves and shards, sparse membership, unchanged parts kept.

use cqrs_model::{DerivedKeys, ItemView, KeyValue, Model, ValueRef};

const ULID: &str = "01HX7MBJK3V9WQBZ7XNDK5ZT2M";
const CREATED: &str = "2024-01-15T10:30:00.000Z";

fn model() -> &'static Model {
    static MODEL: std::sync::OnceLock<Model> = std::sync::OnceLock::new();
    MODEL.get_or_init(Model::example)
}

fn keys(entity: &str, tenant: &str, attrs: &[(&str, ValueRef<'_>)]) -> DerivedKeys {
    let model = model();
    let view = ItemView {
        tenant,
        created_at: CREATED,
        attributes: &attrs.to_vec(),
    };
    model.entity(entity).unwrap().derive(&view).unwrap()
}

fn s(v: &str) -> ValueRef<'_> {
    ValueRef::Str(v)
}

#[test]
fn mbc_pattern_1_simple_entity() {
    let k = keys("product", "tenant001", &[("productId", s(ULID))]);
    assert_eq!((k.pk.as_str(), k.sk.as_str()), ("PRODUCT#tenant001", ULID));
    assert_eq!(
        cqrs_keys::generate_id(&k.pk, &k.sk),
        format!("PRODUCT#tenant001#{ULID}")
    );
}

#[test]
fn mbc_pattern_2_hierarchy() {
    let order = keys(
        "order",
        "tenant001",
        &[
            ("orderId", s(ULID)),
            ("userId", s("u1")),
            ("status", s("PAID")),
        ],
    );
    assert_eq!(
        (order.pk.as_str(), order.sk.as_str()),
        ("ORDER#tenant001", format!("ORDER#{ULID}").as_str())
    );
    for (item, want) in [("001", "001"), ("002", "002")] {
        let k = keys(
            "order_item",
            "tenant001",
            &[
                ("orderId", s(ULID)),
                ("itemId", s(item)),
                ("productId", s("p1")),
                ("quantity", ValueRef::Num("1")),
            ],
        );
        assert_eq!(k.pk, "ORDER#tenant001");
        assert_eq!(k.sk, format!("ORDER_ITEM#{ULID}#{want}"));
    }
}

#[test]
fn mbc_pattern_3_user_with_auth_provider() {
    for provider in ["local", "sso", "oauth", "temp", "profile"] {
        let k = keys(
            "user_auth",
            "common",
            &[("provider", s(provider)), ("userId", s("abc123def456"))],
        );
        assert_eq!(k.pk, "USER#common");
        assert_eq!(k.sk, format!("{provider}#abc123def456"));
    }
}

#[test]
fn mbc_pattern_4_user_tenant_link() {
    let a = keys(
        "user_tenant",
        "common",
        &[("tenantCode", s("tenant001")), ("userId", s("user123"))],
    );
    let b = keys(
        "user_tenant",
        "common",
        &[("tenantCode", s("tenant002")), ("userId", s("user123"))],
    );
    assert_eq!(
        (a.pk.as_str(), a.sk.as_str()),
        ("USER_TENANT#common", "tenant001#user123")
    );
    assert_eq!(
        (b.pk.as_str(), b.sk.as_str()),
        ("USER_TENANT#common", "tenant002#user123")
    );
}

#[test]
fn mbc_pattern_5_master_data() {
    let attrs = |c, d| [("category", s(c)), ("code", s(d))];
    let setting = keys(
        "setting",
        "tenant001",
        &attrs("notification", "email_template"),
    );
    let data = keys(
        "master_data",
        "tenant001",
        &attrs("product_category", "electronics"),
    );
    let copy = keys("master_copy", "tenant001", &attrs("backup", "2024-01-01"));
    assert_eq!(setting.pk, cqrs_keys::master_pk(Some("tenant001")));
    assert_eq!(setting.sk, "SETTING#notification#email_template");
    assert_eq!(data.sk, "DATA#product_category#electronics");
    assert_eq!(copy.sk, "COPY#backup#2024-01-01");
}

#[test]
fn mbc_pattern_6_time_series() {
    let e1 = keys(
        "log",
        "tenant001",
        &[("at", s("2024-01-15T10:30:00Z")), ("eventId", s("evt001"))],
    );
    let e2 = keys(
        "log",
        "tenant001",
        &[
            ("at", s("2024-01-15T19:31:00+09:00")),
            ("eventId", s("evt002")),
        ],
    );
    assert_eq!(e1.pk, "LOG#tenant001#2024-01");
    assert_eq!(e1.sk, "2024-01-15T10:30:00.000Z#evt001");
    assert_eq!(e2.pk, "LOG#tenant001#2024-01");
    assert_eq!(e2.sk, "2024-01-15T10:31:00.000Z#evt002");
}

fn order(status: &str, user: &str) -> DerivedKeys {
    keys(
        "order",
        "t1",
        &[
            ("orderId", s(ULID)),
            ("userId", s(user)),
            ("status", s(status)),
        ],
    )
}

#[test]
fn guide_orders_of_a_user_and_the_inverted_index() {
    let k = order("PENDING", "u1");
    assert_eq!(k.index["gsi1pk"], KeyValue::S("USER#t1#u1".into()));
    assert_eq!(
        k.index["gsi1sk"],
        KeyValue::S(format!("ORDER#{CREATED}#{ULID}"))
    );
    assert_eq!(k.index["gsi3pk"], KeyValue::S(format!("ORDER#t1#{ULID}")));
    assert_eq!(k.index["gsi3sk"], KeyValue::S("USER#u1".into()));
}

#[test]
fn guide_status_index_is_sharded_by_item_id_and_sparse() {
    let pending = order("PENDING", "u1");
    let paid = order("PAID", "u1");
    let shard = cqrs_keys::shard_for_id(&format!("ORDER#t1#ORDER#{ULID}"), 10).unwrap();
    assert_eq!(
        pending.index["gsi2pk"],
        KeyValue::S(format!("STATUS#t1#PENDING#SHARD#{shard}"))
    );
    // A status change moves the item to the new status partition, on the same shard.
    assert_eq!(
        paid.index["gsi2pk"],
        KeyValue::S(format!("STATUS#t1#PAID#SHARD#{shard}"))
    );
    assert_eq!(pending.index["gsi2sk"], paid.index["gsi2sk"]);
    // Delivered orders leave the index: no key attribute at all, never an empty string.
    let delivered = order("DELIVERED", "u1");
    assert!(!delivered.index.contains_key("gsi2pk"));
    assert!(!delivered.index.contains_key("gsi2sk"));
    // A change of one part of a composite key keeps the others.
    let moved = order("PENDING", "u2");
    assert_eq!(moved.index["gsi1pk"], KeyValue::S("USER#t1#u2".into()));
    assert_eq!(moved.index["gsi1sk"], pending.index["gsi1sk"]);
    // Shards spread: 1,000 ids over 10 shards, every shard used.
    let mut used = std::collections::BTreeSet::new();
    for i in 0..1000 {
        let id = format!("o{i:04}");
        let k = keys(
            "order",
            "t1",
            &[
                ("orderId", s(&id)),
                ("userId", s("u")),
                ("status", s("PAID")),
            ],
        );
        used.insert(k.index["gsi2pk"].as_str().to_string());
    }
    assert_eq!(used.len(), 10);
}

#[test]
fn guide_product_index_and_zero_padded_prices() {
    let item = keys(
        "order_item",
        "t1",
        &[
            ("orderId", s("o1")),
            ("itemId", s("1")),
            ("productId", s("p9")),
            ("quantity", ValueRef::Num("2")),
        ],
    );
    assert_eq!(item.index["gsi4pk"], KeyValue::S("PRODUCT#t1#p9".into()));
    assert_eq!(item.index["gsi4sk"], KeyValue::S(format!("{CREATED}#o1#1")));
    let cheap = keys(
        "product",
        "t1",
        &[
            ("productId", s("a")),
            ("category", s("tea")),
            ("priceCents", ValueRef::Num("950")),
        ],
    );
    let dear = keys(
        "product",
        "t1",
        &[
            ("productId", s("b")),
            ("category", s("tea")),
            ("priceCents", ValueRef::Num("12000")),
        ],
    );
    assert_eq!(cheap.index["gsi5sk"], KeyValue::S("000000000950#a".into()));
    assert!(cheap.index["gsi5sk"] < dear.index["gsi5sk"]);
    // Without a category the product is not in the price index.
    let bare = keys("product", "t1", &[("productId", s("c"))]);
    assert!(bare.index.is_empty());
}

#[test]
fn guide_sensor_time_series() {
    let k = keys(
        "reading",
        "t1",
        &[
            ("sensorId", s("s-7")),
            ("readAt", s("2024-03-01T00:00:01.5Z")),
            ("value", ValueRef::Num("21.5")),
        ],
    );
    assert_eq!(k.pk, "SENSOR#t1#s-7");
    assert_eq!(k.sk, "READING#2024-03-01T00:00:01.500Z");
}

#[test]
fn guide_multi_attribute_location_keys_keep_each_attribute() {
    let k = keys(
        "store",
        "t1",
        &[
            ("storeId", s("st1")),
            ("country", s("us")),
            ("region", s("ca")),
            ("city", s("San Francisco")),
        ],
    );
    assert_eq!(k.index["locTenant"], KeyValue::S("t1".into()));
    assert_eq!(k.index["locCountry"], KeyValue::S("US".into()));
    assert_eq!(k.index["locRegion"], KeyValue::S("CA".into()));
    assert_eq!(k.index["locCity"], KeyValue::S("San Francisco".into()));
    assert_eq!(k.index["locStoreId"], KeyValue::S("st1".into()));
}

#[test]
fn values_that_would_break_a_key_name_the_attribute() {
    let model = Model::example();
    let order = model.entity("order").unwrap();
    for (attrs, name) in [
        (
            vec![
                ("orderId", s("a#b")),
                ("userId", s("u")),
                ("status", s("PAID")),
            ],
            "orderId",
        ),
        (
            vec![
                ("orderId", s("o")),
                ("userId", s("")),
                ("status", s("PAID")),
            ],
            "userId",
        ),
        (vec![("orderId", s("o")), ("status", s("PAID"))], "userId"),
        (
            vec![
                ("orderId", s("o")),
                ("userId", ValueRef::Num("1")),
                ("status", s("PAID")),
            ],
            "userId",
        ),
        (
            vec![
                ("orderId", s("o")),
                ("userId", s("u")),
                ("status", s("paid")),
            ],
            "status",
        ),
    ] {
        let view = ItemView {
            tenant: "t1",
            created_at: CREATED,
            attributes: &attrs,
        };
        assert_eq!(
            order.derive(&view).unwrap_err().attribute,
            name,
            "{attrs:?}"
        );
    }
    let long = "x".repeat(129);
    let attrs = vec![
        ("orderId", s("o")),
        ("userId", s(&long)),
        ("status", s("PAID")),
    ];
    let view = ItemView {
        tenant: "t1",
        created_at: CREATED,
        attributes: &attrs,
    };
    assert_eq!(order.derive(&view).unwrap_err().attribute, "userId");
}

#[test]
fn explicit_keys_are_matched_to_their_entity() {
    let model = Model::example();
    assert_eq!(
        model.entity_of_keys("PRODUCT#t1", ULID).unwrap().name,
        "product"
    );
    assert_eq!(
        model.entity_of_keys("MASTER#t1", "DATA#c#x").unwrap().name,
        "master_data"
    );
    assert_eq!(
        model.entity_of_keys("USER#common", "sso#u").unwrap().name,
        "user_auth"
    );
    assert!(model.entity_of_keys("USER#common", "nope#u").is_none());
    assert!(model.entity_of_keys("INVOICE#t1", "1").is_none());
}

/// The example keeps the per-tenant facts of `common` (users, user-tenant links) from every caller
/// but a global system_admin, and leaves master data and settings to everyone.
#[test]
fn the_example_restricts_users_and_links_and_leaves_master_data_to_everyone() {
    use cqrs_model::ReadRule;
    let model = Model::example();
    let restricted: Vec<&str> = model
        .entities()
        .iter()
        .filter(|e| e.read_rule() == ReadRule::SystemAdmin)
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(restricted, ["user_auth", "user_tenant"]);
    for pk in ["USER#common", "USER_TENANT#common"] {
        assert_eq!(model.partition_read_rule(pk), ReadRule::SystemAdmin, "{pk}");
    }
    for pk in [
        "MASTER#common",
        "MASTER#t1",
        "USER_TENANT#t1",
        "USER_TENANT#common#x",
        "PRODUCT#common",
    ] {
        assert_eq!(model.partition_read_rule(pk), ReadRule::Everyone, "{pk}");
    }
    let auth = model.pattern("auth_of_provider").unwrap();
    assert_eq!(model.pattern_read_rule(auth), ReadRule::SystemAdmin);
}
