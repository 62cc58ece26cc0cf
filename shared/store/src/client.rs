//! The DynamoDB client of a Lambda function, built from the function's environment alone, and
//! the clock of its cold start.
//!
//! A Lambda function runs with its credentials, region and (locally) endpoint in environment
//! variables. `aws_config::load_from_env()` also brings the chains a function never uses (profile
//! files, SSO, STS web identity, IMDS, the container endpoint) and loads the system's TLS root
//! certificates; here the three functions read exactly what Lambda gives them:
//!
//! - `AWS_REGION` (required);
//! - `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` (required) and `AWS_SESSION_TOKEN` (optional), the
//!   execution role's credentials that Lambda sets for every function;
//! - `AWS_ENDPOINT_URL_DYNAMODB`, then `AWS_ENDPOINT_URL` (optional; the local stack's DynamoDB
//!   Local);
//! - `CQRS_TLS_ROOTS` (optional): `amazon` (the default) trusts the five Amazon Trust Services
//!   root certificates compiled into the binary, the roots every public AWS endpoint chains to;
//!   `system` loads the system's bundle instead (an endpoint behind another CA, e.g. a
//!   TLS-inspecting proxy). A region of the `cn-` partition uses the system's bundle by default.
//!
//! The client keeps the SDK's standard retry (3 attempts) and its 3.1 s connect timeout, and
//! speaks TLS through rustls with the *ring* crypto provider.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region, SharedHttpClient};
use aws_smithy_http_client::tls::{self, TlsContext, TrustStore, rustls_provider::CryptoMode};

use crate::ConfigError;

/// The root certificates of Amazon Trust Services (Amazon Root CA 1 to 4 and Starfield Services
/// Root Certificate Authority G2), PEM, as Debian's `ca-certificates` ships them: what every public
/// AWS endpoint chains to, RDS Proxy's endpoints among them (sql-sync's TLS trusts them too).
///
/// ```
/// let pem = std::str::from_utf8(cqrs_store::client::AMAZON_ROOTS).unwrap();
/// assert_eq!(pem.matches("-----BEGIN CERTIFICATE-----").count(), 5);
/// ```
pub const AMAZON_ROOTS: &[u8] = include_bytes!("amazon-trust-services.pem");

/// The connect timeout of the SDK's current defaults, kept explicit here.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(3100);

/// Which root certificates the client's TLS trusts.
///
/// ```
/// use cqrs_store::client::TlsRoots;
/// assert_eq!(TlsRoots::parse(None, "eu-west-1"), Ok(TlsRoots::Amazon));
/// assert_eq!(TlsRoots::parse(Some("system"), "eu-west-1"), Ok(TlsRoots::System));
/// assert_eq!(TlsRoots::parse(None, "cn-north-1"), Ok(TlsRoots::System));
/// assert!(TlsRoots::parse(Some("mozilla"), "eu-west-1").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsRoots {
    /// The Amazon Trust Services roots compiled into the binary: nothing to read at start.
    Amazon,
    /// The system's bundle (`SSL_CERT_FILE`, `/etc/ssl/certs`), read at the first connection.
    System,
}

impl TlsRoots {
    /// Reads `CQRS_TLS_ROOTS` (`amazon` or `system`); unset means `amazon`, except in the
    /// `cn-` partition, whose endpoints do not chain to Amazon Trust Services.
    ///
    /// ```
    /// use cqrs_store::client::TlsRoots;
    /// assert_eq!(TlsRoots::parse(Some(" Amazon "), "cn-northwest-1"), Ok(TlsRoots::Amazon));
    /// ```
    pub fn parse(value: Option<&str>, region: &str) -> Result<Self, ConfigError> {
        match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") if region.starts_with("cn-") => Ok(TlsRoots::System),
            None | Some("") | Some("amazon") => Ok(TlsRoots::Amazon),
            Some("system") => Ok(TlsRoots::System),
            Some(_) => Err(ConfigError::InvalidVariable {
                name: "CQRS_TLS_ROOTS",
                expected: "`amazon` or `system`",
            }),
        }
    }
}

/// What the client is built from: the function's region, credentials, endpoint and TLS roots.
///
/// ```
/// use cqrs_store::client::{ClientEnv, TlsRoots};
/// let vars = [
///     ("AWS_REGION", "eu-west-1"),
///     ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
///     ("AWS_SECRET_ACCESS_KEY", "secret"),
///     ("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000"),
/// ];
/// let env = ClientEnv::from_lookup(|name| {
///     vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
/// })
/// .unwrap();
/// assert_eq!(env.region, "eu-west-1");
/// assert_eq!(env.endpoint.as_deref(), Some("http://127.0.0.1:8000"));
/// assert_eq!(env.tls_roots, TlsRoots::Amazon);
/// let client = env.client(cqrs_store::client::http_client(env.tls_roots).unwrap());
/// assert_eq!(client.config().region().map(|r| r.as_ref()), Some("eu-west-1"));
/// ```
#[derive(Clone)]
pub struct ClientEnv {
    /// `AWS_REGION`.
    pub region: String,
    /// `AWS_ENDPOINT_URL_DYNAMODB`, else `AWS_ENDPOINT_URL`; `None`: the region's public endpoint.
    pub endpoint: Option<String>,
    /// `CQRS_TLS_ROOTS`.
    pub tls_roots: TlsRoots,
    credentials: Credentials,
}

impl std::fmt::Debug for ClientEnv {
    /// Never prints the credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientEnv")
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("tls_roots", &self.tls_roots)
            .finish_non_exhaustive()
    }
}

impl ClientEnv {
    /// Reads the process environment; a missing region or key is an error that names it.
    ///
    /// ```
    /// // The doctest environment has no credentials of a function.
    /// if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
    ///     let err = cqrs_store::client::ClientEnv::from_env().unwrap_err();
    ///     assert!(err.to_string().starts_with("environment variable AWS_"));
    /// }
    /// ```
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `lookup` (the environment in production, a map in tests).
    ///
    /// ```
    /// let err = cqrs_store::client::ClientEnv::from_lookup(|name| {
    ///     (name == "AWS_REGION").then(|| "eu-west-1".to_string())
    /// })
    /// .unwrap_err();
    /// assert_eq!(err.to_string(), "environment variable AWS_ACCESS_KEY_ID is missing or empty");
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let required = |name: &'static str| get(name).ok_or(ConfigError::MissingVariable(name));
        let region = required("AWS_REGION")?;
        let credentials = Credentials::new(
            required("AWS_ACCESS_KEY_ID")?,
            required("AWS_SECRET_ACCESS_KEY")?,
            get("AWS_SESSION_TOKEN"),
            None,
            "lambda-environment",
        );
        let endpoint = get("AWS_ENDPOINT_URL_DYNAMODB").or_else(|| get("AWS_ENDPOINT_URL"));
        let tls_roots = TlsRoots::parse(get("CQRS_TLS_ROOTS").as_deref(), &region)?;
        Ok(ClientEnv {
            region,
            endpoint,
            tls_roots,
            credentials,
        })
    }

    /// The DynamoDB client over `http` (see [`http_client`]): standard retry, the SDK's connect
    /// timeout, the latest behaviour version. Builds only; nothing is read or sent until the
    /// first call.
    ///
    /// ```
    /// use cqrs_store::client::{ClientEnv, http_client};
    /// let env = ClientEnv::from_lookup(|name| {
    ///     (name != "CQRS_TLS_ROOTS").then(|| format!("value-of-{name}"))
    /// })
    /// .unwrap();
    /// let client = env.client(http_client(env.tls_roots).unwrap());
    /// assert_eq!(client.config().retry_config().map(|r| r.max_attempts()), Some(3));
    /// ```
    pub fn client(&self, http: SharedHttpClient) -> Client {
        let mut config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(self.region.clone()))
            .credentials_provider(self.credentials.clone())
            .retry_config(RetryConfig::standard())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .build(),
            )
            .http_client(http);
        if let Some(endpoint) = &self.endpoint {
            config = config.endpoint_url(endpoint);
        }
        Client::from_conf(config.build())
    }
}

impl ClientEnv {
    /// The credentials the environment gave, for the client of another AWS service built the same
    /// way as [`ClientEnv::client`] (the change events' SNS topic, a consumer's SQS queue).
    ///
    /// ```
    /// use aws_sdk_dynamodb::config::ProvideCredentials;
    /// let env = cqrs_store::client::ClientEnv::from_lookup(|name| {
    ///     (name != "CQRS_TLS_ROOTS").then(|| format!("value-of-{name}"))
    /// })
    /// .unwrap();
    /// let credentials = env.credentials();
    /// let _: &dyn ProvideCredentials = &credentials;
    /// ```
    pub fn credentials(&self) -> Credentials {
        self.credentials.clone()
    }
}

/// The endpoint of another AWS service's client, as the SDK's own configuration names it:
/// `AWS_ENDPOINT_URL_<SERVICE>` (`SNS`, `SQS`), else `AWS_ENDPOINT_URL`; `None`: the region's
/// public endpoint.
///
/// ```
/// let lookup = |name: &str| match name {
///     "AWS_ENDPOINT_URL_SQS" => Some("http://127.0.0.1:5000".to_string()),
///     "AWS_ENDPOINT_URL" => Some("http://127.0.0.1:9999".to_string()),
///     _ => None,
/// };
/// assert_eq!(
///     cqrs_store::client::service_endpoint("SQS", lookup).as_deref(),
///     Some("http://127.0.0.1:5000")
/// );
/// assert_eq!(
///     cqrs_store::client::service_endpoint("SNS", lookup).as_deref(),
///     Some("http://127.0.0.1:9999")
/// );
/// assert_eq!(cqrs_store::client::service_endpoint("SNS", |_| None), None);
/// ```
pub fn service_endpoint(service: &str, lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
    let get = |name: &str| {
        lookup(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    get(&format!("AWS_ENDPOINT_URL_{service}")).or_else(|| get("AWS_ENDPOINT_URL"))
}

/// The HTTP client: hyper with rustls (*ring*), trusting `roots`. The roots are parsed when the
/// first connection is made.
///
/// ```
/// let http = cqrs_store::client::http_client(cqrs_store::client::TlsRoots::Amazon);
/// assert!(http.is_ok());
/// ```
pub fn http_client(roots: TlsRoots) -> Result<SharedHttpClient, ConfigError> {
    let trust = match roots {
        TlsRoots::Amazon => TrustStore::empty().with_pem_certificate(AMAZON_ROOTS),
        TlsRoots::System => TrustStore::default(),
    };
    // Never a silent fallback to another trust store: a context that does not build stops the
    // function at start.
    let tls = TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .map_err(|e| ConfigError::Tls(e.to_string()))?;
    Ok(aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::rustls(CryptoMode::Ring))
        .tls_context(tls)
        .build_https())
}

/// The function's DynamoDB client from its environment ([`ClientEnv::from_env`], [`http_client`],
/// [`ClientEnv::client`]), each step a lap of `init`: `sdk_config`, `http_client`, `client`.
///
/// ```
/// let mut init = cqrs_store::client::InitClock::start();
/// match cqrs_store::client::client_from_env(&mut init) {
///     Ok(_) => assert!(init.line().contains("client_us=")),
///     // The doctest environment may lack a function's variables: nothing is timed then.
///     Err(e) => assert!(e.to_string().starts_with("environment variable AWS_")),
/// }
/// ```
pub fn client_from_env(init: &mut InitClock) -> Result<Client, ConfigError> {
    let env = ClientEnv::from_env()?;
    init.lap("sdk_config");
    let http = http_client(env.tls_roots)?;
    init.lap("http_client");
    let client = env.client(http);
    init.lap("client");
    Ok(client)
}

/// The clock of a cold start: the time of each phase since the previous one, logged once as
/// `cold start init logging_us=.. config_us=.. ... total_us=..` (the bench reads that line).
///
/// ```
/// let mut init = cqrs_store::client::InitClock::start();
/// init.lap("config");
/// init.lap("client");
/// let line = init.line();
/// assert!(line.starts_with("config_us="));
/// assert!(line.contains(" client_us=") && line.contains(" total_us="));
/// ```
#[derive(Debug)]
pub struct InitClock {
    started: Instant,
    last: Instant,
    laps: Vec<(&'static str, Duration)>,
}

impl InitClock {
    /// Starts the clock (first thing in `main`).
    ///
    /// ```
    /// let init = cqrs_store::client::InitClock::start();
    /// assert_eq!(init.line().split(' ').count(), 1); // only total_us
    /// ```
    pub fn start() -> Self {
        let now = Instant::now();
        InitClock {
            started: now,
            last: now,
            laps: Vec::new(),
        }
    }

    /// Ends the phase `name` now.
    ///
    /// ```
    /// let mut init = cqrs_store::client::InitClock::start();
    /// init.lap("logging");
    /// assert!(init.line().starts_with("logging_us="));
    /// ```
    pub fn lap(&mut self, name: &'static str) {
        let now = Instant::now();
        self.laps.push((name, now - self.last));
        self.last = now;
    }

    /// The phases as `name_us=N` fields, then `total_us`.
    ///
    /// ```
    /// let init = cqrs_store::client::InitClock::start();
    /// assert!(init.line().starts_with("total_us="));
    /// ```
    pub fn line(&self) -> String {
        let mut line = String::new();
        for (name, took) in &self.laps {
            line.push_str(&format!("{name}_us={} ", took.as_micros()));
        }
        line.push_str(&format!("total_us={}", self.started.elapsed().as_micros()));
        line
    }

    /// Logs [`InitClock::line`] at INFO, once per cold start.
    ///
    /// ```
    /// cqrs_store::client::InitClock::start().log();
    /// ```
    pub fn log(&self) {
        tracing::info!("cold start init {}", self.line());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::error::SdkError;
    use std::io::Write;

    /// A TCP server on 127.0.0.1 that answers every connection with bytes that are not TLS.
    fn not_tls_server() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\nnot tls");
            }
        });
        port
    }

    fn env(endpoint: &str, roots: Option<&str>) -> ClientEnv {
        let vars = [
            ("AWS_REGION", Some("eu-west-1")),
            ("AWS_ACCESS_KEY_ID", Some("AKIDEXAMPLE")),
            ("AWS_SECRET_ACCESS_KEY", Some("secret")),
            ("AWS_ENDPOINT_URL", Some(endpoint)),
            ("CQRS_TLS_ROOTS", roots),
        ];
        ClientEnv::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .and_then(|(_, v)| v.map(str::to_string))
        })
        .unwrap()
    }

    /// The compiled-in roots parse (the HTTP client parses them when it makes its first
    /// connection, and panics on a bad PEM), and the client really speaks TLS: the handshake
    /// with a server that is not TLS fails as a dispatch failure.
    #[tokio::test]
    async fn each_trust_store_builds_and_the_client_speaks_tls() {
        let port = not_tls_server();
        for roots in [None, Some("system")] {
            let env = env(&format!("https://127.0.0.1:{port}"), roots);
            let client = env.client(http_client(env.tls_roots).unwrap());
            let config = client
                .config()
                .to_builder()
                .retry_config(RetryConfig::disabled())
                .build();
            let client = Client::from_conf(config);
            let error = client.list_tables().send().await.unwrap_err();
            assert!(
                matches!(error, SdkError::DispatchFailure(_)),
                "{roots:?}: expected a TLS dispatch failure, got {error:?}"
            );
        }
    }

    #[test]
    fn the_service_endpoint_wins_over_the_general_one() {
        let vars = [
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-secret"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
            ("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:2"),
        ];
        let env = ClientEnv::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
        .unwrap();
        assert_eq!(env.endpoint.as_deref(), Some("http://127.0.0.1:2"));
        assert!(
            !format!("{env:?}").contains("wJalrXUtnFEMI"),
            "Debug prints no secret"
        );
    }
}
