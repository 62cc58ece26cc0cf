//! library's own code: what it tells the framework about itself ([`Library`]: its model, its
//! relational read model's migrations, its rules on its commands) and its own route's handler. The
//! binaries in `src/bin/` hand them to the framework, one call each; the tests in `tests/` check
//! them.

use cqrs_dynamo::ApiError;
use cqrs_dynamo::hooks::{HookCommand, Hooks};
use cqrs_dynamo::routes::{Json, Problem, Query, Sql, Tenant, failed};

pub mod model;

pub use model::TaskStatus;

/// The service as the framework runs it: each of its binaries (`src/bin/`) is one call of
/// `cqrs_dynamo::run::<function>::<Library>`.
pub struct Library;

impl cqrs_dynamo::Service for Library {
    /// The service's model (`model.toml`), compiled in.
    const MODEL: &'static str = include_str!("../model.toml");

    /// The migrations of the relational read model (`migrations/`, written by `cqrs model sql
    /// --migrations migrations` after a model change), in order: add each new file here too; the
    /// model test fails until the two agree.
    const MIGRATIONS: &'static [cqrs_dynamo::Migration] = &[(
        1,
        "V1__model.sql",
        include_str!("../migrations/V1__model.sql"),
    )];

    /// The service's command hooks, by entity (one hook per entity: a closure, an `async fn` with
    /// `Hooks::on_async`, or a type implementing `CommandHook` with `Hooks::on`).
    fn hooks() -> Hooks {
        Hooks::new().on_fn("task", task_rules)
    }
}

/// A task that is done stays done: a command that would open it again is refused (422), and nothing
/// is written. The command reads as the typed `model::Task` (`src/model.rs`, written by `cqrs
/// model rust` from model.toml).
pub fn task_rules(command: &mut HookCommand<'_>) -> Result<(), ApiError> {
    let was_done = command
        .stored_typed::<model::Task>()?
        .is_some_and(|task| task.status == TaskStatus::Done);
    if was_done && command.typed::<model::Task>()?.status != TaskStatus::Done {
        return Err(ApiError::refused(
            422,
            "urn:library:task-done",
            "Task done",
            "a task that is done stays done",
        ));
    }
    Ok(())
}

/// The query of `GET /tasks/report` (declared in `model.toml`, `[routes.task-report]`): a value
/// that does not fit is a 400 problem document naming the parameter.
#[derive(Debug, serde::Deserialize)]
pub struct ReportQuery {
    /// Only the tasks of this status.
    pub status: Option<TaskStatus>,
    /// `title` (the default) or `updated` (the most recently updated first).
    pub sort: Option<ReportSort>,
    /// At most this many items, 1 to 500 (50 by default).
    pub limit: Option<i64>,
}

/// The report's order.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportSort {
    /// By title.
    Title,
    /// The most recently updated first.
    Updated,
}

/// `GET /tasks/report?status=open&sort=title|updated&limit=50` (operation `taskReport` of the
/// route function `task-report`, `src/bin/task-report.rs`): the caller's tenant's tasks from the
/// relational read model (PostgreSQL), filtered, sorted and counted, `{"count": 12, "items":
/// [...]}`: what the model's access patterns do not answer. It reads as the caller's tenant
/// (row-level security shows no other tenant's rows), and answers with the framework's caller and
/// problem documents (400 on a bad parameter, 401 without a caller, 503 while the database is
/// unreachable).
pub async fn task_report(
    Tenant(tenant): Tenant,
    Query(query): Query<ReportQuery>,
    mut sql: Sql,
) -> Result<Json<serde_json::Value>, Problem> {
    let limit = query.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::bad_field("limit", "must be a number from 1 to 500").into());
    }
    let status = query.status.map(TaskStatus::as_str);
    let order = match query.sort.unwrap_or(ReportSort::Title) {
        ReportSort::Title => r#""title", "taskId""#,
        ReportSort::Updated => r#""updated_at" DESC, "taskId""#,
    };
    let session = sql.as_tenant(&tenant).await?;
    let filter = r#"NOT "is_deleted" AND ($1::text IS NULL OR "status" = $1)"#;
    let count: i64 = session
        .query_one(
            &format!(r#"SELECT count(*) FROM "task" WHERE {filter}"#),
            &[&status],
        )
        .await
        .map_err(failed)?
        .get(0);
    let rows = session
        .query(
            &format!(
                r#"SELECT "taskId", "title", "owner", "status", "version" FROM "task"
                   WHERE {filter} ORDER BY {order} LIMIT $2"#
            ),
            &[&status, &limit],
        )
        .await
        .map_err(failed)?;
    session.commit().await.map_err(failed)?;
    let items: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            serde_json::json!({
                "taskId": row.get::<_, Option<String>>(0),
                "title": row.get::<_, String>(1),
                "owner": row.get::<_, String>(2),
                "status": row.get::<_, String>(3),
                "version": row.get::<_, i64>(4),
            })
        })
        .collect();
    Ok(Json(serde_json::json!({"count": count, "items": items})))
}
