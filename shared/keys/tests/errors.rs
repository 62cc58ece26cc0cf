//! One or more tests per `KeyError` variant: each error names the offending
//! part (its role or position, and its value where useful).

use chrono::{TimeZone, Utc};
use cqrs_keys::*;

#[test]
fn separator_hash_in_component() {
    let err = SimpleEntityKey::new("PRODUCT", "tenant#1", "p1").unwrap_err();
    assert_eq!(
        err,
        KeyError::SeparatorInComponent {
            part: "tenant".into(),
            value: "tenant#1".into(),
            separator: '#',
        }
    );
    assert_eq!(
        err.to_string(),
        "tenant \"tenant#1\" contains the reserved separator '#'"
    );
}

#[test]
fn separator_at_in_component() {
    let err = OrderItemKey::new("t1", "o1", "item@2").unwrap_err();
    assert_eq!(
        err,
        KeyError::SeparatorInComponent {
            part: "item id".into(),
            value: "item@2".into(),
            separator: '@',
        }
    );
}

#[test]
fn separator_names_position_in_composite() {
    let err = composite_key(&["USER", "1", "a@b"]).unwrap_err();
    assert!(
        matches!(&err, KeyError::SeparatorInComponent { part, separator: '@', .. } if part == "part 3")
    );
    assert!(err.to_string().starts_with("part 3 \"a@b\""));
}

#[test]
fn separator_at_in_sort_key() {
    let err = validate_sort_key("CAT#001@3").unwrap_err();
    assert_eq!(
        err,
        KeyError::SeparatorInComponent {
            part: "sort key".into(),
            value: "CAT#001@3".into(),
            separator: '@',
        }
    );
}

#[test]
fn empty_component() {
    assert_eq!(
        UserTenantKey::new("", "u1").unwrap_err(),
        KeyError::EmptyComponent {
            part: "tenant code".into()
        }
    );
    assert_eq!(
        validate_sort_key("a#").unwrap_err(),
        KeyError::EmptyComponent {
            part: "sort key segment 2".into()
        }
    );
    assert_eq!(
        validate_partition_key("#t1").unwrap_err(),
        KeyError::EmptyComponent {
            part: "partition key prefix".into()
        }
    );
    assert_eq!(
        validate_partition_key("LOG#t1#").unwrap_err(),
        KeyError::EmptyComponent {
            part: "partition key segment 3".into()
        }
    );
    assert_eq!(
        validate_sort_key("").unwrap_err().to_string(),
        "sort key is empty"
    );
    assert_eq!(
        parse_entity_key("#123").unwrap_err(),
        KeyError::EmptyComponent {
            part: "entity type".into()
        }
    );
}

#[test]
fn control_character() {
    let err = MasterKey::new("t1", MasterKind::Data, "cat\n", "x").unwrap_err();
    assert_eq!(
        err,
        KeyError::ControlCharacter {
            part: "category".into(),
            value: "cat\n".into(),
            code: 0x0A,
        }
    );
    assert_eq!(
        err.to_string(),
        "category \"cat\\n\" contains the control character U+000A"
    );
    assert!(matches!(
        validate_partition_key("PRODUCT#t\u{0}1"),
        Err(KeyError::ControlCharacter { code: 0, .. })
    ));
    assert!(matches!(
        validate_sort_key("a\u{7f}"),
        Err(KeyError::ControlCharacter { code: 0x7F, .. })
    ));
    // Spaces and non-ASCII letters are allowed.
    assert!(validate_sort_key("San Francisco#東京").is_ok());
}

#[test]
fn partition_key_too_long() {
    let ok = format!("P#{}", "t".repeat(MAX_PARTITION_KEY_BYTES - 2));
    assert!(validate_partition_key(&ok).is_ok());
    let long = format!("P#{}", "t".repeat(MAX_PARTITION_KEY_BYTES - 1));
    let err = validate_partition_key(&long).unwrap_err();
    assert_eq!(
        err,
        KeyError::PartitionKeyTooLong {
            bytes: 2049,
            max: 2048,
            head: long.chars().take(32).collect(),
        }
    );
    assert!(err.to_string().contains("2049 bytes"));
    // Builders refuse it too.
    let tenant = "t".repeat(2048);
    assert!(matches!(
        SimpleEntityKey::new("PRODUCT", &tenant, "p1"),
        Err(KeyError::PartitionKeyTooLong { .. })
    ));
    assert!(matches!(
        entity_key("USER", &tenant),
        Err(KeyError::PartitionKeyTooLong { .. })
    ));
}

#[test]
fn partition_key_limit_counts_bytes_not_chars() {
    // 683 three-byte characters are 2049 bytes.
    let long = format!("P#{}", "東".repeat(682));
    assert_eq!(long.len(), 2048);
    assert!(validate_partition_key(&long).is_ok());
    let longer = format!("{long}x");
    assert!(matches!(
        validate_partition_key(&longer),
        Err(KeyError::PartitionKeyTooLong { bytes: 2049, .. })
    ));
}

#[test]
fn sort_key_too_long() {
    let ok = "s".repeat(MAX_BASE_SORT_KEY_BYTES);
    assert!(validate_sort_key(&ok).is_ok());
    // The largest versioned form still fits DynamoDB's 1024 bytes.
    assert!(add_sort_key_version(&ok, i64::MIN).len() <= MAX_SORT_KEY_BYTES);
    let long = "s".repeat(MAX_BASE_SORT_KEY_BYTES + 1);
    let err = validate_sort_key(&long).unwrap_err();
    assert_eq!(
        err,
        KeyError::SortKeyTooLong {
            bytes: MAX_BASE_SORT_KEY_BYTES + 1,
            max: MAX_BASE_SORT_KEY_BYTES,
            head: "s".repeat(32),
        }
    );
    assert!(matches!(
        OrderKey::new("t1", &"o".repeat(1000)),
        Err(KeyError::SortKeyTooLong { .. })
    ));
}

#[test]
fn invalid_version() {
    for (sk, suffix) in [
        ("CAT#001@x", "x"),
        ("CAT#001@", ""),
        ("CAT#001@+3", "+3"),
        ("a@1@ 2", " 2"),
    ] {
        assert_eq!(
            parse_sort_key_version(sk),
            Err(KeyError::InvalidVersion {
                sk: sk.into(),
                suffix: suffix.into()
            })
        );
    }
    assert_eq!(
        parse_sort_key_version("CAT#001@99999999999999999999")
            .unwrap_err()
            .to_string(),
        "sort key \"CAT#001@99999999999999999999\" has the version suffix \"99999999999999999999\", which is not an integer"
    );
}

#[test]
fn wrong_prefix() {
    assert_eq!(
        OrderKey::parse("PRODUCT#t1", "ORDER#o1").unwrap_err(),
        KeyError::WrongPrefix {
            expected: "ORDER".into(),
            found: "PRODUCT".into()
        }
    );
    assert_eq!(
        OrderItemKey::parse("ORDER#t1", "ORDER#o1#i1").unwrap_err(),
        KeyError::WrongPrefix {
            expected: "ORDER_ITEM".into(),
            found: "ORDER".into()
        }
    );
    assert_eq!(
        UserAuthKey::parse("USER#common", "github#u1").unwrap_err(),
        KeyError::WrongPrefix {
            expected: "local|sso|oauth|temp|profile".into(),
            found: "github".into()
        }
    );
    assert_eq!(
        UserTenantKey::parse("USER_TENANT#tenant001", "t1#u1").unwrap_err(),
        KeyError::WrongPrefix {
            expected: "USER_TENANT#common".into(),
            found: "USER_TENANT#tenant001".into()
        }
    );
    assert_eq!(
        MasterKey::parse("MASTER#t1", "SETTINGS#a#b")
            .unwrap_err()
            .to_string(),
        "expected the prefix \"SETTING|DATA|COPY\", found \"SETTINGS\""
    );
    assert_eq!(
        parse_time_series_pk("AUDIT#t1#2024-01").unwrap_err(),
        KeyError::WrongPrefix {
            expected: "LOG".into(),
            found: "AUDIT".into()
        }
    );
}

#[test]
fn malformed() {
    assert_eq!(
        parse_entity_key("USER123").unwrap_err(),
        KeyError::Malformed {
            key: "USER123".into(),
            expected: "ENTITY_TYPE#id".into()
        }
    );
    assert_eq!(
        validate_partition_key("PRODUCT").unwrap_err(),
        KeyError::Malformed {
            key: "PRODUCT".into(),
            expected: "PREFIX#TENANT[#more]".into()
        }
    );
    assert_eq!(
        OrderItemKey::parse("ORDER#t1", "ORDER_ITEM#o1").unwrap_err(),
        KeyError::Malformed {
            key: "ORDER_ITEM#o1".into(),
            expected: "ORDER_ITEM#orderId#itemId".into()
        }
    );
    assert!(matches!(
        parse_shard_key("ITEM#SHARD_07"),
        Err(KeyError::Malformed { .. })
    ));
    assert!(matches!(
        parse_shard_key("ITEM#SHARD_x"),
        Err(KeyError::Malformed { .. })
    ));
    assert!(
        matches!(parse_time_series_pk("LOG#t1#2024-1"), Err(KeyError::Malformed { key, .. }) if key == "2024-1")
    );
    assert!(matches!(
        TimeSeriesKey::parse("LOG#t1#2024-02", "2024-01-15T10:30:00.000Z#e1"),
        Err(KeyError::Malformed { key, .. }) if key == "LOG#t1#2024-02"
    ));
    assert!(matches!(
        parse_multi_attribute_key("a#b", &[AttributeKind::Str]),
        Err(KeyError::Malformed { .. })
    ));
    assert_eq!(
        parse_multi_attribute_key("a#12", &[AttributeKind::Str, AttributeKind::Num]).unwrap_err(),
        KeyError::Malformed {
            key: "12".into(),
            expected: "attribute 2 to be a 20-digit number".into()
        }
    );
    assert_eq!(
        SimpleEntityKey::parse("PRODUCT", "p1")
            .unwrap_err()
            .to_string(),
        "key \"PRODUCT\" is malformed: expected PREFIX#tenant"
    );
}

#[test]
fn invalid_timestamp() {
    for bad in [
        "2024-01-15T10:30:00Z",
        "2024-01-15T10:30:00.0000Z",
        "2024-01-15T10:30:00.000+00:00",
        "2024-01-15t10:30:00.000z",
        "2024-02-30T10:30:00.000Z",
        "2024-01-15T10:30:60.000Z",
    ] {
        assert_eq!(
            parse_timestamp(bad),
            Err(KeyError::InvalidTimestamp { value: bad.into() }),
            "{bad}"
        );
    }
    let far = Utc.with_ymd_and_hms(10_000, 1, 1, 0, 0, 0).unwrap();
    assert!(matches!(
        format_timestamp(&far),
        Err(KeyError::InvalidTimestamp { .. })
    ));
    assert!(matches!(
        TimeSeriesKey::new("t1", &far, "e1"),
        Err(KeyError::InvalidTimestamp { .. })
    ));
    let bc = Utc.with_ymd_and_hms(-1, 1, 1, 0, 0, 0).unwrap();
    assert!(matches!(
        year_month(&bc),
        Err(KeyError::InvalidTimestamp { .. })
    ));
}

#[test]
fn invalid_shard_count() {
    assert_eq!(
        shard_for_id("x", 0),
        Err(KeyError::InvalidShardCount { count: 0 })
    );
    assert_eq!(
        all_shard_keys("B", 0),
        Err(KeyError::InvalidShardCount { count: 0 })
    );
    assert_eq!(
        random_shard_key("B", 0),
        Err(KeyError::InvalidShardCount { count: 0 })
    );
    assert_eq!(
        sharded_key_for_id("B", "x", 0).unwrap_err().to_string(),
        "shard count must be at least 1, got 0"
    );
}
