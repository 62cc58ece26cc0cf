//! The local stack's helpers: what `make dev` needs besides DynamoDB Local and `cargo lambda
//! watch`.
//!
//! - [`stream`]: reading the command table's stream shard by shard.
//! - [`mapper`]: the local event source mapping: batches, `batchItemFailures`, retries, bisection
//!   and the on-failure destination.
//! - [`mapping`]: the stream mapping's settings, read from `template.yaml`.
//! - [`invoke`]: invoking data-sync through cargo-lambda's Invoke endpoint.
#![forbid(unsafe_code)]

pub mod invoke;
pub mod mapper;
pub mod mapping;
pub mod stream;
