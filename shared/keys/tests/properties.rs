//! Property tests: build -> parse gives the parts back, version add/remove
//! round-trips, builder output always validates, and ULIDs strictly increase.

use chrono::{DateTime, Utc};
use cqrs_keys::*;
use proptest::prelude::*;

/// Any valid component: no `#`, `@` or control character, any other Unicode.
fn component() -> impl Strategy<Value = String> {
    "[^#@\\p{Cc}]{1,12}"
}

/// A `#`-joined path of 1 to 4 components (a valid base sort key).
fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(component(), 1..5).prop_map(|v| v.join("#"))
}

/// Timestamps from year 0000 to 9999, to the millisecond and below.
fn timestamp() -> impl Strategy<Value = DateTime<Utc>> {
    (
        -62_167_219_200_000_i64..=253_402_300_799_999_i64,
        0_u32..1_000_000,
    )
        .prop_map(|(ms, sub_ms)| {
            DateTime::from_timestamp_millis(ms).unwrap()
                + chrono::Duration::nanoseconds(i64::from(sub_ms))
        })
}

fn assert_valid(pk: &str, sk: &str) {
    assert_eq!(validate_partition_key(pk), Ok(()), "pk {pk:?}");
    assert_eq!(validate_sort_key(sk), Ok(()), "sk {sk:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    // ------------------------------------------------------------ versions

    #[test]
    fn add_then_remove_version_is_identity(base in path(), v in any::<i64>()) {
        let sk = add_sort_key_version(&base, v);
        prop_assert_eq!(remove_sort_key_version(&sk), base.as_str());
        prop_assert_eq!(sort_key_version(&sk), v);
        prop_assert_eq!(parse_sort_key_version(&sk), Ok((base.as_str(), Some(v))));
        // Adding again replaces the version.
        prop_assert_eq!(add_sort_key_version(&sk, 7), format!("{base}@7"));
        prop_assert_eq!(generate_id("P#t", &sk), format!("P#t#{base}"));
    }

    // ------------------------------------------------------------ heads

    #[test]
    fn a_head_key_names_exactly_one_item(
        pk1 in path(), sk1 in path(), pk2 in path(), sk2 in path(), v in 1_i64..1000,
    ) {
        let pk1 = format!("P#{pk1}");
        let pk2 = format!("P#{pk2}");
        // The version of a sort key never changes the head.
        prop_assert_eq!(head_key(&pk1, &add_sort_key_version(&sk1, v)), head_key(&pk1, &sk1));
        // Two different items never share a head, even where they share an id.
        if (pk1.as_str(), sk1.as_str()) != (pk2.as_str(), sk2.as_str()) {
            prop_assert_ne!(head_key(&pk1, &sk1), head_key(&pk2, &sk2));
        }
        // The same length as the legacy key, so `validate_derived_keys` bounds both.
        prop_assert_eq!(
            head_key(&pk1, &sk1).len(),
            legacy_head_key(&generate_id(&pk1, &sk1)).len()
        );
    }

    #[test]
    fn items_that_share_an_id_have_their_own_heads(a in component(), b in component(), c in component()) {
        // `("P#a", "b#c")` and `("P#a#b", "c")`: one id, two items.
        let (first, second) = ((format!("P#{a}"), format!("{b}#{c}")), (format!("P#{a}#{b}"), c.clone()));
        prop_assert_eq!(generate_id(&first.0, &first.1), generate_id(&second.0, &second.1));
        prop_assert_ne!(head_key(&first.0, &first.1), head_key(&second.0, &second.1));
    }

    #[test]
    fn bare_sort_key_has_latest_version(base in path()) {
        prop_assert_eq!(remove_sort_key_version(&base), base.as_str());
        prop_assert_eq!(sort_key_version(&base), VERSION_LATEST);
        prop_assert_eq!(parse_sort_key_version(&base), Ok((base.as_str(), None)));
    }

    #[test]
    fn version_helpers_never_panic(sk in any::<String>()) {
        let _ = remove_sort_key_version(&sk);
        let _ = sort_key_version(&sk);
        let _ = parse_sort_key_version(&sk);
        let _ = validate_sort_key(&sk);
        let _ = validate_partition_key(&sk);
        let _ = tenant_code(&sk);
        let _ = split_id(&sk);
        let _ = parse_composite_key(&sk);
        let _ = parse_entity_key(&sk);
        let _ = parse_shard_key(&sk);
        let _ = parse_time_series_sk(&sk);
    }

    // ----------------------------------------------------- generic keys

    #[test]
    fn entity_key_round_trips(t in component(), id in path()) {
        let key = entity_key(&t, &id).unwrap();
        prop_assert_eq!(parse_entity_key(&key).unwrap(), (t.as_str(), id.as_str()));
        prop_assert_eq!(validate_partition_key(&key), Ok(()));
        prop_assert_eq!(validate_sort_key(&key), Ok(()));
    }

    #[test]
    fn composite_key_round_trips(parts in prop::collection::vec(component(), 1..8)) {
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        let key = composite_key(&refs).unwrap();
        prop_assert_eq!(parse_composite_key(&key).unwrap(), refs.clone());
        prop_assert_eq!(validate_sort_key(&key), Ok(()));
        let prefix = composite_key_prefix(&refs).unwrap();
        prop_assert!(prefix.starts_with(&key) && prefix.ends_with('#'));
    }

    #[test]
    fn multi_attribute_key_round_trips(
        attrs in prop::collection::vec(prop_oneof![component().prop_map(Ok), any::<u64>().prop_map(Err)], 1..6)
    ) {
        let values: Vec<KeyAttribute<'_>> = attrs
            .iter()
            .map(|a| match a {
                Ok(s) => KeyAttribute::Str(s),
                Err(n) => KeyAttribute::Num(*n),
            })
            .collect();
        let kinds: Vec<AttributeKind> = values.iter().map(KeyAttribute::kind).collect();
        let key = multi_attribute_key(&values).unwrap();
        prop_assert_eq!(parse_multi_attribute_key(&key, &kinds).unwrap(), values);
        prop_assert_eq!(validate_sort_key(&key), Ok(()));
    }

    #[test]
    fn numbers_sort_as_strings(a in any::<u64>(), b in any::<u64>()) {
        let ka = multi_attribute_key(&[KeyAttribute::Num(a)]).unwrap();
        let kb = multi_attribute_key(&[KeyAttribute::Num(b)]).unwrap();
        prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
    }

    #[test]
    fn shard_keys_round_trip(base in path(), id in any::<String>(), count in 1_u32..300) {
        let shard = shard_for_id(&id, count).unwrap();
        prop_assert!(shard < count);
        prop_assert_eq!(shard_for_id(&id, count).unwrap(), shard);
        let key = sharded_key_for_id(&base, &id, count).unwrap();
        prop_assert_eq!(parse_shard_key(&key).unwrap(), (base.as_str(), shard));
        prop_assert_eq!(validate_partition_key(&key), Ok(()));

        let random = random_shard_key(&base, count).unwrap();
        let (b, s) = parse_shard_key(&random).unwrap();
        prop_assert_eq!(b, base.as_str());
        prop_assert!(s < count);

        let all = all_shard_keys(&base, count).unwrap();
        prop_assert_eq!(all.len(), count as usize);
        prop_assert!(all.contains(&key) && all.contains(&random));
        for (i, k) in all.iter().enumerate() {
            prop_assert_eq!(parse_shard_key(k).unwrap(), (base.as_str(), i as u32));
            prop_assert_eq!(validate_partition_key(k), Ok(()));
        }
    }

    #[test]
    fn timestamps_round_trip_and_sort(a in timestamp(), b in timestamp()) {
        let fa = format_timestamp(&a).unwrap();
        let fb = format_timestamp(&b).unwrap();
        prop_assert_eq!(fa.len(), 24);
        prop_assert_eq!(parse_timestamp(&fa).unwrap(), truncate_to_millis(&a));
        prop_assert_eq!(truncate_to_millis(&a).cmp(&truncate_to_millis(&b)), fa.cmp(&fb));
    }

    #[test]
    fn time_series_keys_round_trip(tenant in component(), ts in timestamp(), event in component()) {
        let pk = time_series_pk(&tenant, &ts).unwrap();
        let sk = time_series_sk(&ts, &event).unwrap();
        assert_valid(&pk, &sk);
        let ym = year_month(&ts).unwrap();
        prop_assert_eq!(parse_time_series_pk(&pk).unwrap(), (tenant.as_str(), ym.as_str()));
        prop_assert_eq!(parse_time_series_sk(&sk).unwrap(), (truncate_to_millis(&ts), event.as_str()));
    }

    // ------------------------------------------------------ the six patterns

}

// ---------------------------------------------------------------- ULIDs

#[test]
fn ulids_from_one_generator_strictly_increase() {
    let generator = UlidGenerator::new();
    let ids: Vec<String> = (0..100_000).map(|_| generator.generate()).collect();
    assert!(ids.iter().all(|id| id.len() == 26));
    for w in ids.windows(2) {
        assert!(w[0] < w[1], "{} !< {}", w[0], w[1]);
    }
}

#[test]
fn ulids_shared_between_threads_are_unique_and_increase_per_thread() {
    let generator = UlidGenerator::new();
    let per_thread: Vec<Vec<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..10_000)
                        .map(|_| generator.generate())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ids in &per_thread {
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }
    let mut all: Vec<&String> = per_thread.iter().flatten().collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 40_000);
}

#[test]
fn process_wide_ulids_strictly_increase() {
    let ids: Vec<String> = (0..10_000).map(|_| new_ulid()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
}

proptest! {
    /// The byte-wise validation agrees with the rule as written for characters: a component is
    /// non-empty and holds no `#`, no `@` and no control character (Unicode Cc), and the error
    /// names the first offending character.
    #[test]
    fn component_validation_follows_the_character_rule(value in "\\PC{0,12}|[\\x00-\\x7f]{0,12}|[#@a\\u{80}-\\u{a0}é]{0,8}") {
        let first_bad = value.chars().find(|c| *c == '#' || *c == '@' || c.is_control());
        let result = validate_component("part", &value);
        let agrees = match (value.is_empty(), first_bad) {
            (true, _) => matches!(result, Err(KeyError::EmptyComponent { .. })),
            (false, None) => result.is_ok(),
            (false, Some(c)) if c == '#' || c == '@' => {
                matches!(result, Err(KeyError::SeparatorInComponent { separator, .. }) if separator == c)
            }
            (false, Some(c)) => {
                matches!(result, Err(KeyError::ControlCharacter { code, .. }) if code == u32::from(c))
            }
        };
        prop_assert!(agrees, "{:?} gave {:?}", value, result);
    }
}
