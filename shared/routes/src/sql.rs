//! The relational read model for a route function whose declaration `reads` `"sql"`: one
//! PostgreSQL connection per container ([`Reader`]), opened on the first request that takes
//! [`Sql`] and again after it broke, and read as the caller's tenant ([`Sql::as_tenant`]: row-level
//! security shows that tenant's rows and `common`'s, nothing else).
//!
//! Where it connects ([`Reader::from_env`], the connection code of `cqrs_sql::connect`):
//! - `SQL_URL`, a connection string (locally: `cqrs dev` gives it);
//! - else `SQL_HOST`, `SQL_PORT`, `SQL_DATABASE`, `SQL_USER` (and `AWS_REGION`): RDS Proxy with an
//!   IAM authentication token signed with the function's credentials, over TLS verified against
//!   the Amazon roots. An empty `SQL_HOST` is a stack deployed without the read model
//!   (`SqlReadModel` none): the function starts, and each request that takes [`Sql`] is a 503.
//!
//! A database that cannot be reached (or refuses the connection) is a 503 problem document with
//! `Retry-After`; [`failed`] says the same for a query's error.
//!
//! ```no_run
//! use cqrs_routes::{Json, Problem, Tenant, sql::{Sql, failed}};
//!
//! async fn open_tasks(Tenant(tenant): Tenant, mut sql: Sql) -> Result<Json<i64>, Problem> {
//!     let session = sql.as_tenant(&tenant).await?;
//!     let open: i64 = session
//!         .query_one(r#"SELECT count(*) FROM "task" WHERE "status" = 'open'"#, &[])
//!         .await
//!         .map_err(failed)?
//!         .get(0);
//!     session.commit().await.map_err(failed)?;
//!     Ok(Json(open))
//! }
//! # let _ = open_tasks;
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use cqrs_problem::ApiError;
use cqrs_sql::connect::Database;
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio_postgres::{Client, Transaction};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::{Error, Problem, RouteState};

/// The container's one connection to the relational read model (cheap to clone: clones share
/// it).
///
/// ```
/// let reader = cqrs_routes::sql::Reader::new(cqrs_sql::connect::Database::Url(
///     "postgres://postgres@127.0.0.1:5432/postgres".into(),
/// ))
/// .unwrap();
/// assert_eq!(reader.connections(), 0, "nothing is opened before a request needs it");
/// ```
#[derive(Clone)]
pub struct Reader {
    inner: Arc<Inner>,
}

struct Inner {
    /// `None`: the stack has no read model (an empty `SQL_HOST`).
    target: Option<(Database, MakeRustlsConnect)>,
    slot: Arc<Mutex<Option<Client>>>,
    opened: AtomicU64,
}

impl Reader {
    /// A reader of `database`, over TLS verified against the Amazon roots (a local server without
    /// TLS is reached in plain text, as `sslmode=prefer` allows). Nothing is opened yet.
    ///
    /// ```
    /// let database = cqrs_sql::connect::Database::Url("postgres://u@127.0.0.1:1/db".into());
    /// assert!(cqrs_routes::sql::Reader::new(database).is_ok());
    /// ```
    pub fn new(database: Database) -> Result<Reader, Error> {
        let tls = cqrs_sql::connect::tls(cqrs_store::client::AMAZON_ROOTS)
            .map_err(|e| Error::Config(e.to_string()))?;
        Ok(Reader::with_target(Some((database, tls))))
    }

    /// A reader of a stack deployed without the read model: every request that takes [`Sql`] is
    /// a 503.
    ///
    /// ```
    /// let reader = cqrs_routes::sql::Reader::not_deployed();
    /// assert_eq!(reader.connections(), 0);
    /// ```
    pub fn not_deployed() -> Reader {
        Reader::with_target(None)
    }

    fn with_target(target: Option<(Database, MakeRustlsConnect)>) -> Reader {
        Reader {
            inner: Arc::new(Inner {
                target,
                slot: Arc::new(Mutex::new(None)),
                opened: AtomicU64::new(0),
            }),
        }
    }

    /// The reader the environment describes (see the module's documentation): `SQL_URL`, else
    /// `SQL_HOST` and the rest (an empty `SQL_HOST`: [`Reader::not_deployed`]); neither is an
    /// error naming both.
    ///
    /// ```
    /// // The doctest environment sets neither.
    /// let error = cqrs_routes::sql::Reader::from_env().err().unwrap();
    /// assert!(error.to_string().contains("SQL_URL"), "{error}");
    /// ```
    pub fn from_env() -> Result<Reader, Error> {
        Reader::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`Reader::from_env`] reading the variables through `get`.
    ///
    /// ```
    /// let env = |name: &str| (name == "SQL_HOST").then(String::new);
    /// assert!(cqrs_routes::sql::Reader::from_lookup(env).is_ok(), "an empty SQL_HOST: 503s");
    /// ```
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Reader, Error> {
        let url = get("SQL_URL").filter(|u| !u.is_empty());
        match (url, get("SQL_HOST")) {
            (None, None) => Err(Error::Config(
                "SQL_URL (a connection string) or SQL_HOST, SQL_PORT, SQL_DATABASE, SQL_USER (RDS \
                 Proxy with IAM authentication): the relational read model this route function \
                 reads"
                    .into(),
            )),
            (None, Some(host)) if host.is_empty() => {
                tracing::warn!(
                    "SQL_HOST is empty (a stack without the relational read model): requests \
                     that read it are answered 503"
                );
                Ok(Reader::not_deployed())
            }
            _ => {
                let database = Database::from_env(get).map_err(|e| Error::Config(e.to_string()))?;
                Reader::new(database)
            }
        }
    }

    /// How many connections this reader has opened (one per container, again after one broke).
    ///
    /// ```
    /// assert_eq!(cqrs_routes::sql::Reader::not_deployed().connections(), 0);
    /// ```
    pub fn connections(&self) -> u64 {
        self.inner.opened.load(Ordering::Relaxed)
    }

    /// The connection, for one request: opened when there is none or it broke. Unreachable, or
    /// no read model deployed: a 503 problem.
    ///
    /// ```no_run
    /// # async fn example(reader: cqrs_routes::sql::Reader) -> Result<(), cqrs_routes::Problem> {
    /// let mut sql = reader.session().await?;
    /// let session = sql.as_tenant("t1").await?;
    /// session.commit().await.map_err(cqrs_routes::sql::failed)?;
    /// # Ok(()) }
    /// ```
    pub async fn session(&self) -> Result<Sql, Problem> {
        let Some((database, tls)) = &self.inner.target else {
            return Err(Problem(ApiError::Unavailable(
                "the relational read model is not deployed with this stack (SqlReadModel none)"
                    .into(),
            )));
        };
        let mut slot = self.inner.slot.clone().lock_owned().await;
        if slot.as_ref().is_none_or(Client::is_closed) {
            *slot = None;
            match database.connect(tls).await {
                Ok(client) => {
                    self.inner.opened.fetch_add(1, Ordering::Relaxed);
                    *slot = Some(client);
                }
                Err(error) => {
                    tracing::error!(%error, "the relational read model is unreachable");
                    return Err(Problem(ApiError::Unavailable(
                        "the relational read model is unreachable".into(),
                    )));
                }
            }
        }
        Ok(Sql { slot })
    }
}

/// The container's connection to the relational read model, held for one request (a handler's
/// extractor; see the module's example). In a function whose declaration does not read `"sql"`, a
/// 500 problem document naming the declaration to fix.
pub struct Sql {
    slot: OwnedMutexGuard<Option<Client>>,
}

impl Sql {
    /// A transaction that reads as `tenant` ([`cqrs_sql::read::as_tenant`]): commit it (or drop
    /// it) when done.
    ///
    /// ```no_run
    /// # async fn example(mut sql: cqrs_routes::Sql) -> Result<(), cqrs_routes::Problem> {
    /// let session = sql.as_tenant("t1").await?;
    /// let rows = session.query("SELECT 1", &[]).await.map_err(cqrs_routes::sql::failed)?;
    /// # Ok(()) }
    /// ```
    pub async fn as_tenant(&mut self, tenant: &str) -> Result<Transaction<'_>, Problem> {
        cqrs_sql::read::as_tenant(self.client(), tenant)
            .await
            .map_err(|error| {
                // `SET ROLE` of a role that does not exist (22023): the reader role is made by
                // the first migration, which sql-sync applies at its first batch. Until then
                // the read model is not there yet: a 503, as for a missing table.
                if error.code() == Some(&tokio_postgres::error::SqlState::INVALID_PARAMETER_VALUE) {
                    tracing::warn!(%error, "the relational read model is not migrated yet");
                    Problem(ApiError::Unavailable(
                        "the relational read model is not migrated yet".into(),
                    ))
                } else {
                    failed(error)
                }
            })
    }

    /// The connection itself (as its database user, not as a tenant: prefer
    /// [`Sql::as_tenant`]).
    ///
    /// ```no_run
    /// # async fn example(mut sql: cqrs_routes::Sql) {
    /// assert!(!sql.client().is_closed());
    /// # }
    /// ```
    #[allow(clippy::expect_used)]
    pub fn client(&mut self) -> &mut Client {
        self.slot
            .as_mut()
            .expect("a session holds an open connection")
    }
}

impl FromRequestParts<RouteState> for Sql {
    type Rejection = Problem;

    async fn from_request_parts(
        _parts: &mut Parts,
        state: &RouteState,
    ) -> Result<Self, Self::Rejection> {
        match state.sql() {
            Some(reader) => reader.session().await,
            None => Err(Problem(ApiError::Internal(format!(
                "the route function `{0}` reads the relational read model but its declaration \
                 does not: add reads = [\"sql\"] to [routes.{0}] in model.toml",
                state.function()
            )))),
        }
    }
}

/// The problem a failed query answers: the database unreachable, restarting, overloaded, or not
/// migrated yet (its tables missing) is a 503 with `Retry-After`; anything else (a query of the
/// route's that is wrong, a role it may not take) a 500 whose detail stays in the logs.
///
/// ```
/// use cqrs_routes::sql::failed;
/// # async fn example(client: &tokio_postgres::Client) -> Result<(), cqrs_routes::Problem> {
/// let one: i32 = client.query_one("SELECT 1", &[]).await.map_err(failed)?.get(0);
/// # Ok(()) }
/// ```
pub fn failed(error: tokio_postgres::Error) -> Problem {
    let code = error.code().map(|c| c.code().to_string());
    let transient = match code.as_deref() {
        // No answer from the server at all: the connection broke or never opened.
        None => true,
        // Connection exceptions, insufficient resources, operator intervention (shutdown,
        // cancelled by a timeout), serialization failures and deadlocks, an undefined table
        // (sql-sync has not migrated yet).
        Some(code) => {
            ["08", "53", "57", "40"]
                .iter()
                .any(|class| code.starts_with(class))
                || code == "42P01"
        }
    };
    // tokio-postgres shows a server's error as "db error" alone: say what the server said.
    let detail = match error.as_db_error() {
        Some(db) => format!("{} {}: {}", db.severity(), db.code().code(), db.message()),
        None => error.to_string(),
    };
    if transient {
        tracing::warn!(error = %detail, "the relational read model failed a query");
        Problem(ApiError::Unavailable(
            "the relational read model is unavailable".into(),
        ))
    } else {
        Problem(ApiError::Internal(format!(
            "the relational read model: {detail}"
        )))
    }
}
