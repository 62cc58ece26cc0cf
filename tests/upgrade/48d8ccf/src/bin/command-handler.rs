//! The `command-handler` Lambda function: the framework's command handler serving this service's
//! model, with this service's rules on its commands (tasks::hooks).

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    cqrs_command_handler::run_with_hooks(tasks::MODEL, tasks::hooks()).await
}
