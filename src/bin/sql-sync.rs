//! The example service's `sql-sync` Lambda function: the data table's stream into the relational
//! read model (PostgreSQL at `SQL_URL`), with the service's model and migrations.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    cqrs_sql_sync::run(
        include_str!("../../model.toml"),
        cqrs_example_shop::MIGRATIONS,
    )
    .await
}
