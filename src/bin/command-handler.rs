//! The example service's `command-handler` Lambda function: the framework's command handler
//! serving this service's model (`model.toml`, compiled in).

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    cqrs_command_handler::run(include_str!("../../model.toml")).await
}
