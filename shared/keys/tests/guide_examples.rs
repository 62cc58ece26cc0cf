//! Every applicable example of the key guides, as a test.
//!
//! Sources (each test names its own):
//! * [KP] mbc-cqrs-serverless docs, "Key Design Patterns"
//!   (https://mbc-cqrs-serverless.mbc-net.com/docs/key-patterns; Japanese
//!   version "キー設計パターン" at /ja/docs/key-patterns, same examples), from
//!   mbc-net/mbc-cqrs-serverless-doc `i18n/{en,ja}/.../key-patterns.md`;
//! * [HF] mbc-cqrs-serverless docs, "Helper Functions" / "ヘルパー関数"
//!   (/docs/helper-functions, /ja/docs/helper-functions);
//! * [TS] mbc-net/mbc-cqrs-serverless `packages/core/src/helpers/key.ts` and
//!   `key.spec.ts`;
//! * [DDB-*] gxclarke/ddb-lib pattern pages `docs/content/patterns/*.md` and
//!   `packages/core/src/pattern-helpers.test.ts`.
//!
//! Deliberate differences from a source are marked "DIFFERENCE".

use chrono::{TimeZone, Utc};
use cqrs_keys::*;

const ULID: &str = "01HX7MBJK3V9WQBZ7XNDK5ZT2M";

// ------------------------------------------------------------------ [KP]

/// [KP] "Framework Constants" table.
#[test]
fn kp_framework_constants() {
    assert_eq!(KEY_SEPARATOR, '#');
    assert_eq!(VER_SEPARATOR, '@');
    assert_eq!(VERSION_FIRST, 0);
    assert_eq!(VERSION_LATEST, -1);
    assert_eq!(TENANT_COMMON, "common");
    assert_eq!(DEFAULT_TENANT_CODE, "single");
}

/// [KP] "Built-in Key Generators".
#[test]
fn kp_built_in_key_generators() {
    assert_eq!(master_pk(Some("tenant001")), "MASTER#tenant001");
    assert_eq!(master_pk(None), "MASTER#single");
    assert_eq!(seq_pk(Some("tenant001")), "SEQ#tenant001");
    assert_eq!(ttl_sk("product"), "TTL#product");
}

/// [KP] "Generating Keys": PRODUCT#tenant001, a ULID sort key, and the id.
#[test]
fn kp_generating_keys() {
    let pk = format!("PRODUCT{KEY_SEPARATOR}tenant001");
    assert_eq!(pk, "PRODUCT#tenant001");
    assert_eq!(
        generate_id(&pk, ULID),
        "PRODUCT#tenant001#01HX7MBJK3V9WQBZ7XNDK5ZT2M"
    );
    // `ulid()` gives a 26-character ULID.
    assert_eq!(new_ulid().len(), ULID.len());
}

/// [KP] "Version Handling".
#[test]
fn kp_version_handling() {
    let sk_with_version = add_sort_key_version(ULID, 3);
    assert_eq!(sk_with_version, "01HX7MBJK3V9WQBZ7XNDK5ZT2M@3");
    assert_eq!(remove_sort_key_version(&sk_with_version), ULID);
    assert_eq!(sort_key_version(&sk_with_version), 3);
    assert_eq!(sort_key_version(ULID), -1);
    assert_eq!(sort_key_version(ULID), VERSION_LATEST);
}

/// [KP] "Tenant Code Extraction".
#[test]
fn kp_tenant_code_extraction() {
    assert_eq!(tenant_code("PRODUCT#tenant001"), Some("tenant001"));
    assert_eq!(tenant_code("PRODUCT"), None);
}

/// [KP] "Version Management": command-table sort keys carry `@n`, the data
/// table's does not.
#[test]
fn kp_version_management() {
    let base = "ORDER#01HX7MBJK3V9WQBZ7XNDK5ZT2M";
    for v in 1..=3 {
        let sk = add_sort_key_version(base, v);
        assert_eq!(sk, format!("{base}@{v}"));
        assert_eq!(remove_sort_key_version(&sk), base);
        assert_eq!(parse_sort_key_version(&sk).unwrap(), (base, Some(v)));
    }
    assert_eq!(
        add_sort_key_version(base, VERSION_FIRST),
        format!("{base}@0")
    );
}

/// [KP] Anti-pattern 4, "Version Suffix in Data Operations".
#[test]
fn kp_anti_pattern_version_suffix() {
    assert_eq!(
        remove_sort_key_version("01HX7MBJK3V9WQBZ7XNDK5ZT2M@3"),
        ULID
    );
}

/// [KP] Best practice 5 / anti-pattern: `PRODUCT` alone has no tenant.
#[test]
fn kp_include_tenant_in_pk() {
    assert!(validate_partition_key("PRODUCT#tenant001").is_ok());
    assert!(validate_partition_key("PRODUCT").is_err());
}

/// [KP] Anti-pattern 3, "Inconsistent Separators": the better key.
#[test]
fn kp_consistent_separators() {
    assert_eq!(
        composite_key(&["ORDER", "01HX7M", "ITEM", "001"]).unwrap(),
        "ORDER#01HX7M#ITEM#001"
    );
}

// ------------------------------------------------------------------ [HF]

/// [HF] `addSortKeyVersion('CAT#001', 1)`.
#[test]
fn hf_add_sort_key_version() {
    assert_eq!(add_sort_key_version("CAT#001", 1), "CAT#001@1");
}

/// [HF] `getSortKeyVersion`. DIFFERENCE (of the English page from the
/// source): it says a bare key gives `Number.MAX_SAFE_INTEGER`; the Japanese
/// page, the key guide and `key.ts` say `VERSION_LATEST` = -1, which we follow.
#[test]
fn hf_get_sort_key_version() {
    assert_eq!(sort_key_version("CAT#001@3"), 3);
    assert_eq!(sort_key_version("CAT#001"), VERSION_LATEST);
}

/// [HF] `removeSortKeyVersion('CAT#001@3')`.
#[test]
fn hf_remove_sort_key_version() {
    assert_eq!(remove_sort_key_version("CAT#001@3"), "CAT#001");
}

/// [HF] `generateId('TENANT#mbc', 'CAT#001@3')`.
#[test]
fn hf_generate_id() {
    assert_eq!(generate_id("TENANT#mbc", "CAT#001@3"), "TENANT#mbc#CAT#001");
}

/// [HF] `getTenantCode('TENANT#mbc')`.
#[test]
fn hf_get_tenant_code() {
    assert_eq!(tenant_code("TENANT#mbc"), Some("mbc"));
}

/// [HF] `masterPk('mbc')`, `masterPk()`. DIFFERENCE (of the English page
/// from the source): it says `masterPk()` is `MASTER#COMMON`; the Japanese
/// page and `key.ts` (`tenantCode || DEFAULT_TENANT_CODE`) give
/// `MASTER#single`, which we follow.
#[test]
fn hf_master_pk() {
    assert_eq!(master_pk(Some("mbc")), "MASTER#mbc");
    assert_eq!(master_pk(None), "MASTER#single");
}

/// [HF] `seqPk('mbc')`.
#[test]
fn hf_seq_pk() {
    assert_eq!(seq_pk(Some("mbc")), "SEQ#mbc");
}

/// [HF] `serializeToExternal` example entity: pk, sk, id and tenantCode agree.
#[test]
fn hf_serializer_entity_keys() {
    assert_eq!(generate_id("TENANT#mbc", "CAT#001"), "TENANT#mbc#CAT#001");
    assert_eq!(tenant_code("TENANT#mbc"), Some("mbc"));
}

// ------------------------------------------------------------------ [TS]

/// [TS] key.spec.ts: "should split type#tenant and sk with extra hashes".
#[test]
fn ts_parse_two_segment_id() {
    let pk = "USER_TENANT#tenant-A";
    let sk_base = "USER_TENANT#item-1";
    let id = generate_id(pk, sk_base);
    assert_eq!(split_id(&id), Some((pk, sk_base)));
}

/// [TS] key.spec.ts: "should return undefined when fewer than 3 segments".
#[test]
fn ts_parse_id_too_few_segments() {
    assert_eq!(split_id("ONLY"), None);
    assert_eq!(split_id("A#B"), None);
}

/// [TS] key.spec.ts: "should match sortKeyBaseFromId when pk is known".
#[test]
fn ts_split_id_matches_sort_key_base_from_id() {
    let pk = "SEQ#tenant-x";
    let id = generate_id(pk, "FOO#BAR#baz");
    assert_eq!(
        split_id(&id).map(|(_, sk)| sk),
        sort_key_base_from_id(pk, &id)
    );
    assert_eq!(sort_key_base_from_id(pk, &id), Some("FOO#BAR#baz"));
}

/// [TS] key.ts `addSortKeyVersion` removes an existing version first.
#[test]
fn ts_add_replaces_version() {
    assert_eq!(add_sort_key_version("CAT#001@4", 5), "CAT#001@5");
}

/// [TS] key.ts `removeSortKeyVersion` / `getSortKeyVersion` without `@`.
#[test]
fn ts_no_version() {
    assert_eq!(remove_sort_key_version("CAT#001"), "CAT#001");
    assert_eq!(sort_key_version("CAT#001"), VERSION_LATEST);
}

/// [TS] key.ts cuts at the *last* `@`: `a@b@3` has base `a@b`.
/// DIFFERENCE: key.ts also cuts when the suffix is not a number
/// (`CAT#001@x` -> `CAT#001`, version NaN); we keep such a key whole and
/// give VERSION_LATEST, and the strict parser refuses it.
#[test]
fn ts_several_at_signs() {
    assert_eq!(remove_sort_key_version("a@b@3"), "a@b");
    assert_eq!(sort_key_version("a@b@3"), 3);
    assert_eq!(remove_sort_key_version("CAT#001@x"), "CAT#001@x");
    assert_eq!(sort_key_version("CAT#001@x"), VERSION_LATEST);
    assert!(parse_sort_key_version("CAT#001@x").is_err());
}

/// [TS] key.ts `masterPk`/`seqPk` use `tenantCode || DEFAULT_TENANT_CODE`,
/// so an empty tenant also gives the default.
#[test]
fn ts_empty_tenant_defaults() {
    assert_eq!(master_pk(Some("")), "MASTER#single");
    assert_eq!(seq_pk(Some("")), "SEQ#single");
}

/// [TS] key.ts `getTenantCode` takes the text after the last `#`.
/// DIFFERENCE: for three-segment keys that is not the tenant
/// (`LOG#t1#2024-01` would give `2024-01`); we take the segment after the
/// prefix. Two-segment keys agree.
#[test]
fn ts_tenant_code_multi_segment() {
    assert_eq!(tenant_code("LOG#t1#2024-01"), Some("t1"));
    assert_eq!(tenant_code("PRODUCT#tenant001"), Some("tenant001"));
}

// ------------------------------------------------------ [DDB-entity-keys]

/// [DDB-entity-keys] "Creating Entity Keys".
#[test]
fn ddb_entity_keys_create() {
    assert_eq!(entity_key("USER", "123").unwrap(), "USER#123");
    assert_eq!(entity_key("ORDER", "abc-def").unwrap(), "ORDER#abc-def");
    assert_eq!(entity_key("PRODUCT", "SKU-789").unwrap(), "PRODUCT#SKU-789");
    // pattern-helpers.test.ts
    assert_eq!(entity_key("CUSTOMER", "999").unwrap(), "CUSTOMER#999");
    assert_eq!(
        entity_key("USER", "abc-def-123").unwrap(),
        "USER#abc-def-123"
    );
    assert_eq!(
        entity_key("ORDER", "order_2024_01").unwrap(),
        "ORDER#order_2024_01"
    );
    assert!(entity_key("", "123").is_err());
    assert!(entity_key("USER", "").is_err());
}

/// [DDB-entity-keys] "Parsing Entity Keys".
#[test]
fn ddb_entity_keys_parse() {
    assert_eq!(parse_entity_key("USER#123").unwrap(), ("USER", "123"));
    assert_eq!(
        parse_entity_key("ORDER#2024-01-15#abc").unwrap(),
        ("ORDER", "2024-01-15#abc")
    );
    // pattern-helpers.test.ts
    assert_eq!(
        parse_entity_key("USER#123#456#789").unwrap(),
        ("USER", "123#456#789")
    );
    assert!(parse_entity_key("").is_err());
    assert!(parse_entity_key("USER123").is_err());
    let round = entity_key("ORDER", "order-2024-abc-def-123").unwrap();
    assert_eq!(
        parse_entity_key(&round).unwrap(),
        ("ORDER", "order-2024-abc-def-123")
    );
}

/// [DDB-entity-keys] pattern-helpers.test.ts "should handle key with only
/// entity type and separator". DIFFERENCE: ddb-lib returns an empty id for
/// `USER#`; we refuse it (no empty component, as for the builder).
#[test]
fn ddb_entity_keys_empty_id() {
    assert_eq!(
        parse_entity_key("USER#"),
        Err(KeyError::EmptyComponent { part: "id".into() })
    );
}

/// [DDB-entity-keys] "Common Patterns": user, orders, teams, enrolments.
#[test]
fn ddb_entity_keys_common_patterns() {
    assert_eq!(entity_key("ORG", "acme").unwrap(), "ORG#acme");
    assert_eq!(
        entity_key("TEAM", "engineering").unwrap(),
        "TEAM#engineering"
    );
    assert_eq!(entity_key("COURSE", "math-101").unwrap(), "COURSE#math-101");
    assert_eq!(entity_key("STUDENT", "123").unwrap(), "STUDENT#123");
}

// --------------------------------------------------- [DDB-composite-keys]

/// [DDB-composite-keys] "Creating Composite Keys" (default separator; the
/// custom-separator example does not apply: `#` is fixed here).
#[test]
fn ddb_composite_keys_create() {
    assert_eq!(
        composite_key(&["USER", "123", "ORDER", "456"]).unwrap(),
        "USER#123#ORDER#456"
    );
    assert_eq!(
        composite_key(&["2024", "12", "SALES", "region-west"]).unwrap(),
        "2024#12#SALES#region-west"
    );
    assert_eq!(
        composite_key(&["TENANT", "acme", "USER", "alice"]).unwrap(),
        "TENANT#acme#USER#alice"
    );
    // pattern-helpers.test.ts
    assert_eq!(composite_key(&["USER", "123"]).unwrap(), "USER#123");
    assert_eq!(composite_key(&["USER"]).unwrap(), "USER");
    assert!(composite_key(&[]).is_err());
    assert!(matches!(
        composite_key(&["USER#123", "456"]),
        Err(KeyError::SeparatorInComponent { separator: '#', .. })
    ));
}

/// [DDB-composite-keys] "Parsing Composite Keys".
#[test]
fn ddb_composite_keys_parse() {
    let parts = parse_composite_key("USER#123#ORDER#456").unwrap();
    assert_eq!(parts, ["USER", "123", "ORDER", "456"]);
    let [_, user_id, _, order_id] = parts[..] else {
        panic!()
    };
    assert_eq!((user_id, order_id), ("123", "456"));
    // pattern-helpers.test.ts
    assert_eq!(parse_composite_key("USER#123").unwrap(), ["USER", "123"]);
    assert_eq!(parse_composite_key("USER").unwrap(), ["USER"]);
    assert!(parse_composite_key("").is_err());
    let parts = ["USER", "123", "ORDER", "456"];
    assert_eq!(
        parse_composite_key(&composite_key(&parts).unwrap()).unwrap(),
        parts
    );
}

/// [DDB-composite-keys] pattern-helpers.test.ts "should handle keys with
/// empty parts". DIFFERENCE: ddb-lib returns `["USER", "", "123"]`; we refuse
/// the empty part and name it.
#[test]
fn ddb_composite_keys_empty_part() {
    assert_eq!(
        parse_composite_key("USER##123"),
        Err(KeyError::EmptyComponent {
            part: "part 2".into()
        })
    );
}

/// [DDB-composite-keys] "Using with TableClient" and use cases: the query
/// prefixes.
#[test]
fn ddb_composite_keys_prefix_queries() {
    let sk = composite_key(&["ORDER", "2024-12-01", "456"]).unwrap();
    assert!(sk.starts_with(&composite_key_prefix(&["ORDER", "2024-12-01"]).unwrap()));
    assert_eq!(
        composite_key_prefix(&["ORDER", "2024-12-01"]).unwrap(),
        "ORDER#2024-12-01#"
    );
    let metric = composite_key(&["2024", "12", "01", "CPU", "server-1"]).unwrap();
    assert!(metric.starts_with("2024#12#01#CPU#"));
    assert!(metric.starts_with("2024#12#"));
    let laptop = composite_key(&["ELECTRONICS", "COMPUTERS", "LAPTOPS", "product-123"]).unwrap();
    assert!(
        laptop
            .starts_with(&composite_key_prefix(&["ELECTRONICS", "COMPUTERS", "LAPTOPS"]).unwrap())
    );
    assert_eq!(
        composite_key(&["USER", "alice", "PROFILE"]).unwrap(),
        "USER#alice#PROFILE"
    );
    assert_eq!(
        entity_key("DOCUMENT", "doc-123").unwrap(),
        "DOCUMENT#doc-123"
    );
}

// ------------------------------------------- [DDB-hot-partition-distribution]

/// [DDB-hot-partition-distribution] "Creating Distributed Keys".
#[test]
fn ddb_distributed_keys_create() {
    for (base, count) in [
        ("ACTIVE_USERS", 10),
        ("POPULAR_ITEM", 100),
        ("USER#123#POPULAR", 10),
    ] {
        let key = random_shard_key(base, count).unwrap();
        let (b, shard) = parse_shard_key(&key).unwrap();
        assert_eq!(b, base);
        assert!(shard < count);
        assert!(key.starts_with(&format!("{base}#SHARD_")));
    }
    assert_eq!(random_shard_key("ITEM", 1).unwrap(), "ITEM#SHARD_0");
    assert!(random_shard_key("", 10).is_err());
    assert!(random_shard_key("ITEM", 0).is_err());
}

/// [DDB-hot-partition-distribution] "Extracting Shard Number" and the
/// getShardNumber tests.
#[test]
fn ddb_shard_number() {
    assert_eq!(shard_number("ACTIVE_USERS#SHARD_7"), Some(7));
    assert_eq!(shard_number("REGULAR_KEY"), None);
    assert_eq!(shard_number("ITEM#SHARD_0"), Some(0));
    assert_eq!(shard_number("ITEM#SHARD_99"), Some(99));
    assert_eq!(shard_number("ITEM#SHARD_999"), Some(999));
    assert_eq!(shard_number("USER#123"), None);
    assert_eq!(shard_number("ITEM#SHARD"), None);
    assert_eq!(shard_number("USER#123#ITEM#SHARD_5"), Some(5));
    assert_eq!(shard_number("SHARD_5#ITEM"), None);
    assert_eq!(shard_number(""), None);
}

/// [DDB-hot-partition-distribution] "Querying All Shards".
#[test]
fn ddb_query_all_shards() {
    let keys = all_shard_keys("POPULAR_ITEM", 5).unwrap();
    assert_eq!(keys.len(), 5);
    assert_eq!(keys[0], "POPULAR_ITEM#SHARD_0");
    assert_eq!(keys[4], "POPULAR_ITEM#SHARD_4");
    assert!(keys.iter().all(|k| shard_number(k).is_some_and(|s| s < 5)));
    assert_eq!(
        all_shard_keys("ACTIVE_SESSIONS", 25).unwrap()[24],
        "ACTIVE_SESSIONS#SHARD_24"
    );
}

/// [DDB-hot-partition-distribution] "should distribute writes for popular
/// items": 100 random writes over 10 shards use at least half the shards.
#[test]
fn ddb_random_writes_spread() {
    let mut used = std::collections::HashSet::new();
    for _ in 0..100 {
        used.insert(shard_number(&random_shard_key("TRENDING_PRODUCT_123", 10).unwrap()).unwrap());
    }
    assert!(used.len() >= 5, "{used:?}");
}

// ------------------------------------------------------- [DDB-time-series]

/// [DDB-time-series] "Creating Time-Series Keys" and timeSeriesKey tests.
#[test]
fn ddb_time_series_buckets() {
    let ts = Utc.with_ymd_and_hms(2024, 12, 1, 14, 30, 0).unwrap();
    assert_eq!(
        time_bucket(&ts, Granularity::Hour).unwrap(),
        "2024-12-01-14"
    );
    assert_eq!(time_bucket(&ts, Granularity::Day).unwrap(), "2024-12-01");
    assert_eq!(time_bucket(&ts, Granularity::Month).unwrap(), "2024-12");
    let hour = time_bucket(&ts, Granularity::Hour).unwrap();
    assert_eq!(
        composite_key(&["SENSOR", "123", &hour]).unwrap(),
        "SENSOR#123#2024-12-01-14"
    );

    let ts = Utc.with_ymd_and_hms(2024, 12, 2, 15, 30, 45).unwrap();
    assert_eq!(
        time_bucket(&ts, Granularity::Hour).unwrap(),
        "2024-12-02-15"
    );
    let ts = Utc.with_ymd_and_hms(2024, 1, 5, 8, 30, 0).unwrap();
    assert_eq!(
        time_bucket(&ts, Granularity::Hour).unwrap(),
        "2024-01-05-08"
    );
    assert_eq!(time_bucket(&ts, Granularity::Day).unwrap(), "2024-01-05");
    assert_eq!(time_bucket(&ts, Granularity::Month).unwrap(), "2024-01");
    let midnight = Utc.with_ymd_and_hms(2024, 12, 2, 0, 0, 0).unwrap();
    assert_eq!(
        time_bucket(&midnight, Granularity::Hour).unwrap(),
        "2024-12-02-00"
    );
    let late = Utc.with_ymd_and_hms(2024, 12, 2, 23, 59, 59).unwrap();
    assert_eq!(
        time_bucket(&late, Granularity::Hour).unwrap(),
        "2024-12-02-23"
    );
    let utc = Utc.with_ymd_and_hms(2024, 12, 2, 23, 30, 0).unwrap();
    assert_eq!(time_bucket(&utc, Granularity::Day).unwrap(), "2024-12-02");
}

/// [DDB-time-series] "Use ISO 8601 Format for Precise Sorting".
#[test]
fn ddb_time_series_iso_timestamps() {
    let ts = Utc.with_ymd_and_hms(2024, 12, 1, 14, 30, 0).unwrap();
    assert_eq!(format_timestamp(&ts).unwrap(), "2024-12-01T14:30:00.000Z");
    let later = Utc.with_ymd_and_hms(2024, 12, 31, 23, 59, 59).unwrap();
    assert!(format_timestamp(&ts).unwrap() < format_timestamp(&later).unwrap());
    // "Add Unique Suffix for Same-Timestamp Items"
    let sk = time_series_sk(&ts, &new_ulid()).unwrap();
    assert!(sk.starts_with("2024-12-01T14:30:00.000Z#"));
}

// ------------------------------------------------ [DDB-multi-attribute-keys]

/// [DDB-multi-attribute-keys] "Creating Multi-Attribute Keys".
#[test]
fn ddb_multi_attribute_keys() {
    use KeyAttribute::{Num, Str};
    let key =
        multi_attribute_key(&[Str("TENANT-123"), Str("CUSTOMER-456"), Str("DEPT-A")]).unwrap();
    assert_eq!(key, "TENANT-123#CUSTOMER-456#DEPT-A");
    assert_eq!(
        parse_multi_attribute_key(&key, &[AttributeKind::Str; 3]).unwrap(),
        [Str("TENANT-123"), Str("CUSTOMER-456"), Str("DEPT-A")]
    );
    // hierarchicalMultiKey('USA', 'CA', 'San Francisco', 'SOMA')
    let key =
        multi_attribute_key(&[Str("USA"), Str("CA"), Str("San Francisco"), Str("SOMA")]).unwrap();
    assert_eq!(key, "USA#CA#San Francisco#SOMA");
    // timeSeriesMultiKey('ERROR', new Date('2024-12-01')) -> ['ERROR', 1733011200000]
    let millis = Utc
        .with_ymd_and_hms(2024, 12, 1, 0, 0, 0)
        .unwrap()
        .timestamp_millis();
    assert_eq!(millis, 1_733_011_200_000);
    let key = multi_attribute_key(&[Str("ERROR"), Num(millis as u64)]).unwrap();
    assert_eq!(key, "ERROR#00000001733011200000");
    assert_eq!(
        parse_multi_attribute_key(&key, &[AttributeKind::Str, AttributeKind::Num]).unwrap(),
        [Str("ERROR"), Num(1_733_011_200_000)]
    );
    // versionMultiKey(2, 1, 5), and numeric order is string order.
    let v215 = multi_attribute_key(&[Num(2), Num(1), Num(5)]).unwrap();
    let v2110 = multi_attribute_key(&[Num(2), Num(1), Num(10)]).unwrap();
    assert!(v215 < v2110);
}
