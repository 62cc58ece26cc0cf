//! The floors of the cold-path bench: what a careful team would write by hand instead of using
//! this project, one Lambda function per path, making exactly the DynamoDB calls our function
//! makes for the same request. This library holds what the three hand-written functions share:
//! the DynamoDB client, built the way a careful hand-written function builds it (the same
//! crates, features, TLS roots and SDK trims as ours, but none of the project's crates).
//!
//! The binaries: `bench-floor` (an echo: the Lambda runtime and nothing else), `floor-create`
//! (`POST /commands`, a create), `floor-get` (`GET /items/{pk}/{sk}`), `floor-batch` (a stream
//! batch of INSERT records). `bench/run.py` runs each beside our function for the same event.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_smithy_http_client::tls::{self, TlsContext, TrustStore, rustls_provider::CryptoMode};

/// The Amazon Trust Services roots, the same file our functions compile in.
const AMAZON_ROOTS: &[u8] = include_bytes!("amazon-trust-services.pem");

/// An environment variable, or an error naming it.
///
/// ```
/// assert!(bench_floor::var("BENCH_FLOOR_SURELY_UNSET").is_err());
/// ```
pub fn var(name: &str) -> Result<String, lambda_runtime::Error> {
    std::env::var(name).map_err(|_| format!("environment variable {name} is not set").into())
}

/// The DynamoDB client from the Lambda environment: region, the execution role's keys, the
/// endpoint override of the local run; rustls with ring and the compiled-in Amazon roots.
///
/// ```no_run
/// let client = bench_floor::dynamodb_client().unwrap();
/// # let _ = client;
/// ```
pub fn dynamodb_client() -> Result<Client, lambda_runtime::Error> {
    let credentials = Credentials::new(
        var("AWS_ACCESS_KEY_ID")?,
        var("AWS_SECRET_ACCESS_KEY")?,
        std::env::var("AWS_SESSION_TOKEN").ok(),
        None,
        "environment",
    );
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::rustls(CryptoMode::Ring))
        .tls_context(
            TlsContext::builder()
                .with_trust_store(TrustStore::empty().with_pem_certificate(AMAZON_ROOTS))
                .build()?,
        )
        .build_https();
    let mut config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(var("AWS_REGION")?))
        .credentials_provider(credentials)
        .retry_config(RetryConfig::standard())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_millis(3100))
                .build(),
        )
        .http_client(http);
    if let Ok(endpoint) = var("AWS_ENDPOINT_URL_DYNAMODB") {
        config = config.endpoint_url(endpoint);
    }
    Ok(Client::from_conf(config.build()))
}
