//! `cqrs replay`: one consumer's queue fed with the versions written in a time window, from the
//! history table ([`cqrs_consumer::replay`]).
//!
//! A full scan of the history table, said plainly: a filter does not reduce what DynamoDB reads,
//! so every replay reads the whole table (table size / 4 KB × 0.5 read units, eventually
//! consistent), whatever the window. The consumer's marker makes it fill-only: versions the
//! consumer already applied are acknowledged as duplicates, not handled again.

use std::path::PathBuf;
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::Args;
use cqrs_consumer::replay::{ReplayOptions, ReplayReport, replay};
use cqrs_events::Feed;
use cqrs_model::Model;

use super::redrive_consumer::SqsEndpoint;
use super::{Connection, EXIT_DIFFERENCE, Need, fail};

/// `cqrs replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// The consumer's queue (SQS FIFO): only that consumer sees the replayed events.
    #[arg(long, env = "CONSUMER_QUEUE_URL")]
    pub queue_url: String,
    /// The first time (RFC 3339, inclusive) of the versions' `updatedAt`.
    #[arg(long, value_parser = parse_time)]
    pub since: DateTime<Utc>,
    /// The end (RFC 3339, exclusive); without it, everything since.
    #[arg(long, value_parser = parse_time)]
    pub until: Option<DateTime<Utc>>,
    /// Only this entity's versions.
    #[arg(long)]
    pub entity: Option<String>,
    /// The service's entity model (the events are built from it, as the publisher builds them;
    /// `source` from CQRS_EVENT_SOURCE).
    #[arg(long, default_value = "model.toml")]
    pub model: PathBuf,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub sqs: SqsEndpoint,
}

/// An RFC 3339 time.
fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("not an RFC 3339 time (e.g. 2026-11-27T10:00:00Z): {e}"))
}

/// Runs `cqrs replay`: exit 1 when an event could not be sent, 2 when the replay could not
/// start (nothing sent).
pub async fn run(args: ReplayArgs) -> ExitCode {
    let text = match std::fs::read_to_string(&args.model) {
        Ok(text) => text,
        Err(e) => return fail("replay", format!("{}: {e}", args.model.display())),
    };
    let model = match Model::parse(&text) {
        Ok(model) => model,
        Err(e) => return fail("replay", format!("{}: {e}", args.model.display())),
    };
    if let Some(entity) = &args.entity
        && model.entity(entity).is_none()
    {
        return fail(
            "replay",
            format!("--entity {entity}: the model has no such entity"),
        );
    }
    let feed = Feed::from_env(model);
    let store = match args.connection.store(&[Need::History]).await {
        Ok(store) => store,
        Err(e) => return fail("replay", e),
    };
    let sqs = args.sqs.client().await;
    let options = ReplayOptions {
        until: args.until,
        entity: args.entity.clone(),
        ..ReplayOptions::since(args.since)
    };
    let report = match replay(&store, &feed, &sqs, &args.queue_url, &options).await {
        Ok(report) => report,
        Err(e) => return fail("replay", e),
    };
    if args.json {
        println!("{}", summary_json(&report));
    } else {
        println!(
            "run {}: {} versions of {} items, {} sent, {} failed, {} without an event, {} unreadable rows",
            report.run_id,
            report.versions,
            report.items,
            report.sent,
            report.failed,
            report.skipped,
            report.unreadable
        );
        for (entity, n) in &report.by_entity {
            println!("  {entity}: {n}");
        }
    }
    for error in &report.errors {
        eprintln!("cqrs replay: {error}");
    }
    if report.failed > 0 {
        ExitCode::from(EXIT_DIFFERENCE)
    } else {
        ExitCode::SUCCESS
    }
}

/// The summary as JSON.
fn summary_json(report: &ReplayReport) -> serde_json::Value {
    serde_json::json!({
        "runId": report.run_id,
        "versions": report.versions,
        "items": report.items,
        "sent": report.sent,
        "byEntity": report.by_entity,
        "skipped": report.skipped,
        "unreadable": report.unreadable,
        "failed": report.failed,
        "errors": report.errors,
    })
}
