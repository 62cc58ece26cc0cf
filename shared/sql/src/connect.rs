//! Connecting to the relational read model: either a connection string (a local PostgreSQL) or
//! an RDS Proxy (or RDS database) reached with IAM authentication over verified TLS (a
//! deployment). sql-sync connects this way, and so do `cqrs verify --sql` / `rebuild --sql` and a
//! service's own routes (feature `connect`).
//!
//! - `SQL_URL`: a connection string (`postgres://user@127.0.0.1:5432/db`). TLS is used when the
//!   server offers it (`sslmode=prefer`, the default) or required with `sslmode=require`; a
//!   server's certificate is verified against the roots given to [`tls`] either way.
//! - Otherwise `SQL_HOST` (the proxy's endpoint), `SQL_PORT` (5432), `SQL_DATABASE`, `SQL_USER`:
//!   each connection's password is an IAM authentication token ([`Iam::token`]) signed with the
//!   caller's credentials (a function's come from its environment: `AWS_ACCESS_KEY_ID`,
//!   `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, which Lambda sets; the CLI's
//!   from the AWS SDK's chain, [`Database::connect_signed`]), valid 15 minutes, and TLS is
//!   required: the proxy's certificate chains to the roots (Amazon Trust Services in AWS), and its
//!   host name is checked. Signing is local (no call to any AWS API), so the caller needs no
//!   password, no Secrets Manager call and no VPC endpoint: its role holds `rds-db:connect` for
//!   its one database user, and nothing else about the database.
//!
//! In AWS (the template's `SqlReadModel` aurora or existing) every reader connects the second way,
//! to the RDS Proxy of the stack (`SQL_HOST` = its `SqlProxyEndpoint` output, `SQL_PORT` 5432,
//! `SQL_DATABASE` = `SqlDatabaseName`), from the VPC (`SqlSubnetIds`, and a security group the
//! proxy lets in: the service's routes have `SqlRoutesSecurityGroup`): sql-sync as its own user
//! (`cqrs_sync`, or `SqlExistingUser`), a service's routes as
//! [`crate::schema::ROUTES_USER`] (`cqrs_routes`, the `SqlRoutesUser` output), each function's
//! role holding `rds-db:connect` on `arn:aws:rds-db:<region>:<account>:dbuser:<proxy id>/<user>`.
//! The proxy uses end-to-end IAM authentication: it signs in to the cluster as the same user
//! with an IAM token of its own role, so no user has a password and nothing reads a secret. A
//! route then reads one tenant's rows with [`crate::read::as_tenant`]: `cqrs_routes` may only
//! `SET ROLE cqrs_reader` ([`crate::schema::routes_user_ddl`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The credentials an IAM token is signed with (`aws_credential_types::Credentials`).
pub use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign,
};
use aws_sigv4::sign::v4;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres::Client;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How long opening a connection may take (TCP, TLS, authentication, RDS Proxy lending a database
/// connection), well inside sql-sync's 60 s timeout: RDS Proxy waits up to its borrow timeout
/// (120 s by default) for a database connection to lend, and a function that waits for it would
/// time out with nothing said. Past it, the batch is reported and Lambda retries it.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an IAM authentication token is valid (RDS accepts at most 15 minutes). A token is
/// only checked when a connection opens; an open connection outlives it.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(900);

/// Where and how to reach PostgreSQL ([`Database::from_env`]).
///
/// ```
/// use cqrs_sql::connect::Database;
/// let local = Database::from_env(|name| {
///     (name == "SQL_URL").then(|| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
/// })
/// .unwrap();
/// assert!(matches!(local, Database::Url(_)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// A connection string (`SQL_URL`).
    Url(String),
    /// An RDS Proxy with IAM authentication, over verified TLS.
    Iam(Iam),
}

/// An RDS Proxy (or RDS database) with IAM authentication.
///
/// ```
/// let proxy = cqrs_sql::connect::Iam {
///     host: "shop.proxy-abc123.eu-west-1.rds.amazonaws.com".into(),
///     port: 5432,
///     database: "cqrs".into(),
///     user: "cqrs_sync".into(),
///     region: "eu-west-1".into(),
/// };
/// assert_eq!(proxy.port, 5432);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iam {
    /// The endpoint's host name (checked against its certificate).
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The database.
    pub database: String,
    /// The database user the caller's role may connect as (`rds-db:connect`).
    pub user: String,
    /// The region the token is signed for.
    pub region: String,
}

/// Why a connection could not be opened.
///
/// ```
/// let error = cqrs_sql::connect::ConnectError::Timeout(cqrs_sql::connect::CONNECT_TIMEOUT);
/// assert_eq!(error.to_string(), "connecting to the database: no answer within 10s");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The database could not be reached, or refused the connection (TLS, authentication).
    #[error("connecting to the database: {}", crate::write::describe(.0))]
    Connect(tokio_postgres::Error),
    /// The database did not answer within this time ([`CONNECT_TIMEOUT`]).
    #[error("connecting to the database: no answer within {0:?}")]
    Timeout(Duration),
    /// The configuration is missing or wrong (the message names the setting).
    #[error("{0}")]
    Config(String),
}

fn config_error(message: impl Into<String>) -> ConnectError {
    ConnectError::Config(message.into())
}

impl Database {
    /// Reads the environment through `get` (see the module's documentation).
    ///
    /// ```
    /// use cqrs_sql::connect::Database;
    /// let env = [
    ///     ("SQL_HOST", "shop.proxy-abc123.eu-west-1.rds.amazonaws.com"),
    ///     ("SQL_DATABASE", "cqrs"),
    ///     ("SQL_USER", "cqrs_sync"),
    ///     ("AWS_REGION", "eu-west-1"),
    /// ];
    /// let get = |name: &str| env.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string());
    /// let Database::Iam(proxy) = Database::from_env(get).unwrap() else { panic!() };
    /// assert_eq!((proxy.port, proxy.user.as_str()), (5432, "cqrs_sync"));
    /// assert!(Database::from_env(|_| None).is_err(), "nothing to connect to");
    /// ```
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConnectError> {
        if let Some(url) = get("SQL_URL").filter(|u| !u.is_empty()) {
            return Ok(Database::Url(url));
        }
        let required = |name: &str, what: &str| {
            get(name).filter(|v| !v.is_empty()).ok_or_else(|| {
                config_error(format!("{name}: {what} (or SQL_URL, a connection string)"))
            })
        };
        let host = required("SQL_HOST", "the database's (RDS Proxy's) host name")?;
        let port = match get("SQL_PORT").filter(|p| !p.is_empty()) {
            None => 5432,
            Some(port) => port
                .parse()
                .map_err(|_| config_error(format!("SQL_PORT: {port:?} is not a port")))?,
        };
        let database = required("SQL_DATABASE", "the database's name")?;
        let user = required("SQL_USER", "the database user of the function's role")?;
        // The user travels in the token's query string, signed: letters, digits and `_` only, so
        // that no encoding question arises.
        if !user.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(config_error(format!(
                "SQL_USER: {user:?}: letters, digits and _ only"
            )));
        }
        let region = required("AWS_REGION", "the region the token is signed for")?;
        Ok(Database::Iam(Iam {
            host,
            port,
            database,
            user,
            region,
        }))
    }

    /// Opens a connection through `tls` (see [`tls`]): a fresh token for [`Database::Iam`], from
    /// the caller's credentials in its environment (as Lambda sets them), given up on after
    /// [`CONNECT_TIMEOUT`] ([`ConnectError::Timeout`]). The connection's task runs on the current
    /// runtime.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), cqrs_sql::connect::ConnectError> {
    /// use cqrs_sql::connect::{ConnectError, Database, tls};
    /// let database = Database::Url("postgres://postgres@127.0.0.1:5432/postgres".into());
    /// let client = database.connect(&tls(cqrs_store::client::AMAZON_ROOTS)?).await?;
    /// client.simple_query("SELECT 1").await.map_err(ConnectError::Connect)?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(&self, tls: &MakeRustlsConnect) -> Result<Client, ConnectError> {
        let credentials = match self {
            Database::Url(_) => None,
            Database::Iam(_) => Some(credentials_from_env()?),
        };
        self.open(tls, credentials, SystemTime::now()).await
    }

    /// [`Database::connect`] with the token of [`Database::Iam`] signed with `credentials` at
    /// `now` (a caller whose credentials come from elsewhere than its environment, e.g. the AWS
    /// SDK's chain: profiles, SSO, instance roles); a [`Database::Url`] ignores both.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), cqrs_sql::connect::ConnectError> {
    /// use cqrs_sql::connect::{Database, Iam, tls};
    /// let proxy = Database::Iam(Iam {
    ///     host: "shop.proxy-abc123.eu-west-1.rds.amazonaws.com".into(),
    ///     port: 5432,
    ///     database: "cqrs".into(),
    ///     user: "cqrs_reader".into(),
    ///     region: "eu-west-1".into(),
    /// });
    /// let credentials = aws_credential_types::Credentials::new("AKID", "secret", None, None, "example");
    /// let roots = tls(cqrs_store::client::AMAZON_ROOTS)?;
    /// let client = proxy.connect_signed(&roots, credentials, std::time::SystemTime::now()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_signed(
        &self,
        tls: &MakeRustlsConnect,
        credentials: Credentials,
        now: SystemTime,
    ) -> Result<Client, ConnectError> {
        self.open(tls, Some(credentials), now).await
    }

    async fn open(
        &self,
        tls: &MakeRustlsConnect,
        credentials: Option<Credentials>,
        now: SystemTime,
    ) -> Result<Client, ConnectError> {
        let mut config = match self {
            Database::Url(url) => url
                .parse::<tokio_postgres::Config>()
                .map_err(|e| config_error(format!("SQL_URL: {e}")))?,
            Database::Iam(iam) => {
                let credentials = credentials.ok_or_else(|| {
                    config_error("the credentials the IAM token is signed with are missing")
                })?;
                let mut config = tokio_postgres::Config::new();
                config
                    .host(&iam.host)
                    .port(iam.port)
                    .dbname(&iam.database)
                    .user(&iam.user)
                    .password(iam.token(credentials, now)?)
                    .ssl_mode(SslMode::Require);
                config
            }
        };
        // The TCP connection's own timeout, and one over the whole opening (TLS and the startup
        // too, where RDS Proxy waits to lend a database connection).
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let (client, connection) =
            tokio::time::timeout(CONNECT_TIMEOUT, config.connect(tls.clone()))
                .await
                .map_err(|_| ConnectError::Timeout(CONNECT_TIMEOUT))?
                .map_err(ConnectError::Connect)?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::warn!(%error, "the database connection ended");
            }
        });
        Ok(client)
    }
}

impl Iam {
    /// The IAM authentication token for a connection at `now`: the password RDS Proxy checks (a
    /// SigV4-presigned `connect` request of the service `rds-db`, without its `https://`).
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// let proxy = cqrs_sql::connect::Iam {
    ///     host: "shop.proxy-abc123.eu-west-1.rds.amazonaws.com".into(),
    ///     port: 5432,
    ///     database: "cqrs".into(),
    ///     user: "cqrs_sync".into(),
    ///     region: "eu-west-1".into(),
    /// };
    /// let credentials = aws_credential_types::Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
    /// let token = proxy.token(credentials, UNIX_EPOCH + Duration::from_secs(1_800_000_000)).unwrap();
    /// assert!(token.starts_with("shop.proxy-abc123.eu-west-1.rds.amazonaws.com:5432/?"));
    /// assert!(token.contains("Action=connect") && token.contains("DBUser=cqrs_sync"));
    /// assert!(token.contains("X-Amz-Expires=900"));
    /// ```
    pub fn token(&self, credentials: Credentials, now: SystemTime) -> Result<String, ConnectError> {
        let signing =
            |e: &dyn std::fmt::Display| config_error(format!("signing the IAM token: {e}"));
        let identity = credentials.into();
        let mut settings = SigningSettings::default();
        settings.expires_in = Some(TOKEN_LIFETIME);
        settings.signature_location = SignatureLocation::QueryParams;
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("rds-db")
            .time(now)
            .settings(settings)
            .build()
            .map_err(|e| signing(&e))?
            .into();
        let url = format!(
            "https://{}:{}/?Action=connect&DBUser={}",
            self.host, self.port, self.user
        );
        let request =
            SignableRequest::new("GET", &url, std::iter::empty(), SignableBody::Bytes(&[]))
                .map_err(|e| signing(&e))?;
        let (instructions, _signature) = sign(request, &params)
            .map_err(|e| signing(&e))?
            .into_parts();
        let mut signed = http::Request::builder()
            .uri(&url)
            .body(())
            .map_err(|e| signing(&e))?;
        instructions.apply_to_request_http1x(&mut signed);
        let uri = signed.uri().to_string();
        Ok(uri.strip_prefix("https://").unwrap_or(&uri).to_string())
    }
}

/// The caller's credentials from its environment, as Lambda sets them.
fn credentials_from_env() -> Result<Credentials, ConnectError> {
    let get = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let (Some(key), Some(secret)) = (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) else {
        return Err(config_error(
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: the credentials the IAM token is signed with",
        ));
    };
    Ok(Credentials::new(
        key,
        secret,
        get("AWS_SESSION_TOKEN"),
        None,
        "environment",
    ))
}

/// The TLS of a connection: rustls with the *ring* provider, trusting `roots_pem` (PEM
/// certificates; in AWS, `cqrs_store::client::AMAZON_ROOTS`, the Amazon Trust Services roots).
///
/// ```
/// let tls = cqrs_sql::connect::tls(cqrs_store::client::AMAZON_ROOTS);
/// assert!(tls.is_ok());
/// assert!(cqrs_sql::connect::tls(b"not a certificate").is_err());
/// ```
pub fn tls(roots_pem: &[u8]) -> Result<MakeRustlsConnect, ConnectError> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(roots_pem) {
        let certificate =
            certificate.map_err(|e| config_error(format!("a root certificate: {e}")))?;
        roots
            .add(certificate)
            .map_err(|e| config_error(format!("a root certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(config_error("no root certificate to trust"));
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| config_error(format!("TLS: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn proxy() -> Iam {
        Iam {
            host: "my-proxy.proxy-abc123.eu-west-1.rds.amazonaws.com".into(),
            port: 5432,
            database: "cqrs".into(),
            user: "cqrs_sync".into(),
            region: "eu-west-1".into(),
        }
    }

    fn query(token: &str) -> Vec<(String, String)> {
        let (_, query) = token.split_once("/?").unwrap();
        let mut pairs: Vec<(String, String)> = query
            .split('&')
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect();
        pairs.sort();
        pairs
    }

    /// The token botocore's `generate_db_auth_token` signs for the same proxy, user, credentials
    /// and instant (2026-11-26T04:20:00Z), computed once with botocore 1.43 (its clock pinned).
    #[test]
    fn the_token_is_the_one_the_aws_sdks_sign() {
        let credentials = Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some("session/token+example=".into()),
            None,
            "test",
        );
        let now = UNIX_EPOCH + Duration::from_secs(1_795_666_800);
        let token = proxy().token(credentials, now).unwrap();
        let botocore = "my-proxy.proxy-abc123.eu-west-1.rds.amazonaws.com:5432/?Action=connect&DBUser=cqrs_sync\
            &X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20261126%2Feu-west-1%2Frds-db%2Faws4_request\
            &X-Amz-Date=20261126T042000Z&X-Amz-SignedHeaders=host&X-Amz-Expires=900\
            &X-Amz-Security-Token=session%2Ftoken%2Bexample%3D\
            &X-Amz-Signature=1cc232bfc16902f3b1a117607bc88bd019c9c19d24bb86271362b84e69374c8f";
        assert!(token.starts_with("my-proxy.proxy-abc123.eu-west-1.rds.amazonaws.com:5432/?"));
        assert_eq!(query(&token), query(botocore));
    }

    #[test]
    fn a_user_name_that_would_need_encoding_is_refused() {
        let env = [
            ("SQL_HOST", "h"),
            ("SQL_DATABASE", "d"),
            ("SQL_USER", "sync user"),
            ("AWS_REGION", "eu-west-1"),
        ];
        let get = |name: &str| {
            env.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        };
        let error = Database::from_env(get).unwrap_err().to_string();
        assert!(error.starts_with("SQL_USER"), "{error}");
        let bad_port = |name: &str| match name {
            "SQL_PORT" => Some("54x".to_string()),
            other => get(other),
        };
        let error = Database::from_env(bad_port).unwrap_err().to_string();
        assert!(error.starts_with("SQL_PORT"), "{error}");
    }
}
