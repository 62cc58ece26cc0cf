//! Guards: what a command's transaction checks or keeps besides its version, its head and its
//! idempotency record. A service's rule across items (a command hook's) is racy when it is read
//! through an index and then written on; a guard makes it part of the write instead: the version is
//! written only if every guard holds, in the same `TransactWriteItems`, and nothing is written when
//! one does not ([`crate::StoreError::GuardFailed`] names which).
//!
//! - [`Guard::counter`]: a counter of the tenant's, kept by the framework in the idempotency table
//!   (`COUNTER#tenant#name`, [`cqrs_keys::counter_key`]), moved by `delta` only if it stays within
//!   `0..=at_most`: "a member holds at most 3 loans" is `+1, at most 3` on the loan's create and
//!   `-1` on its return.
//! - [`Guard::item`]: a condition check or write of the service's own, as DynamoDB's
//!   `TransactWriteItem`, on a table of the service's.

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem, Update};

use crate::StoreError;

/// The attribute that holds a counter's value.
pub const COUNTER_VALUE: &str = "n";

/// The longest counter name accepted, in bytes.
pub const MAX_COUNTER_NAME_BYTES: usize = 512;

/// One more condition (and maybe write) of a command's transaction.
///
/// ```
/// let guard = cqrs_store::guard::Guard::counter("t1", "loans#m1", 1, 3).unwrap();
/// assert!(matches!(guard, cqrs_store::guard::Guard::Counter { delta: 1, at_most: 3, .. }));
/// ```
#[derive(Debug, Clone)]
pub enum Guard {
    /// The tenant's counter `name` moves by `delta` if it stays within `0..=at_most` (a counter
    /// never written is 0); `delta = 0` only checks it.
    Counter {
        /// The tenant whose counter it is.
        tenant: String,
        /// The counter's name within the tenant.
        name: String,
        /// How much the write moves it.
        delta: i64,
        /// The largest value it may have after the write.
        at_most: i64,
    },
    /// A `TransactWriteItem` of the service's own (a `ConditionCheck`, `Put`, `Update` or `Delete`
    /// on one of its tables).
    Item(Box<TransactWriteItem>),
}

impl Guard {
    /// A counter guard; refuses an empty or over-long name, a name with a control character, and
    /// a negative `at_most`.
    ///
    /// ```
    /// use cqrs_store::guard::Guard;
    /// assert!(Guard::counter("t1", "loans#m1", -1, 3).is_ok());
    /// assert!(Guard::counter("t1", "", 1, 3).is_err());
    /// assert!(Guard::counter("t1", "a", 1, -1).is_err());
    /// ```
    pub fn counter(
        tenant: impl Into<String>,
        name: impl Into<String>,
        delta: i64,
        at_most: i64,
    ) -> Result<Guard, String> {
        let name = name.into();
        if name.is_empty() || name.len() > MAX_COUNTER_NAME_BYTES {
            return Err(format!(
                "a counter's name is 1 to {MAX_COUNTER_NAME_BYTES} bytes, not {}",
                name.len()
            ));
        }
        if name.chars().any(char::is_control) {
            return Err(format!("counter name {name:?} holds a control character"));
        }
        if at_most < 0 {
            return Err(format!(
                "a counter is never below 0, so at_most {at_most} cannot hold"
            ));
        }
        Ok(Guard::Counter {
            tenant: tenant.into(),
            name,
            delta,
            at_most,
        })
    }

    /// A guard of the service's own.
    ///
    /// ```
    /// use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem};
    /// let check = ConditionCheck::builder()
    ///     .table_name("members")
    ///     .key("pk", AttributeValue::S("MEMBER#t1".into()))
    ///     .key("sk", AttributeValue::S("m1".into()))
    ///     .condition_expression("attribute_exists(pk)")
    ///     .build()
    ///     .unwrap();
    /// let guard = cqrs_store::guard::Guard::item(TransactWriteItem::builder().condition_check(check).build());
    /// assert!(matches!(guard, cqrs_store::guard::Guard::Item(_)));
    /// ```
    pub fn item(item: TransactWriteItem) -> Guard {
        Guard::Item(Box::new(item))
    }

    /// Whether the guard can never hold, so that the write need not be tried: a counter moved by
    /// more than its bound allows from 0.
    ///
    /// ```
    /// use cqrs_store::guard::Guard;
    /// assert!(Guard::counter("t1", "a", 4, 3).unwrap().never_holds());
    /// assert!(!Guard::counter("t1", "a", 3, 3).unwrap().never_holds());
    /// ```
    pub fn never_holds(&self) -> bool {
        matches!(self, Guard::Counter { delta, at_most, .. } if *delta > *at_most)
    }

    /// The guard as an item of the transaction; `counters` is the table counters live in (the
    /// idempotency table).
    pub(crate) fn to_transact_item(&self, counters: &str) -> Result<TransactWriteItem, StoreError> {
        let build = |e: aws_sdk_dynamodb::error::BuildError| StoreError::Dynamo(e.to_string());
        match self {
            Guard::Item(item) => Ok((**item).clone()),
            Guard::Counter {
                tenant,
                name,
                delta,
                at_most,
            } => {
                let key = AttributeValue::S(cqrs_keys::counter_key(tenant, name));
                if *delta == 0 {
                    let check = ConditionCheck::builder()
                        .table_name(counters)
                        .key("pk", key)
                        .condition_expression("attribute_not_exists(#n) OR #n <= :most")
                        .expression_attribute_names("#n", COUNTER_VALUE)
                        .expression_attribute_values(
                            ":most",
                            AttributeValue::N(at_most.to_string()),
                        )
                        .build()
                        .map_err(build)?;
                    return Ok(TransactWriteItem::builder().condition_check(check).build());
                }
                // After the write the counter is `n + delta`: within 0..=at_most when
                // n <= at_most - delta and n >= -delta (a counter never written is 0).
                let condition = if *delta > 0 {
                    "attribute_not_exists(#n) OR #n <= :bound"
                } else {
                    "#n >= :bound"
                };
                let bound = if *delta > 0 {
                    at_most - delta
                } else {
                    delta.checked_neg().unwrap_or(i64::MAX)
                };
                let update = Update::builder()
                    .table_name(counters)
                    .key("pk", key)
                    .update_expression("ADD #n :delta")
                    .condition_expression(condition)
                    .expression_attribute_names("#n", COUNTER_VALUE)
                    .expression_attribute_values(":delta", AttributeValue::N(delta.to_string()))
                    .expression_attribute_values(":bound", AttributeValue::N(bound.to_string()))
                    .build()
                    .map_err(build)?;
                Ok(TransactWriteItem::builder().update(update).build())
            }
        }
    }
}
