//! Reading the relational read model as a caller of one tenant: a transaction in the role
//! `cqrs_reader` with the session's tenant set, so that row-level security shows that tenant's rows
//! (and the `common` rows every tenant may read) and nothing else, whatever the query says; the
//! reader writes nothing. The connecting user must be allowed to `SET ROLE cqrs_reader`: a
//! superuser (as locally), the user that ran the migrations (they grant it to that user,
//! [`crate::schema::reader_grant_ddl`], on PostgreSQL 15 and 16+ alike), the service's routes'
//! user `cqrs_routes` ([`crate::schema::ROUTES_USER`], which may do nothing else; in AWS it signs
//! in through RDS Proxy with an IAM token, see `crate::connect`), or a reader's own user granted
//! it by the migrating user: `GRANT cqrs_reader TO <user>`. Otherwise the transaction fails with
//! `permission denied to set role "cqrs_reader"`.
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
