//! The `data-sync` Lambda function: projects the command table's stream into the data and history
//! tables. Nothing of the service's goes here: it reacts to a change in a consumer of its change
//! events (src/bin/task-audit.rs), with a queue of its own.

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::data_sync::<library::Library>()
}
