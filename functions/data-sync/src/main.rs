//! The `data-sync` Lambda function: wiring only. The DynamoDB client, the configuration and the
//! sync targets are built once per cold start (each phase timed and logged once, see
//! [`cqrs_store::client::InitClock`]); every batch goes to [`data_sync::handle_event`].
//!
//! Configuration: `COMMAND_TABLE`, `DATA_TABLE`, `HISTORY_TABLE`, `IDEMPOTENCY_TABLE` (required,
//! like every function of the project), `PARKED_TABLE` (required here: where records that can
//! never be projected are parked), `CHANGE_LOG_TABLE` (optional: enables the change-log target),
//! `RUST_LOG` / `AWS_LAMBDA_LOG_LEVEL` / `AWS_LAMBDA_LOG_FORMAT`; the client's variables are
//! those of [`cqrs_store::client`].
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use aws_lambda_events::event::dynamodb::Event;
use cqrs_store::client::{InitClock, client_from_env};
use cqrs_store::{Store, Tables};
use data_sync::{DataSync, change_log::ChangeLog};
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut init = InitClock::start();
    cqrs_store::logging::init();
    init.lap("logging");
    let tables = Tables::from_env()?.require_parked()?;
    init.lap("config");
    let store = Store::new(client_from_env(&mut init)?, tables);
    let mut sync = DataSync::new(store.clone());
    if let Some(change_log) = ChangeLog::from_env(&store) {
        tracing::info!(table = change_log.table(), "change log enabled");
        sync = sync.with_target(change_log);
    }
    init.log();
    let sync = &sync;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        data_sync::handle_event(sync, event).await
    }))
    .await
}
