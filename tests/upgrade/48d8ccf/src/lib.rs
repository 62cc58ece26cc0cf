//! tasks's own code: its rules on its commands (command hooks) and its sync targets. The
//! binaries in `src/bin/` hand them to the framework; the tests in `tests/` run them against
//! DynamoDB Local.

use cqrs_command_handler::hooks::{CommandHook, HookCommand, HookFuture, Hooks};
use cqrs_problem::ApiError;

/// The service's model (`model.toml`), compiled in.
pub const MODEL: &str = include_str!("../model.toml");

/// The migrations of the relational read model (`migrations/`, written by `cqrs model sql
/// --migrations migrations` after a model change), in order: add each new file here too; the model
/// test fails until the two agree.
pub const MIGRATIONS: &[(u32, &str, &str)] = &[(
    1,
    "V1__model.sql",
    include_str!("../migrations/V1__model.sql"),
)];

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
                    "urn:tasks:task-done",
                    "Task done",
                    "a task that is done stays done",
                ));
            }
            Ok(())
        })
    }
}

/// `GET /tasks/report?status=open&sort=title|updated&limit=50`: the caller's tenant's tasks from the
/// relational read model (PostgreSQL), filtered, sorted and counted, `{"count": 12, "items":
/// [...]}`: what the model's access patterns do not answer. It reads as the caller's tenant
/// ([`cqrs_sql::read::as_tenant`]: row-level security shows no other tenant's rows), and answers
/// with the framework's caller and problem documents (400 on a bad parameter, 401 without a caller,
/// 503 while the database is unreachable).
pub async fn task_report(
    client: Option<&mut tokio_postgres::Client>,
    mode: cqrs_caller::CallerMode,
    request: lambda_http::Request,
) -> lambda_http::Response<lambda_http::Body> {
    let request_id = cqrs_caller::request_id(&request);
    match task_report_answer(client, mode, &request).await {
        Ok(body) => lambda_http::Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(lambda_http::Body::Text(body.to_string()))
            .unwrap_or_default(),
        Err(error) => error.into_response(&request_id),
    }
}

async fn task_report_answer(
    client: Option<&mut tokio_postgres::Client>,
    mode: cqrs_caller::CallerMode,
    request: &lambda_http::Request,
) -> Result<serde_json::Value, ApiError> {
    use lambda_http::RequestExt;
    let caller = cqrs_caller::Caller::from_request(request, mode)?;
    let query = request.query_string_parameters();
    let status = query.first("status").map(str::to_string);
    if let Some(status) = &status
        && !["open", "done"].contains(&status.as_str())
    {
        return Err(ApiError::bad_field("status", "must be open or done"));
    }
    let order = match query.first("sort").unwrap_or("title") {
        "title" => r#""title", "taskId""#,
        "updated" => r#""updated_at" DESC, "taskId""#,
        _ => return Err(ApiError::bad_field("sort", "must be title or updated")),
    };
    let limit: i64 = match query.first("limit") {
        None => 50,
        Some(text) => text
            .parse()
            .ok()
            .filter(|n| (1..=500).contains(n))
            .ok_or_else(|| ApiError::bad_field("limit", "must be a number from 1 to 500"))?,
    };
    let unavailable =
        |e: tokio_postgres::Error| ApiError::Unavailable(format!("the relational read model: {e}"));
    let client = client.ok_or_else(|| {
        ApiError::Unavailable("the relational read model is unreachable".into())
    })?;
    let session = cqrs_sql::read::as_tenant(client, &caller.tenant_code)
        .await
        .map_err(unavailable)?;
    let filter = r#"NOT "is_deleted" AND ($1::text IS NULL OR "status" = $1)"#;
    let count: i64 = session
        .query_one(&format!(r#"SELECT count(*) FROM "task" WHERE {filter}"#), &[&status])
        .await
        .map_err(unavailable)?
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
        .map_err(unavailable)?;
    session.commit().await.map_err(unavailable)?;
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
    Ok(serde_json::json!({"count": count, "items": items}))
}
