//! The `event-publisher` Lambda function: the change feed. It reads the data table's stream and
//! publishes one CloudEvent per version of each item of the model's entities to the service's SNS
//! FIFO topic (template.yaml's `EventsTopic`), in order per item; the consumers of `model.toml`'s
//! `[consumers]` each read it from a FIFO queue of their own. Nothing of the service's goes here:
//! a team reacts to a change in a consumer (src/bin/task-audit.rs).

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::event_publisher::<{{crate}}::{{service}}>()
}
