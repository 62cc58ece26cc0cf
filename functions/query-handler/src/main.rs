//! The `query-handler` Lambda function: wiring only. The DynamoDB client and the configuration
//! are built once per cold start (each phase timed and logged once, see
//! [`cqrs_store::client::InitClock`]); the entity model on the first `/query/{pattern}` request
//! ([`query_handler::App::model`]); every request goes to [`query_handler::handle`].

#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use cqrs_caller::CallerMode;
use cqrs_store::client::{InitClock, client_from_env};
use cqrs_store::{Store, Tables};
use lambda_http::{Error, Request, service_fn};
use query_handler::App;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut init = InitClock::start();
    cqrs_store::logging::init();
    init.lap("logging");
    let tables = Tables::from_env()?;
    let caller_mode = CallerMode::from_env()?;
    query_handler::access_log::init_from_env()?;
    init.lap("config");
    let client = client_from_env(&mut init)?;
    let app = App::new(Store::new(client, tables), caller_mode);
    init.log();
    let app = &app;
    lambda_http::run(service_fn(move |request: Request| async move {
        Ok::<_, Error>(query_handler::handle(app, request).await)
    }))
    .await
}
