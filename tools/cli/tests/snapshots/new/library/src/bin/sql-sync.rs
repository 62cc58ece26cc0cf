//! The `sql-sync` Lambda function: the data table's stream into this service's relational read model
//! (PostgreSQL at `SQL_URL`), with its model and its migrations (`migrations/`, listed in
//! `src/lib.rs`'s `MIGRATIONS`), applied at cold start.

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::sql_sync::<library::Library>()
}
