//! Publishing a command: choosing the version to write, building the item with its audit fields,
//! and writing it with the item's head record (and the idempotency record, when there is one) in
//! one conditional transaction.
//!
//! The transaction's conditions are the version rules' checks, so the reads in front of it are
//! only those the new version needs (sequential DynamoDB round trips, the TTL policy and the heads
//! state cached per container, as the `round_trips` test counts them):
//!
//! | command | reads before the transaction | round trips |
//! | --- | --- | --- |
//! | create (`version: 0`) | none: `attribute_not_exists` on the head | 1 |
//! | `version: N` (POST, PATCH) | the base version's row (its `createdAt`, `createdBy`, `createdIp`, `seq`; for PATCH its content) | 2 |
//! | `version: -1` | the head, then the base row | 3 |
//!
//! The guards of the constraints the model declares (`unique`, `limits`, `references`:
//! [`crate::constraints`]) ride in the same transaction, computed from the base version these reads
//! already give: a constrained command makes the same round trips, and a refusal of one is named
//! by its failed condition's `ALL_OLD`, without a read.
//!
//! A failed head condition returns the current head (`ALL_OLD`), so a 409 names
//! `currentVersion` without a read; a failed idempotency condition returns the first request's
//! record, so a retry is answered from it without a read.
//!
//! All of this holds when the deployment's heads are complete ([`HeadKnowledge::Complete`]).
//! Until they are, an item may have versions but no head, so each command reads (and if
//! needed seeds) the head first ([`Store::latest_version`]); a create by entity whose id the
//! server made just now (a new ULID) skips that read even then.

use cqrs_caller::Caller;
use cqrs_item::{Item, MAX_ITEM_BYTES, check_limits};
use cqrs_keys::{
    MAX_SORT_KEY_BYTES, VERSION_LATEST, add_sort_key_version, generate_id, parse_entity_key,
    tenant_code,
};
use cqrs_problem::ApiError;
use cqrs_store::{IdempotencyRecord, Store, StoreError};

use crate::constraints::{self, Refusal};
use crate::entity::{ModelEntity, apply};
use crate::hooks::{CommandHook, HookCommand};
use crate::input::CommandInput;
use cqrs_store::guard::{self, CommandKeys, Guard};

/// How many times a `version: -1` write re-reads the latest version after losing a race.
pub const LATEST_RETRIES: usize = 5;

/// Whether the command replaces the item (`POST`) or merges into it (`PATCH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `POST /commands`: the new version holds exactly the given fields.
    Replace,
    /// `PATCH /commands`: the given fields merged into the named version.
    Merge,
}

impl Mode {
    /// The `source` recorded on the items this mode writes.
    pub fn source(self) -> &'static str {
        match self {
            Mode::Replace => "POST /commands",
            Mode::Merge => "PATCH /commands",
        }
    }
}

/// What the handler knows of the item's head before it publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadKnowledge {
    /// Every item of the deployment has a head: a missing head means a new item, and the
    /// transaction's head condition is the version check.
    Complete,
    /// Items may lack a head (the heads state is not `complete`): read the head, seeding it from
    /// the stored versions when it is missing, before choosing the version.
    Incomplete,
    /// The caller has just read the item's latest version (the master-data copy).
    Latest(Option<i64>),
}

impl HeadKnowledge {
    /// From the deployment's heads state.
    pub fn of(state: cqrs_store::HeadsState) -> Self {
        if state.is_complete() {
            HeadKnowledge::Complete
        } else {
            HeadKnowledge::Incomplete
        }
    }
}

/// Who wrote, from where, and under which request id.
#[derive(Debug, Clone)]
pub struct Audit {
    /// The caller.
    pub caller: Caller,
    /// The caller's address.
    pub ip: String,
    /// The idempotency key or the Lambda request id.
    pub request_id: String,
    /// Now, ISO-8601.
    pub now: String,
}

/// What publishing a command came to, short of a refusal.
#[derive(Debug, Clone, PartialEq)]
pub enum Published {
    /// The new version, stored.
    Stored(Box<Item>),
    /// Nothing was written: an earlier request holds the idempotency key, and this is its record
    /// (returned by the failed condition). Answer from it.
    Replay(Box<IdempotencyRecord>),
    /// Nothing was written: a concurrent request took the idempotency key first, and its record
    /// could not be read from the failed condition. Read it and answer from it.
    KeyTaken,
}

/// The latest version of an item: its head alone when the deployment's heads are complete, else
/// the head seeded from the stored versions when missing ([`Store::latest_version`]).
pub async fn read_latest(
    store: &Store,
    pk: &str,
    sk: &str,
    heads: HeadKnowledge,
) -> Result<Option<i64>, ApiError> {
    Ok(match heads {
        HeadKnowledge::Latest(latest) => latest,
        HeadKnowledge::Complete => store.get_head(pk, sk).await?,
        HeadKnowledge::Incomplete => store.latest_version(pk, sk).await?,
    })
}

/// What a command of an entity obeys besides the version rules: the model's entity (`None`: a
/// command by key that matches no entity) and the service's hook on it.
#[derive(Clone, Copy, Default)]
pub struct Rules<'a> {
    /// The entity of the model, when the command is one of its items.
    pub entity: Option<ModelEntity<'a>>,
    /// The service's command hook on that entity ([`crate::hooks`]).
    pub hook: Option<&'a dyn CommandHook>,
    /// The service's model, for the hook's reads ([`crate::hooks::HookReader`]).
    pub model: Option<&'a cqrs_model::Model>,
}

impl std::fmt::Debug for Rules<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rules")
            .field("entity", &self.entity.map(|e| e.entity.name.as_str()))
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

/// Writes the command as a new version; returns the stored item.
///
/// The version rules are checked by the transaction's condition on the item's head record (never
/// by the command rows alone), so a version whose row expired or was deleted is still known and
/// never written again.
pub async fn publish_command(
    store: &Store,
    input: &CommandInput,
    mode: Mode,
    audit: &Audit,
    rules: Rules<'_>,
    idempotency: Option<&IdempotencyRecord>,
    heads: HeadKnowledge,
) -> Result<Published, ApiError> {
    let Rules {
        entity,
        hook,
        model,
    } = rules;
    let latest_wanted = input.version == VERSION_LATEST;
    let attempts = if latest_wanted { LATEST_RETRIES } else { 1 };
    // A key holding a ULID made for this command names an item with no stored version.
    let mut heads = if input.fresh_id {
        HeadKnowledge::Latest(None)
    } else {
        heads
    };
    // What to read when what was known goes stale: the deployment's state, or the safe read.
    let reread = match heads {
        HeadKnowledge::Latest(_) => HeadKnowledge::Incomplete,
        other => other,
    };
    let mut last_seen = None;
    for attempt in 0..attempts {
        if attempt > 0 {
            // Lost a race for the latest version: let the winner's write settle, with jitter so
            // that the losers do not collide again in lockstep.
            tokio::time::sleep(backoff(attempt)).await;
        }
        let (previous, base) = Box::pin(plan(store, input, mode, heads)).await?;
        let mut item = build_item(input, mode, previous, base.as_ref(), audit, entity)?;
        // The operation the request could not show (a `version: -1` create or update, a restore
        // without `isDeleted`), now that the base is known: before the hook and the write.
        crate::roles::check_transition(entity, &audit.caller, previous, base.as_ref(), &item)?;
        let hook_guards = match hook {
            Some(hook) => {
                let hooked = Hooked {
                    hook,
                    model,
                    entity,
                };
                run_hook(hooked, store, &audit.caller, &mut item, base.as_ref()).await?
            }
            None => Vec::new(),
        };
        // The declared constraints' guards, from the base to the item as the hook left it; then
        // the hook's.
        let declared = constraints::plan(model, entity, &item, base.as_ref(), previous)?;
        let (guards, refusals, mirror) =
            prepare_guards(store, &item, idempotency, entity, declared, hook_guards)?;
        let record = idempotency.map(|r| IdempotencyRecord {
            item_pk: item.pk.clone(),
            item_sk: item.sk.clone(),
            item_id: item.id.clone(),
            version: item.version,
            ..r.clone()
        });
        match store
            .write_version_constrained(&item, previous, record.as_ref(), &guards, mirror.as_ref())
            .await
        {
            Ok(()) => return Ok(Published::Stored(Box::new(item))),
            Err(StoreError::GuardFailed { index, old }) => {
                return Err(match (refusals.get(index), model) {
                    (Some(Refusal::Hook(refusal)), _) => refusal.clone(),
                    (Some(Refusal::Declared(violation)), Some(model)) => {
                        constraints::refusal(model, violation, old.as_ref())
                    }
                    _ => ApiError::Internal(format!(
                        "guard {index} failed, and neither the model nor a hook added it"
                    )),
                });
            }
            Err(StoreError::IdempotencyReplay(first)) => return Ok(Published::Replay(first)),
            Err(StoreError::IdempotencyKeyTaken(_)) => return Ok(Published::KeyTaken),
            // Another writer moved the head: try again on the version the failed condition
            // returned, without reading it.
            Err(StoreError::StaleVersion { latest, .. }) if latest_wanted => {
                last_seen = latest;
                heads = match latest {
                    Some(_) => HeadKnowledge::Latest(latest),
                    None => reread,
                };
            }
            // A transaction got in the way: read the head again.
            Err(StoreError::WriteConflict(_)) if latest_wanted => heads = reread,
            Err(StoreError::StaleVersion { latest, .. }) => {
                return Err(stale(input, latest));
            }
            Err(StoreError::AlreadyExists { .. }) => {
                // The row of the next version exists although the head said otherwise: a writer
                // that does not keep heads (an older deployment, mbc-cqrs-serverless) wrote it.
                return Err(ApiError::VersionConflict {
                    detail: format!(
                        "version {} of {} already exists in the command table",
                        item.version, item.id
                    ),
                    current_version: previous.max(Some(item.version)),
                });
            }
            Err(other) => return Err(other.into()),
        }
    }
    Err(ApiError::VersionConflict {
        detail: format!(
            "{}: lost the race for the latest version {attempts} times",
            generate_id(&input.pk, &input.sk)
        ),
        current_version: last_seen,
    })
}

/// The version the command builds on (`None`: it creates the item) and that version's stored
/// content, with only the reads the version rules and the new version need.
async fn plan(
    store: &Store,
    input: &CommandInput,
    mode: Mode,
    heads: HeadKnowledge,
) -> Result<(Option<i64>, Option<Item>), ApiError> {
    let version = input.version;
    if version == 0 {
        // A create: with complete heads, the head's `attribute_not_exists` is the whole check.
        let latest = match heads {
            HeadKnowledge::Complete => None,
            other => read_latest(store, &input.pk, &input.sk, other).await?,
        };
        return Ok((previous_version(input, mode, latest)?, None));
    }
    if version != VERSION_LATEST && heads == HeadKnowledge::Complete {
        // Version N: its row is the only read; the head's `latest = N` condition checks that N
        // is the latest (and a failed one names the latest).
        let base = stored_base(store, input, version).await?;
        if base.is_none() && mode == Mode::Merge {
            // Nothing to merge into: say whether N never existed or its row is gone.
            let latest = store.get_head(&input.pk, &input.sk).await?;
            previous_version(input, mode, latest)?;
            return Err(no_longer_stored(input, version));
        }
        return Ok((Some(version), base));
    }
    let latest = read_latest(store, &input.pk, &input.sk, heads).await?;
    let previous = previous_version(input, mode, latest)?;
    let base = match previous {
        Some(previous) => load_base(store, input, mode, previous).await?,
        None => None,
    };
    Ok((previous, base))
}

/// The version the command builds on (`None`: it creates the item), by the version rules, given
/// the item's latest version. Refuses what the rules refuse, without a write.
fn previous_version(
    input: &CommandInput,
    mode: Mode,
    latest: Option<i64>,
) -> Result<Option<i64>, ApiError> {
    let id = || generate_id(&input.pk, &input.sk);
    match (input.version, latest) {
        (0, None) => Ok(None),
        (0, Some(latest)) => Err(ApiError::VersionConflict {
            detail: format!("{} already exists: version 0 only creates", id()),
            current_version: Some(latest),
        }),
        (VERSION_LATEST, None) => match mode {
            Mode::Replace => Ok(None),
            Mode::Merge => Err(ApiError::NotFound(format!(
                "{} has no version to merge into",
                id()
            ))),
        },
        (VERSION_LATEST, Some(latest)) => Ok(Some(latest)),
        (version, latest) if latest.is_none_or(|latest| version > latest) => {
            Err(missing_version(input, version))
        }
        (version, latest) if latest == Some(version) => Ok(Some(version)),
        (version, latest) => Err(stale(input, latest).with_detail(format!(
            "version {} of {} already exists: the command was based on version {version}",
            version.saturating_add(1),
            id()
        ))),
    }
}

/// The 404 of a command based on a version that was never written.
fn missing_version(input: &CommandInput, version: i64) -> ApiError {
    ApiError::NotFound(format!(
        "version {version} of {} does not exist: a command names the version it builds on",
        generate_id(&input.pk, &input.sk)
    ))
}

/// The answer to a write whose head condition failed: 409 with the current version, or 404
/// when the version the command names does not exist (no version at all, or an older latest).
fn stale(input: &CommandInput, latest: Option<i64>) -> ApiError {
    let id = generate_id(&input.pk, &input.sk);
    match latest {
        Some(latest) if input.version == 0 => ApiError::VersionConflict {
            detail: format!("{id} already exists: version 0 only creates"),
            current_version: Some(latest),
        },
        Some(latest) if input.version > latest => missing_version(input, input.version),
        Some(latest) => ApiError::VersionConflict {
            detail: format!(
                "{id} is at version {latest}: the command was based on version {}",
                input.version
            ),
            current_version: Some(latest),
        },
        None if input.version > 0 => missing_version(input, input.version),
        None => ApiError::NotFound(format!("{id} has no version")),
    }
}

/// Replaces the detail of a version conflict, keeping the rest.
trait WithDetail {
    fn with_detail(self, detail: String) -> Self;
}

impl WithDetail for ApiError {
    fn with_detail(self, detail: String) -> Self {
        match self {
            ApiError::VersionConflict {
                current_version, ..
            } => ApiError::VersionConflict {
                detail,
                current_version,
            },
            other => other,
        }
    }
}

/// A short, jittered pause before retry `attempt` (1-based): 5–10 ms, then 10–20 ms, ...
fn backoff(attempt: usize) -> std::time::Duration {
    let base = 5u64 << attempt.min(5);
    let jitter = u64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default(),
    ) % base;
    std::time::Duration::from_millis(base / 2 + jitter / 2)
}

/// The stored content of version `previous`, which the new version builds on: its command row,
/// or the data table's item when that is at this version and the row is gone (TTL, a delete).
/// `None` when neither holds it (any more). A row or item whose `ttl` has passed is gone although
/// DynamoDB has not deleted it yet ([`Item::is_expired`], the rule of the query side too).
async fn stored_base(
    store: &Store,
    input: &CommandInput,
    previous: i64,
) -> Result<Option<Item>, ApiError> {
    let now = chrono::Utc::now().timestamp();
    let live = |item: Option<Item>| item.filter(|item| !item.is_expired(now));
    if let Some(row) = live(store.get_command(&input.pk, &input.sk, previous).await?) {
        return Ok(Some(row));
    }
    Ok(live(store.get_data_item(&input.pk, &input.sk).await?)
        .filter(|item| item.version == previous))
}

/// [`stored_base`] of a version known to exist: `None` for a `POST` when it is no longer stored
/// (the new version is written from the command alone); a `PATCH` has nothing to merge into
/// then: 404.
async fn load_base(
    store: &Store,
    input: &CommandInput,
    mode: Mode,
    previous: i64,
) -> Result<Option<Item>, ApiError> {
    match (stored_base(store, input, previous).await?, mode) {
        (Some(item), _) => Ok(Some(item)),
        (None, Mode::Replace) => Ok(None),
        (None, Mode::Merge) => Err(no_longer_stored(input, previous)),
    }
}

/// The 404 of a `PATCH` on a version whose row expired or was deleted.
fn no_longer_stored(input: &CommandInput, previous: i64) -> ApiError {
    ApiError::NotFound(format!(
        "version {previous} of {} is no longer stored (its command row expired or was \
         deleted), so there is nothing to merge into: send the whole item with POST",
        generate_id(&input.pk, &input.sk)
    ))
}

/// The new version: the command's fields (or the base merged with them), the next version number,
/// and the audit fields.
fn build_item(
    input: &CommandInput,
    mode: Mode,
    previous: Option<i64>,
    base: Option<&Item>,
    audit: &Audit,
    entity: Option<ModelEntity<'_>>,
) -> Result<Item, ApiError> {
    let version = match previous {
        None => 1,
        Some(previous) => previous.checked_add(1).ok_or_else(|| {
            ApiError::bad_field(
                "version",
                format!("version {previous} is the largest a version can be: none can follow it"),
            )
        })?,
    };
    let sk = add_sort_key_version(&input.sk, version);
    if sk.len() > MAX_SORT_KEY_BYTES {
        return Err(ApiError::bad_field(
            "sk",
            format!(
                "with its version the sort key is {} bytes, over DynamoDB's {MAX_SORT_KEY_BYTES}",
                sk.len()
            ),
        ));
    }
    let (item_type, _) = parse_entity_key(&input.pk).map_err(|e| ApiError::bad_field("pk", e))?;
    let tenant = tenant_code(&input.pk)
        .ok_or_else(|| ApiError::bad_field("pk", "names no tenant"))?
        .to_string();
    let (created_at, created_by, created_ip) = match base {
        Some(b) => (
            b.created_at.clone(),
            b.created_by.clone(),
            b.created_ip.clone(),
        ),
        None => (
            audit.now.clone(),
            audit.caller.user_id.clone(),
            audit.ip.clone(),
        ),
    };
    let (code, name, attributes, is_deleted, ttl, seq) = match (mode, base) {
        (Mode::Merge, Some(b)) => {
            let mut attributes = b.attributes.clone();
            input.attributes.merge_into(&mut attributes);
            (
                input.code.clone().unwrap_or_else(|| b.code.clone()),
                input.name.clone().unwrap_or_else(|| b.name.clone()),
                attributes,
                input.is_deleted.unwrap_or(b.is_deleted),
                input.ttl.apply(b.ttl),
                b.seq,
            )
        }
        _ => (
            input.code.clone().unwrap_or_default(),
            input.name.clone().unwrap_or_default(),
            input.attributes.value().unwrap_or_default(),
            input.is_deleted.unwrap_or(false),
            input.ttl.value(),
            input.seq.or(base.and_then(|b| b.seq)),
        ),
    };
    let mut item = Item {
        id: generate_id(&input.pk, &input.sk),
        pk: input.pk.clone(),
        sk,
        code,
        name,
        version,
        tenant_code: tenant,
        item_type: item_type.to_string(),
        is_deleted,
        seq,
        ttl,
        attributes,
        source: input
            .source
            .clone()
            .unwrap_or_else(|| mode.source().to_string()),
        request_id: audit.request_id.clone(),
        created_at,
        created_by,
        created_ip,
        updated_at: audit.now.clone(),
        updated_by: audit.caller.user_id.clone(),
        updated_ip: audit.ip.clone(),
        cpk: None,
        csk: None,
        entity: None,
        model_revision: None,
        index_keys: Default::default(),
    };
    finish_item(entity, &mut item)?;
    Ok(item)
}

/// The model's checks of the whole item of this version and its index keys (counted in the size
/// checked next), then the limits of DynamoDB: after the command's fields are merged, and again
/// after a command hook adjusted attributes.
fn finish_item(entity: Option<ModelEntity<'_>>, item: &mut Item) -> Result<(), ApiError> {
    if let Some(entity) = entity {
        apply(entity, item)?;
    }
    let size = item
        .stored_size()
        .map_err(|e| ApiError::bad_field("attributes", e))?;
    if size > MAX_ITEM_BYTES {
        return Err(ApiError::PayloadTooLarge(format!(
            "the item would be {size} bytes, over DynamoDB's limit of {MAX_ITEM_BYTES}"
        )));
    }
    // Nesting and numbers DynamoDB cannot store: a 400, not a failed write.
    let attributes = item
        .to_attributes()
        .map_err(|e| ApiError::bad_field("attributes", e))?;
    check_limits(&attributes).map_err(|e| ApiError::bad_field("attributes", e))?;
    Ok(())
}

/// The 500 of guards a command hook added that its transaction cannot take ([`guard::prepare`]): a
/// fault of the service's hook, named with its entity in the logged detail (the caller sees the
/// internal problem and the request id).
fn hook_fault(entity: Option<ModelEntity<'_>>, error: guard::GuardError) -> ApiError {
    let name = entity.map_or("?", |e| e.entity.name.as_str());
    ApiError::Internal(format!("the command hook of entity {name}: {error}"))
}

/// The guards of the transaction, declared first then the hook's, through [`guard::prepare`], with
/// what each answers when it fails, and the head mirror of a referenced entity.
fn prepare_guards(
    store: &Store,
    item: &Item,
    idempotency: Option<&IdempotencyRecord>,
    entity: Option<ModelEntity<'_>>,
    declared: cqrs_store::constraints::ConstraintPlan,
    hook_guards: Vec<(Guard, ApiError)>,
) -> Result<PreparedGuards, ApiError> {
    let hooked = !hook_guards.is_empty();
    let guards: Vec<(Guard, Refusal)> = declared
        .guards
        .into_iter()
        .map(|(guard, violation)| (guard, Refusal::Declared(violation)))
        .chain(
            hook_guards
                .into_iter()
                .map(|(guard, refusal)| (guard, Refusal::Hook(refusal))),
        )
        .collect();
    if guards.is_empty() {
        return Ok((Vec::new(), Vec::new(), declared.mirror));
    }
    let keys = CommandKeys {
        tables: store.tables(),
        pk: &item.pk,
        sk: &item.sk,
        record: idempotency.map(|r| r.key.as_str()),
    };
    let prepared = guard::prepare(guards, &keys).map_err(|e| {
        if hooked {
            hook_fault(entity, e)
        } else {
            let name = entity.map_or("?", |e| e.entity.name.as_str());
            ApiError::Internal(format!("the declared constraints of entity {name}: {e}"))
        }
    })?;
    let (guards, refusals) = prepared.into_iter().unzip();
    Ok((guards, refusals, declared.mirror))
}

/// The guards of a transaction, what each answers when it fails, and the head mirror.
type PreparedGuards = (
    Vec<Guard>,
    Vec<Refusal>,
    Option<cqrs_store::guard::HeadMirror>,
);

/// A command hook and what it runs with.
struct Hooked<'a> {
    hook: &'a dyn CommandHook,
    model: Option<&'a cqrs_model::Model>,
    entity: Option<ModelEntity<'a>>,
}

/// Runs the entity's command hook on the new version `item` (built on `base`), then the model's
/// checks and index keys again; answers the guards the hook added, each with its refusal. The
/// hook may change attributes only: one whose change moves the item's keys is a fault of the hook.
async fn run_hook(
    hooked: Hooked<'_>,
    store: &Store,
    caller: &Caller,
    item: &mut Item,
    base: Option<&Item>,
) -> Result<Vec<(Guard, ApiError)>, ApiError> {
    let Hooked {
        hook,
        model,
        entity,
    } = hooked;
    let before = (item.pk.clone(), item.sk.clone());
    let mut guards = Vec::new();
    let mut command = HookCommand::running(
        caller,
        store,
        model,
        entity.map(|e| e.entity),
        item,
        base,
        &mut guards,
    );
    hook.before_write(&mut command).await?;
    drop(command);
    finish_item(entity, item).map_err(|e| match e {
        ApiError::BadRequest { detail, .. } => ApiError::Internal(format!(
            "the command hook left an item the model refuses: {detail}"
        )),
        other => other,
    })?;
    if (&item.pk, &item.sk) != (&before.0, &before.1) {
        return Err(ApiError::Internal(format!(
            "the command hook changed the item's keys ({} / {} became {} / {}): a hook may not",
            before.0, before.1, item.pk, item.sk
        )));
    }
    Ok(guards)
}
