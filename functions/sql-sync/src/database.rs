//! Where sql-sync connects, and how: the function's environment names either a connection string
//! (the local stack's PostgreSQL) or an RDS Proxy reached with IAM authentication over verified TLS
//! (a deployment). The code is shared with the CLI and a service's own routes: it lives in
//! [`cqrs_sql::connect`] (its documentation says which variables mean what); these are its names
//! as sql-sync has always exported them.
//!
//! ```
//! use cqrs_sql_sync::database::Database;
//! let local = Database::from_env(|name| {
//!     (name == "SQL_URL").then(|| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
//! })
//! .unwrap();
//! assert!(matches!(local, Database::Url(_)));
//! ```

pub use cqrs_sql::connect::{CONNECT_TIMEOUT, ConnectError, Database, Iam, TOKEN_LIFETIME, tls};

use crate::SyncError;

/// A connection that could not be opened is sql-sync's [`SyncError`] of the same kind.
impl From<ConnectError> for SyncError {
    fn from(error: ConnectError) -> Self {
        match error {
            ConnectError::Connect(error) => SyncError::Connect(error),
            ConnectError::Timeout(after) => SyncError::ConnectTimeout(after),
            ConnectError::Config(message) => SyncError::Config(message),
        }
    }
}
