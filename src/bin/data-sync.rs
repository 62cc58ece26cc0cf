//! The example service's `data-sync` Lambda function: the framework's projection of the command
//! table's stream into the data and history tables, with the framework's own sync targets only
//! (this service registers none of its own: a service adds them in the closure).

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::data_sync::<cqrs_example_shop::Shop>()
}
