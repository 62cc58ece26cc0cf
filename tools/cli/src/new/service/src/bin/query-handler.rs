//! The `query-handler` Lambda function: the framework's query handler serving this service's model
//! (items, history, and the model's access patterns).

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::query_handler::<{{crate}}::{{service}}>()
}
