//! The `command-handler` Lambda function: the framework's command handler serving this service's
//! model, with this service's rules on its commands (`{{crate}}::{{service}}`'s hooks).

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::command_handler::<{{crate}}::{{service}}>()
}
