//! `cqrs redrive`: the records data-sync and the event publisher parked (`list`, `show`) and,
//! after the cause is fixed, their redrive: data-sync's by re-projecting the items they name from
//! the history table (`run`), the event publisher's by publishing their change events again
//! (`events`).
//!
//! `run` writes each named item's newest history version into the data table with data-sync's own
//! condition (never an older version), then removes the item's parked records (unless `--keep`).
//! An item history holds no version of stays parked: there is nothing to project until a new
//! version is written. The event publisher's records (reason kind `event-feed`: change events
//! that could not be made or published) are listed and shown but never redriven nor removed by
//! `run`: re-projecting publishes nothing, so removing them would lose the events silently; `run`
//! counts them and names `cqrs redrive events`. The event source mapping's on-failure queue holds
//! only stream positions, not records; its batches are re-projected the same way once the items
//! are known, or by `cqrs rebuild --tenant`.
//!
//! `events` republishes the event publisher's parked records to the events topic, with the
//! publisher's own code: the parked stream record (kept as Lambda delivered it) goes through the
//! feed again ([`cqrs_events::events_from_batch_with`], the model's entities, `source` from
//! `--source` / `CQRS_EVENT_SOURCE`), so the versions a `MODIFY` skipped are read from the
//! history table with consistent reads and the record's own version from its image, exactly as
//! the publisher made them; each event becomes the publisher's [`Entry`] (message group the item,
//! deduplication id the event id, the `type`/`tenant`/`entity` attributes) and goes to the topic
//! through [`SnsTopic`] (`--topic-arn` / `EVENTS_TOPIC_ARN`, the publisher's variable), one entry
//! a call, in version order. Which events:
//!
//! - a record the topic refused (its reason `SNS refused event <id> ...`): that event only (the
//!   record's other versions went out);
//! - any other (the record could not make its events, e.g. a version missing from history): all
//!   the record's events, once the record makes them without a failure; while it still fails
//!   (the version is still not in history) it stays parked with that reason;
//! - a TTL removal (a `REMOVE` by DynamoDB's TTL: no version is written, history has nothing to
//!   read) is rebuilt from the parked record's old image, as the publisher builds it: the same
//!   `<entity>.deleted` event, `removal: "ttl"`, the same id ([`cqrs_events::ttl_removal_id`])
//!   and time (the record's `ApproximateCreationDateTime`);
//! - a refused event whose stream record the parked entry could not keep (its JSON too large for
//!   an item): the record is made from the history table, the `MODIFY` from version `v - 1` to the
//!   refused `v` (consistent reads), and goes through the feed the same way. Any other entry
//!   without its stream record stays parked: which versions it made is not known without it.
//!
//! A record is removed (unless `--keep`) once every event it names was accepted by the topic; a
//! record whose events cannot be made, or whose event the topic refuses again (or fails to take)
//! stays parked, reported with the reason (exit 1).
//!
//! **Order.** A republished version reaches the topic's subscribers after later versions of the
//! same item (SNS FIFO orders per publish, not per version): a subscriber outside the framework
//! must compare `itemversion` with what it holds. The framework's consumers already filled the
//! version from the history table when the later version arrived, so for them it is a duplicate
//! (dropped as already applied), never a gap.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use cqrs_event_publisher::park::refused_event_id;
use cqrs_event_publisher::{Entry, Publish, SnsTopic, TOPIC_ENV};
use cqrs_events::{Feed, Gaps, SOURCE_ENV, events_from_batch_with};
use cqrs_keys::parked::EVENT_FEED_KIND;
use cqrs_keys::{generate_id, remove_sort_key_version, tenant_code};
use cqrs_store::Store;
use cqrs_store::parked::ParkedRecord;
use cqrs_store::projection::DataWrite;

use super::{Connection, EXIT_DIFFERENCE, Need, fail};

/// The records data-sync parked, and their redrive.
#[derive(Debug, Args)]
pub struct RedriveArgs {
    #[command(flatten)]
    pub connection: Connection,
    #[command(subcommand)]
    pub command: RedriveCommand,
}

/// What to do with parked records.
#[derive(Debug, Subcommand)]
pub enum RedriveCommand {
    /// List parked records: all tenants, or one.
    List {
        /// Only this tenant's records.
        #[arg(long)]
        tenant: Option<String>,
        /// Print JSON (one array).
        #[arg(long)]
        json: bool,
    },
    /// Show every parked record of one item, with its reason and the stream record as Lambda
    /// delivered it.
    Show {
        #[command(flatten)]
        item: ItemKey,
    },
    /// Re-project the items the parked records name from the history table, then remove the
    /// records. The event publisher's records (reason kind `event-feed`) are left parked: they
    /// are change events, not republished by a re-projection (`cqrs redrive events` republishes
    /// them).
    Run {
        /// Only this tenant's records.
        #[arg(long)]
        tenant: Option<String>,
        /// Only this item's records: its `pk` (with `--sk`).
        #[arg(long, requires = "sk")]
        pk: Option<String>,
        /// Only this item's records: its sort key without version (with `--pk`).
        #[arg(long, requires = "pk")]
        sk: Option<String>,
        /// Say what would be written and removed; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Keep the parked records after the re-projection.
        #[arg(long)]
        keep: bool,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Republish the event publisher's parked records (reason kind `event-feed`) to the events
    /// topic, as the publisher makes and sends them (the versions a record skipped read from the
    /// history table; a TTL removal rebuilt from the record's old image), then remove the
    /// records. A record whose events still cannot be made (a version not in history) or that
    /// the topic refuses again stays parked with the reason (exit 1). Order: a republished
    /// version reaches subscribers after later versions of its item (FIFO order is per publish),
    /// so a subscriber outside the framework must compare `itemversion`; the framework's
    /// consumers filled it from history already and drop it as a duplicate, never a gap.
    Events(EventsArgs),
}

/// `cqrs redrive events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only this tenant's records.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Only this item's records: its `pk` (with `--sk`).
    #[arg(long, requires = "sk")]
    pub pk: Option<String>,
    /// Only this item's records: its sort key without version (with `--pk`).
    #[arg(long, requires = "pk")]
    pub sk: Option<String>,
    /// Make the events and say what would be published and removed; publish and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Keep the parked records after their events are published.
    #[arg(long)]
    pub keep: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// The events topic (SNS FIFO), as the publisher reads it.
    #[arg(long, env = TOPIC_ENV)]
    pub topic_arn: Option<String>,
    /// The events' `source`, as the publisher reads it (`urn:cqrs:service` when unset).
    #[arg(long, env = SOURCE_ENV)]
    pub source: Option<String>,
    /// The service's entity model (the events are built from it, as the publisher builds them).
    #[arg(long, default_value = "model.toml")]
    pub model: std::path::PathBuf,
    /// An SNS endpoint other than AWS's, e.g. moto's. Without it the standard SDK configuration
    /// applies (AWS_ENDPOINT_URL_SNS, AWS_REGION, profiles, ...).
    #[arg(long, env = "AWS_ENDPOINT_URL_SNS")]
    pub sns_endpoint_url: Option<String>,
}

/// One item, by its keys: an item id (`pk#sk`) can name two items (`("ORDER#t1", "ORDER#o1")` and
/// `("ORDER#t1#ORDER", "o1")` share `ORDER#t1#ORDER#o1`), its keys only one.
#[derive(Debug, Clone, Args)]
pub struct ItemKey {
    /// The item's partition key (e.g. PRODUCT#t1).
    #[arg(long)]
    pub pk: String,
    /// The item's sort key without version (e.g. P001).
    #[arg(long)]
    pub sk: String,
}

impl ItemKey {
    /// Whether `record` is of this item (its keys, never its id alone).
    fn holds(&self, record: &ParkedRecord) -> bool {
        record.item_pk.as_deref() == Some(self.pk.as_str())
            && record
                .item_sk
                .as_deref()
                .map(remove_sort_key_version)
                .is_some_and(|sk| sk == self.sk)
    }
}

/// Runs `cqrs redrive`.
pub async fn run(args: RedriveArgs) -> ExitCode {
    let needs: &[Need] = match args.command {
        RedriveCommand::Run { .. } => &[Need::Parked, Need::Data, Need::History],
        RedriveCommand::Events(_) => &[Need::Parked, Need::History],
        _ => &[Need::Parked],
    };
    let store = match args.connection.store(needs).await {
        Ok(store) => store,
        Err(e) => return fail("redrive", e),
    };
    let result = match args.command {
        RedriveCommand::List { tenant, json } => list(&store, tenant.as_deref(), json).await,
        RedriveCommand::Show { item } => show(&store, &item).await,
        RedriveCommand::Run {
            tenant,
            pk,
            sk,
            dry_run,
            keep,
            json,
        } => {
            let item = pk.zip(sk).map(|(pk, sk)| ItemKey { pk, sk });
            redrive(
                &store,
                tenant.as_deref(),
                item.as_ref(),
                dry_run,
                keep,
                json,
            )
            .await
        }
        RedriveCommand::Events(events) => republish(&store, events).await,
    };
    result.unwrap_or_else(|e| fail("redrive", e))
}

/// The parked records of `tenant` (all tenants when `None`), of one item when `item` is given
/// (read by its id, kept by its keys: another item may share the id).
async fn records(
    store: &Store,
    tenant: Option<&str>,
    item: Option<&ItemKey>,
) -> Result<Vec<ParkedRecord>, String> {
    let tenant = tenant.or_else(|| item.and_then(|i| tenant_code(&i.pk)));
    let id = item.map(|i| generate_id(&i.pk, &i.sk));
    let mut records = match tenant {
        Some(tenant) => store.list_parked(Some(tenant), id.as_deref()).await,
        None => store.scan_parked().await,
    }
    .map_err(|e| e.to_string())?;
    if let Some(item) = item {
        records.retain(|r| item.holds(r));
    }
    records.sort_by(|a, b| {
        (&a.tenant, &a.item_id, &a.sequence_number).cmp(&(
            &b.tenant,
            &b.item_id,
            &b.sequence_number,
        ))
    });
    Ok(records)
}

async fn list(store: &Store, tenant: Option<&str>, json: bool) -> Result<ExitCode, String> {
    let records = records(store, tenant, None).await?;
    if json {
        let list: Vec<serde_json::Value> = records
            .iter()
            .map(|r| {
                let mut value = serde_json::to_value(r).unwrap_or_default();
                if let Some(map) = value.as_object_mut() {
                    map.remove("record");
                }
                value
            })
            .collect();
        println!("{}", serde_json::Value::Array(list));
        return Ok(ExitCode::SUCCESS);
    }
    println!("{} parked records", records.len());
    for r in &records {
        let reason: String = r.reason.chars().take(100).collect();
        println!(
            "  {:<10} {} @{}  {:<16} {}  {}",
            r.tenant.as_deref().unwrap_or("-"),
            r.item_sk
                .as_deref()
                .map(|sk| format!("{} / {sk}", r.item_pk.as_deref().unwrap_or("-")))
                .unwrap_or_else(|| "(no keys)".into()),
            r.sequence_number,
            r.reason_kind,
            r.parked_at,
            reason
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn show(store: &Store, item: &ItemKey) -> Result<ExitCode, String> {
    let records = records(store, None, Some(item)).await?;
    if records.is_empty() {
        println!("no parked record of {} / {}", item.pk, item.sk);
        return Ok(ExitCode::SUCCESS);
    }
    let list: Vec<serde_json::Value> = records
        .iter()
        .map(|r| {
            let mut value = serde_json::to_value(r).unwrap_or_default();
            // The stream record as JSON, not as a string holding JSON.
            if let (Some(map), Some(text)) = (value.as_object_mut(), &r.record)
                && let Ok(record) = serde_json::from_str::<serde_json::Value>(text)
            {
                map.insert("record".into(), record);
            }
            value
        })
        .collect();
    println!(
        "{}",
        serde_json::to_string_pretty(&list).map_err(|e| e.to_string())?
    );
    Ok(ExitCode::SUCCESS)
}

/// Why `run` leaves the event publisher's records parked (printed and in `--json`).
const EVENT_FEED_LEFT: &str = "change events, not republished by a re-projection: `cqrs redrive events` republishes them to the events topic";

/// What became of one item's redrive.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Redriven {
    pk: String,
    sk: String,
    records: usize,
    /// `written`, `already-current`, `no-history` or `would-write` (dry run).
    outcome: &'static str,
    version: Option<i64>,
    removed: usize,
}

async fn redrive(
    store: &Store,
    tenant: Option<&str>,
    item: Option<&ItemKey>,
    dry_run: bool,
    keep: bool,
    json: bool,
) -> Result<ExitCode, String> {
    let (event_feed, parked): (Vec<ParkedRecord>, Vec<ParkedRecord>) = records(store, tenant, item)
        .await?
        .into_iter()
        .partition(|r| r.reason_kind == EVENT_FEED_KIND);
    let mut by_item: BTreeMap<(String, String), Vec<ParkedRecord>> = BTreeMap::new();
    let mut keyless = 0;
    for record in parked {
        match (&record.item_pk, &record.item_sk) {
            (Some(pk), Some(sk)) => {
                let key = (pk.clone(), remove_sort_key_version(sk).to_string());
                by_item.entry(key).or_default().push(record);
            }
            _ => keyless += 1,
        }
    }
    let mut done = Vec::new();
    for ((pk, sk), records) in by_item {
        let newest = store
            .newest_history_version(&pk, &sk)
            .await
            .map_err(|e| format!("{pk} / {sk}: {e}"))?;
        let (outcome, version) = match &newest {
            None => ("no-history", None),
            Some(item) if dry_run => ("would-write", Some(item.version)),
            Some(item) => match store.put_data_if_newer(item).await {
                Ok(DataWrite::Written) => ("written", Some(item.version)),
                Ok(DataWrite::AlreadyCurrent) => ("already-current", Some(item.version)),
                Err(e) => return Err(format!("{pk} / {sk}: {e}")),
            },
        };
        let mut removed = 0;
        if newest.is_some() && !dry_run && !keep {
            for record in &records {
                store
                    .delete_parked(record)
                    .await
                    .map_err(|e| format!("removing the parked record {}: {e}", record.sk()))?;
                removed += 1;
            }
        }
        done.push(Redriven {
            pk,
            sk,
            records: records.len(),
            outcome,
            version,
            removed,
        });
    }
    let left = done.iter().filter(|d| d.outcome == "no-history").count();
    if json {
        let out = serde_json::json!({
            "dryRun": dry_run,
            "items": done,
            "withoutKeys": keyless,
            "leftParked": left,
            "eventFeed": { "left": event_feed.len(), "why": EVENT_FEED_LEFT },
        });
        println!("{out}");
    } else {
        println!(
            "redrive{}: {} items named by parked records, {} without history (left parked), {} \
             records without keys (left parked)",
            if dry_run { " (dry run)" } else { "" },
            done.len(),
            left,
            keyless
        );
        for d in &done {
            println!(
                "  {} / {}  {} records  {}{}  {} removed",
                d.pk,
                d.sk,
                d.records,
                d.outcome,
                d.version.map(|v| format!(" v{v}")).unwrap_or_default(),
                d.removed
            );
        }
        if !event_feed.is_empty() {
            println!(
                "{} change-event records left parked ({EVENT_FEED_LEFT}); see `cqrs redrive list`",
                event_feed.len()
            );
        }
    }
    if left > 0 || keyless > 0 || !event_feed.is_empty() {
        return Ok(ExitCode::from(EXIT_DIFFERENCE));
    }
    Ok(ExitCode::SUCCESS)
}

/// What became of one parked change-event record.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Republished {
    pk: Option<String>,
    sk: Option<String>,
    sequence_number: String,
    version: Option<i64>,
    /// `published`, `would-publish` (dry run) or `left` (stays parked).
    outcome: &'static str,
    /// The ids of the record's events, in the order they go (went, would go).
    events: Vec<String>,
    /// How many of them the topic accepted in this run.
    published: usize,
    removed: bool,
    /// Why the record stays parked.
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
}

/// The entries of the events `parked` names, made by the publisher's own code from the parked
/// stream record (see the [module docs](self)); `Err`: why it stays parked.
async fn entries_of(
    store: &Store,
    feed: &Feed,
    parked: &ParkedRecord,
) -> Result<Vec<Entry>, String> {
    let record = match parked.record.as_deref() {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| format!("the parked stream record does not read: {e}"))?,
        None => record_from_history(store, parked).await?,
    };
    let batch =
        events_from_batch_with(feed, std::slice::from_ref(&record), store, Gaps::Skip).await;
    let failures = || {
        batch
            .failures
            .iter()
            .map(|f| f.error.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let events: Vec<&cqrs_events::ChangeEvent> = match refused_event_id(&parked.reason) {
        // The topic refused one event; the record's others went out.
        Some(id) => {
            let events: Vec<_> = batch.events.iter().filter(|e| e.id == id).collect();
            if events.is_empty() {
                let why = failures();
                return Err(if why.is_empty() {
                    format!("the record no longer makes the refused event {id}")
                } else {
                    why
                });
            }
            events
        }
        None => {
            if !batch.failures.is_empty() {
                return Err(failures());
            }
            if batch.events.is_empty() {
                return Err(
                    "the record makes no event (its item is of no entity of the model, \
                            or a REMOVE not made by TTL)"
                        .into(),
                );
            }
            batch.events.iter().collect()
        }
    };
    events
        .into_iter()
        .map(|e| {
            Entry::of(e).map_err(|error| format!("event {} does not serialise: {error}", e.id))
        })
        .collect()
}

/// The stream record of an event the topic refused, when the parked entry could not keep it
/// (its JSON too large for an item): the `MODIFY` from version `v - 1` to the refused version `v`
/// (an `INSERT` of version 1), both read from the history table (consistent reads), in the data
/// table's form, observed when it was parked. Only for a refusal of an `INSERT` or `MODIFY`: the
/// refusal names the one event to make; any other entry's versions are not known without its
/// record.
async fn record_from_history(
    store: &Store,
    parked: &ParkedRecord,
) -> Result<aws_lambda_events::event::dynamodb::EventRecord, String> {
    use cqrs_events::{HistoryKey, HistoryReader};
    let too_large = "the stream record was too large to keep in the parked table";
    let refused = refused_event_id(&parked.reason).is_some();
    let (Some(pk), Some(sk), Some(version), true, "INSERT" | "MODIFY") = (
        parked.item_pk.as_deref(),
        parked.item_sk.as_deref(),
        parked.version,
        refused,
        parked.event_name.as_str(),
    ) else {
        return Err(format!(
            "{too_large}, and its entry names no single version to read from history: its events \
             cannot be made again (`cqrs replay` feeds a framework consumer from history)"
        ));
    };
    let sk = remove_sort_key_version(sk);
    let wanted: Vec<HistoryKey> = (version - 1..=version)
        .filter(|v| *v >= 1)
        .map(|v| HistoryKey::new(pk, sk, v))
        .collect();
    let found = store
        .read_versions(&wanted)
        .await
        .map_err(|e| format!("reading the history of {pk} / {sk}: {e}"))?;
    let image = |v: i64| -> Result<serde_dynamo::Item, String> {
        let item = found.iter().find(|item| item.version == v).ok_or_else(|| {
            format!("{too_large}, and version {v} of {pk} / {sk} is not in the history table")
        })?;
        let attributes = item
            .clone()
            .into_data_item()
            .to_attributes()
            .map_err(|e| format!("version {v} of {pk} / {sk}: {e}"))?;
        Ok(serde_dynamo::Item::from(attributes))
    };
    let mut record = aws_lambda_events::event::dynamodb::EventRecord::default();
    record.event_id = parked.event_id.clone();
    record.event_name = if version > 1 { "MODIFY" } else { "INSERT" }.to_string();
    record.change.keys = serde_dynamo::Item::from(std::collections::HashMap::from([
        (
            "pk".to_string(),
            aws_sdk_dynamodb::types::AttributeValue::S(pk.into()),
        ),
        (
            "sk".to_string(),
            aws_sdk_dynamodb::types::AttributeValue::S(sk.into()),
        ),
    ]));
    if version > 1 {
        record.change.old_image = image(version - 1)?;
    }
    record.change.new_image = image(version)?;
    record.change.sequence_number = Some(parked.sequence_number.clone());
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(&parked.parked_at) {
        record.change.approximate_creation_date_time = at.with_timezone(&chrono::Utc);
    }
    Ok(record)
}

/// Publishes `entries` in order, one a call (an item's versions never share a call, as the
/// publisher sends them); answers how many the topic accepted and, at the first it did not, why.
async fn publish(topic: &dyn Publish, entries: &[Entry]) -> (usize, Option<String>) {
    for (at, entry) in entries.iter().enumerate() {
        let error = match topic.publish_batch(std::slice::from_ref(entry)).await {
            Ok(results) => match results.into_iter().next() {
                Some(Ok(())) => continue,
                Some(Err(error)) => error,
                None => {
                    cqrs_event_publisher::PublishError::new("NoResult", "no result for the entry")
                }
            },
            Err(error) => error,
        };
        let why = if error.permanent() {
            format!("the topic refused event {} again: {error}", entry.dedup_id)
        } else {
            format!(
                "publishing event {} failed (run again later): {error}",
                entry.dedup_id
            )
        };
        return (at, Some(why));
    }
    (entries.len(), None)
}

/// Runs `cqrs redrive events` (see the [module docs](self)).
async fn republish(store: &Store, args: EventsArgs) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(&args.model)
        .map_err(|e| format!("{}: {e}", args.model.display()))?;
    let model =
        cqrs_model::Model::parse(&text).map_err(|e| format!("{}: {e}", args.model.display()))?;
    let source = args.source.clone();
    let feed = Feed::from_lookup(model, |name| {
        (name == SOURCE_ENV).then(|| source.clone()).flatten()
    });
    let topic = match (&args.topic_arn, args.dry_run) {
        (Some(arn), _) if !arn.trim().is_empty() => {
            let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
                .load()
                .await;
            let mut builder = aws_sdk_sns::config::Builder::from(&config);
            if let Some(url) = &args.sns_endpoint_url {
                builder = builder.endpoint_url(url);
            }
            Some(SnsTopic::new(
                aws_sdk_sns::Client::from_conf(builder.build()),
                arn.trim(),
            ))
        }
        (_, true) => None,
        _ => {
            return Err(format!(
                "no events topic: give --topic-arn or set {TOPIC_ENV}"
            ));
        }
    };
    let item = args
        .pk
        .clone()
        .zip(args.sk.clone())
        .map(|(pk, sk)| ItemKey { pk, sk });
    let parked: Vec<ParkedRecord> = records(store, args.tenant.as_deref(), item.as_ref())
        .await?
        .into_iter()
        .filter(|r| r.reason_kind == EVENT_FEED_KIND)
        .collect();
    let mut done = Vec::with_capacity(parked.len());
    for record in &parked {
        let mut outcome = Republished {
            pk: record.item_pk.clone(),
            sk: record.item_sk.clone(),
            sequence_number: record.sequence_number.clone(),
            version: record.version,
            outcome: "left",
            events: Vec::new(),
            published: 0,
            removed: false,
            why: None,
        };
        let entries = match entries_of(store, &feed, record).await {
            Ok(entries) => entries,
            Err(why) => {
                outcome.why = Some(why);
                done.push(outcome);
                continue;
            }
        };
        outcome.events = entries.iter().map(|e| e.dedup_id.clone()).collect();
        let Some(topic) = topic.as_ref().filter(|_| !args.dry_run) else {
            outcome.outcome = "would-publish";
            done.push(outcome);
            continue;
        };
        let (published, why) = publish(topic, &entries).await;
        outcome.published = published;
        if why.is_some() {
            outcome.why = why;
            done.push(outcome);
            continue;
        }
        outcome.outcome = "published";
        if !args.keep {
            store
                .delete_parked(record)
                .await
                .map_err(|e| format!("removing the parked record {}: {e}", record.sk()))?;
            outcome.removed = true;
        }
        done.push(outcome);
    }
    let published: usize = done.iter().map(|d| d.published).sum();
    let would: usize = done
        .iter()
        .filter(|d| d.outcome == "would-publish")
        .map(|d| d.events.len())
        .sum();
    let removed = done.iter().filter(|d| d.removed).count();
    let left = done.iter().filter(|d| d.outcome == "left").count();
    if args.json {
        let out = serde_json::json!({
            "dryRun": args.dry_run,
            "records": done,
            "published": published,
            "wouldPublish": would,
            "removed": removed,
            "left": left,
        });
        println!("{out}");
    } else {
        println!(
            "redrive events{}: {} change-event records, {} events {}, {} records removed, {} left \
             parked",
            if args.dry_run { " (dry run)" } else { "" },
            done.len(),
            if args.dry_run { would } else { published },
            if args.dry_run {
                "would be published"
            } else {
                "published"
            },
            removed,
            left
        );
        for d in &done {
            println!(
                "  {} / {} @{}  {}  {} events{}{}",
                d.pk.as_deref().unwrap_or("-"),
                d.sk.as_deref().unwrap_or("-"),
                d.sequence_number,
                d.outcome,
                d.events.len(),
                if d.removed { ", removed" } else { "" },
                d.why.as_ref().map(|w| format!(": {w}")).unwrap_or_default()
            );
        }
        if published > 0 {
            println!(
                "republished versions reach subscribers after later versions of their item: \
                 subscribers outside the framework must compare `itemversion`"
            );
        }
    }
    if left > 0 {
        return Ok(ExitCode::from(EXIT_DIFFERENCE));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parked(pk: &str, sk: &str) -> ParkedRecord {
        ParkedRecord {
            tenant: tenant_code(pk).map(str::to_string),
            item_id: Some(generate_id(pk, sk)),
            item_pk: Some(pk.into()),
            item_sk: Some(sk.into()),
            version: None,
            sequence_number: "1".into(),
            event_id: "e".into(),
            event_name: "INSERT".into(),
            reason_kind: "test".into(),
            reason: "test".into(),
            parked_at: String::new(),
            record: None,
        }
    }

    #[test]
    fn an_item_is_named_by_its_keys_not_its_id() {
        let order = ItemKey {
            pk: "ORDER#t1".into(),
            sk: "ORDER#o1".into(),
        };
        assert!(order.holds(&parked("ORDER#t1", "ORDER#o1@3")));
        // Same id, another item.
        let other = parked("ORDER#t1#ORDER", "o1@1");
        assert_eq!(other.item_id, parked("ORDER#t1", "ORDER#o1@3").item_id);
        assert!(!order.holds(&other));
    }

    #[test]
    fn a_refused_event_is_named_by_the_publishers_reason() {
        let record = serde_json::from_str(
            r#"{"eventID":"e1","eventName":"MODIFY","awsRegion":"r",
                "dynamodb":{"Keys":{"pk":{"S":"PRODUCT#t1"},"sk":{"S":"P001"}},
                "NewImage":{"version":{"N":"4"}},"SequenceNumber":"100","SizeBytes":1}}"#,
        )
        .unwrap();
        let error = cqrs_event_publisher::PublishError::sender("ParameterValueInvalid", "bad");
        let parked =
            cqrs_event_publisher::park::refused(&record, "abc_-12", 3, &error, chrono::Utc::now());
        assert_eq!(refused_event_id(&parked.reason), Some("abc_-12"));
        assert_eq!(
            refused_event_id("version 2 of P#t1 / a is not in the history table"),
            None
        );
    }
}
