//! The key crate's parsers and validators on arbitrary text: no panic, and what parses builds back
//! to the same key (so a parser never accepts a key its builders would write differently).
//!
//! Input: UTF-8 (lossily), split at the first newline into a partition key and a sort key.
#![no_main]

use cqrs_keys::{
    AttributeKind, MAX_BASE_SORT_KEY_BYTES, add_sort_key_version, composite_key, entity_key,
    generate_id, parse_composite_key, parse_entity_key, parse_multi_attribute_key, parse_shard_key,
    parse_sort_key_version, parse_time_series_pk, parse_time_series_sk, parse_timestamp,
    remove_sort_key_version, sort_key_base_from_id, sort_key_version, split_id, tenant_code,
    validate_component, validate_partition_key, validate_sort_key,
};
use cqrs_model::{AttrType, ItemView, Model, ValueRef};
use libfuzzer_sys::fuzz_target;

/// The entity model reads keys back and builds them again: whatever an entity's templates read
/// from `pk`/`sk` must build exactly the same keys (so no key has two readings, and no reading
/// builds a different key).
fn model_round_trip(model: &Model, pk: &str, sk: &str) {
    for entity in model.entities() {
        let Some(values) = entity.read_keys(pk, sk) else {
            continue;
        };
        let tenant = values
            .iter()
            .find(|(name, _)| name == "tenant")
            .map_or(cqrs_keys::TENANT_COMMON, |(_, v)| v.as_str());
        let attrs: Vec<(&str, ValueRef<'_>)> = values
            .iter()
            .filter(|(name, _)| name != "tenant")
            .map(|(name, text)| {
                let number = entity
                    .attributes
                    .get(name)
                    .is_some_and(|a| a.ty == AttrType::Number);
                let value = if number {
                    ValueRef::Num(text)
                } else {
                    ValueRef::Str(text)
                };
                (name.as_str(), value)
            })
            .collect();
        let view = ItemView {
            tenant,
            created_at: "2024-01-15T10:30:00.000Z",
            attributes: &attrs,
        };
        if let Ok((built_pk, built_sk)) = entity.primary_key(&view) {
            assert_eq!(built_pk, pk, "{} pk", entity.name);
            assert_eq!(built_sk, sk, "{} sk", entity.name);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (pk, sk) = text.split_once('\n').unwrap_or((&text, ""));

    for key in [pk, sk] {
        // Validation: a valid partition key always names a tenant without separators.
        if validate_partition_key(key).is_ok() {
            let tenant = tenant_code(key).expect("a valid pk names a tenant");
            assert!(!tenant.is_empty() && !tenant.contains(['#', '@']));
        }
        let base_ok = validate_sort_key(key).is_ok();
        if validate_component("part", key).is_ok() && key.len() <= MAX_BASE_SORT_KEY_BYTES {
            assert!(base_ok, "a component that fits is a valid sort key");
        }
        // Versions: the strict parser and the lenient helpers agree; a valid base round-trips.
        match parse_sort_key_version(key) {
            Ok((base, Some(version))) => {
                assert_eq!(remove_sort_key_version(key), base);
                assert_eq!(sort_key_version(key), version);
            }
            Ok((base, None)) => assert_eq!(base, key),
            Err(_) => {}
        }
        if base_ok {
            for version in [1, 9, 10, i64::MAX] {
                let versioned = add_sort_key_version(key, version);
                assert_eq!(parse_sort_key_version(&versioned), Ok((key, Some(version))));
            }
        }
        // Generic keys build back to themselves.
        if let Ok((entity_type, id)) = parse_entity_key(key) {
            assert_eq!(entity_key(entity_type, id).as_deref(), Ok(key));
        }
        if let Ok(parts) = parse_composite_key(key) {
            assert_eq!(composite_key(&parts).as_deref(), Ok(key));
        }
        let _ = parse_shard_key(key);
        let _ = parse_multi_attribute_key(key, &[AttributeKind::Str, AttributeKind::Num]);
        let _ = parse_time_series_pk(key);
        let _ = parse_time_series_sk(key);
        let _ = parse_timestamp(key);
        let _ = split_id(key);
    }

    // Ids: a two-segment pk and a valid base sort key split back from their id.
    if validate_partition_key(pk).is_ok() && validate_sort_key(sk).is_ok() {
        let id = generate_id(pk, sk);
        assert_eq!(sort_key_base_from_id(pk, &id), Some(sk));
        if pk.matches('#').count() == 1 {
            assert_eq!(split_id(&id), Some((pk, sk)));
        }
    }

    static MODEL: std::sync::OnceLock<Model> = std::sync::OnceLock::new();
    model_round_trip(MODEL.get_or_init(Model::example), pk, sk);
});
