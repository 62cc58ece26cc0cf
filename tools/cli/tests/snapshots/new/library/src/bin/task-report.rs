//! The `task-report` Lambda function: the service's own route function, declared in `model.toml`
//! (`[routes.task-report]`: its operations' methods, paths, query and what it reads), each operation
//! served by its id ([`library::task_report`]).

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::routes::<library::Library>("task-report", |routes| {
        routes.on("taskReport", library::task_report)
    })
}
