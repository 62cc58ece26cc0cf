//! The example service's `event-publisher` Lambda function: the framework's change feed. It reads
//! the data table's stream and publishes one CloudEvent per version of each item of the model's
//! entities to the service's SNS FIFO topic (`EventsTopic`), which the consumers' queues subscribe
//! to (model.toml's `[consumers]`).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    cqrs_event_publisher::run(cqrs_example_shop::MODEL).await
}
