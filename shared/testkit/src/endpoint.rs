//! Where DynamoDB Local is, and SDK clients that talk only to it.
//!
//! The endpoint comes from `AWS_ENDPOINT_URL_DYNAMODB`, which the operator
//! CLI's `cqrs dynamodb-local start` prints for `eval` after starting a fresh
//! DynamoDB Local (a service's `make test`, and this repository's, do this). Any endpoint whose
//! host is not `127.0.0.1` or `localhost` is refused, so nothing built here can
//! reach AWS. Credentials are static dummies unless `AWS_ACCESS_KEY_ID` /
//! `AWS_SECRET_ACCESS_KEY` are set; the region is `AWS_REGION` or `us-east-1`.
//! Neither the default credential chain nor profile credentials are consulted.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::config::Credentials;

/// Environment variable holding the DynamoDB Local endpoint.
pub const ENDPOINT_ENV: &str = "AWS_ENDPOINT_URL_DYNAMODB";

/// Region used when `AWS_REGION` is not set.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Why an endpoint cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// `AWS_ENDPOINT_URL_DYNAMODB` is not set (or empty).
    #[error(
        "{ENDPOINT_ENV} is not set: these tests need DynamoDB Local. Run them through \
         the project's test command (`make test`), which starts a fresh DynamoDB Local \
         and exports {ENDPOINT_ENV}. By hand, with the operator CLI: \
         `cqrs dynamodb-local install && eval \"$(cqrs dynamodb-local start)\"`, then \
         `cargo test`, then `cqrs dynamodb-local stop --port $DDB_LOCAL_PORT`."
    )]
    Unset,
    /// The endpoint is not an `http(s)://host[:port][/]` URL.
    #[error("{ENDPOINT_ENV}={0:?} is not a valid http(s) URL")]
    Malformed(String),
    /// The endpoint points somewhere other than this machine.
    #[error(
        "{ENDPOINT_ENV}={0:?} is not local: the testkit only talks to DynamoDB Local on \
         127.0.0.1 or localhost and never to AWS"
    )]
    NotLocal(String),
}

/// Checks that `url` is `http(s)://127.0.0.1[:port]` or
/// `http(s)://localhost[:port]` (an optional trailing `/` is allowed).
///
/// # Examples
///
/// ```
/// use cqrs_testkit::endpoint::{check_local_endpoint, EndpointError};
///
/// assert!(check_local_endpoint("http://127.0.0.1:8000").is_ok());
/// assert!(check_local_endpoint("http://localhost:8000/").is_ok());
/// assert!(matches!(
///     check_local_endpoint("https://dynamodb.us-east-1.amazonaws.com"),
///     Err(EndpointError::NotLocal(_))
/// ));
/// assert!(matches!(
///     check_local_endpoint("http://user@127.0.0.1.example:80"),
///     Err(EndpointError::NotLocal(_))
/// ));
/// ```
pub fn check_local_endpoint(url: &str) -> Result<(), EndpointError> {
    let malformed = || EndpointError::Malformed(url.to_owned());
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(malformed)?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if !(path.is_empty() || path == "/") || authority.contains(['?', '#']) {
        return Err(malformed());
    }
    if authority.contains('@') {
        // Userinfo could hide the real host; there is no reason to use it.
        return Err(EndpointError::NotLocal(url.to_owned()));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    if let Some(port) = port
        && (port.is_empty() || port.parse::<u16>().is_err())
    {
        return Err(malformed());
    }
    if host == "127.0.0.1" || host.eq_ignore_ascii_case("localhost") {
        Ok(())
    } else {
        Err(EndpointError::NotLocal(url.to_owned()))
    }
}

/// Reads `AWS_ENDPOINT_URL_DYNAMODB` and checks it with
/// [`check_local_endpoint`].
///
/// # Examples
///
/// ```no_run
/// let endpoint = cqrs_testkit::endpoint::local_endpoint()?;
/// assert!(endpoint.starts_with("http://127.0.0.1:"));
/// # Ok::<(), cqrs_testkit::endpoint::EndpointError>(())
/// ```
pub fn local_endpoint() -> Result<String, EndpointError> {
    let url = std::env::var(ENDPOINT_ENV).unwrap_or_default();
    let url = url.trim();
    if url.is_empty() {
        return Err(EndpointError::Unset);
    }
    check_local_endpoint(url)?;
    Ok(url.trim_end_matches('/').to_owned())
}

/// The endpoint from [`local_endpoint`], panicking with a clear message
/// (how to run the tests) when it is unset or not local.
///
/// # Examples
///
/// ```no_run
/// let endpoint = cqrs_testkit::endpoint::endpoint();
/// println!("DynamoDB Local at {endpoint}");
/// ```
pub fn endpoint() -> String {
    match local_endpoint() {
        Ok(url) => url,
        Err(e) => panic!("{e}"),
    }
}

/// Shared SDK configuration for a local endpoint: region from `AWS_REGION`
/// (default `us-east-1`), static credentials from `AWS_ACCESS_KEY_ID` /
/// `AWS_SECRET_ACCESS_KEY` (default dummy `local`/`local`), endpoint `url`.
///
/// Useful to build clients of other services or to hand to code that takes an
/// [`SdkConfig`]. Fails if `url` is not local.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let config = cqrs_testkit::endpoint::sdk_config_for("http://127.0.0.1:8000")
///     .await
///     .unwrap();
/// assert_eq!(config.endpoint_url(), Some("http://127.0.0.1:8000"));
/// assert!(
///     cqrs_testkit::endpoint::sdk_config_for("https://example.com")
///         .await
///         .is_err()
/// );
/// # }
/// ```
pub async fn sdk_config_for(url: &str) -> Result<SdkConfig, EndpointError> {
    check_local_endpoint(url)?;
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let region = env("AWS_REGION").unwrap_or_else(|| DEFAULT_REGION.to_owned());
    let credentials = Credentials::new(
        env("AWS_ACCESS_KEY_ID").unwrap_or_else(|| "local".to_owned()),
        env("AWS_SECRET_ACCESS_KEY").unwrap_or_else(|| "local".to_owned()),
        env("AWS_SESSION_TOKEN"),
        None,
        "cqrs-testkit",
    );
    Ok(aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region))
        .credentials_provider(credentials)
        .endpoint_url(url.trim_end_matches('/'))
        .load()
        .await)
}

/// A DynamoDB client for `url`; fails if `url` is not local.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = cqrs_testkit::endpoint::client_for("http://127.0.0.1:8000").await?;
/// let tables = client.list_tables().send().await?;
/// println!("{:?}", tables.table_names());
/// # Ok(()) }
/// ```
pub async fn client_for(url: &str) -> Result<aws_sdk_dynamodb::Client, EndpointError> {
    let shared = sdk_config_for(url).await?;
    // Set the endpoint on the service config too, so it wins over any
    // service-specific environment or profile setting.
    let config = aws_sdk_dynamodb::config::Builder::from(&shared)
        .endpoint_url(url.trim_end_matches('/'))
        .build();
    Ok(aws_sdk_dynamodb::Client::from_conf(config))
}

/// A DynamoDB Streams client for `url` (DynamoDB Local serves both APIs on
/// the same port); fails if `url` is not local.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let streams = cqrs_testkit::endpoint::streams_client_for("http://127.0.0.1:8000").await?;
/// let list = streams.list_streams().send().await?;
/// println!("{:?}", list.streams());
/// # Ok(()) }
/// ```
pub async fn streams_client_for(
    url: &str,
) -> Result<aws_sdk_dynamodbstreams::Client, EndpointError> {
    let shared = sdk_config_for(url).await?;
    let config = aws_sdk_dynamodbstreams::config::Builder::from(&shared)
        .endpoint_url(url.trim_end_matches('/'))
        .interceptor(crate::local_quirks::EmptyMapFix)
        .build();
    Ok(aws_sdk_dynamodbstreams::Client::from_conf(config))
}

/// A DynamoDB client for the DynamoDB Local named by
/// `AWS_ENDPOINT_URL_DYNAMODB`.
///
/// # Panics
///
/// When the variable is unset (tests not run through `make test`) or not
/// local.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() {
/// let client = cqrs_testkit::client().await;
/// client.list_tables().send().await.unwrap();
/// # }
/// ```
pub async fn client() -> aws_sdk_dynamodb::Client {
    match client_for(&endpoint()).await {
        Ok(client) => client,
        Err(e) => panic!("{e}"),
    }
}

/// A DynamoDB Streams client for the DynamoDB Local named by
/// `AWS_ENDPOINT_URL_DYNAMODB`.
///
/// # Panics
///
/// When the variable is unset (tests not run through `make test`) or not
/// local.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() {
/// let streams = cqrs_testkit::streams_client().await;
/// streams.list_streams().send().await.unwrap();
/// # }
/// ```
pub async fn streams_client() -> aws_sdk_dynamodbstreams::Client {
    match streams_client_for(&endpoint()).await {
        Ok(client) => client,
        Err(e) => panic!("{e}"),
    }
}
