//! Realtime to browsers (issue 39): a framework consumer, `realtime`, that publishes every change
//! event to the service's AppSync Events API, where browsers subscribe over WebSocket with their
//! JWT (template parameter `RealtimeEvents`, off by default).
//!
//! Per event ([`Realtime::publish_event`]):
//!
//! - **Channels** ([`channel`]): namespace = the entity (`_` written `-`), then the tenant of the
//!   item's partition key: `/<namespace>/<tenant>` and `/<namespace>/<tenant>/<item token>`.
//!   Browsers subscribe to either; the namespace's `onSubscribe` handler
//!   (`tools/cli/src/new/realtime/on-subscribe.js`) lets a caller in on its own tenant, on `common`
//!   as the entity's read rule says, and a global `system_admin` anywhere.
//! - **Payload** ([`payload`]): the event as its consumers get it, without the state's audit
//!   attributes where not every subscriber may see them; over the Event API's 240 KB as a
//!   reference (no `data.state`, `stateref: "history"`).
//! - **Publish** ([`publish`]): `POST https://<api domain>/event`, SigV4-signed for `appsync` with
//!   the function's role (`appsync:EventPublish` on the namespaces only), one call per channel.
//!   A refused event or a failed call is [`ConsumerError::Retry`] (the runtime retries, then
//!   parks it with its reason); a 400/413 is [`ConsumerError::Poison`].
//! - **Skipped**, logged and counted ([`Skip`], EMF metric `RealtimeSkipped` in
//!   `cqrs-dynamo/consumer`, dimension `Consumer`): a tenant (or entity) whose name is not a
//!   channel segment (`[A-Za-z0-9-]`, 1-50, no `-` at either end), a partition key without a
//!   tenant, a `common` item of a partition a restricted entity shares while its own namespace is
//!   open to everyone, an event over 240 KB even as a reference.
//!
//! What a browser may rely on: per item, the events of one channel arrive in version order (one
//! FIFO queue, one item at a time); at least once (a retried call may publish an event again:
//! deduplicate by the event's `id`); not every version when a subscription was not open.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use cqrs_consumer::Consumer;
//! let credentials = aws_credential_types::Credentials::new("AKID", "secret", None, None, "test");
//! let publisher = cqrs_realtime::publish::Publisher::new(
//!     "abc.appsync-api.eu-west-1.amazonaws.com", "eu-west-1", credentials,
//!     cqrs_store::client::TlsRoots::Amazon,
//! ).unwrap();
//! let realtime = cqrs_realtime::Realtime::new(cqrs_model::Model::example(), publisher);
//! assert_eq!(realtime.name(), "realtime");
//! # }
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod channel;
pub mod payload;
pub mod publish;

use std::sync::atomic::{AtomicU64, Ordering};

use cqrs_consumer::{Consumer, ConsumerError, Delivered};
use cqrs_events::ChangeEvent;
use cqrs_model::Model;
use futures::future::{BoxFuture, FutureExt};

use crate::publish::Publisher;

/// The consumer's name: queue `${Prefix}-realtime.fifo`, its markers, binary `src/bin/realtime.rs`.
///
/// ```
/// assert_eq!(cqrs_realtime::NAME, "realtime");
/// ```
pub const NAME: &str = "realtime";

/// The variable that holds the Event API's HTTP endpoint (`https://<domain>/event`, the template's
/// `!Sub 'https://${RealtimeApi.Dns.Http}/event'`).
///
/// ```
/// assert_eq!(cqrs_realtime::URL_VAR, "REALTIME_API_URL");
/// ```
pub const URL_VAR: &str = "REALTIME_API_URL";

/// Why an event was not published (logged, counted, acknowledged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Skip {
    /// The item's partition key has no tenant, or its tenant is not a channel segment.
    #[error("tenant {0:?} is not a channel segment ([A-Za-z0-9-], 1 to 50, no `-` at either end)")]
    Tenant(String),
    /// The entity is not in the model, or its namespace is not a channel segment.
    #[error("entity {0:?} has no namespace")]
    Namespace(String),
    /// A `common` item whose partition a restricted entity shares (only a global `system_admin`
    /// reads it), while the entity's namespace lets everyone subscribe to `common`.
    #[error(
        "partition {0:?} of common is read by a global system_admin only; its namespace's common channel is open to everyone"
    )]
    Restricted(String),
    /// Over the size limit even as a reference.
    #[error(transparent)]
    TooBig(#[from] payload::PayloadError),
}

impl Skip {
    /// A short name for logs and metrics.
    ///
    /// ```
    /// assert_eq!(cqrs_realtime::Skip::Tenant("t_1".into()).reason(), "tenant");
    /// ```
    pub fn reason(&self) -> &'static str {
        match self {
            Skip::Tenant(_) => "tenant",
            Skip::Namespace(_) => "namespace",
            Skip::Restricted(_) => "restricted",
            Skip::TooBig(_) => "too-big",
        }
    }
}

/// What became of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// Published on these channels (no leading `/`); `reference`: without its state.
    Channels {
        /// `<namespace>/<tenant>` and `<namespace>/<tenant>/<item>`.
        channels: [String; 2],
        /// Sent as a reference event.
        reference: bool,
    },
    /// Not published.
    Skipped(Skip),
}

/// The realtime consumer: publishes each event it is handed.
pub struct Realtime {
    model: Model,
    publisher: Publisher,
    published: AtomicU64,
    skipped: AtomicU64,
}

impl std::fmt::Debug for Realtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Realtime")
            .field("publisher", &self.publisher)
            .field("published", &self.published())
            .field("skipped", &self.skipped())
            .finish_non_exhaustive()
    }
}

impl Realtime {
    /// The consumer of `model`'s events, publishing through `publisher`.
    pub fn new(model: Model, publisher: Publisher) -> Self {
        Realtime {
            model,
            publisher,
            published: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        }
    }

    /// The consumer as the function builds it: the model from `model_text`, the URL from
    /// [`URL_VAR`], region, credentials and TLS roots as every function reads them
    /// ([`cqrs_store::client::ClientEnv`]).
    ///
    /// ```
    /// let vars = [
    ///     ("AWS_REGION", "eu-west-1"), ("AWS_ACCESS_KEY_ID", "AKID"), ("AWS_SECRET_ACCESS_KEY", "s"),
    ///     ("REALTIME_API_URL", "https://abc.appsync-api.eu-west-1.amazonaws.com/event"),
    /// ];
    /// let lookup = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
    /// assert!(cqrs_realtime::Realtime::from_lookup(cqrs_model::EXAMPLE_TOML, lookup).is_ok());
    /// let err = cqrs_realtime::Realtime::from_lookup(cqrs_model::EXAMPLE_TOML, |_| None).unwrap_err();
    /// assert!(err.to_string().contains("REALTIME_API_URL"), "{err}");
    /// ```
    pub fn from_lookup(
        model_text: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, StartError> {
        let model = Model::parse(model_text)?;
        let url = lookup(URL_VAR)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .ok_or(StartError::Url(format!(
                "environment variable {URL_VAR} is missing or empty (the Event API's https://<domain>/event)"
            )))?;
        let env = cqrs_store::client::ClientEnv::from_lookup(&lookup)?;
        let publisher = Publisher::new(&url, &env.region, env.credentials(), env.tls_roots)
            .map_err(|e| StartError::Url(format!("{URL_VAR}: {e}")))?;
        Ok(Realtime::new(model, publisher))
    }

    /// Events published since start.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }

    /// Events skipped since start ([`Skip`]).
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// Where `event` goes and what is sent, or why it is not published.
    ///
    /// ```
    /// # let credentials = aws_credential_types::Credentials::new("AKID", "secret", None, None, "test");
    /// # let publisher = cqrs_realtime::publish::Publisher::new("a.example", "eu-west-1", credentials, cqrs_store::client::TlsRoots::Amazon).unwrap();
    /// let realtime = cqrs_realtime::Realtime::new(cqrs_model::Model::example(), publisher);
    /// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
    /// let mut item = cqrs_item::Item::example().into_data_item();
    /// item.entity = Some("product".into());
    /// let event = feed.version_event(&item, None, chrono::Utc::now()).unwrap();
    /// let (channels, payload) = realtime.plan(&event).unwrap();
    /// assert_eq!(channels[0], "product/t1");
    /// assert!(!payload.reference);
    /// item.pk = "PRODUCT#t_1".into();
    /// let event = feed.version_event(&item, None, chrono::Utc::now()).unwrap();
    /// assert_eq!(realtime.plan(&event).unwrap_err(), cqrs_realtime::Skip::Tenant("t_1".into()));
    /// ```
    pub fn plan(&self, event: &ChangeEvent) -> Result<([String; 2], payload::Payload), Skip> {
        let entity = self
            .model
            .entity(&event.entity)
            .ok_or_else(|| Skip::Namespace(event.entity.clone()))?;
        let namespace = channel::namespace(&entity.name);
        if !channel::is_segment(&namespace) {
            return Err(Skip::Namespace(event.entity.clone()));
        }
        let tenant = cqrs_keys::tenant_code(&event.data.pk).unwrap_or_default();
        if !channel::is_segment(tenant) {
            return Err(Skip::Tenant(tenant.to_string()));
        }
        if tenant == cqrs_keys::TENANT_COMMON
            && self.model.partition_read_rule(&event.data.pk) > entity.read_rule()
        {
            return Err(Skip::Restricted(event.data.pk.clone()));
        }
        let payload = payload::payload(event, payload::keeps_audit(tenant, &event.tenant))?;
        let channels = channel::channels(&namespace, tenant, &event.data.pk, &event.data.sk);
        Ok((channels, payload))
    }

    /// Publishes `event` on its two channels, or skips it (logged, counted). A failed call is
    /// [`ConsumerError::Retry`], a 400/413 [`ConsumerError::Poison`].
    pub async fn publish_event(&self, event: &ChangeEvent) -> Result<Published, ConsumerError> {
        let (channels, payload) = match self.plan(event) {
            Ok(plan) => plan,
            Err(skip) => {
                self.skipped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(id = %event.id, subject = %event.subject, reason = skip.reason(), "not published to the realtime API: {skip}");
                println!(
                    "{}",
                    skipped_emf_line(skip.reason(), chrono::Utc::now().timestamp_millis())
                );
                return Ok(Published::Skipped(skip));
            }
        };
        let events = [payload.text];
        for channel in &channels {
            if let Err(error) = self.publisher.publish(channel, &events).await {
                tracing::warn!(id = %event.id, %channel, %error, "publishing to the realtime API");
                return Err(if error.is_permanent() {
                    ConsumerError::poison(format!("realtime channel {channel}: {error}"))
                } else {
                    ConsumerError::retry(format!("realtime channel {channel}: {error}"))
                });
            }
        }
        self.published.fetch_add(1, Ordering::Relaxed);
        Ok(Published::Channels {
            channels,
            reference: payload.reference,
        })
    }
}

impl Consumer for Realtime {
    fn name(&self) -> &str {
        NAME
    }

    fn handle<'a>(&'a self, delivered: &'a Delivered) -> BoxFuture<'a, Result<(), ConsumerError>> {
        async move { self.publish_event(&delivered.event).await.map(|_| ()) }.boxed()
    }
}

/// The EMF line of one skipped event: metric `RealtimeSkipped` (Count 1) in
/// `cqrs-dynamo/consumer`, dimension `Consumer` = `realtime`, the reason as a property.
///
/// ```
/// let line = cqrs_realtime::skipped_emf_line("tenant", 1_800_000_000_000);
/// let json: serde_json::Value = serde_json::from_str(&line).unwrap();
/// assert_eq!(json["RealtimeSkipped"], 1);
/// assert_eq!(json["Consumer"], "realtime");
/// assert_eq!(json["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"], "RealtimeSkipped");
/// ```
pub fn skipped_emf_line(reason: &str, timestamp_ms: i64) -> String {
    serde_json::json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": cqrs_consumer::metrics::NAMESPACE,
                "Dimensions": [["Consumer"]],
                "Metrics": [{"Name": "RealtimeSkipped", "Unit": "Count"}],
            }],
        },
        "Consumer": NAME,
        "RealtimeSkipped": 1,
        "reason": reason,
    })
    .to_string()
}

/// Why the function cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The service's `model.toml` does not check.
    #[error(transparent)]
    Model(#[from] cqrs_model::ModelErrors),
    /// A missing or malformed AWS variable.
    #[error(transparent)]
    Config(#[from] cqrs_store::ConfigError),
    /// `REALTIME_API_URL` is missing or not a URL.
    #[error("{0}")]
    Url(String),
}

/// The realtime function's `main` (the service's `src/bin/realtime.rs`, where MODEL is
/// `include_str!("../../model.toml")`): [`Realtime::from_lookup`] on the environment, run by
/// [`cqrs_consumer::run`] (its queue, dead-letter queue, markers and metrics).
///
/// ```no_run
/// # const MODEL: &str = "";
/// #[tokio::main]
/// async fn main() -> Result<(), lambda_runtime::Error> {
///     cqrs_realtime::run(MODEL).await
/// }
/// ```
///
/// # Errors
///
/// A model that does not check, a missing or malformed variable: the cold start fails and says
/// which.
pub async fn run(model_text: &str) -> Result<(), lambda_runtime::Error> {
    let realtime = Realtime::from_lookup(model_text, |name| std::env::var(name).ok())?;
    cqrs_consumer::run(model_text, realtime).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two common entities in one partition: notes read by everyone, secrets by a global
    /// `system_admin` only.
    const SHARED: &str = r#"
[entities.note]
common = true
pk = "BOARD#common"
sk = "NOTE#{noteId}"
attributes.noteId = { type = "string", required = true, max = 64 }

[entities.secret]
common = true
read = "system_admin"
pk = "BOARD#common"
sk = "SECRET#{secretId}"
attributes.secretId = { type = "string", required = true, max = 64 }
"#;

    fn realtime(model: Model) -> Realtime {
        let credentials =
            aws_credential_types::Credentials::new("AKID", "secret", None, None, "test");
        let publisher = Publisher::new(
            "http://127.0.0.1:9/event",
            "eu-west-1",
            credentials,
            cqrs_store::client::TlsRoots::Amazon,
        )
        .unwrap();
        Realtime::new(model, publisher)
    }

    fn event(model: &Model, entity: &str, sk: &str) -> ChangeEvent {
        let feed = cqrs_events::Feed::new(model.clone(), "urn:cqrs:test");
        let mut item = cqrs_item::Item::example().into_data_item();
        item.entity = Some(entity.into());
        item.pk = "BOARD#common".into();
        item.sk = sk.into();
        item.tenant_code = "common".into();
        feed.version_event(&item, None, chrono::Utc::now()).unwrap()
    }

    #[tokio::test]
    async fn a_common_item_of_a_partition_a_restricted_entity_shares_is_skipped() {
        let model = Model::parse(SHARED).unwrap();
        let realtime = realtime(model.clone());
        // The note's namespace lets everyone subscribe to `common`, but the HTTP API shows the
        // partition to a global system_admin only: not published (nothing is sent, so the
        // unreachable URL is never called).
        let published = realtime
            .publish_event(&event(&model, "note", "NOTE#n1"))
            .await
            .unwrap();
        assert_eq!(
            published,
            Published::Skipped(Skip::Restricted("BOARD#common".into()))
        );
        assert_eq!(realtime.skipped(), 1);
        // The secret's own namespace is restricted to a global system_admin: planned normally.
        let (channels, _) = realtime
            .plan(&event(&model, "secret", "SECRET#s1"))
            .unwrap();
        assert_eq!(channels[0], "secret/common");
        let namespaces = channel::namespaces(&model);
        assert_eq!(
            namespaces
                .iter()
                .map(|n| (n.name.as_str(), n.common_readers.as_str()))
                .collect::<Vec<_>>(),
            [("note", "everyone"), ("secret", "system_admin")]
        );
    }
}
