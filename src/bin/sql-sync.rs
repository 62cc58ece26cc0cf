//! The example service's `sql-sync` Lambda function: the data table's stream into the relational
//! read model (PostgreSQL at `SQL_URL`), with the service's model and migrations.

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::sql_sync::<cqrs_example_shop::Shop>()
}
