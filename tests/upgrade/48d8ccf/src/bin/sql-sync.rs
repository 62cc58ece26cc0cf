//! The `sql-sync` Lambda function: the data table's stream into this service's relational read model
//! (PostgreSQL at `SQL_URL`), with its model and its migrations (`migrations/`, listed in
//! `src/lib.rs`), applied at cold start.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    cqrs_sql_sync::run(tasks::MODEL, tasks::MIGRATIONS).await
}
