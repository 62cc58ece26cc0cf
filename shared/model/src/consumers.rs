//! A service's consumers of its change events, declared once in `model.toml`
//! (`[consumers.<function>]`): each table is one Lambda function of the service (its binary
//! `src/bin/<function>.rs`, which hands its handler to `cqrs_consumer::run`), fed from a FIFO queue
//! of its own that the service's events topic delivers to, with a dead-letter queue of its own. One
//! consumer's failures never delay another's, nor the projection. From this declaration the CLI
//! writes the consumer's deployed resources and the local stack runs it.
//!
//! ```toml
//! [consumers.search-index]
//! description = "Keeps the search index in step with the orders"
//! entities = ["order"]            # the entities whose events it receives; all when absent
//! reads = ["data"]                # what its role may reach besides its queue: as a route's
//! batch_size = 10                 # events per invocation, 1 to 10 (a FIFO queue's limit)
//! max_receive = 5                 # attempts of a failing event before it is parked
//! maximum_concurrency = 10        # invocations at once, 2 to 1000
//! lag_alarm_seconds = 300         # the alarm on the age of its oldest event
//! timeout = 30                    # seconds, 1 to 900
//! memory = 256                    # MB
//! ```
//!
//! Every key is optional: `[consumers.audit]` alone declares a consumer of every event.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::model::ModelError;
use crate::routes::{Access, FRAMEWORK_FUNCTIONS};

/// The most consumers a service may declare: a FIFO topic takes 100 subscriptions, and the
/// framework keeps some for itself (realtime delivery, the local stack's event tap).
pub const MAX_CONSUMERS: usize = 90;

/// `[consumers.<function>]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConsumer {
    pub description: Option<String>,
    pub entities: Option<Vec<String>>,
    #[serde(default)]
    pub reads: Vec<String>,
    pub batch_size: Option<u32>,
    pub max_receive: Option<u32>,
    pub maximum_concurrency: Option<u32>,
    pub lag_alarm_seconds: Option<u32>,
    pub memory: Option<u32>,
    pub timeout: Option<u32>,
}

/// A consumer of the service's change events, as `model.toml` declares it.
///
/// ```
/// let model = cqrs_model::Model::parse(r#"
/// [entities.order]
/// pk = "ORDER#{tenant}"
/// sk = "{orderId}"
/// attributes.orderId = { type = "string", required = true }
///
/// [consumers.search-index]
/// entities = ["order"]
/// max_receive = 3
/// "#).unwrap();
/// let consumer = &model.consumers()[0];
/// assert_eq!(consumer.name, "search-index");
/// assert_eq!(consumer.entities, Some(vec!["order".to_string()]));
/// assert_eq!(consumer.max_receive, 3);
/// assert_eq!(consumer.batch_size, 10);
/// assert_eq!(consumer.visibility_timeout(), 180);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerFunction {
    /// The function's name: its binary (`src/bin/<name>.rs`), its queue's and, after the stack's
    /// prefix, its deployed name.
    pub name: String,
    /// What it does, for its deployed description.
    pub description: Option<String>,
    /// The entities whose events it receives (a filter on its subscription); `None`: all.
    pub entities: Option<Vec<String>>,
    /// What its role may reach besides its queue, its dead-letter queue, its markers and the
    /// history table (which the runtime reads).
    pub reads: Vec<Access>,
    /// Events per invocation (1 to 10).
    pub batch_size: u32,
    /// Attempts of an event whose handler fails before the runtime parks it in the dead-letter
    /// queue.
    pub max_receive: u32,
    /// Invocations at once (the event source's maximum concurrency, 2 to 1000).
    pub maximum_concurrency: u32,
    /// The age of its oldest event, in seconds, from which its lag alarm fires.
    pub lag_alarm_seconds: u32,
    /// Its memory in MB (the template's default when `None`).
    pub memory: Option<u32>,
    /// Its timeout in seconds.
    pub timeout: u32,
}

impl ConsumerFunction {
    /// The queue's visibility timeout in seconds: six times the function's timeout, as AWS
    /// advises for a Lambda event source (an invocation's retries by Lambda stay within it).
    ///
    /// ```
    /// let model = cqrs_model::Model::parse("[consumers.audit]\ntimeout = 20").unwrap();
    /// assert_eq!(model.consumers()[0].visibility_timeout(), 120);
    /// ```
    pub fn visibility_timeout(&self) -> u32 {
        self.timeout * 6
    }
}

/// What a consumer's settings default to.
const DEFAULT_BATCH_SIZE: u32 = 10;
const DEFAULT_MAX_RECEIVE: u32 = 5;
const DEFAULT_MAXIMUM_CONCURRENCY: u32 = 10;
const DEFAULT_LAG_ALARM_SECONDS: u32 = 300;
const DEFAULT_TIMEOUT: u32 = 30;

/// Builds and checks the declared consumers; each problem is pushed to `errors`. `entities` are
/// the model's entity names, `routes` its route functions' names (a consumer's binary may not
/// take one).
pub(crate) fn build(
    raw: BTreeMap<String, RawConsumer>,
    entities: &[&str],
    routes: &[&str],
    errors: &mut Vec<ModelError>,
) -> Vec<ConsumerFunction> {
    let mut err = |place: &str, field: String, message: String| {
        errors.push(ModelError {
            place: place.to_string(),
            field,
            message,
        })
    };
    if raw.len() > MAX_CONSUMERS {
        err(
            "consumers",
            "consumers".into(),
            format!(
                "{} consumers: at most {MAX_CONSUMERS} (an SNS FIFO topic takes 100 subscriptions, some are the framework's)",
                raw.len()
            ),
        );
    }
    let mut consumers = Vec::new();
    for (name, raw) in raw {
        let place = format!("consumer `{name}`");
        let valid_name = name.len() <= 40
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !name.ends_with('-');
        if !valid_name {
            err(
                &place,
                format!("consumers.{name}"),
                "a function name is its binary's: lowercase letters, digits and `-`, starting with a letter, at most 40 characters".into(),
            );
        }
        if FRAMEWORK_FUNCTIONS.contains(&name.as_str()) {
            err(
                &place,
                format!("consumers.{name}"),
                format!(
                    "`{name}` is one of the framework's functions: name the consumer another way"
                ),
            );
        }
        if routes.contains(&name.as_str()) {
            err(
                &place,
                format!("consumers.{name}"),
                format!("`{name}` is also a route function: a binary is one or the other"),
            );
        }
        if let Some(wanted) = &raw.entities {
            if wanted.is_empty() {
                err(
                    &place,
                    format!("consumers.{name}.entities"),
                    "an empty list receives nothing: name entities, or leave the key out for all"
                        .into(),
                );
            }
            for entity in wanted {
                if !entities.contains(&entity.as_str()) {
                    err(
                        &place,
                        format!("consumers.{name}.entities"),
                        format!("`{entity}` is not an entity of the model"),
                    );
                }
            }
        }
        let mut reads = Vec::new();
        for text in &raw.reads {
            match Access::parse(text) {
                Some(access) if !reads.contains(&access) => reads.push(access),
                Some(_) => {}
                None => err(
                    &place,
                    format!("consumers.{name}.reads"),
                    format!(
                        "`{text}` is not something a consumer reads: use \"data\", \"history\", \"counters\" or \"sql\""
                    ),
                ),
            }
        }
        let mut setting = |key: &str,
                           value: Option<u32>,
                           default: u32,
                           range: std::ops::RangeInclusive<u32>,
                           why: &str| {
            let value = value.unwrap_or(default);
            if !range.contains(&value) {
                err(
                    &place,
                    format!("consumers.{name}.{key}"),
                    format!("{value}: {why}, so {} to {}", range.start(), range.end()),
                );
            }
            value
        };
        let batch_size = setting(
            "batch_size",
            raw.batch_size,
            DEFAULT_BATCH_SIZE,
            1..=10,
            "Lambda reads at most 10 messages of a FIFO queue at once",
        );
        let max_receive = setting(
            "max_receive",
            raw.max_receive,
            DEFAULT_MAX_RECEIVE,
            1..=100,
            "the attempts of a failing event before it is parked",
        );
        let maximum_concurrency = setting(
            "maximum_concurrency",
            raw.maximum_concurrency,
            DEFAULT_MAXIMUM_CONCURRENCY,
            2..=1000,
            "an SQS event source runs 2 to 1000 invocations at once",
        );
        let lag_alarm_seconds = setting(
            "lag_alarm_seconds",
            raw.lag_alarm_seconds,
            DEFAULT_LAG_ALARM_SECONDS,
            60..=1_209_600,
            "an SQS queue keeps a message at most 14 days",
        );
        let timeout = setting(
            "timeout",
            raw.timeout,
            DEFAULT_TIMEOUT,
            1..=900,
            "Lambda runs a function at most 15 minutes",
        );
        if let Some(memory) = raw.memory {
            setting(
                "memory",
                Some(memory),
                memory,
                128..=10240,
                "Lambda takes 128 to 10240 MB",
            );
        }
        consumers.push(ConsumerFunction {
            name,
            description: raw.description,
            entities: raw.entities,
            reads,
            batch_size,
            max_receive,
            maximum_concurrency,
            lag_alarm_seconds,
            memory: raw.memory,
            timeout,
        });
    }
    consumers
}

#[cfg(test)]
mod tests {
    use crate::Model;

    fn errors(text: &str) -> Vec<String> {
        match Model::parse(text) {
            Ok(_) => Vec::new(),
            Err(e) => e.to_string().lines().map(str::to_string).collect(),
        }
    }

    const ORDER: &str = "[entities.order]\npk = \"ORDER#{tenant}\"\nsk = \"{orderId}\"\n\
                         attributes.orderId = { type = \"string\", required = true }\n";

    #[test]
    fn a_bare_declaration_takes_every_default() {
        let model = Model::parse(&format!("{ORDER}[consumers.audit]\n")).unwrap();
        let audit = model.consumer("audit").unwrap();
        assert_eq!(audit.entities, None);
        assert_eq!(
            (
                audit.batch_size,
                audit.max_receive,
                audit.maximum_concurrency
            ),
            (10, 5, 10)
        );
        assert_eq!((audit.lag_alarm_seconds, audit.timeout), (300, 30));
        assert_eq!(audit.memory, None);
        assert!(audit.reads.is_empty());
        assert!(model.consumer("other").is_none());
    }

    #[test]
    fn a_model_without_consumers_declares_none() {
        assert!(Model::parse(ORDER).unwrap().consumers().is_empty());
        // The example shop declares one: its order-audit.
        assert_eq!(Model::example().consumers().len(), 1);
    }

    #[test]
    fn each_wrong_setting_is_named() {
        let text = format!(
            "{ORDER}[routes.report]\n[routes.report.operations.report]\nmethod = \"GET\"\npath = \"/report\"\n\
             [consumers.Bad_Name]\n\
             [consumers.data-sync]\n\
             [consumers.report]\n\
             [consumers.a]\nentities = [\"order\", \"nope\"]\nreads = [\"everything\"]\nbatch_size = 11\n\
             max_receive = 0\nmaximum_concurrency = 1\nlag_alarm_seconds = 10\ntimeout = 901\nmemory = 64\n\
             [consumers.b]\nentities = []\n"
        );
        let errors = errors(&text).join("\n");
        for expected in [
            "consumers.Bad_Name",
            "`data-sync` is one of the framework's functions",
            "`report` is also a route function",
            "`nope` is not an entity of the model",
            "`everything` is not something a consumer reads",
            "consumers.a.batch_size",
            "consumers.a.max_receive",
            "consumers.a.maximum_concurrency",
            "consumers.a.lag_alarm_seconds",
            "consumers.a.timeout",
            "consumers.a.memory",
            "an empty list receives nothing",
        ] {
            assert!(
                errors.contains(expected),
                "{expected} missing from:\n{errors}"
            );
        }
    }

    #[test]
    fn too_many_consumers_are_refused() {
        let mut text = ORDER.to_string();
        for i in 0..=super::MAX_CONSUMERS {
            text.push_str(&format!("[consumers.c{i}]\n"));
        }
        assert!(errors(&text).join("\n").contains("at most 90"));
    }
}
