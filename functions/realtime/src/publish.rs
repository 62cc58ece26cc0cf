//! The HTTP publish call of the AppSync Events API, signed with SigV4.
//!
//! AppSync Events "Publish events via HTTP" (publish-http.html): `POST https://HTTP_DOMAIN/event`
//! with the authorization headers and a JSON body `{"channel": "...", "events": [...]}`, at most
//! five events, "each specified event ... must be a stringified valid JSON value". Publishing is
//! IAM-only here: the request is signed with SigV4 for the service `appsync` with the function's
//! credentials (`appsync:EventPublish` on the namespaces). The answer lists the events by index:
//! `{"failed": [], "successful": [{"identifier": "...", "index": 0}]}` (create-event-api-tutorial,
//! "the publisher logs table displays a response similar to"), a failed entry carrying
//! `errorCode` / `errorMessage` (the field names of Amplify's events client).
//!
//! The connection is the AWS SDK's own connector (hyper, rustls with *ring*) trusting the roots
//! the other functions trust ([`cqrs_store::client::TlsRoots`]).

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_http_client::tls::{self, TlsContext, TrustStore, rustls_provider::CryptoMode};
use aws_smithy_runtime_api::client::http::{HttpConnector, SharedHttpConnector};
use aws_smithy_runtime_api::client::identity::Identity;
use aws_smithy_types::body::SdkBody;
use cqrs_store::client::{AMAZON_ROOTS, TlsRoots};
use serde::Deserialize;

/// The service name requests are signed for.
///
/// ```
/// assert_eq!(cqrs_realtime::publish::SIGNING_NAME, "appsync");
/// ```
pub const SIGNING_NAME: &str = "appsync";

/// How long one publish call may take (connect, send, answer) before it counts as failed.
///
/// ```
/// assert_eq!(cqrs_realtime::publish::CALL_TIMEOUT.as_secs(), 10);
/// ```
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The publish URL from `REALTIME_API_URL`: the API's HTTP endpoint (`https://<domain>/event`), or
/// its domain alone (`<domain>` or `https://<domain>`), to which `/event` is added.
///
/// ```
/// use cqrs_realtime::publish::event_url;
/// let domain = "abc.appsync-api.eu-west-1.amazonaws.com";
/// let url = format!("https://{domain}/event");
/// assert_eq!(event_url(domain).unwrap(), url);
/// assert_eq!(event_url(&format!("https://{domain}")).unwrap(), url);
/// assert_eq!(event_url(&format!("https://{domain}/")).unwrap(), url);
/// assert_eq!(event_url(&url).unwrap(), url);
/// assert_eq!(event_url("http://127.0.0.1:9000").unwrap(), "http://127.0.0.1:9000/event");
/// assert!(event_url("").is_err() && event_url("https://").is_err());
/// assert!(event_url("ftp://x/event").is_err());
/// ```
pub fn event_url(value: &str) -> Result<String, String> {
    let value = value.trim();
    let with_scheme = if value.contains("://") {
        value.to_string()
    } else {
        format!("https://{value}")
    };
    let uri: http::Uri = with_scheme
        .parse()
        .map_err(|e| format!("`{value}` is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("https" | "http") => {}
        _ => {
            return Err(format!(
                "`{value}`: the URL must be https (or http locally)"
            ));
        }
    }
    let authority = uri
        .authority()
        .filter(|a| !a.host().is_empty())
        .ok_or_else(|| format!("`{value}` names no host"))?;
    let path = match uri.path() {
        "" | "/" => "/event",
        path => path,
    };
    Ok(format!(
        "{}://{authority}{path}",
        uri.scheme_str().unwrap_or("https")
    ))
}

/// Why a publish call did not publish every event.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The request could not be signed or built.
    #[error("building the request: {0}")]
    Request(String),
    /// No answer: connection, TLS, timeout.
    #[error("no answer from the Event API: {0}")]
    Transport(String),
    /// An HTTP status other than 200.
    #[error("the Event API answered {status}: {body}")]
    Status {
        /// The status code.
        status: u16,
        /// The answer's body (at most 1,000 characters).
        body: String,
    },
    /// A 200 whose body is not the documented answer, or does not account for every event.
    #[error("the Event API's answer {body:?} does not say every event was published: {reason}")]
    Answer {
        /// What is wrong with it.
        reason: String,
        /// The answer's body (at most 1,000 characters).
        body: String,
    },
    /// The API refused some of the events.
    #[error("the Event API refused {} event(s): {}", .0.len(), .0.iter().map(FailedEvent::to_string).collect::<Vec<_>>().join("; "))]
    Failed(Vec<FailedEvent>),
}

impl PublishError {
    /// Whether sending the same request again cannot succeed: a 400 (a malformed request) or a
    /// 413 (too large). Everything else (throttling, 5xx, 401/403 while a role is fixed, a
    /// refused entry) may pass on a later attempt.
    ///
    /// ```
    /// use cqrs_realtime::publish::PublishError;
    /// assert!(PublishError::Status { status: 400, body: String::new() }.is_permanent());
    /// assert!(!PublishError::Status { status: 429, body: String::new() }.is_permanent());
    /// assert!(!PublishError::Transport("reset".into()).is_permanent());
    /// ```
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            PublishError::Status {
                status: 400 | 413,
                ..
            }
        )
    }
}

/// One entry of the answer's `failed` list.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedEvent {
    /// The event's identifier (for AppSync's logs).
    #[serde(default)]
    pub identifier: Option<String>,
    /// The event's index in the request.
    #[serde(default)]
    pub index: Option<u64>,
    /// The error code (a number or a text).
    #[serde(default, alias = "code")]
    pub error_code: Option<serde_json::Value>,
    /// The error message.
    #[serde(default, alias = "message")]
    pub error_message: Option<String>,
}

impl std::fmt::Display for FailedEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "index {} ({}): {} {}",
            self.index.map_or("?".to_string(), |i| i.to_string()),
            self.identifier.as_deref().unwrap_or("-"),
            self.error_code
                .as_ref()
                .map_or(String::new(), |c| c.to_string()),
            self.error_message.as_deref().unwrap_or("")
        )
    }
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    successful: Vec<serde_json::Value>,
    #[serde(default)]
    failed: Vec<FailedEvent>,
}

/// Publishes events to the Event API over HTTP.
#[derive(Clone)]
pub struct Publisher {
    url: String,
    host: String,
    region: String,
    credentials: Credentials,
    connector: SharedHttpConnector,
}

impl std::fmt::Debug for Publisher {
    /// Never prints the credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("url", &self.url)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl Publisher {
    /// A publisher to `url` ([`event_url`]) in `region`, signing with `credentials`, its TLS
    /// trusting `roots`. Builds only; nothing is sent.
    ///
    /// ```
    /// use cqrs_realtime::publish::Publisher;
    /// let credentials = aws_credential_types::Credentials::new("AKID", "secret", None, None, "test");
    /// let publisher = Publisher::new(
    ///     "abc.appsync-api.eu-west-1.amazonaws.com",
    ///     "eu-west-1",
    ///     credentials,
    ///     cqrs_store::client::TlsRoots::Amazon,
    /// )
    /// .unwrap();
    /// assert_eq!(publisher.url(), "https://abc.appsync-api.eu-west-1.amazonaws.com/event");
    /// assert!(!format!("{publisher:?}").contains("secret"));
    /// ```
    pub fn new(
        url: &str,
        region: &str,
        credentials: Credentials,
        roots: TlsRoots,
    ) -> Result<Self, String> {
        let url = event_url(url)?;
        let host = url
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| u.authority().map(|a| a.as_str().to_string()))
            .ok_or_else(|| format!("`{url}` names no host"))?;
        let trust = match roots {
            TlsRoots::Amazon => TrustStore::empty().with_pem_certificate(AMAZON_ROOTS),
            TlsRoots::System => TrustStore::default(),
        };
        let context = TlsContext::builder()
            .with_trust_store(trust)
            .build()
            .map_err(|e| format!("the TLS context: {e}"))?;
        let connector = aws_smithy_http_client::Connector::builder()
            .tls_provider(tls::Provider::rustls(CryptoMode::Ring))
            .tls_context(context)
            .build();
        Ok(Publisher {
            url,
            host,
            region: region.to_string(),
            credentials,
            connector: SharedHttpConnector::new(connector),
        })
    }

    /// The publish URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The publish request of `events` (each a JSON text) on `channel`, signed at `now`.
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// let credentials = aws_credential_types::Credentials::new("AKID", "secret", Some("token".into()), None, "test");
    /// let publisher = cqrs_realtime::publish::Publisher::new(
    ///     "https://abc.appsync-api.eu-west-1.amazonaws.com/event", "eu-west-1", credentials,
    ///     cqrs_store::client::TlsRoots::Amazon,
    /// ).unwrap();
    /// let request = publisher
    ///     .request("order/t1", &[r#"{"id":"e1"}"#.to_string()], UNIX_EPOCH + Duration::from_secs(1_800_000_000))
    ///     .unwrap();
    /// let auth = request.headers()["authorization"].to_str().unwrap();
    /// assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKID/20270115/eu-west-1/appsync/aws4_request"));
    /// assert!(auth.contains("SignedHeaders=content-type;host;x-amz-date;x-amz-security-token"));
    /// assert_eq!(request.headers()["x-amz-security-token"], "token");
    /// let body: serde_json::Value = serde_json::from_slice(request.body()).unwrap();
    /// assert_eq!(body, serde_json::json!({"channel": "order/t1", "events": [r#"{"id":"e1"}"#]}));
    /// ```
    pub fn request(
        &self,
        channel: &str,
        events: &[String],
        now: SystemTime,
    ) -> Result<http::Request<Vec<u8>>, PublishError> {
        let failed = |e: &dyn std::fmt::Display| PublishError::Request(e.to_string());
        let body = serde_json::to_vec(&serde_json::json!({ "channel": channel, "events": events }))
            .map_err(|e| failed(&e))?;
        let identity: Identity = self.credentials.clone().into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(SIGNING_NAME)
            .time(now)
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| failed(&e))?
            .into();
        let headers = [
            ("content-type", "application/json"),
            ("host", self.host.as_str()),
        ];
        let signable = SignableRequest::new(
            "POST",
            &self.url,
            headers.iter().copied(),
            SignableBody::Bytes(&body),
        )
        .map_err(|e| failed(&e))?;
        let (instructions, _signature) = sign(signable, &params)
            .map_err(|e| failed(&e))?
            .into_parts();
        let mut request = http::Request::builder()
            .method("POST")
            .uri(&self.url)
            .header("content-type", "application/json")
            .header("host", &self.host)
            .body(body)
            .map_err(|e| failed(&e))?;
        instructions.apply_to_request_http1x(&mut request);
        Ok(request)
    }

    /// Publishes `events` (each a JSON text, at most five) on `channel`: `Ok` when the answer
    /// lists every one of them as successful.
    pub async fn publish(&self, channel: &str, events: &[String]) -> Result<(), PublishError> {
        let request = self
            .request(channel, events, SystemTime::now())?
            .map(SdkBody::from);
        let request = aws_smithy_runtime_api::http::Request::try_from(request)
            .map_err(|e| PublishError::Request(e.to_string()))?;
        let call = async {
            let response = self
                .connector
                .call(request)
                .await
                .map_err(|e| PublishError::Transport(format!("{e:?}")))?;
            let status = response.status().as_u16();
            let body = http_body_util::BodyExt::collect(response.into_body())
                .await
                .map_err(|e| PublishError::Transport(e.to_string()))?
                .to_bytes();
            Ok::<_, PublishError>((status, body))
        };
        let (status, body) = tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .map_err(|_| PublishError::Transport(format!("no answer within {CALL_TIMEOUT:?}")))??;
        let text: String = String::from_utf8_lossy(&body).chars().take(1000).collect();
        if status != 200 {
            return Err(PublishError::Status { status, body: text });
        }
        let answer: Answer = serde_json::from_slice(&body).map_err(|e| PublishError::Answer {
            reason: e.to_string(),
            body: text.clone(),
        })?;
        if !answer.failed.is_empty() {
            return Err(PublishError::Failed(answer.failed));
        }
        if answer.successful.len() != events.len() {
            return Err(PublishError::Answer {
                reason: format!(
                    "{} successful of {} sent",
                    answer.successful.len(),
                    events.len()
                ),
                body: text,
            });
        }
        Ok(())
    }
}
