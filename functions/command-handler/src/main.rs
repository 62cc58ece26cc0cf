//! The `command-handler` Lambda function: wiring only. The DynamoDB client and configuration are
//! built once per cold start; every request goes to [`command_handler::handle`].

#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use command_handler::App;
use cqrs_caller::CallerMode;
use cqrs_store::{Store, Tables};
use lambda_http::{Error, Request, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    let tables = Tables::from_env()?;
    if tables.sequences.is_none() {
        return Err(cqrs_store::ConfigError::MissingVariable("SEQUENCES_TABLE").into());
    }
    let caller_mode = CallerMode::from_env()?;
    let config = aws_config::load_from_env().await;
    let started = std::time::Instant::now();
    let app = App::new(
        Store::new(aws_sdk_dynamodb::Client::new(&config), tables),
        caller_mode,
    )?;
    tracing::info!(
        entities = app.model.entities().len(),
        revision = app.model.revision(),
        micros = started.elapsed().as_micros() as u64,
        "entity model loaded"
    );
    let app = &app;
    lambda_http::run(service_fn(move |request: Request| async move {
        Ok::<_, Error>(command_handler::handle(app, request).await)
    }))
    .await
}
