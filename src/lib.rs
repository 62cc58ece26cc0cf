//! The example service's own code: what it tells the framework about itself ([`Shop`]: its model
//! and the PostgreSQL migrations of its relational read model, compiled into its `sql-sync`
//! function; `tests/model.rs` holds the list equal to `migrations/`), and the handler of its own
//! route, `GET /orders/summary` ([`order_summary`]).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use cqrs_model::{KeyValue, Model, ModelErrors, SortOp};
use cqrs_problem::ApiError;
use cqrs_routes::{Caller, Json, Problem, Store};
use cqrs_store::query::{PartitionQuery, SortKeyRange};

/// The service's model (`model.toml`), compiled in.
pub const MODEL: &str = include_str!("../model.toml");

/// The migrations of `migrations/`, in order: (version, file name, SQL). A new one
/// (`cqrs model sql --migrations migrations`) is added here too; the model test fails until it is.
pub const MIGRATIONS: &[(u32, &str, &str)] = &[(
    1,
    "V1__model.sql",
    include_str!("../migrations/V1__model.sql"),
)];

/// The example shop as the framework runs it: each of its binaries (`src/bin/`) is one call of
/// `cqrs_dynamo::run::<function>::<Shop>`. It has no rules in code (no hooks): its rules are those
/// `model.toml` declares.
pub struct Shop;

impl cqrs_dynamo::Service for Shop {
    const MODEL: &'static str = MODEL;
    const MIGRATIONS: &'static [cqrs_dynamo::Migration] = MIGRATIONS;
}

/// [`MODEL`], parsed once per container: the route plans its read with it.
static SHOP: LazyLock<Result<Model, ModelErrors>> = LazyLock::new(|| Model::parse(MODEL));

/// An order's statuses, as the model's `order.status` enum names them.
pub const ORDER_STATUSES: [&str; 5] = ["PENDING", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"];

// ANCHOR: order_summary
/// `GET /orders/summary` (operation `orderSummary` of the route function `order-summary`,
/// `src/bin/order-summary.rs`, declared in `model.toml`): the caller's tenant's orders counted by
/// status, and the sum of their `totalCents`, `{"orders": 3, "byStatus": {"PAID": 2, ...},
/// "totalCents": 12900, "withoutTotal": 0}`: what no access pattern answers directly. It reads the
/// tenant's `ORDER#` items of its order partition from the data table (every page; soft-deleted
/// and expired orders left out), as the framework's caller (401 without one) with its problem
/// documents (503 when DynamoDB throttles).
pub async fn order_summary(
    caller: Caller,
    store: Store,
) -> Result<Json<serde_json::Value>, Problem> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    // The tenant's orders as the model's `orders` pattern reads them: its partition and sort key
    // prefix come from the entity's key templates, never spelled out here.
    let internal = |detail: String| Problem(ApiError::Internal(detail));
    let model = SHOP
        .as_ref()
        .map_err(|e| internal(format!("the model: {e}")))?;
    let plan = model
        .query("orders", &caller.tenant_code, &[])
        .map_err(|e| internal(format!("the orders pattern: {e}")))?;
    let (pk, prefix) = match (plan.partitions.as_slice(), &plan.sort) {
        ([partition], Some(sort)) => match (partition.as_slice(), &sort.op) {
            ([KeyValue::S(pk)], SortOp::BeginsWith(prefix)) => (pk.clone(), prefix.clone()),
            _ => {
                return Err(internal(
                    "the orders pattern is not one partition by prefix".into(),
                ));
            }
        },
        _ => {
            return Err(internal(
                "the orders pattern is not one partition by prefix".into(),
            ));
        }
    };
    let mut query = PartitionQuery::new(pk)
        .range(SortKeyRange::Prefix(prefix))
        .limit(cqrs_store::query::MAX_PAGE_SIZE);
    query.live_at = Some(now);
    let mut by_status: BTreeMap<String, u64> =
        ORDER_STATUSES.iter().map(|s| (s.to_string(), 0)).collect();
    let (mut orders, mut total_cents, mut without_total) = (0u64, 0i64, 0u64);
    loop {
        let page = store.query_partition(&query).await?;
        for order in &page.items {
            orders += 1;
            let status = order.attributes.get("status").and_then(|v| v.as_str());
            *by_status
                .entry(status.unwrap_or("").to_string())
                .or_default() += 1;
            match order.attributes.get("totalCents").and_then(|v| v.as_i64()) {
                Some(cents) => total_cents = total_cents.saturating_add(cents),
                None => without_total += 1,
            }
        }
        match page.next {
            Some(next) => query.start = Some(next),
            None => break,
        }
    }
    Ok(Json(serde_json::json!({
        "orders": orders,
        "byStatus": by_status,
        "totalCents": total_cents,
        "withoutTotal": without_total,
    })))
}
// ANCHOR_END: order_summary
