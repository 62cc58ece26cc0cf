//! What the tests of the read model's roles share: a one-entity model, its rows, and sessions as
//! a given user of a throwaway cluster (trust authentication: no password is ever set).

#![allow(dead_code)]

use cqrs_item::{Item, Value};
use cqrs_local_stack::postgres::Throwaway;
use cqrs_model::Model;
use cqrs_sql::{rows::row, schema::Schema, write::Change};
use tokio_postgres::{Client, NoTls};

/// A model of one entity, `loan`.
pub const MODEL: &str = r#"
[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
attributes.loanId = { type = "string", required = true, max = 26 }
"#;

/// A session of `user` on `database` of `pg`, or PostgreSQL's message.
pub async fn connect(pg: &Throwaway, user: &str, database: &str) -> Result<Client, String> {
    let url = pg
        .url()
        .replacen("postgres://postgres@", &format!("postgres://{user}@"), 1);
    let url = format!("{}/{database}", url.rsplit_once('/').unwrap().0);
    let (client, connection) = tokio_postgres::connect(&url, NoTls)
        .await
        .map_err(|e| message(&e))?;
    tokio::spawn(connection);
    Ok(client)
}

/// [`connect`], which must succeed.
pub async fn connected(pg: &Throwaway, user: &str, database: &str) -> Client {
    connect(pg, user, database)
        .await
        .unwrap_or_else(|e| panic!("{user} connects to {database}: {e}"))
}

/// PostgreSQL's own message of an error (not "db error").
pub fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map_or(e.to_string(), |d| d.message().to_string())
}

/// Version 1 of loan `id` of `tenant`, as a row to write.
pub fn loan(model: &Model, tenant: &str, id: &str) -> Change {
    let mut item = Item::example();
    item.pk = format!("LOAN#{tenant}");
    item.sk = id.into();
    item.id = cqrs_keys::generate_id(&item.pk, id);
    item.tenant_code = tenant.into();
    item.item_type = "LOAN".into();
    item.version = 1;
    item.attributes.clear();
    item.attributes.insert("loanId".into(), Value::from(id));
    Change::Upsert(row(model, &Schema::of(model), &item))
}

/// The keys of the loans `client` reads as `tenant` through [`cqrs_sql::read::as_tenant`].
pub async fn tenant_rows(client: &mut Client, tenant: &str) -> Result<Vec<String>, String> {
    let session = cqrs_sql::read::as_tenant(client, tenant)
        .await
        .map_err(|e| format!("as_tenant: {}", message(&e)))?;
    let rows = session
        .query(r#"SELECT "sk" FROM "loan" ORDER BY "sk""#, &[])
        .await
        .map_err(|e| message(&e))?;
    session.commit().await.map_err(|e| message(&e))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}
