//! `POST /master-data/copy`: copies the `common` tenant's master data (`MASTER#common` /
//! `DATA#category#code`) to a tenant, as ordinary versioned commands, one page per request.
//!
//! For each `common` item (soft-deleted ones are not copied) the tenant's item of the same key is:
//!
//! - **created** (version 1) when the tenant has none;
//! - **updated** (a new version with `common`'s content) when the tenant's latest version is an
//!   earlier copy and `common` has changed since;
//! - **unchanged** when its latest version is the copy of `common`'s current version (so a second
//!   copy writes nothing: the copy is idempotent);
//! - **kept** when the tenant wrote its latest version itself (an edit, a soft delete, or an item
//!   of its own from before any copy), when that version's command row is gone so the copy
//!   cannot tell, or when another request wrote the item while the copy ran (its version
//!   stands): the tenant's item is left alone and listed in the answer.
//!
//! A copied version is marked in its `source`: `COPY <common item id>@<common version>`; that,
//! written atomically with the version, is what the next copy reads. Beside every created or
//! updated item the copy writes (as a command too) the record `MASTER#tenant` /
//! `COPY#category#code` with `sourceId`, `sourceVersion`, `targetVersion` and `copiedAt`: the
//! key guide's `COPY#` layout, for people and reports (the decision never depends on it).
//!
//! One request handles at most `limit` items (default [`DEFAULT_LIMIT`]) and stops early, with a
//! cursor, when it has worked for [`TIME_BUDGET`]: the function's timeout is never reached. The
//! answer's `cursor` (the sort key of the last item handled) continues the copy; `null` means done.

use std::time::{Duration, Instant};

use cqrs_caller::Caller;
use cqrs_item::{Item, Map, Value};
use cqrs_keys::master::{COPY_PREFIX, copy_sk, data_sk_prefix, parse_data_sk, tenant_master_pk};
use cqrs_keys::{TENANT_COMMON, VERSION_LATEST, validate_sort_key};
use cqrs_problem::ApiError;
use cqrs_store::query::{PageKey, PartitionQuery, SortKeyRange};
use serde::{Deserialize, Serialize};

use crate::input::{CommandInput, Patch};
use crate::publish::{Audit, HeadKnowledge, Mode, Published, publish_command, read_latest};
use crate::{App, entity};

/// Items per request when the body names no `limit`.
pub const DEFAULT_LIMIT: usize = 25;

/// The most items one request handles.
pub const MAX_LIMIT: usize = 100;

/// How long one request works before it answers with a cursor (the function's timeout is 10 s).
pub const TIME_BUDGET: Duration = Duration::from_secs(5);

/// The body of `POST /master-data/copy` (every member optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CopyRequest {
    /// The tenant copied to; default the caller's.
    pub tenant_code: Option<String>,
    /// Only this category (`DATA#category#...`); default all master data.
    pub category: Option<String>,
    /// Continue after this item (the previous answer's `cursor`).
    pub cursor: Option<String>,
    /// Items handled by this request, 1 to [`MAX_LIMIT`].
    pub limit: Option<usize>,
}

/// An item the copy left to the tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptItem {
    /// The tenant's item id.
    pub id: String,
    /// Its latest version.
    pub version: i64,
    /// Who wrote that version (empty when its row is gone).
    pub updated_by: String,
    /// When.
    pub updated_at: String,
    /// Why it was kept.
    pub reason: &'static str,
}

/// What one copy request did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CopyReport {
    /// The tenant copied to.
    pub tenant_code: String,
    /// Items created in the tenant (ids).
    pub created: Vec<String>,
    /// Earlier copies brought up to `common`'s current version (ids).
    pub updated: Vec<String>,
    /// Items already at `common`'s current version.
    pub unchanged: usize,
    /// Items the tenant wrote itself, left as they are.
    pub kept: Vec<KeptItem>,
    /// Continue with this cursor; `null` when the copy is complete.
    pub cursor: Option<String>,
}

/// One source item's fate.
enum Outcome {
    Created(String),
    Updated(String),
    Unchanged,
    Kept(KeptItem),
}

/// The `source` marking a copied version of `item`.
fn marker(item: &Item) -> String {
    format!("{COPY_PREFIX} {}@{}", item.id, item.version)
}

/// Runs one page of a copy for `caller`.
pub async fn copy_master_data(
    app: &App,
    caller: &Caller,
    request: CopyRequest,
    audit: &Audit,
) -> Result<CopyReport, ApiError> {
    let started = Instant::now();
    let tenant = request
        .tenant_code
        .clone()
        .unwrap_or_else(|| caller.tenant_code.clone());
    let target_pk = tenant_master_pk(&tenant).map_err(|e| ApiError::bad_field("tenantCode", e))?;
    if tenant == TENANT_COMMON {
        return Err(ApiError::bad_field(
            "tenantCode",
            "the copy is from common: name another tenant",
        ));
    }
    caller.authorize_write(&target_pk)?;
    let limit = match request.limit {
        None => DEFAULT_LIMIT,
        Some(n) if (1..=MAX_LIMIT).contains(&n) => n,
        Some(n) => {
            return Err(ApiError::bad_field(
                "limit",
                format!("{n}: 1 to {MAX_LIMIT}"),
            ));
        }
    };
    let prefix = data_sk_prefix(request.category.as_deref())
        .map_err(|e| ApiError::bad_field("category", e))?;
    let source_pk =
        tenant_master_pk(TENANT_COMMON).map_err(|e| ApiError::Internal(e.to_string()))?;
    let start = match &request.cursor {
        None => None,
        Some(sk) => {
            if !sk.starts_with(&prefix) || validate_sort_key(sk).is_err() {
                return Err(ApiError::bad_field(
                    "cursor",
                    "is not a cursor of this copy (give the previous answer's cursor, with the same category)",
                ));
            }
            Some(PageKey {
                pk: source_pk.clone(),
                sk: sk.clone(),
            })
        }
    };
    // A `common` item expired now is not copied: it is as absent as on the query side.
    let mut query = PartitionQuery::new(source_pk)
        .range(SortKeyRange::Prefix(prefix))
        .limit(limit)
        .live_at(chrono::Utc::now().timestamp());
    query.start = start;
    let page = app.store.query_partition(&query).await?;
    let mut report = CopyReport {
        tenant_code: tenant.clone(),
        ..CopyReport::default()
    };
    let mut last = None;
    let mut stopped_early = false;
    for source in &page.items {
        if started.elapsed() > TIME_BUDGET {
            stopped_early = true;
            break;
        }
        match copy_one(app, &tenant, &target_pk, source, audit).await? {
            Outcome::Created(id) => report.created.push(id),
            Outcome::Updated(id) => report.updated.push(id),
            Outcome::Unchanged => report.unchanged += 1,
            Outcome::Kept(kept) => report.kept.push(kept),
        }
        last = Some(source.sk.clone());
    }
    report.cursor = if stopped_early {
        last.or(request.cursor)
    } else {
        page.next.map(|key| key.sk)
    };
    Ok(report)
}

/// Copies one `common` item to the tenant, unless the tenant wrote its own.
async fn copy_one(
    app: &App,
    tenant: &str,
    target_pk: &str,
    source: &Item,
    audit: &Audit,
) -> Result<Outcome, ApiError> {
    let sk = source.sk.as_str();
    let id = cqrs_keys::generate_id(target_pk, sk);
    let heads = crate::heads::knowledge(app).await?;
    let latest = read_latest(&app.store, target_pk, sk, heads).await?;
    let previous = match latest {
        None => None,
        Some(version) => {
            let row = app.store.get_command(target_pk, sk, version).await?;
            let kept = |row: Option<&Item>, reason| {
                Outcome::Kept(KeptItem {
                    id: id.clone(),
                    version,
                    updated_by: row.map(|r| r.updated_by.clone()).unwrap_or_default(),
                    updated_at: row.map(|r| r.updated_at.clone()).unwrap_or_default(),
                    reason,
                })
            };
            let Some(row) = row else {
                return Ok(kept(
                    None,
                    "its latest version's command row is gone: who wrote it is unknown",
                ));
            };
            let copied_from = row
                .source
                .strip_prefix(COPY_PREFIX)
                .and_then(|rest| rest.strip_prefix(' '))
                .and_then(|rest| rest.rsplit_once('@'))
                .filter(|(from, _)| *from == source.id);
            match copied_from {
                None => return Ok(kept(Some(&row), "the tenant wrote its latest version")),
                Some((_, v)) if v == source.version.to_string() => return Ok(Outcome::Unchanged),
                Some(_) => Some(version),
            }
        }
    };
    let mut input = CommandInput {
        entity: None,
        pk: target_pk.to_string(),
        sk: sk.to_string(),
        version: previous.unwrap_or(0),
        code: Some(source.code.clone()),
        name: Some(source.name.clone()),
        attributes: Patch::Value(source.attributes.clone()),
        is_deleted: Some(false),
        ttl: Patch::Absent,
        sequence: None,
        seq: None,
        source: Some(marker(source)),
        fresh_id: false,
    };
    // The latest version just read is what the write builds on: no second read of the head.
    let written = match publish(app, &mut input, audit, HeadKnowledge::Latest(latest)).await {
        Ok(version) => version,
        // Someone wrote the tenant's item between our read and our write: theirs stands.
        Err(ApiError::VersionConflict {
            current_version, ..
        }) => {
            return Ok(Outcome::Kept(KeptItem {
                id,
                version: current_version.unwrap_or_default(),
                updated_by: String::new(),
                updated_at: String::new(),
                reason: "written concurrently while the copy ran: copy again to see who wrote it",
            }));
        }
        Err(other) => return Err(other),
    };
    // The COPY# record, for people and reports.
    if let Some((category, code)) = parse_data_sk(sk) {
        let record_sk = copy_sk(category, code).map_err(|e| ApiError::Internal(e.to_string()))?;
        let mut attributes = Map::new();
        attributes.insert("category".into(), Value::String(category.into()));
        attributes.insert("code".into(), Value::String(code.into()));
        attributes.insert("sourceId".into(), Value::String(source.id.clone()));
        attributes.insert("sourceVersion".into(), Value::Number(source.version.into()));
        attributes.insert("targetVersion".into(), Value::Number(written.into()));
        attributes.insert("copiedAt".into(), Value::String(audit.now.clone()));
        let mut record = CommandInput {
            sk: record_sk,
            version: VERSION_LATEST,
            code: Some(code.to_string()),
            name: Some(format!("copy of {}", source.id)),
            attributes: Patch::Value(attributes),
            source: Some(marker(source)),
            ..input
        };
        publish(app, &mut record, audit, heads).await?;
    }
    tracing::info!(tenant, %id, version = written, "master data copied");
    Ok(match previous {
        None => Outcome::Created(id),
        Some(_) => Outcome::Updated(id),
    })
}

/// Publishes one copy command through the model and the normal versioned path; answers the
/// version written.
async fn publish(
    app: &App,
    input: &mut CommandInput,
    audit: &Audit,
    heads: HeadKnowledge,
) -> Result<i64, ApiError> {
    let entity = entity::resolve(&app.model, input, &audit.caller, Mode::Replace, &audit.now)?;
    // The copied entity's write roles: a create or an update (the copy never deletes).
    if let Some(model_entity) = entity {
        let op = if input.version == 0 {
            cqrs_model::WriteOp::Create
        } else {
            cqrs_model::WriteOp::Update
        };
        crate::roles::check(model_entity.entity, &audit.caller, op)?;
    }
    crate::ttl_policy::refuse_policy_write(&app.model, input)?;
    crate::ttl_policy::apply(app, input, entity).await?;
    crate::ttl_policy::refuse_policy_found(entity, input)?;
    // The entity's command hook applies to copies too: no path writes around a service's rule.
    let rules = app.rules(entity);
    match publish_command(&app.store, input, Mode::Replace, audit, rules, None, heads).await? {
        Published::Stored(item) => Ok(item.version),
        Published::Replay(_) | Published::KeyTaken => Err(ApiError::Internal(
            "an idempotency key was taken without one being used".into(),
        )),
    }
}
