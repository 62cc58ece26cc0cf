//! The lending library's own code: its rules on loans and members (command hooks) and a sync
//! target. The binaries `cqrs new` wrote hand them to the framework.

use cqrs_command_handler::hooks::{CommandHook, HookCommand, HookFuture, Hooks};
use cqrs_problem::ApiError;
use cqrs_routes::{Caller, Json, Path, Problem, Store};

/// The library's model (`model.toml`), compiled in.
pub const MODEL: &str = include_str!("../model.toml");

/// The migrations of the library's relational read model (`migrations/`), in order.
pub const MIGRATIONS: &[(u32, &str, &str)] = &[(
    1,
    "V1__model.sql",
    include_str!("../migrations/V1__model.sql"),
)];

/// The library's command hooks, by entity.
pub fn hooks() -> Hooks {
    Hooks::new().on("loan", LoanRules).on("member", MemberRules)
}

fn text<'a>(item: &'a cqrs_item::Item, name: &str) -> Option<&'a str> {
    item.attributes.get(name).and_then(|v| v.as_str())
}

/// The counter of a member's loans out.
fn loans_out(member: &str) -> String {
    format!("loans#{member}")
}

/// Loans: a reference copy (`REF-...`) is never lent (422); a member holds at most 3 loans out, kept
/// by a counter in each loan's own transaction (409 when a fourth would go out).
pub struct LoanRules;

impl CommandHook for LoanRules {
    fn before_write<'a>(&'a self, command: &'a mut HookCommand<'_>) -> HookFuture<'a> {
        Box::pin(async move {
            let item = command.item();
            let copy = text(item, "copyId").unwrap_or_default().to_string();
            let member = text(item, "memberId").unwrap_or_default().to_string();
            let is_out = text(item, "status") == Some("out");
            let was_out = command.stored().and_then(|s| text(s, "status")) == Some("out");
            if is_out && copy.starts_with("REF-") {
                return Err(ApiError::refused(
                    422,
                    "urn:library:reference-copy",
                    "Reference copy",
                    format!("copy {copy} is for reading in the library"),
                ));
            }
            if is_out && !was_out {
                let full = ApiError::refused(
                    409,
                    "urn:library:loan-limit",
                    "Loan limit",
                    format!("member {member} already holds 3 loans"),
                );
                command.counter(&loans_out(&member), 1, 3, full)?;
            } else if was_out && !is_out {
                let broken = ApiError::Internal(format!("{} went below 0", loans_out(&member)));
                command.counter(&loans_out(&member), -1, 3, broken)?;
            }
            Ok(())
        })
    }
}

/// Members: one with loans out is not deleted (409), checked by the same counter in the delete's
/// own transaction.
pub struct MemberRules;

impl CommandHook for MemberRules {
    fn before_write<'a>(&'a self, command: &'a mut HookCommand<'_>) -> HookFuture<'a> {
        Box::pin(async move {
            if command.item().is_deleted {
                let member = text(command.item(), "memberId")
                    .unwrap_or_default()
                    .to_string();
                let holds = ApiError::refused(
                    409,
                    "urn:library:loans-out",
                    "Loans out",
                    format!("member {member} still holds loans: they come back first"),
                );
                command.counter(&loans_out(&member), 0, 0, holds)?;
            }
            Ok(())
        })
    }
}

/// The library's own route, `GET /members/{memberId}/loans` (operation `memberLoans` of the route
/// function `member-loans`, declared in `model.toml`): how many loans a member of the caller's
/// tenant holds out, `{"memberId": "m1", "loansOut": 2}`, the counter the loan rules keep. It is a
/// binary of the service's own (`src/bin/member-loans.rs`) beside the framework's, and shares their
/// caller (JWT claims, or local headers), tenant and problem documents: a caller that cannot be
/// established is a 401, another path a 404, as the framework answers them.
pub async fn member_loans(
    caller: Caller,
    store: Store,
    Path(member): Path<String>,
) -> Result<Json<serde_json::Value>, Problem> {
    let loans = store
        .counter(&caller.tenant_code, &loans_out(&member))
        .await?;
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

type TargetFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<(), cqrs_data_sync::TargetError>> + Send + 'a>,
>;

impl cqrs_data_sync::SyncTarget for LoanFeed {
    fn name(&self) -> &str {
        "loan-feed"
    }

    fn apply<'a>(&'a self, change: &'a cqrs_data_sync::Change) -> TargetFuture<'a> {
        Box::pin(async move {
            let item = &change.item;
            if item.entity.as_deref() == Some("loan") {
                (self.sink)(&LoanEvent {
                    loan_id: text(item, "loanId").unwrap_or_default().to_string(),
                    member_id: text(item, "memberId").unwrap_or_default().to_string(),
                    status: text(item, "status").unwrap_or_default().to_string(),
                    version: item.version,
                    current: matches!(change.data, cqrs_store::projection::DataWrite::Written),
                });
            }
            Ok(())
        })
    }
}
