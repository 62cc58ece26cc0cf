//! The `task-report` Lambda function: the service's own route function, declared in `model.toml`
//! (`[routes.task-report]`: its operations' methods, paths, query and what it reads), each operation
//! served by its id ([`{{crate}}::task_report`]).

#[tokio::main]
async fn main() -> Result<(), cqrs_routes::Error> {
    cqrs_routes::Routes::new({{crate}}::MODEL, "task-report")?
        .on("taskReport", {{crate}}::task_report)?
        .run()
        .await
}
