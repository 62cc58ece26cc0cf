//! The example service's `command-handler` Lambda function: the framework's command handler
//! serving this service's model (`model.toml`, compiled in).

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::command_handler::<cqrs_example_shop::Shop>()
}
