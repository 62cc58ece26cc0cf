//! Reading the relational read model as a caller of one tenant: a transaction in the role
//! `cqrs_reader` with the session's tenant set, so that row-level security shows that tenant's rows
//! (and the `common` rows every tenant may read) and nothing else, whatever the query says; the
//! reader writes nothing. The connecting user must be a member of `cqrs_reader` (or a superuser,
//! as locally): `GRANT cqrs_reader TO <user>`.
//!
//! ```no_run
//! # async fn example(client: &mut tokio_postgres::Client) -> Result<(), tokio_postgres::Error> {
//! let session = cqrs_sql::read::as_tenant(client, "t1").await?;
//! let open: i64 = session
//!     .query_one(r#"SELECT count(*) FROM "task" WHERE "status" = 'open'"#, &[])
//!     .await?
//!     .get(0);
//! session.commit().await?;
//! # Ok(()) }
//! ```

use tokio_postgres::{Client, Transaction};

use crate::schema::{READER_ROLE, TENANT_SETTING, ident, literal};

/// A transaction that reads as `tenant` (see the module's example).
pub async fn as_tenant<'a>(
    client: &'a mut Client,
    tenant: &str,
) -> Result<Transaction<'a>, tokio_postgres::Error> {
    let transaction = client.transaction().await?;
    transaction
        .batch_execute(&format!("SET LOCAL ROLE {}", ident(READER_ROLE)))
        .await?;
    transaction
        .execute(
            &format!("SELECT set_config({}, $1, true)", literal(TENANT_SETTING)),
            &[&tenant],
        )
        .await?;
    Ok(transaction)
}
