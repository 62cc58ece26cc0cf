//! Publishing a command: choosing the version to write from the item's head record, building the
//! item with its audit fields, and writing it with the head (and the idempotency record, when there
//! is one) in one transaction.

use cqrs_caller::Caller;
use cqrs_item::{Item, MAX_ITEM_BYTES, check_limits};
use cqrs_keys::{
    MAX_SORT_KEY_BYTES, VERSION_LATEST, add_sort_key_version, generate_id, parse_entity_key,
    tenant_code,
};
use cqrs_problem::ApiError;
use cqrs_store::{IdempotencyRecord, Store, StoreError};

use crate::entity::{ModelEntity, apply};
use crate::input::CommandInput;

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
    /// Nothing was written: a concurrent request took the idempotency key first. Answer from its
    /// record.
    KeyTaken,
}

/// Writes the command as a new version; returns the stored item.
///
/// The version rules read the item's head record (one read; seeded from the stored versions when
/// the item has none), never the command rows alone, so a version whose row expired or was
/// deleted is still known and never written again.
pub async fn publish_command(
    store: &Store,
    input: &CommandInput,
    mode: Mode,
    audit: &Audit,
    entity: Option<ModelEntity<'_>>,
    idempotency: Option<&IdempotencyRecord>,
) -> Result<Published, ApiError> {
    let latest_wanted = input.version == VERSION_LATEST;
    let attempts = if latest_wanted { LATEST_RETRIES } else { 1 };
    let mut last_seen = None;
    for attempt in 0..attempts {
        if attempt > 0 {
            // Lost a race for the latest version: let the winner's write settle, with jitter so
            // that the losers do not collide again in lockstep.
            tokio::time::sleep(backoff(attempt)).await;
        }
        let latest = store.latest_version(&input.pk, &input.sk).await?;
        last_seen = latest;
        let previous = previous_version(input, mode, latest)?;
        let base = match previous {
            Some(previous) => load_base(store, input, mode, previous).await?,
            None => None,
        };
        let item = build_item(input, mode, previous, base.as_ref(), audit, entity)?;
        let record = idempotency.map(|r| IdempotencyRecord {
            item_pk: item.pk.clone(),
            item_sk: item.sk.clone(),
            item_id: item.id.clone(),
            version: item.version,
            ..r.clone()
        });
        match store.write_version(&item, previous, record.as_ref()).await {
            Ok(()) => return Ok(Published::Stored(Box::new(item))),
            Err(StoreError::IdempotencyKeyTaken(_)) => return Ok(Published::KeyTaken),
            // Another writer moved the head (or a transaction got in the way): try again on the
            // new latest version.
            Err(StoreError::StaleVersion { latest, .. }) if latest_wanted => last_seen = latest,
            Err(StoreError::WriteConflict(_)) if latest_wanted => {}
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
                    current_version: latest.max(Some(item.version)),
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
            Err(ApiError::NotFound(format!(
                "version {version} of {} does not exist: a command names the version it builds on",
                id()
            )))
        }
        (version, latest) if latest == Some(version) => Ok(Some(version)),
        (version, latest) => Err(stale(input, latest).with_detail(format!(
            "version {} of {} already exists: the command was based on version {version}",
            version.saturating_add(1),
            id()
        ))),
    }
}

/// The answer to a write whose head moved: 409 with the current version, or 404 when the item
/// has no version at all.
fn stale(input: &CommandInput, latest: Option<i64>) -> ApiError {
    let id = generate_id(&input.pk, &input.sk);
    match latest {
        Some(latest) if input.version == 0 => ApiError::VersionConflict {
            detail: format!("{id} already exists: version 0 only creates"),
            current_version: Some(latest),
        },
        Some(latest) => ApiError::VersionConflict {
            detail: format!(
                "{id} is at version {latest}: the command was based on version {}",
                input.version
            ),
            current_version: Some(latest),
        },
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
/// `None` for a `POST` when neither holds it any more (the new version is written from the
/// command alone); a `PATCH` has nothing to merge into then: 404.
async fn load_base(
    store: &Store,
    input: &CommandInput,
    mode: Mode,
    previous: i64,
) -> Result<Option<Item>, ApiError> {
    if let Some(row) = store.get_command(&input.pk, &input.sk, previous).await? {
        return Ok(Some(row));
    }
    let data = store
        .get_data_item(&input.pk, &input.sk)
        .await?
        .filter(|item| item.version == previous);
    match (data, mode) {
        (Some(item), _) => Ok(Some(item)),
        (None, Mode::Replace) => Ok(None),
        (None, Mode::Merge) => Err(ApiError::NotFound(format!(
            "version {previous} of {} is no longer stored (its command row expired or was \
             deleted), so there is nothing to merge into: send the whole item with POST",
            generate_id(&input.pk, &input.sk)
        ))),
    }
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
    // The model checks the whole item of this version and computes its index keys (counted in
    // the size below).
    if let Some(entity) = entity {
        apply(entity, &mut item)?;
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
    Ok(item)
}
