//! The example service's `query-handler` Lambda function: the framework's query handler serving
//! this service's model (`model.toml`, compiled in; parsed on the first access-pattern request).

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::query_handler::<cqrs_example_shop::Shop>()
}
