//! The event publisher's integration tests, one binary (one link in CI):
//!
//! - [`publish`]: the publishing rules (waves, reporting, parking) against the in-memory topic;
//! - [`sns_topic`]: the SNS client's requests and answers, against a canned endpoint;
//! - [`dynamodb_local`]: real stream batches and the parked table on DynamoDB Local.

mod common;
mod dynamodb_local;
mod publish;
mod sns_topic;
