//! The consumer runtime's integration tests, one binary (one link in CI):
//!
//! - [`change_log`]: the framework's change log consumer writing into DynamoDB Local's data table;
//! - [`dynamodb_local`]: the runtime against DynamoDB Local's markers and history table;
//! - [`faults`]: markers, parking and history failing, in memory;
//! - [`moto`]: parking into a real SQS FIFO dead-letter queue on moto's server;
//! - [`redrive_replay`]: `redrive` and `replay` on moto's queues (and DynamoDB Local's history
//!   table), the runtime handling what they sent.

mod change_log;
mod common;
mod dynamodb_local;
mod faults;
mod moto;
mod redrive_replay;
