//! Key design for multi-tenant CQRS items on DynamoDB.
//!
//! Pure functions and types, no AWS dependency. The layout is that of the
//! TypeScript framework mbc-cqrs-serverless, so both can share tables:
//!
//! ```text
//! PK = PREFIX#TENANT[#more]
//! SK = IDENTIFIER[@VERSION]      (the version only in command/history tables)
//! ID = PK#SK                     (without the version)
//! ```
//!
//! `#` ([`KEY_SEPARATOR`]) joins components; `@` ([`VER_SEPARATOR`])
//! introduces a version. Neither may appear inside a component, nor may U+10FFFF, the end of
//! every range read of the keys that begin with a prefix ([`KeyError::HighestCodePoint`]).
//!
//! # Entity keys are declared, not coded
//!
//! The six key patterns of the mbc-cqrs-serverless key guide (products, orders and their items,
//! users with auth providers, user-tenant links, master data, time series) and a team's own
//! entities are declared in the entity model (`model.toml`, the `cqrs-model` crate), which builds
//! and reads their keys with the helpers of this crate. This crate keeps what every key shares.
//!
//! # Also here
//!
//! * the mbc helpers: [`generate_id`], [`tenant_code`],
//!   [`add_sort_key_version`], [`remove_sort_key_version`],
//!   [`sort_key_version`] (and the strict [`parse_sort_key_version`]),
//!   [`master_pk`], [`seq_pk`], [`ttl_sk`];
//! * validation: [`validate_partition_key`], [`validate_sort_key`],
//!   [`validate_component`], [`validate_derived_keys`], all failing with a [`KeyError`] that names the
//!   offending part;
//! * generic keys: entity keys ([`entity_key`]), composite keys
//!   ([`composite_key`]), multi-attribute keys ([`multi_attribute_key`]),
//!   sharded partition keys ([`sharded_key_for_id`], [`random_shard_key`],
//!   [`all_shard_keys`]), time-series keys ([`time_series_pk`],
//!   [`time_series_sk`]);
//! * monotonic ULIDs: [`UlidGenerator`], [`new_ulid`].
//!
//! ```
//! use cqrs_keys::{add_sort_key_version, composite_key, generate_id};
//!
//! let sk = composite_key(&["ORDER_ITEM", "01HX7MBJK3V9WQBZ7XNDK5ZT2M", "001"]).unwrap();
//! let command_sk = add_sort_key_version(&sk, 2);
//! assert_eq!(command_sk, "ORDER_ITEM#01HX7MBJK3V9WQBZ7XNDK5ZT2M#001@2");
//! assert_eq!(
//!     generate_id("ORDER#tenant001", &command_sk),
//!     "ORDER#tenant001#ORDER_ITEM#01HX7MBJK3V9WQBZ7XNDK5ZT2M#001"
//! );
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod composite;
pub mod constants;
pub mod entity;
pub mod error;
pub mod helpers;
pub mod master;
pub mod multi_attribute;
pub mod parked;
pub mod reserved;
pub mod shard;
pub mod time_series;
pub mod ulid_gen;
pub mod validate;
pub mod version;

pub use composite::{composite_key, composite_key_prefix, parse_composite_key};
pub use constants::{
    DEFAULT_TENANT_CODE, KEY_SEPARATOR, MAX_BASE_SORT_KEY_BYTES, MAX_PARTITION_KEY_BYTES,
    MAX_SORT_KEY_BYTES, MAX_VERSION_SUFFIX_BYTES, TENANT_COMMON, VER_SEPARATOR, VERSION_FIRST,
    VERSION_LATEST,
};
pub use entity::{entity_key, parse_entity_key};
pub use error::KeyError;
pub use helpers::{
    CONSUMER_KEY_PREFIX, COUNTER_KEY_PREFIX, GUARD_GLOBAL_SCOPE, GUARD_KEY_PREFIX, HEAD_KEY_PREFIX,
    HEADS_STATE_KEY, MASTER_PK_PREFIX, SEQ_PK_PREFIX, TTL_SK_PREFIX, consumer_marker_key,
    consumer_marker_prefix, counter_key, generate_id, guard_key, head_key, is_ttl_policy_key,
    item_hex_token, legacy_head_key, master_pk, member_token, parse_guard_key, seq_pk,
    sort_key_base_from_id, split_id, tenant_code, ttl_sk,
};
pub use multi_attribute::{
    AttributeKind, KeyAttribute, multi_attribute_key, parse_multi_attribute_key,
};
pub use reserved::{
    CHANGE_LOG_PK_PREFIX, RESERVED_PK_PREFIXES, change_log_month_pk, change_log_pk, reserved_prefix,
};
pub use shard::{
    SHARD_MARKER, all_shard_keys, fnv1a_64, parse_shard_key, random_shard_key, shard_for_id,
    shard_key, shard_number, sharded_key_for_id,
};
pub use time_series::{
    Granularity, LOG_PK_PREFIX, format_timestamp, parse_time_series_pk, parse_time_series_sk,
    parse_timestamp, time_bucket, time_series_pk, time_series_sk, truncate_to_millis, year_month,
};
pub use ulid_gen::{UlidGenerator, new_ulid};
pub use validate::{
    validate_component, validate_derived_keys, validate_partition_key, validate_sort_key,
};
pub use version::{
    add_sort_key_version, parse_sort_key_version, remove_sort_key_version, sort_key_version,
    sort_key_version_prefix,
};
