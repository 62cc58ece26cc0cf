//! The example service's `event-publisher` Lambda function: the framework's change feed. It reads
//! the data table's stream and publishes one CloudEvent per version of each item of the model's
//! entities to the service's SNS FIFO topic (`EventsTopic`), which the consumers' queues subscribe
//! to (model.toml's `[consumers]`).

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::event_publisher::<cqrs_example_shop::Shop>()
}
