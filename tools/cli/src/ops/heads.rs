//! `cqrs heads`: every item's head record (its latest version, `HEAD#pk@sk` in the idempotency
//! table), which lets a create be one conditional transaction.
//!
//! `seed` gives every stored item a head and then marks the deployment's heads `complete`, after
//! which the command handler stops reading stored versions in front of a create. It is the
//! migration too: heads used to be keyed by the item id (`HEAD#pk#sk`), which two items can share.
//! It runs in four phases, each a scan, page by page:
//!
//! 1. **legacy heads** (`HEAD#` + id): each is moved to the head of the one item that has its id
//!    (the history table's `id-version-index` names the items of an id), raised to the item's
//!    highest stored version if that is higher. An id that several items share has **collided**:
//!    its legacy head holds the larger of their versions, so it is not copied; each item gets its
//!    own highest stored version, and the collision is reported. A legacy head whose id no
//!    stored item has (every row expired, no history) is an **orphan**: it is copied to the item
//!    its id names by the usual split (`PREFIX#TENANT` / the rest), so that the versions it
//!    remembers are never written again, and reported.
//! 2. **command rows**, 3. **history rows**, 4. **data items**: each item's highest version in
//!    the table.
//!
//! An item whose id is 2044 to 2048 bytes (written before heads, or by mbc-cqrs-serverless) cannot
//! have a head: `HEAD#pk@sk` would be over DynamoDB's 2048-byte key limit
//! ([`cqrs_keys::validate_derived_keys`]). The seed skips such an item and lists it (exit 1); the
//! command handler refuses every command on it (400), so the heads are complete without it.
//!
//! Every write only ever raises a head (`attribute_not_exists(pk) OR latest < :v`), so the seed
//! is safe while commands run: a command based on a head the seed raised fails its condition
//! and reads again, and a head a command moved is never lowered. After each page the position
//! goes into the checkpoint file; a run that stops resumes from it (`--restart` starts over).
//!
//! `status` prints the state; `mark shared` records that a writer which keeps no heads
//! (mbc-cqrs-serverless, `Store::put_command`) shares the tables, so they are never complete;
//! `mark incomplete` removes the state record. A mark (and the seed's `complete`) reaches every
//! command-handler container within [`HEADS_STATE_MAX_AGE`] (60 s): each reads the state again
//! that often.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use cqrs_keys::split_id;
use cqrs_store::head::{HEADS_STATE_MAX_AGE, SeedPage, StoredVersion, VersionTable};
use cqrs_store::{HeadsState, Store};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::{Connection, EXIT_DIFFERENCE, Need, fail, spinner};

/// How many head writes of one page are in flight at once.
const WRITE_CONCURRENCY: usize = 16;
/// How many collided ids and orphans are listed.
const LISTED: usize = 50;

/// Every item's head record, and the migration to `(pk, sk)` keys.
#[derive(Debug, Args)]
pub struct HeadsArgs {
    #[command(flatten)]
    pub connection: Connection,
    #[command(subcommand)]
    pub command: HeadsCommand,
}

/// What to do with heads.
#[derive(Debug, Subcommand)]
pub enum HeadsCommand {
    /// Print the deployment's heads state: complete, incomplete or shared.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Give every stored item a head (moving legacy id-keyed heads), then mark the heads
    /// complete. Resumable, conditional, safe while commands run. Exit 1 when collided ids,
    /// orphan legacy heads or items whose head key would be over 2048 bytes (skipped) were found
    /// (each is listed).
    Seed {
        /// Rows read per scan page; the checkpoint is written after every page.
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10000))]
        page_size: u32,
        /// The checkpoint file: a run that stops resumes from it; removed when the run completes.
        #[arg(long, default_value = "cqrs-heads-seed.checkpoint.json")]
        checkpoint: PathBuf,
        /// Ignore an unfinished run's checkpoint and start from the beginning.
        #[arg(long)]
        restart: bool,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
        /// Test hook: stop once this many pages are done, as if the run were killed.
        #[arg(long, hide = true)]
        stop_after_pages: Option<u64>,
    },
    /// Record a state by hand: `shared` when a writer that keeps no heads shares the tables
    /// (they are then never complete), `incomplete` to remove the record.
    Mark {
        /// The state to record.
        state: Marked,
    },
}

/// A state an operator may record.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Marked {
    /// A writer that keeps no heads shares the tables.
    Shared,
    /// Remove the state record (commands read stored versions again until the next seed).
    Incomplete,
}

/// The phases of a seed, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Phase {
    LegacyHeads,
    CommandRows,
    HistoryRows,
    DataItems,
    Done,
}

impl Phase {
    fn next(self) -> Phase {
        match self {
            Phase::LegacyHeads => Phase::CommandRows,
            Phase::CommandRows => Phase::HistoryRows,
            Phase::HistoryRows => Phase::DataItems,
            Phase::DataItems | Phase::Done => Phase::Done,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Phase::LegacyHeads => "legacy heads",
            Phase::CommandRows => "command rows",
            Phase::HistoryRows => "history rows",
            Phase::DataItems => "data items",
            Phase::Done => "done",
        }
    }
}

/// An id several items share, found by the seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Collision {
    id: String,
    legacy_latest: i64,
    /// Each item's key and highest stored version, which its head got.
    items: Vec<(String, String, i64)>,
}

/// A legacy head no stored item has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Orphan {
    id: String,
    legacy_latest: i64,
    /// The item its head went to (by the usual split), if the id splits.
    seeded: Option<(String, String)>,
}

/// An item whose head key DynamoDB cannot store, skipped by the seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TooLong {
    pk: String,
    sk: String,
    /// The length `HEAD#pk@sk` would have.
    head_key_bytes: usize,
}

/// What the seed did (summed over resumed runs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    pages: u64,
    legacy_heads: u64,
    versions_read: u64,
    heads_raised: u64,
    already_current: u64,
    collisions: Vec<Collision>,
    collisions_found: u64,
    orphans: Vec<Orphan>,
    orphans_found: u64,
    /// Every item skipped because its head key cannot exist (each once, whichever tables hold
    /// it: such ids are within 4 bytes of the limit, so they are few).
    #[serde(default)]
    keys_too_long: Vec<TooLong>,
    #[serde(default)]
    keys_too_long_found: u64,
}

/// The checkpoint: which tables, which phase, where in it, and what was done so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Checkpoint {
    command_table: String,
    idempotency_table: String,
    phase: Phase,
    after: Option<BTreeMap<String, String>>,
    summary: Summary,
}

/// Runs `cqrs heads`.
pub async fn run(args: HeadsArgs) -> ExitCode {
    let needs: &[Need] = match args.command {
        HeadsCommand::Seed { .. } => &[Need::Command, Need::Data, Need::History, Need::Idempotency],
        _ => &[Need::Idempotency],
    };
    let store = match args.connection.store(needs).await {
        Ok(store) => store,
        Err(e) => return fail("heads", e),
    };
    let result = match args.command {
        HeadsCommand::Status { json } => status(&store, json).await,
        HeadsCommand::Mark { state } => mark(&store, state).await,
        HeadsCommand::Seed {
            page_size,
            checkpoint,
            restart,
            json,
            stop_after_pages,
        } => {
            seed(
                &store,
                &args.connection,
                SeedOptions {
                    page_size,
                    checkpoint: &checkpoint,
                    restart,
                    json,
                    stop_after_pages,
                },
            )
            .await
        }
    };
    result.unwrap_or_else(|e| fail("heads", e))
}

async fn status(store: &Store, json: bool) -> Result<ExitCode, String> {
    let state = store.heads_state().await.map_err(|e| e.to_string())?;
    if json {
        println!("{}", serde_json::json!({"state": state.as_str()}));
    } else {
        println!("heads: {}", state.as_str());
        match state {
            HeadsState::Complete => {
                println!("  every item has a head: a create is one transaction")
            }
            HeadsState::Incomplete => println!(
                "  commands read stored versions before writing an item without a head; \
                 run `cqrs heads seed` to complete"
            ),
            HeadsState::Shared => println!(
                "  a writer that keeps no heads shares the tables: commands always read stored \
                 versions first"
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn mark(store: &Store, state: Marked) -> Result<ExitCode, String> {
    let state = match state {
        Marked::Shared => HeadsState::Shared,
        Marked::Incomplete => HeadsState::Incomplete,
    };
    let now = store
        .mark_heads(state, "cqrs heads mark")
        .await
        .map_err(|e| e.to_string())?;
    println!("heads: {}", now.as_str());
    println!(
        "  every command-handler container reads it within {} s: a command that starts {} s \
         from now is decided on it (wait that long before another writer starts writing)",
        HEADS_STATE_MAX_AGE.as_secs(),
        HEADS_STATE_MAX_AGE.as_secs()
    );
    Ok(ExitCode::SUCCESS)
}

struct SeedOptions<'a> {
    page_size: u32,
    checkpoint: &'a Path,
    restart: bool,
    json: bool,
    stop_after_pages: Option<u64>,
}

fn load_checkpoint(path: &Path) -> Result<Option<Checkpoint>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("the checkpoint {} is not readable: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

fn save_checkpoint(path: &Path, checkpoint: &Checkpoint) -> Result<(), String> {
    let text = serde_json::to_string_pretty(checkpoint).map_err(|e| e.to_string())?;
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|e| format!("cannot write the checkpoint {}: {e}", path.display()))
}

async fn seed(
    store: &Store,
    connection: &Connection,
    options: SeedOptions<'_>,
) -> Result<ExitCode, String> {
    let tables = (
        connection.command_table.clone().unwrap_or_default(),
        connection.idempotency_table.clone().unwrap_or_default(),
    );
    let mut checkpoint = match load_checkpoint(options.checkpoint)? {
        Some(saved) if !options.restart => {
            if (&saved.command_table, &saved.idempotency_table) != (&tables.0, &tables.1) {
                return Err(format!(
                    "the checkpoint {} is of another deployment ({} / {}): give --restart or \
                     another --checkpoint",
                    options.checkpoint.display(),
                    saved.command_table,
                    saved.idempotency_table
                ));
            }
            saved
        }
        _ => Checkpoint {
            command_table: tables.0,
            idempotency_table: tables.1,
            phase: Phase::LegacyHeads,
            after: None,
            summary: Summary::default(),
        },
    };
    let bar = spinner(options.json, "seeding heads");
    let mut pages_this_run = 0u64;
    while checkpoint.phase != Phase::Done {
        bar.set_prefix(checkpoint.phase.label());
        let next = match checkpoint.phase {
            Phase::LegacyHeads => legacy_page(store, &mut checkpoint, options.page_size).await?,
            phase => {
                let table = match phase {
                    Phase::CommandRows => VersionTable::Command,
                    Phase::HistoryRows => VersionTable::History,
                    _ => VersionTable::Data,
                };
                versions_page(store, &mut checkpoint, table, options.page_size).await?
            }
        };
        match next {
            Some(after) => checkpoint.after = Some(after),
            None => {
                checkpoint.phase = checkpoint.phase.next();
                checkpoint.after = None;
            }
        }
        checkpoint.summary.pages += 1;
        pages_this_run += 1;
        bar.set_position(checkpoint.summary.versions_read + checkpoint.summary.legacy_heads);
        save_checkpoint(options.checkpoint, &checkpoint)?;
        if options
            .stop_after_pages
            .is_some_and(|stop| pages_this_run >= stop)
            && checkpoint.phase != Phase::Done
        {
            bar.finish_and_clear();
            return Err(format!(
                "stopped after {pages_this_run} pages (test hook); the checkpoint {} resumes it",
                options.checkpoint.display()
            ));
        }
    }
    bar.finish_and_clear();
    let state = store
        .mark_heads(HeadsState::Complete, "cqrs heads seed")
        .await
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(options.checkpoint);
    let summary = &checkpoint.summary;
    if options.json {
        let mut out = serde_json::to_value(summary).map_err(|e| e.to_string())?;
        if let Some(map) = out.as_object_mut() {
            map.insert("state".into(), state.as_str().into());
        }
        println!("{out}");
    } else {
        println!(
            "heads: {} ({} pages; {} legacy heads, {} stored versions read; {} heads raised, {} \
             already current)",
            state.as_str(),
            summary.pages,
            summary.legacy_heads,
            summary.versions_read,
            summary.heads_raised,
            summary.already_current
        );
        for c in &summary.collisions {
            println!(
                "  collided id {} (legacy head {}): {}",
                c.id,
                c.legacy_latest,
                c.items
                    .iter()
                    .map(|(pk, sk, v)| format!("{pk} / {sk} at {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        for o in &summary.orphans {
            println!(
                "  orphan legacy head {} at {}: {}",
                o.id,
                o.legacy_latest,
                match &o.seeded {
                    Some((pk, sk)) => format!("kept as the head of {pk} / {sk}"),
                    None => "its id does not split into keys: not kept".into(),
                }
            );
        }
        for t in summary.keys_too_long.iter().take(LISTED) {
            println!(
                "  skipped {} / {}: its head key would be {} bytes, over DynamoDB's 2048 (commands \
                 on it are refused)",
                t.pk, t.sk, t.head_key_bytes
            );
        }
        if summary.keys_too_long.len() > LISTED {
            println!(
                "  ... and {} more skipped (--json lists them all)",
                summary.keys_too_long.len() - LISTED
            );
        }
        if state == HeadsState::Shared {
            println!("  the tables are marked shared: commands keep reading stored versions first");
        }
    }
    let found = summary.collisions_found + summary.orphans_found + summary.keys_too_long_found;
    Ok(if found > 0 {
        ExitCode::from(EXIT_DIFFERENCE)
    } else {
        ExitCode::SUCCESS
    })
}

/// Raises each head to its version, concurrently; counts what moved.
async fn raise_all(
    store: &Store,
    heads: Vec<StoredVersion>,
    summary: &mut Summary,
) -> Result<(), String> {
    let results: Vec<_> = futures::stream::iter(heads)
        .map(|v| async move {
            store
                .raise_head(&v.pk, &v.base_sk, v.version)
                .await
                .map_err(|e| format!("{} / {}: {e}", v.pk, v.base_sk))
        })
        .buffer_unordered(WRITE_CONCURRENCY)
        .collect()
        .await;
    for raised in results {
        if raised? {
            summary.heads_raised += 1;
        } else {
            summary.already_current += 1;
        }
    }
    Ok(())
}

/// One page of a command, history or data scan: each item's highest version on the page.
async fn versions_page(
    store: &Store,
    checkpoint: &mut Checkpoint,
    table: VersionTable,
    page_size: u32,
) -> Result<Option<BTreeMap<String, String>>, String> {
    let page: SeedPage<StoredVersion> = store
        .scan_versions_page(table, checkpoint.after.as_ref(), page_size)
        .await
        .map_err(|e| e.to_string())?;
    checkpoint.summary.versions_read += page.rows.len() as u64;
    // Versions of one item are neighbours in a scan (one partition, sorted by sk): one write
    // per item and page.
    let mut highest: BTreeMap<(String, String), i64> = BTreeMap::new();
    for v in page.rows {
        let slot = highest.entry((v.pk, v.base_sk)).or_insert(v.version);
        *slot = (*slot).max(v.version);
    }
    let summary = &mut checkpoint.summary;
    let mut heads = Vec::with_capacity(highest.len());
    for ((pk, base_sk), version) in highest {
        if cqrs_keys::validate_derived_keys(&pk, &base_sk).is_err() {
            skip_too_long(summary, pk, base_sk);
            continue;
        }
        heads.push(StoredVersion {
            pk,
            base_sk,
            version,
        });
    }
    raise_all(store, heads, summary).await?;
    Ok(page.next)
}

/// Lists an item whose head key cannot exist (once, whichever tables hold it).
fn skip_too_long(summary: &mut Summary, pk: String, sk: String) {
    if summary
        .keys_too_long
        .iter()
        .any(|t| t.pk == pk && t.sk == sk)
    {
        return;
    }
    summary.keys_too_long_found += 1;
    let head_key_bytes = cqrs_keys::head_key(&pk, &sk).len();
    summary.keys_too_long.push(TooLong {
        pk,
        sk,
        head_key_bytes,
    });
}

/// One page of legacy heads: each moved to the one item of its id, or reported.
async fn legacy_page(
    store: &Store,
    checkpoint: &mut Checkpoint,
    page_size: u32,
) -> Result<Option<BTreeMap<String, String>>, String> {
    let page = store
        .scan_legacy_heads_page(checkpoint.after.as_ref(), page_size)
        .await
        .map_err(|e| e.to_string())?;
    let summary = &mut checkpoint.summary;
    summary.legacy_heads += page.rows.len() as u64;
    let mut heads = Vec::new();
    for (id, legacy) in page.rows {
        let mut items = store.items_with_id(&id).await.map_err(|e| e.to_string())?;
        // Items of this id that have rows but nothing in history yet (not yet projected).
        if let Some((pk, sk)) = split_id(&id)
            && !items.iter().any(|i| i.pk == pk && i.base_sk == sk)
        {
            let stored = store
                .highest_stored_version(pk, sk)
                .await
                .map_err(|e| e.to_string())?;
            if let Some(version) = stored.highest() {
                items.push(StoredVersion {
                    pk: pk.to_string(),
                    base_sk: sk.to_string(),
                    version,
                });
            }
        }
        match items.len() {
            1 => {
                let mut item = items.remove(0);
                item.version = item.version.max(legacy);
                heads.push(item);
            }
            0 => {
                summary.orphans_found += 1;
                let seeded = split_id(&id).map(|(pk, sk)| (pk.to_string(), sk.to_string()));
                if let Some((pk, sk)) = &seeded {
                    heads.push(StoredVersion {
                        pk: pk.clone(),
                        base_sk: sk.clone(),
                        version: legacy,
                    });
                }
                if summary.orphans.len() < LISTED {
                    summary.orphans.push(Orphan {
                        id,
                        legacy_latest: legacy,
                        seeded,
                    });
                }
            }
            _ => {
                summary.collisions_found += 1;
                if summary.collisions.len() < LISTED {
                    summary.collisions.push(Collision {
                        id,
                        legacy_latest: legacy,
                        items: items
                            .iter()
                            .map(|i| (i.pk.clone(), i.base_sk.clone(), i.version))
                            .collect(),
                    });
                }
                heads.extend(items);
            }
        }
    }
    raise_all(store, heads, summary).await?;
    Ok(page.next)
}
