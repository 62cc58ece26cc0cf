//! `cqrs verify`: compare the data table with the newest history version of every item.
//!
//! Both tables are scanned in parallel segments. An item differs when the data table lacks it
//! (`missing`), holds an older version (`behind`) or a newer one than history knows (`ahead`),
//! holds the same version with other content (`content`), or holds an item history has never
//! seen (`orphan`). Content is compared without what a rebuild may recompute (the index keys,
//! `entity`, `modelRevision`). The counts and the first keys of each kind are printed; the exit
//! code is 1 when anything differs. With `--sql`, the relational read model is compared with the
//! data table instead (`super::sql`).
//!
//! With `--constraints`, the declared constraints of the model (`unique`, `limits`, `references`)
//! are checked instead ([`constraints`]): the guard items of the idempotency table against what the
//! newest version of every item holds (`cqrs_store::constraints::verify`). Each difference is
//! confirmed on consistent re-reads before it is printed; `cqrs rebuild --constraints` repairs them.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;

use clap::Args;
use cqrs_item::Item;
use cqrs_store::Store;
use cqrs_store::rebuild::{ItemTable, ScanCursor, ScanScope};
use futures::StreamExt;
use serde::Serialize;

use super::{Connection, EXIT_DIFFERENCE, Need, fail, spinner};

pub mod constraints;

/// Compare the data table with the newest history version of every item.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// Only the items of this tenant (their tenantCode).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Parallel scan segments of each table.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub segments: u32,
    /// How many differing keys to list.
    #[arg(long, default_value_t = 10)]
    pub show: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Compare the relational read model (PostgreSQL at --sql-url or --sql-host) with the data
    /// table instead.
    #[arg(long, conflicts_with = "constraints")]
    pub sql: bool,
    /// Check the model's declared constraints (unique values, bounded groups, references, the
    /// heads' mirrors) instead: the guard items (idempotency table) against the newest version of
    /// every item (command and data tables). It scans all three tables whole (with --tenant, the
    /// tenant's items and guards; global uniques need the whole table). Differences are confirmed
    /// on consistent re-reads; `cqrs rebuild --constraints` repairs them.
    #[arg(long)]
    pub constraints: bool,
    /// Where the relational read model is (a connection string, or RDS Proxy with IAM).
    #[command(flatten)]
    pub sql_target: super::sql::SqlTarget,
    /// With --sql or --constraints: the service's model file (what each state's row is, the
    /// declared constraints).
    #[arg(long, default_value = "model.toml")]
    pub model: std::path::PathBuf,
}

/// One differing item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// `missing`, `behind`, `ahead`, `content` or `orphan`.
    pub kind: &'static str,
    /// The item's partition key.
    pub pk: String,
    /// The item's sort key (without version).
    pub sk: String,
    /// The newest version in history, if any.
    pub history_version: Option<i64>,
    /// The version in the data table, if any.
    pub data_version: Option<i64>,
}

/// Runs `cqrs verify`.
pub async fn run(args: VerifyArgs) -> ExitCode {
    if args.sql {
        return super::sql::run(super::sql::SqlRun {
            connection: &args.connection,
            target: &args.sql_target,
            model: &args.model,
            segments: args.segments,
            show: args.show,
            json: args.json,
            repair: false,
        })
        .await;
    }
    if args.constraints {
        return constraints::run(constraints::Run {
            connection: &args.connection,
            model: &args.model,
            tenant: args.tenant.as_deref(),
            show: args.show,
            json: args.json,
            repair: false,
        })
        .await;
    }
    let store = match args.connection.store(&[Need::Data, Need::History]).await {
        Ok(store) => store,
        Err(e) => return fail("verify", e),
    };
    let scope = ScanScope {
        tenant: args.tenant.clone(),
        entity: None,
    };
    let progress = spinner(args.json, "verify: rows read");
    let history = match scan_all(&store, ItemTable::History, &scope, args.segments, &progress).await
    {
        Ok(rows) => rows,
        Err(e) => return fail("verify", e),
    };
    let data = match scan_all(&store, ItemTable::Data, &scope, args.segments, &progress).await {
        Ok(rows) => rows,
        Err(e) => return fail("verify", e),
    };
    progress.finish_and_clear();
    let (history_rows, data_rows) = (history.len(), data.len());
    let differences = compare(history, data);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for d in &differences.list {
        *counts.entry(d.kind).or_default() += 1;
    }
    let first: Vec<&Difference> = differences.list.iter().take(args.show).collect();
    if args.json {
        let out = serde_json::json!({
            "historyVersions": history_rows,
            "historyItems": differences.history_items,
            "dataItems": data_rows,
            "differences": differences.list.len(),
            "byKind": counts,
            "first": first,
        });
        println!("{out}");
    } else {
        let kinds: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        println!(
            "verify: {} items in history ({} versions), {} in the data table: {} differences{}",
            differences.history_items,
            history_rows,
            data_rows,
            differences.list.len(),
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            }
        );
        for d in first {
            let v = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
            println!(
                "  {:<8} {} / {}  history v{}  data v{}",
                d.kind,
                d.pk,
                d.sk,
                v(d.history_version),
                v(d.data_version)
            );
        }
    }
    if differences.list.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DIFFERENCE)
    }
}

/// Every row of `table` in `scope`, all segments at once.
pub(crate) async fn scan_all(
    store: &Store,
    table: ItemTable,
    scope: &ScanScope,
    segments: u32,
    progress: &indicatif::ProgressBar,
) -> Result<Vec<Item>, String> {
    let parts: Vec<Result<Vec<Item>, String>> = futures::stream::iter(0..segments)
        .map(|segment| async move {
            let mut items = Vec::new();
            let mut start: Option<ScanCursor> = None;
            loop {
                let page = store
                    .scan_items_page(table, scope, segment, segments, start.as_ref(), 1000)
                    .await
                    .map_err(|e| e.to_string())?;
                if let Some(key) = page.unreadable.first() {
                    return Err(format!("{key}: a row that is not an item"));
                }
                progress.inc(page.items.len() as u64);
                items.extend(page.items);
                match page.next {
                    Some(next) => start = Some(next),
                    None => return Ok(items),
                }
            }
        })
        .buffer_unordered(segments as usize)
        .collect()
        .await;
    let mut all = Vec::new();
    for part in parts {
        all.extend(part?);
    }
    Ok(all)
}

/// What [`compare`] found.
#[derive(Debug, Default)]
pub struct Differences {
    /// Distinct items in history.
    pub history_items: usize,
    /// The differing items, in key order.
    pub list: Vec<Difference>,
}

/// The content a rebuild keeps: the data-table form without index keys, entity and revision.
fn content(mut item: Item) -> Item {
    item.index_keys.clear();
    item.entity = None;
    item.model_revision = None;
    item
}

/// Compares the newest history version of every item with the data table's item.
pub fn compare(history: Vec<Item>, data: Vec<Item>) -> Differences {
    let mut newest: HashMap<(String, String), Item> = HashMap::new();
    for item in history {
        let key = (item.pk.clone(), item.base_sk().to_string());
        if newest.get(&key).is_none_or(|n| n.version < item.version) {
            newest.insert(key, item);
        }
    }
    let history_items = newest.len();
    let mut list = Vec::new();
    for stored in data {
        let key = (stored.pk.clone(), stored.sk.clone());
        let difference = |kind, history_version| Difference {
            kind,
            pk: key.0.clone(),
            sk: key.1.clone(),
            history_version,
            data_version: Some(stored.version),
        };
        match newest.remove(&key) {
            None => list.push(difference("orphan", None)),
            Some(h) if h.version > stored.version => {
                list.push(difference("behind", Some(h.version)))
            }
            Some(h) if h.version < stored.version => {
                list.push(difference("ahead", Some(h.version)))
            }
            Some(h) => {
                let version = h.version;
                if content(h.into_data_item()) != content(stored.clone()) {
                    list.push(difference("content", Some(version)));
                }
            }
        }
    }
    for ((pk, sk), h) in newest {
        list.push(Difference {
            kind: "missing",
            pk,
            sk,
            history_version: Some(h.version),
            data_version: None,
        });
    }
    list.sort_by(|a, b| (&a.pk, &a.sk).cmp(&(&b.pk, &b.sk)));
    Differences {
        history_items,
        list,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(base: &str, v: i64) -> Item {
        let mut item = Item::example();
        item.sk = cqrs_keys::add_sort_key_version(base, v);
        item.id = cqrs_keys::generate_id(&item.pk, base);
        item.version = v;
        item
    }

    #[test]
    fn every_kind_of_difference_is_named_and_index_keys_are_not_one() {
        let history = vec![
            version("A", 1),
            version("A", 2),
            version("B", 3),
            version("C", 1),
            version("D", 1),
            version("E", 2),
            version("F", 1),
        ];
        let mut rebuilt = version("A", 2).into_data_item();
        rebuilt
            .index_keys
            .insert("gsi9pk".into(), cqrs_item::Value::from("NEW"));
        rebuilt.model_revision = Some("r2".into());
        let mut changed = version("D", 1).into_data_item();
        changed.name = "planted".into();
        let data = vec![
            rebuilt,                          // A: same content, new index keys
            version("B", 2).into_data_item(), // behind
            // C missing
            changed,                          // D: content
            version("E", 3).into_data_item(), // ahead
            version("F", 1).into_data_item(), // equal
            version("G", 1).into_data_item(), // orphan
        ];
        let found = compare(history, data);
        let kinds: Vec<(&str, &str)> = found.list.iter().map(|d| (d.sk.as_str(), d.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("B", "behind"),
                ("C", "missing"),
                ("D", "content"),
                ("E", "ahead"),
                ("G", "orphan")
            ]
        );
        assert_eq!(found.history_items, 6);
    }
}
