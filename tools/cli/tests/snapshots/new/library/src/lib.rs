//! library's own code: its rules on its commands (command hooks) and its sync targets. The
//! binaries in `src/bin/` hand them to the framework; the tests in `tests/` run them against
//! DynamoDB Local.

use cqrs_command_handler::hooks::{CommandHook, HookCommand, HookFuture, Hooks};
use cqrs_problem::ApiError;

/// The service's model (`model.toml`), compiled in.
pub const MODEL: &str = include_str!("../model.toml");

/// The service's command hooks, by entity.
pub fn hooks() -> Hooks {
    Hooks::new().on("task", TaskRules)
}

/// A task that is done stays done: a command that would open it again is refused (422), and nothing
/// is written.
pub struct TaskRules;

fn status(item: &cqrs_item::Item) -> Option<&str> {
    item.attributes.get("status").and_then(|v| v.as_str())
}

impl CommandHook for TaskRules {
    fn before_write<'a>(&'a self, command: &'a mut HookCommand<'_>) -> HookFuture<'a> {
        Box::pin(async move {
            let was_done = command.stored().and_then(status) == Some("done");
            if was_done && status(command.item()) != Some("done") {
                return Err(ApiError::refused(
                    422,
                    "urn:library:task-done",
                    "Task done",
                    "a task that is done stays done",
                ));
            }
            Ok(())
        })
    }
}
