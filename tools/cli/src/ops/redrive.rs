//! `cqrs redrive`: the records data-sync parked (`list`, `show`) and, after the cause is fixed,
//! the re-projection of the items they name from the history table (`run`).
//!
//! `run` writes each named item's newest history version into the data table with data-sync's own
//! condition (never an older version), then removes the item's parked records (unless `--keep`).
//! An item history holds no version of stays parked: there is nothing to project until a new
//! version is written. The event publisher's records (reason kind `event-feed`: change events
//! that could not be made or published) are listed and shown but never redriven nor removed by
//! `run`: re-projecting publishes nothing, so removing them would lose the events silently; `run`
//! counts them and says they were left parked. The event source mapping's on-failure queue holds
//! only stream positions, not records; its batches are re-projected the same way once the items
//! are known, or by `cqrs rebuild --tenant`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::{Args, Subcommand};
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
    /// are change events, not republished by a re-projection.
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
const EVENT_FEED_LEFT: &str = "change-event records: not republished by cqrs redrive";

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
}
