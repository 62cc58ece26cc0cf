//! The `query-handler` Lambda function: wiring only. The DynamoDB client and configuration are
//! built once per cold start; every request goes to [`query_handler::handle`].

#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use cqrs_caller::CallerMode;
use cqrs_store::{Store, Tables};
use lambda_http::{Error, Request, service_fn};
use query_handler::App;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    let tables = Tables::from_env()?;
    let caller_mode = CallerMode::from_env()?;
    query_handler::access_log::init_from_env()?;
    let config = aws_config::load_from_env().await;
    let started = std::time::Instant::now();
    let app = App::new(
        Store::new(aws_sdk_dynamodb::Client::new(&config), tables),
        caller_mode,
    )?;
    tracing::info!(
        revision = app.model.revision(),
        patterns = app.model.patterns().len(),
        micros = started.elapsed().as_micros() as u64,
        "entity model loaded"
    );
    let app = &app;
    lambda_http::run(service_fn(move |request: Request| async move {
        Ok::<_, Error>(query_handler::handle(app, request).await)
    }))
    .await
}
