//! Test support for the CQRS workspace: DynamoDB Local clients and tables
//! created from the service's `template.yaml`.
//!
//! Integration tests of other crates use it as a dev-dependency:
//!
//! ```no_run
//! # async fn demo() {
//! let tables = cqrs_testkit::fresh_tables().await; // unique names per call
//! let client = &tables.client;
//! let arn = tables.command_stream_arn().await;
//! let streams = cqrs_testkit::streams_client().await;
//! # let _ = (client, arn, streams);
//! # }
//! ```
//!
//! The tests must run with DynamoDB Local started by
//! `cqrs dynamodb-local start` (the project's `make test` does it), which
//! exports `AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:<port>`. Without it the
//! helpers panic with instructions; with a non-local endpoint they refuse to
//! run, so no test ever reaches AWS.
//!
//! Modules:
//! - [`api`]: a client of a running stack's HTTP API, for end-to-end tests.
//! - [`endpoint`]: the endpoint, the local-only check, SDK clients.
//! - [`template`]: `template.yaml` → [`template::TableSpec`] (no I/O besides
//!   reading the file; the local stack creates its tables with it).
//! - [`tables`]: create a [`template::TableSpec`] with the SDK, wait for
//!   `ACTIVE`, read streams.
//! - [`fixtures`]: [`TestTables`] and [`fresh_tables`].
//! - [`models`]: small models the tests of several crates share.
//! - [`own_routes`]: what a service's own route functions deploy, on the transformed template.
//! - [`routers`]: `template.yaml`'s HTTP API routes and the `cargo lambda watch` router agree.
//! - [`round_trips`]: a client that records every DynamoDB call, and the sequential round trips
//!   they took.

pub mod api;
pub mod endpoint;
pub mod fixtures;
pub mod http_event;
pub mod iam;
pub mod local_quirks;
pub mod models;
pub mod own_routes;
pub mod round_trips;
pub mod routers;
pub mod stream_event;
pub mod tables;
pub mod template;

pub use endpoint::{client, streams_client};
pub use fixtures::{TestTables, fresh_tables};
pub use template::TableSpec;
