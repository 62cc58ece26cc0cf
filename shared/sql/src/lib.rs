//! The relational read model of a service: a copy of its data table in PostgreSQL, for what
//! DynamoDB's access patterns do not answer (free filters and sorting, counts, reports across
//! entities).
//!
//! - [`schema`]: the schema of a model: a table per entity, typed columns with the model's
//!   constraints, a generic table, row-level security per tenant.
//! - `connect` (feature `connect`): a connection string, or RDS Proxy with IAM authentication
//!   over verified TLS.
//! - [`migrate`]: versioned migrations from one model revision to the next.
//! - [`read`]: reading as a caller of one tenant (row-level security).
//! - [`rows`]: an item of the data table as a row: its table, its values.
//! - [`verify`]: the relational read model compared with the data table, and repaired.
//! - [`write`](mod@write): a batch of changes in one transaction, idempotent and newest-wins by version.
#![forbid(unsafe_code)]

#[cfg(feature = "connect")]
pub mod connect;
pub mod migrate;
pub mod read;
pub mod rows;
pub mod schema;
pub mod verify;
pub mod write;
