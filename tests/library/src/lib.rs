//! The lending library's own code: the one rule its model does not declare (a command hook), its own
//! route and a sync target. The binaries `cqrs new` wrote hand them to the framework.
//!
//! Its other rules are declarations in `model.toml`, enforced by the framework in each command's
//! own transaction: a copy's (isbn, copyNo) is unique among the tenant's live copies
//! (`unique.copy_number`), a member holds at most 3 loans out (`limits.loans_out`: through
//! returns, soft deletes, restores and a loan moved to another member), a loan names a live
//! copy that is not a reference copy and a live member (`references.copy`, `references.member`),
//! and only a librarian creates, updates or deletes copies and loans (`roles`).

use cqrs_dynamo::ApiError;
use cqrs_dynamo::data_sync::{Change, DataWrite, SyncTarget, TargetError};
use cqrs_dynamo::hooks::{HookCommand, Hooks, limit_key};
use cqrs_dynamo::item::Item;
use cqrs_dynamo::model::Model;
use cqrs_dynamo::routes::{Caller, Json, Path, Problem, Store};

pub mod model;

/// The library's model (`model.toml`), compiled in.
pub const MODEL: &str = include_str!("../model.toml");

/// The migrations of the library's relational read model (`migrations/`), in order.
pub const MIGRATIONS: &[(u32, &str, &str)] = &[(
    1,
    "V1__model.sql",
    include_str!("../migrations/V1__model.sql"),
)];

/// The model's limit on a member's loans out (`limits.loans_out` of entity `loan`).
pub const LOANS_OUT: &str = "loan.loans_out";

/// The library as the framework runs it: its binaries (`src/bin/`) are one call each of
/// `cqrs_dynamo::run::<function>::<Library>`.
pub struct Library;

impl cqrs_dynamo::Service for Library {
    const MODEL: &'static str = MODEL;
    const MIGRATIONS: &'static [cqrs_dynamo::Migration] = MIGRATIONS;

    /// The library's command hooks, by entity: [`member_rules`] (one hook per entity).
    fn hooks() -> Hooks {
        Hooks::new().on_fn("member", member_rules)
    }
}

fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.attributes.get(name).and_then(|v| v.as_str())
}

/// Members: one with loans out is not deleted (409). The declared limit's member set is checked
/// empty in the delete's own transaction; a loan created at the same moment checks the member's
/// head and joins that set, so DynamoDB orders the two: no loan slips in beside the deletion.
pub fn member_rules(command: &mut HookCommand<'_>) -> Result<(), ApiError> {
    if command.is_delete() {
        let member: model::Member = command.typed()?;
        let holds = ApiError::refused(
            409,
            "urn:library:loans-out",
            "Loans out",
            format!(
                "member {} still holds loans: they come back first",
                member.member_id
            ),
        );
        command.check_limit(LOANS_OUT, &[&member.member_id], 0, holds)?;
    }
    Ok(())
}

/// The library's model, parsed once.
fn library_model() -> Result<&'static Model, ApiError> {
    static PARSED: std::sync::OnceLock<Result<Model, String>> = std::sync::OnceLock::new();
    PARSED
        .get_or_init(|| Model::parse(MODEL).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| ApiError::Internal(format!("model.toml: {e}")))
}

/// The library's own route, `GET /members/{memberId}/loans` (operation `memberLoans` of the route
/// function `member-loans`, declared in `model.toml`): how many loans a member of the caller's
/// tenant holds out, `{"memberId": "m1", "loansOut": 2}`, the size of the member's group of the
/// declared limit `loans_out` (its guard item, read strongly consistent; the key from the model,
/// never spelled out here). It is a binary of the service's own (`src/bin/member-loans.rs`) beside
/// the framework's, and shares their caller (JWT claims, or local headers), tenant and problem
/// documents: a caller that cannot be established is a 401, another path a 404, as the framework
/// answers them.
pub async fn member_loans(
    caller: Caller,
    store: Store,
    Path(member): Path<String>,
) -> Result<Json<serde_json::Value>, Problem> {
    let key = limit_key(library_model()?, &caller.tenant_code, LOANS_OUT, &[&member])
        .map_err(ApiError::Internal)?;
    let loans = store.limit_members(&key).await?;
    Ok(Json(
        serde_json::json!({"memberId": member, "loansOut": loans}),
    ))
}

/// One loan version as the library's feed tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoanEvent {
    /// The loan.
    pub loan_id: String,
    /// Its member.
    pub member_id: String,
    /// `out` or `returned`.
    pub status: String,
    /// The version.
    pub version: i64,
    /// Whether this version just became the data table's state (false on a replay, or for a
    /// version a newer one of the same batch overtook).
    pub current: bool,
}

/// The library's sync target: every loan version, after data-sync wrote it to the data and history
/// tables, to a sink (a JSON line on standard output in the function, its logs; a list in tests).
/// Registered in the service's own data-sync binary (`src/bin/data-sync.rs`).
pub struct LoanFeed {
    sink: std::sync::Arc<dyn Fn(&LoanEvent) + Send + Sync>,
}

impl LoanFeed {
    /// A feed into `sink`.
    pub fn new(sink: impl Fn(&LoanEvent) + Send + Sync + 'static) -> Self {
        LoanFeed {
            sink: std::sync::Arc::new(sink),
        }
    }

    /// A feed that prints one JSON line per loan version.
    pub fn printing() -> Self {
        LoanFeed::new(|event| {
            println!(
                "{}",
                serde_json::json!({"loanFeed": event.loan_id, "member": event.member_id,
                    "status": event.status, "version": event.version, "current": event.current})
            );
        })
    }
}

type TargetFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), TargetError>> + Send + 'a>>;

impl SyncTarget for LoanFeed {
    fn name(&self) -> &str {
        "loan-feed"
    }

    fn apply<'a>(&'a self, change: &'a Change) -> TargetFuture<'a> {
        Box::pin(async move {
            let item = &change.item;
            if item.entity.as_deref() == Some("loan") {
                (self.sink)(&LoanEvent {
                    loan_id: text(item, "loanId").unwrap_or_default().to_string(),
                    member_id: text(item, "memberId").unwrap_or_default().to_string(),
                    status: text(item, "status").unwrap_or_default().to_string(),
                    version: item.version,
                    current: matches!(change.data, DataWrite::Written),
                });
            }
            Ok(())
        })
    }
}
