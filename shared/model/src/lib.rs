//! The entity model: a team declares its entities, key templates, indexes and access patterns once,
//! in its service's `model.toml`, and every write obeys it.
//!
//! The service compiles its file into its functions (`include_str!("../model.toml")`) and hands it
//! to them; [`Model::parse`] checks it (command-handler at start, query-handler on its first
//! access-pattern request): no file is read at run time, and a model with an error names the
//! entity and the field ([`ModelErrors`]). [`Model::example`] is the example service's model, the
//! fixture of the tests and doc examples. Pure: no AWS dependency; above the key crate, below the store and the
//! functions.
//!
//! - [`Model`]: the checked model (entities, GSIs, access patterns);
//! - [`Template`]: key templates such as `USER#{tenant}#{userId}` and how keys are read back;
//! - [`Attribute`]: attribute types and the key formatting that keeps sort order;
//! - [`RouteFunction`]: the service's own routes (`[routes.<function>]`), each a Lambda function;
//! - [`Entity::derive`]: the one pure function that computes a version's `pk`, `sk` and every index
//!   key attribute from the whole item.
//!
//! ```
//! use cqrs_model::{ItemView, KeyValue, Model, ValueRef};
//!
//! let model = Model::example();
//! let order = model.entity("order").unwrap();
//! let attrs = [
//!     ("orderId", ValueRef::Str("01HX7MBJK3V9WQBZ7XNDK5ZT2M")),
//!     ("userId", ValueRef::Str("u1")),
//!     ("status", ValueRef::Str("PENDING")),
//! ];
//! let view = ItemView { tenant: "t1", created_at: "2024-01-15T10:30:00.000Z", attributes: &attrs };
//! let keys = order.derive(&view).unwrap();
//! assert_eq!(keys.sk, "ORDER#01HX7MBJK3V9WQBZ7XNDK5ZT2M");
//! assert_eq!(keys.index["gsi1sk"], KeyValue::S("ORDER#2024-01-15T10:30:00.000Z#01HX7MBJK3V9WQBZ7XNDK5ZT2M".into()));
//! assert!(keys.index["gsi2pk"].as_str().starts_with("STATUS#t1#PENDING#SHARD#"));
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

mod attribute;
mod check;
mod cloudformation;
mod constraints;
mod consumers;
mod derive;
mod lang;
mod lint;
mod model;
mod query;
mod routes;
pub mod rust;
mod spec;
mod template;
mod value;

pub use attribute::{
    AttrType, Attribute, Case, TIMESTAMP_WIDTH, format_timestamp, parse_timestamp,
};
pub use check::{MAX_GSIS, MAX_MULTI_ATTRIBUTES, SQL_ENVELOPE_COLUMNS, SQL_IDENTIFIER_BYTES};
pub use constraints::{
    Condition, Limit, MAX_AT_MOST, MAX_CONSTRAINT_GUARDS, Reference, Scope, Unique, WriteOp,
    WriteRule, guard_budget,
};
pub use consumers::{ConsumerFunction, MAX_CONSUMERS};
pub use derive::{DeriveError, DerivedKeys, ItemView};
pub use lint::{
    Finding, LARGE_GUARD_AT_MOST, LintReport, MAX_KEY_PARTS, RULES, Severity, lint, lint_source,
};
pub use model::{
    CREATED_AT, DEFAULT_TENANT_MAX, EXAMPLE_TOML, Entity, EntityIndex, ITEM_FIELDS, Index, KeyAttr,
    KeyType, Model, ModelError, ModelErrors, Pattern, Projection, ReadRule, SortCondition,
};
pub use query::{PatternQuery, PlanError, RANGE_PARAMS, SortKeyCondition, SortOp};
pub use routes::{Access, FRAMEWORK_FUNCTIONS, FRAMEWORK_PATH_SEGMENTS, Operation, RouteFunction};
pub use template::{Bucket, Part, Template};
pub use value::{AttributeSource, KeyValue, ValueRef};
