//! `cqrs rebuild`: re-project the data table from the history table, computing every version's
//! index keys again with the current entity model (so a new GSI is backfilled).
//!
//! The history table is scanned in parallel segments, page by page. On each page the newest
//! version of every item is written to the data table with the rebuild's condition
//! ([`cqrs_store::Store::put_data_revised`]): a newer version always, the same version when the
//! stored one was computed by another model revision, an older one never. An item whose
//! versions span pages is written once per page, and the newest always wins, so no state is kept
//! between pages: after each page the segment's position goes into the checkpoint file, and a
//! run that is killed resumes from there. The checkpoint is removed when the run completes.
//!
//! With `--constraints`, the guard items of the model's declared constraints are repaired instead
//! (`super::verify::constraints`): newest wins, each fix tied to the version of its items, beside
//! live commands.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use clap::Args;
use cqrs_item::Item;
use cqrs_item::entity::{ModelEntity, apply};
use cqrs_model::Model;
use cqrs_store::Store;
use cqrs_store::projection::DataWrite;
use cqrs_store::rebuild::{ItemTable, ScanCursor, ScanScope};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::{Connection, EXIT_DIFFERENCE, EXIT_FAILURE, Need, fail, key_text, spinner};

/// How many data-table writes of one page are in flight at once.
const WRITE_CONCURRENCY: usize = 32;
/// How many refused items are listed by key.
const LISTED: usize = 20;

/// Re-project the data table from the history table with the current entity model.
#[derive(Debug, Args)]
pub struct RebuildArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// Only the items of this entity of the model (matched by their keys, so items written before
    /// the entity existed are rebuilt too).
    #[arg(long)]
    pub entity: Option<String>,
    /// Only the items of this tenant (their tenantCode).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Parallel scan segments of the history table.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub segments: u32,
    /// Rows read per scan page; the checkpoint is written after every page.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub page_size: u32,
    /// The checkpoint file: a run that stops resumes from it; removed when the run completes.
    #[arg(long, default_value = "cqrs-rebuild.checkpoint.json")]
    pub checkpoint: PathBuf,
    /// Ignore an unfinished run's checkpoint and start from the beginning.
    #[arg(long)]
    pub restart: bool,
    /// The service's entity model file to compute index keys with (the one its functions compile
    /// in).
    #[arg(long, default_value = "model.toml")]
    pub model: PathBuf,
    /// Read and count what would be written; write nothing (no data-table write, no checkpoint).
    #[arg(long)]
    pub dry_run: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Rebuild the relational read model (PostgreSQL at --sql-url or --sql-host) from the data
    /// table instead: every difference `cqrs verify --sql` finds is written over with the data table's state.
    #[arg(long, conflicts_with = "constraints")]
    pub sql: bool,
    /// Repair the guard items of the model's declared constraints (unique values, bounded groups,
    /// the heads' mirrors of referenced entities) instead: every difference `cqrs verify
    /// --constraints` finds, newest wins, each fix one transaction tied to the version of the
    /// items it is about (so it runs beside live commands; a fix a command overtook is confirmed
    /// again and retried). Two live holders of one value, a group over its bound and a dangling
    /// reference are listed, not repaired; exit 1 while anything is left. Run it after deploying
    /// a model that adds a constraint.
    #[arg(long)]
    pub constraints: bool,
    /// Where the relational read model is (a connection string, or RDS Proxy with IAM).
    #[command(flatten)]
    pub sql_target: super::sql::SqlTarget,
    /// Test hook: stop once this many pages that read versions are done (pages other segments
    /// have in flight finish too), as if the run were killed (the checkpoint stays).
    #[arg(long, hide = true)]
    pub stop_after_pages: Option<u64>,
}

/// Where each scan segment stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Segment {
    /// Not started.
    Start,
    /// Resumes after this key.
    After(ScanCursor),
    /// Finished.
    Done,
}

/// What a run did (summed over resumed runs in the checkpoint).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Counts {
    pages: u64,
    versions_read: u64,
    items: u64,
    written: u64,
    already_current: u64,
    out_of_scope: u64,
    refused_by_model: u64,
    unreadable: u64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.pages += other.pages;
        self.versions_read += other.versions_read;
        self.items += other.items;
        self.written += other.written;
        self.already_current += other.already_current;
        self.out_of_scope += other.out_of_scope;
        self.refused_by_model += other.refused_by_model;
        self.unreadable += other.unreadable;
    }
}

/// The checkpoint file's content: what the run is, and where it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Checkpoint {
    history_table: String,
    data_table: String,
    tenant: Option<String>,
    entity: Option<String>,
    model_revision: String,
    segments: Vec<Segment>,
    counts: Counts,
    refused: Vec<String>,
}

impl Checkpoint {
    fn same_run(&self, other: &Checkpoint) -> bool {
        self.history_table == other.history_table
            && self.data_table == other.data_table
            && self.tenant == other.tenant
            && self.entity == other.entity
            && self.model_revision == other.model_revision
            && self.segments.len() == other.segments.len()
    }

    fn save(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| format!("cannot write the checkpoint {}: {e}", path.display()))
    }
}

/// Runs `cqrs rebuild`.
pub async fn run(args: RebuildArgs) -> ExitCode {
    if args.sql {
        return super::sql::run(super::sql::SqlRun {
            connection: &args.connection,
            target: &args.sql_target,
            model: &args.model,
            segments: args.segments,
            show: 10,
            json: args.json,
            repair: true,
        })
        .await;
    }
    if args.constraints {
        return super::verify::constraints::run(super::verify::constraints::Run {
            connection: &args.connection,
            model: &args.model,
            tenant: args.tenant.as_deref(),
            show: LISTED,
            json: args.json,
            repair: true,
        })
        .await;
    }
    match rebuild(&args).await {
        Ok(code) => code,
        Err(error) => fail("rebuild", error),
    }
}

async fn rebuild(args: &RebuildArgs) -> Result<ExitCode, String> {
    let file = &args.model;
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read the model file {}: {e}", file.display()))?;
    let model = Model::parse(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    if let Some(entity) = &args.entity
        && model.entity(entity).is_none()
    {
        let known: Vec<&str> = model.entities().iter().map(|e| e.name.as_str()).collect();
        return Err(format!(
            "no entity {entity:?} in the model: one of {}",
            known.join(", ")
        ));
    }
    let store = args.connection.store(&[Need::Data, Need::History]).await?;
    let fresh = Checkpoint {
        history_table: store.tables().history.clone(),
        data_table: store.tables().data.clone(),
        tenant: args.tenant.clone(),
        entity: args.entity.clone(),
        model_revision: model.revision().to_string(),
        segments: vec![Segment::Start; args.segments as usize],
        counts: Counts::default(),
        refused: Vec::new(),
    };
    let (checkpoint, resumed) = match std::fs::read_to_string(&args.checkpoint) {
        Ok(text) if !args.restart && !args.dry_run => {
            let saved: Checkpoint = serde_json::from_str(&text).map_err(|e| {
                format!(
                    "{} is not a rebuild checkpoint ({e}); remove it or give --restart",
                    args.checkpoint.display()
                )
            })?;
            if !saved.same_run(&fresh) {
                return Err(format!(
                    "{} holds an unfinished rebuild of other tables, scope, model revision or \
                     segment count; finish it with the same flags, or give --restart",
                    args.checkpoint.display()
                ));
            }
            (saved, true)
        }
        _ => (fresh, false),
    };

    let scope = ScanScope {
        tenant: args.tenant.clone(),
        entity: None,
    };
    let started = Instant::now();
    let progress = spinner(args.json, "rebuild: items");
    progress.set_prefix(if args.dry_run { "(dry run)" } else { "written" });
    let run = Run {
        store: &store,
        model: &model,
        entity: args.entity.as_deref(),
        scope: &scope,
        page_size: args.page_size,
        dry_run: args.dry_run,
        path: &args.checkpoint,
        state: Mutex::new(checkpoint),
        this_run: Mutex::new(Counts::default()),
        pages: AtomicU64::new(0),
        stop_after: args.stop_after_pages,
        stopped: AtomicBool::new(false),
        progress: &progress,
    };
    let segments = args.segments;
    let results: Vec<Result<(), String>> = futures::stream::iter(0..segments)
        .map(|segment| run.segment(segment, segments))
        .buffer_unordered(segments as usize)
        .collect()
        .await;
    progress.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let state = run.state.lock().map_err(|_| "a segment panicked")?.clone();
    let this_run = *run.this_run.lock().map_err(|_| "a segment panicked")?;
    if let Some(error) = results.into_iter().find_map(Result::err) {
        return Err(format!(
            "{error}; the checkpoint {} keeps what is done: run again to resume",
            args.checkpoint.display()
        ));
    }
    let stopped = run.stopped.load(Ordering::SeqCst);
    if !stopped && !args.dry_run {
        match std::fs::remove_file(&args.checkpoint) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot remove the checkpoint: {e}")),
        }
    }
    let totals = state.counts;
    let per_second = if seconds > 0.0 {
        this_run.items as f64 / seconds
    } else {
        0.0
    };
    if args.json {
        let out = serde_json::json!({
            "complete": !stopped,
            "dryRun": args.dry_run,
            "resumed": resumed,
            "modelRevision": model.revision(),
            "segments": segments,
            "totals": totals,
            "thisRun": this_run,
            "seconds": seconds,
            "itemsPerSecond": per_second,
            "refused": state.refused,
        });
        println!("{out}");
    } else {
        println!(
            "rebuild{}{}: {} versions read, {} items, {} written, {} already current, {} refused \
             by the model, {} unreadable{} (model revision {}; this run {:.1} s, {:.0} items/s)",
            if args.dry_run { " (dry run)" } else { "" },
            if resumed { " (resumed)" } else { "" },
            totals.versions_read,
            totals.items,
            totals.written,
            totals.already_current,
            totals.refused_by_model,
            totals.unreadable,
            if args.entity.is_some() || args.tenant.is_some() {
                format!(", {} out of scope", totals.out_of_scope)
            } else {
                String::new()
            },
            model.revision(),
            seconds,
            per_second,
        );
        for refused in &state.refused {
            println!("  refused: {refused}");
        }
    }
    if stopped {
        eprintln!(
            "cqrs rebuild: stopped after {} pages (--stop-after-pages); the checkpoint {} resumes it",
            run.pages.load(Ordering::SeqCst),
            args.checkpoint.display()
        );
        return Ok(ExitCode::from(EXIT_FAILURE));
    }
    if totals.refused_by_model > 0 || totals.unreadable > 0 {
        return Ok(ExitCode::from(EXIT_DIFFERENCE));
    }
    Ok(ExitCode::SUCCESS)
}

/// One rebuild run, shared by its segments.
struct Run<'a> {
    store: &'a Store,
    model: &'a Model,
    entity: Option<&'a str>,
    scope: &'a ScanScope,
    page_size: u32,
    dry_run: bool,
    path: &'a Path,
    state: Mutex<Checkpoint>,
    this_run: Mutex<Counts>,
    pages: AtomicU64,
    stop_after: Option<u64>,
    stopped: AtomicBool,
    progress: &'a indicatif::ProgressBar,
}

impl Run<'_> {
    /// Scans segment `segment` of `segments` from where the checkpoint says, page by page.
    async fn segment(&self, segment: u32, segments: u32) -> Result<(), String> {
        let at = segment as usize;
        let mut start = match self.state.lock().map_err(|_| "lock")?.segments.get(at) {
            Some(Segment::Done) => return Ok(()),
            Some(Segment::After(cursor)) => Some(cursor.clone()),
            _ => None,
        };
        loop {
            if self.stopped.load(Ordering::SeqCst) {
                return Ok(());
            }
            let page = self
                .store
                .scan_items_page(
                    ItemTable::History,
                    self.scope,
                    segment,
                    segments,
                    start.as_ref(),
                    self.page_size,
                )
                .await
                .map_err(|e| format!("scan of segment {segment}: {e}"))?;
            let mut counts = Counts {
                pages: 1,
                versions_read: page.items.len() as u64,
                unreadable: page.unreadable.len() as u64,
                ..Counts::default()
            };
            let mut refused: Vec<String> = page
                .unreadable
                .iter()
                .map(|key| format!("{key}: not an item"))
                .collect();
            self.project_page(page.items, &mut counts, &mut refused)
                .await?;
            let next = page.next;
            {
                let mut state = self.state.lock().map_err(|_| "lock")?;
                if let Some(slot) = state.segments.get_mut(at) {
                    *slot = match &next {
                        Some(cursor) => Segment::After(cursor.clone()),
                        None => Segment::Done,
                    };
                }
                state.counts.add(&counts);
                let room = LISTED.saturating_sub(state.refused.len());
                state.refused.extend(refused.into_iter().take(room));
                if !self.dry_run {
                    state.save(self.path)?;
                }
            }
            self.this_run.lock().map_err(|_| "lock")?.add(&counts);
            self.progress.inc(counts.items);
            // The test hook counts pages that read versions: an empty segment (all of a small
            // table's items in one partition fall into one segment) would otherwise stop the run
            // before the segment holding the items had read its first page.
            if counts.versions_read > 0 {
                let pages = self.pages.fetch_add(1, Ordering::SeqCst) + 1;
                if self.stop_after.is_some_and(|limit| pages >= limit) {
                    self.stopped.store(true, Ordering::SeqCst);
                }
            }
            match next {
                Some(cursor) => start = Some(cursor),
                None => return Ok(()),
            }
        }
    }

    /// Writes the newest version of every item of one page, its index keys computed again.
    async fn project_page(
        &self,
        versions: Vec<Item>,
        counts: &mut Counts,
        refused: &mut Vec<String>,
    ) -> Result<(), String> {
        let mut newest: HashMap<(String, String), Item> = HashMap::new();
        for item in versions {
            let base = item.base_sk().to_string();
            if let Some(entity) = self.entity
                && self
                    .model
                    .entity_of_keys(&item.pk, &base)
                    .is_none_or(|e| e.name != entity)
            {
                counts.out_of_scope += 1;
                continue;
            }
            let key = (item.pk.clone(), base);
            if newest.get(&key).is_none_or(|n| n.version < item.version) {
                newest.insert(key, item);
            }
        }
        counts.items += newest.len() as u64;
        let mut ready = Vec::with_capacity(newest.len());
        for item in newest.into_values() {
            match recompute(self.model, item) {
                Ok(item) => ready.push(item),
                Err(reason) => {
                    counts.refused_by_model += 1;
                    refused.push(reason);
                }
            }
        }
        if self.dry_run {
            return Ok(());
        }
        let writes: Vec<Result<DataWrite, String>> = futures::stream::iter(ready.iter())
            .map(|item| async move {
                self.store
                    .put_data_revised(item)
                    .await
                    .map_err(|e| format!("{}: {e}", key_text(&item.pk, &item.sk)))
            })
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await;
        for write in writes {
            match write? {
                DataWrite::Written => counts.written += 1,
                DataWrite::AlreadyCurrent => counts.already_current += 1,
            }
        }
        Ok(())
    }
}

/// `item` (a history version) with its entity, index keys and model revision computed by `model`,
/// as the command handler computes them for a new version. Items of no entity stay as they are.
fn recompute(model: &Model, mut item: Item) -> Result<Item, String> {
    let base = item.base_sk().to_string();
    if let Some(entity) = model.entity_of_keys(&item.pk, &base) {
        let revision = model.revision();
        apply(ModelEntity { entity, revision }, &mut item)
            .map_err(|e| format!("{}: {e}", key_text(&item.pk, &item.sk)))?;
    }
    Ok(item)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_product_gets_its_price_index_keys_from_the_current_model() {
        let model = Model::example();
        let mut item = Item::example();
        item.attributes
            .insert("category".into(), cqrs_item::Value::from("tea"));
        item.attributes
            .insert("priceCents".into(), cqrs_item::Value::from(1200));
        item.index_keys.clear();
        item.model_revision = None;
        let rebuilt = recompute(&model, item).unwrap();
        assert_eq!(rebuilt.model_revision.as_deref(), Some(model.revision()));
        assert_eq!(rebuilt.entity.as_deref(), Some("product"));
        assert_eq!(rebuilt.index_keys["gsi5pk"], "PRICE#t1#tea");
    }

    #[test]
    fn the_checkpoint_reads_back_and_names_its_run() {
        let checkpoint = Checkpoint {
            history_table: "h".into(),
            data_table: "d".into(),
            tenant: Some("t1".into()),
            entity: None,
            model_revision: "r".into(),
            segments: vec![
                Segment::Start,
                Segment::After(ScanCursor {
                    pk: "P#t1".into(),
                    sk: "a@2".into(),
                }),
                Segment::Done,
            ],
            counts: Counts::default(),
            refused: Vec::new(),
        };
        let text = serde_json::to_string(&checkpoint).unwrap();
        assert!(
            text.contains(r#"{"after":{"pk":"P#t1","sk":"a@2"}}"#),
            "{text}"
        );
        let back: Checkpoint = serde_json::from_str(&text).unwrap();
        assert_eq!(back, checkpoint);
        let mut other = checkpoint.clone();
        other.tenant = None;
        assert!(!other.same_run(&checkpoint));
    }
}
