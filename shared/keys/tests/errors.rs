//! One or more tests per `KeyError` variant: each error names the offending
//! part (its role or position, and its value where useful).

use cqrs_keys::*;

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

/// U+10FFFF is the end of every key range (`prefix + U+10FFFF`): a component holding it would sort
/// after that end, so no key takes it (issue 36, item 7).
#[test]
fn the_highest_code_point_is_refused_in_keys() {
    let max = '\u{10FFFF}';
    for value in [
        format!("{max}"),
        format!("a{max}"),
        format!("{max}b"),
        format!("é{max}東"),
    ] {
        assert_eq!(
            validate_component("part", &value),
            Err(KeyError::HighestCodePoint {
                part: "part".into(),
                value: value.clone()
            }),
            "component {value:?}"
        );
        assert!(
            validate_component("part", &value)
                .unwrap_err()
                .to_string()
                .contains("U+10FFFF"),
            "the message names the character"
        );
        assert!(
            validate_sort_key(&format!("A#{value}")).is_err(),
            "sort key A#{value:?} accepted"
        );
        assert!(
            validate_partition_key(&format!("P#{value}")).is_err(),
            "partition key P#{value:?} accepted"
        );
        assert!(
            entity_key("USER", &value).is_err(),
            "entity id {value:?} accepted"
        );
        assert!(
            composite_key(&["A", &value]).is_err(),
            "composite part {value:?} accepted"
        );
    }
    // Its neighbours are ordinary characters.
    for ok in ['\u{10FFFE}', '\u{FFFF}', '\u{F0000}'] {
        assert!(
            validate_component("part", &format!("a{ok}")).is_ok(),
            "U+{:04X}",
            ok as u32
        );
    }
}
