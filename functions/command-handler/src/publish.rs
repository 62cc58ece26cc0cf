//! Publishing a command: choosing the version to write, building the item with its audit fields,
//! and writing it with one conditional put (with the idempotency record, when there is one).

use cqrs_caller::Caller;
use cqrs_item::{Item, MAX_ITEM_BYTES, check_limits};
use cqrs_keys::{
    MAX_SORT_KEY_BYTES, VERSION_LATEST, add_sort_key_version, generate_id, parse_entity_key,
    tenant_code,
};
use cqrs_problem::ApiError;
use cqrs_store::{IdempotencyRecord, Store, StoreError};

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
pub async fn publish_command(
    store: &Store,
    input: &CommandInput,
    mode: Mode,
    audit: &Audit,
    idempotency: Option<&IdempotencyRecord>,
) -> Result<Published, ApiError> {
    let attempts = if input.version == VERSION_LATEST {
        LATEST_RETRIES
    } else {
        1
    };
    let mut last_conflict = None;
    for attempt in 0..attempts {
        if attempt > 0 {
            // Lost a race for the latest version: let the winner's write settle, with jitter so
            // that the losers do not collide again in lockstep.
            tokio::time::sleep(backoff(attempt)).await;
        }
        let base = load_base(store, input, mode).await?;
        let item = build_item(input, mode, base.as_ref(), audit)?;
        let record = idempotency.map(|r| IdempotencyRecord {
            item_pk: item.pk.clone(),
            item_sk: item.sk.clone(),
            item_id: item.id.clone(),
            version: item.version,
            ..r.clone()
        });
        match store.put_command(&item, record.as_ref()).await {
            Ok(()) => return Ok(Published::Stored(Box::new(item))),
            Err(StoreError::AlreadyExists { .. }) => last_conflict = Some(item.version),
            Err(StoreError::IdempotencyKeyTaken(_)) => return Ok(Published::KeyTaken),
            Err(other) => return Err(store_error(other)),
        }
    }
    let written = last_conflict.unwrap_or_default();
    let current = store
        .latest_command_version(&input.pk, &input.sk)
        .await
        .ok()
        .flatten();
    let id = generate_id(&input.pk, &input.sk);
    let detail = if input.version == 0 {
        format!("{id} already exists: version 0 only creates")
    } else if input.version == VERSION_LATEST {
        format!(
            "{id}: lost the race for the latest version {attempts} times, last at version {written}"
        )
    } else {
        format!(
            "version {written} of {id} already exists: the command was based on version {}",
            input.version
        )
    };
    Err(ApiError::VersionConflict {
        detail,
        current_version: current,
    })
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

/// The stored version the command builds on: none for a create, version `N`, or the latest.
async fn load_base(
    store: &Store,
    input: &CommandInput,
    mode: Mode,
) -> Result<Option<Item>, ApiError> {
    let id = || generate_id(&input.pk, &input.sk);
    match input.version {
        0 => Ok(None),
        VERSION_LATEST => {
            let Some(latest) = store
                .latest_command_version(&input.pk, &input.sk)
                .await
                .map_err(store_error)?
            else {
                return match mode {
                    Mode::Replace => Ok(None),
                    Mode::Merge => Err(ApiError::NotFound(format!(
                        "{} has no version to merge into",
                        id()
                    ))),
                };
            };
            // The latest version may only be missing here if it was deleted under us (TTL).
            store
                .get_command(&input.pk, &input.sk, latest)
                .await
                .map_err(store_error)?
                .map(Some)
                .ok_or_else(|| ApiError::NotFound(format!("version {latest} of {} vanished", id())))
        }
        version => store
            .get_command(&input.pk, &input.sk, version)
            .await
            .map_err(store_error)?
            .map(Some)
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "version {version} of {} does not exist: a command names the version it builds on",
                    id()
                ))
            }),
    }
}

/// The new version: the command's fields (or the base merged with them), the next version number,
/// and the audit fields.
fn build_item(
    input: &CommandInput,
    mode: Mode,
    base: Option<&Item>,
    audit: &Audit,
) -> Result<Item, ApiError> {
    let version = base.map_or(1, |b| b.version + 1);
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
            base.and_then(|b| b.seq),
        ),
    };
    let item = Item {
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
        source: mode.source().to_string(),
        request_id: audit.request_id.clone(),
        created_at,
        created_by,
        created_ip,
        updated_at: audit.now.clone(),
        updated_by: audit.caller.user_id.clone(),
        updated_ip: audit.ip.clone(),
        cpk: None,
        csk: None,
    };
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

/// A store failure as the HTTP side answers it.
pub fn store_error(error: StoreError) -> ApiError {
    match error {
        StoreError::Throttled(detail) => ApiError::Unavailable(detail),
        other => ApiError::Internal(other.to_string()),
    }
}
