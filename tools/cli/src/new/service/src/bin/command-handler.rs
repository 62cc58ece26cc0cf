//! The `command-handler` Lambda function: the framework's command handler serving this service's
//! model, with this service's rules on its commands (command hooks).

use cqrs_command_handler::hooks::{CommandHook, HookCommand, HookFuture, Hooks};
use cqrs_problem::ApiError;

/// A task that is done stays done: a command that would open it again is refused (422), and nothing
/// is written.
struct TaskRules;

impl CommandHook for TaskRules {
    fn before_write<'a>(&'a self, command: &'a mut HookCommand<'_>) -> HookFuture<'a> {
        Box::pin(async move {
            let status = |item: &cqrs_item::Item| {
                item.attributes
                    .get("status")
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
            };
            let was = command.stored().and_then(status);
            let now = status(command.item());
            if was.as_deref() == Some("done") && now.as_deref() != Some("done") {
                return Err(ApiError::refused(
                    422,
                    "urn:{{name}}:task-done",
                    "Task done",
                    "a task that is done stays done",
                ));
            }
            Ok(())
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    let hooks = Hooks::new().on("task", TaskRules);
    cqrs_command_handler::run_with_hooks(include_str!("../../model.toml"), hooks).await
}
