//! The consumer runtime's integration tests, one binary (one link in CI):
//!
//! - [`dynamodb_local`]: the runtime against DynamoDB Local's markers and history table;
//! - [`faults`]: markers, parking and history failing, in memory;
//! - [`moto`]: parking into a real SQS FIFO dead-letter queue on moto's server;
//! - [`redrive_replay`]: `redrive` and `replay` on moto's queues (and DynamoDB Local's history
//!   table), the runtime handling what they sent.

mod common;
mod dynamodb_local;
mod faults;
mod moto;
mod redrive_replay;
