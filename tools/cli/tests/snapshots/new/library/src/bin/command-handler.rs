//! The `command-handler` Lambda function: the framework's command handler serving this service's
//! model, with this service's rules on its commands (`library::Library`'s hooks).

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::command_handler::<library::Library>()
}
