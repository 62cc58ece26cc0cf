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
//! - The moves of the model's declared constraints ([`crate::constraints::plan`]), on guard items
//!   of the idempotency table ([`cqrs_keys::guard_key`]): [`Guard::Claim`] / [`Guard::Release`] of a
//!   unique value (the holder kept in the item, a claim conditional on the key being free or the
//!   owner's), [`Guard::Join`] / [`Guard::Leave`] of a bounded group (a string set of member
//!   tokens, a join bounded and idempotent), [`Guard::RequireHead`] (a referenced item exists,
//!   is live and its head's mirror satisfies a condition: [`HeadMirror`], [`HeadRefusal`]) and
//!   [`Guard::CheckMembers`] (a hook's check of a group's size). Their failures return the item
//!   the condition found ([`crate::StoreError::GuardFailed`]'s `old`).
//!
//! **What a transaction takes.** DynamoDB takes at most [`MAX_TRANSACTION_ITEMS`] (100) items in a
//! `TransactWriteItems`, and at most one operation on any one item. A command writes
//! [`COMMAND_ITEMS`] (3) itself: its version row, its head and its idempotency record (counted
//! whether or not the request carries an `Idempotency-Key`, so that what a hook may add never
//! depends on the client). So [`prepare`] merges the counters of one name into one guard (their
//! deltas summed, the tightest bound kept, with its refusal), then refuses more than
//! [`MAX_GUARDS`] (97) guards, and any guard on an item the transaction already touches (the
//! version row, the head, the idempotency record, or another guard's item): a fault of the hook
//! that added them ([`GuardError`]), found before anything is sent.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};

use crate::{StoreError, Tables};

/// The most items DynamoDB takes in one `TransactWriteItems`.
///
/// ```
/// assert_eq!(cqrs_store::guard::MAX_TRANSACTION_ITEMS, 100);
/// ```
pub const MAX_TRANSACTION_ITEMS: usize = 100;

/// The items a command's transaction writes itself: its version row, its head and its idempotency
/// record (counted even for a request without an `Idempotency-Key`).
///
/// ```
/// assert_eq!(cqrs_store::guard::COMMAND_ITEMS, 3);
/// ```
pub const COMMAND_ITEMS: usize = 3;

/// The most guards one command takes, after [`prepare`] merged the counters of one name:
/// [`MAX_TRANSACTION_ITEMS`] less [`COMMAND_ITEMS`].
///
/// ```
/// assert_eq!(cqrs_store::guard::MAX_GUARDS, 97);
/// ```
pub const MAX_GUARDS: usize = MAX_TRANSACTION_ITEMS - COMMAND_ITEMS;

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
    /// A unique value is claimed by the item `owner_pk` / `owner_sk` (its base sort key): a `Put`
    /// of the guard item `key` (a [`cqrs_keys::guard_key`]) holding the constraint's name (`c`),
    /// the values (`v`) and the owner (`o`, `s`), if the key is free or already the owner's (a
    /// claim by its owner twice holds). When it fails, the cancellation reason carries the
    /// holder ([`crate::StoreError::GuardFailed`]'s `old`).
    Claim {
        /// The guard item's key.
        key: String,
        /// The owner's partition key.
        owner_pk: String,
        /// The owner's base sort key (no version).
        owner_sk: String,
        /// The values claimed, kept readable in the guard item.
        values: Vec<String>,
        /// The constraint, `entity.name`.
        constraint: String,
    },
    /// A unique value is released by its owner: a `Delete` of `key` if it is absent or the
    /// owner's. Fails only when another item holds it (drift, which `verify` lists).
    Release {
        /// The guard item's key.
        key: String,
        /// The owner's partition key.
        owner_pk: String,
        /// The owner's base sort key (no version).
        owner_sk: String,
    },
    /// An item joins a bounded group: `ADD` its `token` ([`cqrs_keys::member_token`]) to the
    /// string set `m` of `key` if the set has fewer than `at_most` members or already holds the
    /// token (a join is idempotent).
    Join {
        /// The guard item's key.
        key: String,
        /// The member's token.
        token: String,
        /// The most members the group may have.
        at_most: u32,
        /// The group's values, kept readable in the guard item.
        values: Vec<String>,
        /// The constraint, `entity.name`.
        constraint: String,
    },
    /// An item leaves a bounded group: `DELETE` its token from the set (no condition: leaving a
    /// group one is not in is a no-op; an emptied set disappears).
    Leave {
        /// The guard item's key.
        key: String,
        /// The member's token.
        token: String,
    },
    /// The item `pk` / `sk` exists (its head does) and its head's mirror satisfies `condition`:
    /// a `ConditionCheck` on its head, nothing written. When it fails, the cancellation reason
    /// carries the head, which [`HeadRefusal::of`] reads (missing, deleted, condition, stale).
    RequireHead {
        /// The target's partition key.
        pk: String,
        /// The target's sort key (any version is removed).
        sk: String,
        /// What the target's head must show.
        condition: HeadCondition,
    },
    /// A bounded group has at most `at_most` members (0: none): a `ConditionCheck` on `key`.
    CheckMembers {
        /// The guard item's key.
        key: String,
        /// The most members it may have.
        at_most: u32,
    },
}

/// One mirrored attribute value, as its text: a string as it is, a number as its decimal text, a
/// boolean as `true` / `false` (what `cqrs_model::Condition` compares).
pub type MirrorValue = String;

/// What a referenced item's head mirrors of its latest version, written with it on the head by
/// [`crate::Store::write_version_constrained`]: `mv` (the version the mirror describes, the
/// version written), `del` (whether it is soft-deleted) and `m` (the attributes some reference's
/// condition names, as text; an absent attribute is absent from `m`).
///
/// ```
/// let mirror = cqrs_store::guard::HeadMirror {
///     is_deleted: false,
///     attributes: [("reference".to_string(), "true".to_string())].into(),
/// };
/// assert_eq!(mirror.attributes["reference"], "true");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeadMirror {
    /// Whether the version is soft-deleted.
    pub is_deleted: bool,
    /// The mirrored attributes, by name.
    pub attributes: BTreeMap<String, MirrorValue>,
}

/// What a [`Guard::RequireHead`] asks of the target's head. With `live` or any `when` / `unless`
/// the head's mirror must describe its latest version (`mv = latest`), else the check fails as
/// stale ([`HeadRefusal::Stale`]); with none of them the head's existence alone is checked.
///
/// ```
/// use cqrs_store::guard::HeadCondition;
/// let not_a_reference_copy = HeadCondition {
///     live: true,
///     unless: [("reference".to_string(), vec!["true".to_string()])].into(),
///     ..HeadCondition::default()
/// };
/// assert!(not_a_reference_copy.needs_mirror());
/// assert!(!HeadCondition::default().needs_mirror());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeadCondition {
    /// The target is not soft-deleted.
    pub live: bool,
    /// Each attribute holds one of its values.
    pub when: BTreeMap<String, Vec<MirrorValue>>,
    /// No attribute holds one of its values (an absent attribute holds none).
    pub unless: BTreeMap<String, Vec<MirrorValue>>,
}

impl HeadCondition {
    /// Whether the check reads the head's mirror (and so needs it current).
    pub fn needs_mirror(&self) -> bool {
        self.live || !self.when.is_empty() || !self.unless.is_empty()
    }

    /// The condition expression with its names and values.
    fn expression(&self) -> ConditionParts {
        let mut parts = vec!["attribute_exists(pk)".to_string()];
        let mut names = Vec::new();
        let mut values = Vec::new();
        if self.needs_mirror() {
            names.push(("#mv".to_string(), MIRROR_VERSION.to_string()));
            names.push(("#latest".to_string(), "latest".to_string()));
            parts.push("#mv = #latest".to_string());
        }
        if self.live {
            names.push(("#del".to_string(), MIRROR_DELETED.to_string()));
            values.push((":false".to_string(), AttributeValue::Bool(false)));
            parts.push("#del = :false".to_string());
        }
        if !self.when.is_empty() || !self.unless.is_empty() {
            names.push(("#m".to_string(), MIRROR_ATTRIBUTES.to_string()));
        }
        for (kind, map) in [("w", &self.when), ("u", &self.unless)] {
            for (i, (attribute, allowed)) in map.iter().enumerate() {
                let name = format!("#{kind}{i}");
                names.push((name.clone(), attribute.clone()));
                let list: Vec<String> = allowed
                    .iter()
                    .enumerate()
                    .map(|(j, value)| {
                        let placeholder = format!(":{kind}{i}_{j}");
                        values.push((placeholder.clone(), AttributeValue::S(value.clone())));
                        placeholder
                    })
                    .collect();
                let test = if list.is_empty() {
                    // No value listed: `when` cannot hold, `unless` always does.
                    if kind == "w" {
                        "attribute_not_exists(pk)".to_string()
                    } else {
                        continue;
                    }
                } else {
                    format!("#m.{name} IN ({})", list.join(", "))
                };
                parts.push(if kind == "w" {
                    test
                } else {
                    format!("NOT ({test})")
                });
            }
        }
        (parts.join(" AND "), names, values)
    }
}

/// A condition expression, its attribute names and its values.
type ConditionParts = (String, Vec<(String, String)>, Vec<(String, AttributeValue)>);

/// Why a [`Guard::RequireHead`] failed, read from the head the cancellation reason returned
/// (`ALL_OLD`), with no read.
///
/// ```
/// use std::collections::HashMap;
/// use aws_sdk_dynamodb::types::AttributeValue;
/// use cqrs_store::guard::HeadRefusal;
///
/// assert_eq!(HeadRefusal::of(None), HeadRefusal::Missing);
/// let head = |mv: &str, del: bool| -> HashMap<String, AttributeValue> {
///     [
///         ("pk".to_string(), AttributeValue::S("HEAD#COPY#t1@C1".into())),
///         ("latest".to_string(), AttributeValue::N("3".into())),
///         ("mv".to_string(), AttributeValue::N(mv.into())),
///         ("del".to_string(), AttributeValue::Bool(del)),
///     ]
///     .into()
/// };
/// assert_eq!(HeadRefusal::of(Some(&head("2", false))), HeadRefusal::Stale { latest: Some(3) });
/// assert_eq!(HeadRefusal::of(Some(&head("3", true))), HeadRefusal::Deleted);
/// assert_eq!(HeadRefusal::of(Some(&head("3", false))), HeadRefusal::Condition);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadRefusal {
    /// The target has no head: it does not exist.
    Missing,
    /// The head's mirror does not describe its latest version (a head raised by
    /// [`crate::Store::raise_head`], written by an older release or by a write without the
    /// mirror): `cqrs rebuild --constraints` writes it.
    Stale {
        /// The head's latest version.
        latest: Option<i64>,
    },
    /// The target's latest version is soft-deleted.
    Deleted,
    /// The target's latest version does not satisfy the condition.
    Condition,
}

impl HeadRefusal {
    /// The reason of a failed [`Guard::RequireHead`] from the head it returned (`None`: none).
    pub fn of(old: Option<&HashMap<String, AttributeValue>>) -> HeadRefusal {
        let Some(head) = old else {
            return HeadRefusal::Missing;
        };
        let number = |name: &str| match head.get(name) {
            Some(AttributeValue::N(n)) => n.parse::<i64>().ok(),
            _ => None,
        };
        let latest = number("latest");
        if latest.is_none() || number(MIRROR_VERSION) != latest {
            return HeadRefusal::Stale { latest };
        }
        if matches!(head.get(MIRROR_DELETED), Some(AttributeValue::Bool(true))) {
            return HeadRefusal::Deleted;
        }
        HeadRefusal::Condition
    }
}

/// The head attribute that holds the version its mirror describes.
pub const MIRROR_VERSION: &str = "mv";
/// The head attribute that holds whether that version is soft-deleted.
pub const MIRROR_DELETED: &str = "del";
/// The head attribute that holds the mirrored attributes (a map of text values).
pub const MIRROR_ATTRIBUTES: &str = "m";
/// A guard item's constraint name (`entity.name`).
pub const GUARD_CONSTRAINT: &str = "c";
/// A guard item's values (a list of strings).
pub const GUARD_VALUES: &str = "v";
/// A unique guard's owner partition key.
pub const GUARD_OWNER_PK: &str = "o";
/// A unique guard's owner base sort key.
pub const GUARD_OWNER_SK: &str = "s";
/// A limit guard's member set (string set of member tokens).
pub const GUARD_MEMBERS: &str = "m";

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
        let s = |value: &str| AttributeValue::S(value.to_string());
        let all_old = ReturnValuesOnConditionCheckFailure::AllOld;
        let owned = "attribute_not_exists(pk) OR (#o = :o AND #s = :s)";
        match self {
            Guard::Item(item) => Ok((**item).clone()),
            Guard::Claim {
                key,
                owner_pk,
                owner_sk,
                values,
                constraint,
            } => {
                let put = Put::builder()
                    .table_name(counters)
                    .item("pk", s(key))
                    .item(GUARD_CONSTRAINT, s(constraint))
                    .item(
                        GUARD_VALUES,
                        AttributeValue::L(values.iter().map(|v| s(v)).collect()),
                    )
                    .item(GUARD_OWNER_PK, s(owner_pk))
                    .item(GUARD_OWNER_SK, s(owner_sk))
                    .condition_expression(owned)
                    .expression_attribute_names("#o", GUARD_OWNER_PK)
                    .expression_attribute_names("#s", GUARD_OWNER_SK)
                    .expression_attribute_values(":o", s(owner_pk))
                    .expression_attribute_values(":s", s(owner_sk))
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(build)?;
                Ok(TransactWriteItem::builder().put(put).build())
            }
            Guard::Release {
                key,
                owner_pk,
                owner_sk,
            } => {
                let delete = Delete::builder()
                    .table_name(counters)
                    .key("pk", s(key))
                    .condition_expression(owned)
                    .expression_attribute_names("#o", GUARD_OWNER_PK)
                    .expression_attribute_names("#s", GUARD_OWNER_SK)
                    .expression_attribute_values(":o", s(owner_pk))
                    .expression_attribute_values(":s", s(owner_sk))
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(build)?;
                Ok(TransactWriteItem::builder().delete(delete).build())
            }
            Guard::Join {
                key,
                token,
                at_most,
                values,
                constraint,
            } => {
                let update = Update::builder()
                    .table_name(counters)
                    .key("pk", s(key))
                    .update_expression("SET #c = :c, #v = :v ADD #m :toks")
                    .condition_expression(
                        "attribute_not_exists(#m) OR size(#m) < :n OR contains(#m, :tok)",
                    )
                    .expression_attribute_names("#c", GUARD_CONSTRAINT)
                    .expression_attribute_names("#v", GUARD_VALUES)
                    .expression_attribute_names("#m", GUARD_MEMBERS)
                    .expression_attribute_values(":c", s(constraint))
                    .expression_attribute_values(
                        ":v",
                        AttributeValue::L(values.iter().map(|v| s(v)).collect()),
                    )
                    .expression_attribute_values(":toks", AttributeValue::Ss(vec![token.clone()]))
                    .expression_attribute_values(":tok", s(token))
                    .expression_attribute_values(":n", AttributeValue::N(at_most.to_string()))
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(build)?;
                Ok(TransactWriteItem::builder().update(update).build())
            }
            Guard::Leave { key, token } => {
                let update = Update::builder()
                    .table_name(counters)
                    .key("pk", s(key))
                    .update_expression("DELETE #m :toks")
                    .expression_attribute_names("#m", GUARD_MEMBERS)
                    .expression_attribute_values(":toks", AttributeValue::Ss(vec![token.clone()]))
                    .build()
                    .map_err(build)?;
                Ok(TransactWriteItem::builder().update(update).build())
            }
            Guard::RequireHead { pk, sk, condition } => {
                let (expression, names, values) = condition.expression();
                let check = ConditionCheck::builder()
                    .table_name(counters)
                    .key("pk", s(&cqrs_keys::head_key(pk, sk)))
                    .condition_expression(expression)
                    .set_expression_attribute_names(
                        (!names.is_empty()).then(|| names.into_iter().collect()),
                    )
                    .set_expression_attribute_values(
                        (!values.is_empty()).then(|| values.into_iter().collect()),
                    )
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(build)?;
                Ok(TransactWriteItem::builder().condition_check(check).build())
            }
            Guard::CheckMembers { key, at_most } => {
                let check = ConditionCheck::builder()
                    .table_name(counters)
                    .key("pk", s(key))
                    .condition_expression("attribute_not_exists(#m) OR size(#m) <= :n")
                    .expression_attribute_names("#m", GUARD_MEMBERS)
                    .expression_attribute_values(":n", AttributeValue::N(at_most.to_string()))
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(build)?;
                Ok(TransactWriteItem::builder().condition_check(check).build())
            }
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

/// The items a command's transaction writes itself, which no guard may touch ([`prepare`]).
#[derive(Debug, Clone, Copy)]
pub struct CommandKeys<'a> {
    /// The deployment's tables (the version row is in the command table; the head, the
    /// idempotency record and the counters in the idempotency table).
    pub tables: &'a Tables,
    /// The item's partition key.
    pub pk: &'a str,
    /// The sort key of the version the command writes (`sk@version`).
    pub sk: &'a str,
    /// The key of the command's idempotency record, when it has one.
    pub record: Option<&'a str>,
}

/// Why a hook's guards cannot go into the command's transaction ([`prepare`]): a fault of the
/// hook, never of the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// More guards than [`MAX_GUARDS`], after merging counters of one name.
    #[error(
        "added {count} guards (after merging counters of one name): a command takes at most \
         {MAX_GUARDS}, DynamoDB's {MAX_TRANSACTION_ITEMS} transaction items less the \
         {COMMAND_ITEMS} the command writes itself (its version row, its head, its idempotency record)"
    )]
    TooMany {
        /// How many guards there were.
        count: usize,
    },
    /// A guard on an item the command writes itself.
    #[error(
        "guard {index} is on {what} ({table} {key}), which the command writes itself: DynamoDB \
         takes one operation per item in a transaction"
    )]
    OnCommandItem {
        /// The guard's position, as the hook added it (after merging).
        index: usize,
        /// `its own version row`, `its own head` or `its own idempotency record`.
        what: &'static str,
        /// The table.
        table: String,
        /// The key, as `name=value` pairs.
        key: String,
    },
    /// Two guards on one item.
    #[error(
        "guards {first} and {second} are on one item ({table} {key}), twice in one transaction: \
         DynamoDB takes one operation per item"
    )]
    SameItem {
        /// The first guard's position.
        first: usize,
        /// The second guard's position.
        second: usize,
        /// The table.
        table: String,
        /// The key, as `name=value` pairs.
        key: String,
    },
    /// Merged counters whose deltas overflow.
    #[error("the deltas of counter {name:?} add up past the largest number a counter holds")]
    Overflow {
        /// The counter's name.
        name: String,
    },
}

/// The guards of one command, ready for its transaction: the counters of one name (and tenant)
/// merged into one (their deltas summed, the smallest `at_most` kept, and the refusal that came
/// with it), in the order each was first added; then refused when more than [`MAX_GUARDS`] are
/// left, when one is on an item the command writes itself ([`CommandKeys`]), or when two are on
/// one item. Each guard comes with what the caller gets when it does not hold (`R`, a refusal).
///
/// The key of a service's own guard is read from its `ConditionCheck`, `Update` or `Delete`, and
/// from a `Put`'s item in the command table (`pk`, `sk`) and the idempotency table (`pk`); a `Put`
/// in another table (whose key attributes are not known here) is left to DynamoDB.
///
/// ```
/// use cqrs_store::guard::{CommandKeys, Guard, GuardError, prepare};
///
/// let tables = cqrs_store::Tables::new("c", "d", "h", "i");
/// let keys = CommandKeys { tables: &tables, pk: "LOAN#t1", sk: "L1@1", record: None };
/// let guards = vec![
///     (Guard::counter("t1", "loans", 1, 5).unwrap(), "loose"),
///     (Guard::counter("t1", "loans", 1, 3).unwrap(), "tight"),
/// ];
/// let merged = prepare(guards, &keys).unwrap();
/// assert_eq!(merged.len(), 1);
/// assert!(matches!(merged[0].0, Guard::Counter { delta: 2, at_most: 3, .. }));
/// assert_eq!(merged[0].1, "tight");
///
/// let many: Vec<_> = (0..98).map(|i| (Guard::counter("t1", format!("c{i}"), 1, 1).unwrap(), ())).collect();
/// assert_eq!(prepare(many, &keys).unwrap_err(), GuardError::TooMany { count: 98 });
/// ```
///
/// # Errors
///
/// [`GuardError`]: too many guards, one on the command's own items, two on one item, or counters
/// whose deltas overflow.
pub fn prepare<R>(
    guards: Vec<(Guard, R)>,
    command: &CommandKeys<'_>,
) -> Result<Vec<(Guard, R)>, GuardError> {
    let merged = merge_counters(guards)?;
    if merged.len() > MAX_GUARDS {
        return Err(GuardError::TooMany {
            count: merged.len(),
        });
    }
    let s = |value: &str| AttributeValue::S(value.to_string());
    let head = cqrs_keys::head_key(command.pk, command.sk);
    let mut own = vec![
        (
            "its own version row",
            target(
                &command.tables.command,
                [("pk", s(command.pk)), ("sk", s(command.sk))],
            ),
        ),
        (
            "its own head",
            target(&command.tables.idempotency, [("pk", s(&head))]),
        ),
    ];
    if let Some(record) = command.record {
        own.push((
            "its own idempotency record",
            target(&command.tables.idempotency, [("pk", s(record))]),
        ));
    }
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    for (index, (guard, _)) in merged.iter().enumerate() {
        let Some((table, key)) = guard.target(command.tables) else {
            continue;
        };
        if let Some((what, _)) = own
            .iter()
            .find(|(_, item)| *item == (table.clone(), key.clone()))
        {
            return Err(GuardError::OnCommandItem {
                index,
                what,
                table,
                key,
            });
        }
        if let Some(first) = seen.insert((table.clone(), key.clone()), index) {
            return Err(GuardError::SameItem {
                first,
                second: index,
                table,
                key,
            });
        }
    }
    Ok(merged)
}

/// The counters of one tenant and name merged into the first of them (see [`prepare`]).
fn merge_counters<R>(guards: Vec<(Guard, R)>) -> Result<Vec<(Guard, R)>, GuardError> {
    let mut merged: Vec<(Guard, R)> = Vec::with_capacity(guards.len());
    let mut counters: HashMap<(String, String), usize> = HashMap::new();
    for (guard, refusal) in guards {
        let Guard::Counter {
            tenant,
            name,
            delta,
            at_most,
        } = &guard
        else {
            merged.push((guard, refusal));
            continue;
        };
        let Some(&at) = counters.get(&(tenant.clone(), name.clone())) else {
            counters.insert((tenant.clone(), name.clone()), merged.len());
            merged.push((guard, refusal));
            continue;
        };
        let Some((
            Guard::Counter {
                delta: sum,
                at_most: bound,
                ..
            },
            kept,
        )) = merged.get_mut(at)
        else {
            continue;
        };
        *sum = sum
            .checked_add(*delta)
            .ok_or_else(|| GuardError::Overflow { name: name.clone() })?;
        if *at_most < *bound {
            *bound = *at_most;
            *kept = refusal;
        }
    }
    Ok(merged)
}

/// A transaction item's table and key, the key as sorted `name=value` pairs.
fn target<'a>(
    table: &str,
    key: impl IntoIterator<Item = (&'a str, AttributeValue)>,
) -> (String, String) {
    let mut pairs: Vec<String> = key
        .into_iter()
        .map(|(name, value)| format!("{name}={}", shown(&value)))
        .collect();
    pairs.sort();
    (table.to_string(), pairs.join(" "))
}

/// A key attribute's value as a problem's detail shows it.
fn shown(value: &AttributeValue) -> String {
    match value {
        AttributeValue::S(s) => format!("{s:?}"),
        AttributeValue::N(n) => n.clone(),
        other => format!("{other:?}"),
    }
}

impl Guard {
    /// The table and key of the item the guard touches, when it can be told ([`prepare`]): the
    /// table and the key as sorted `name=value` pairs.
    ///
    /// ```
    /// use cqrs_store::guard::Guard;
    /// let tables = cqrs_store::Tables::new("c", "d", "h", "i");
    /// let leave = Guard::Leave { key: "GUARD#t1#loan#out#x".into(), token: "t".into() };
    /// assert_eq!(leave.target(&tables), Some(("i".into(), "pk=\"GUARD#t1#loan#out#x\"".into())));
    /// ```
    pub fn target(&self, tables: &Tables) -> Option<(String, String)> {
        let key_of = |table: &str, key: &HashMap<String, AttributeValue>| {
            Some(target(
                table,
                key.iter()
                    .map(|(name, value)| (name.as_str(), value.clone())),
            ))
        };
        match self {
            Guard::Counter { tenant, name, .. } => Some(target(
                &tables.idempotency,
                [(
                    "pk",
                    AttributeValue::S(cqrs_keys::counter_key(tenant, name)),
                )],
            )),
            Guard::Claim { key, .. }
            | Guard::Release { key, .. }
            | Guard::Join { key, .. }
            | Guard::Leave { key, .. }
            | Guard::CheckMembers { key, .. } => Some(target(
                &tables.idempotency,
                [("pk", AttributeValue::S(key.clone()))],
            )),
            Guard::RequireHead { pk, sk, .. } => Some(target(
                &tables.idempotency,
                [("pk", AttributeValue::S(cqrs_keys::head_key(pk, sk)))],
            )),
            Guard::Item(item) => {
                if let Some(check) = item.condition_check() {
                    return key_of(check.table_name(), check.key());
                }
                if let Some(update) = item.update() {
                    return key_of(update.table_name(), update.key());
                }
                if let Some(delete) = item.delete() {
                    return key_of(delete.table_name(), delete.key());
                }
                let put = item.put()?;
                let names: &[&str] = if put.table_name() == tables.command {
                    &["pk", "sk"]
                } else if put.table_name() == tables.idempotency {
                    &["pk"]
                } else {
                    return None;
                };
                let item = put.item();
                let key: Option<Vec<(&str, AttributeValue)>> = names
                    .iter()
                    .map(|name| item.get(*name).map(|value| (*name, value.clone())))
                    .collect();
                Some(target(put.table_name(), key?))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, TransactWriteItem};

    use super::*;

    fn keys<'a>(tables: &'a Tables, record: Option<&'a str>) -> CommandKeys<'a> {
        CommandKeys {
            tables,
            pk: "LOAN#t1",
            sk: "L1@2",
            record,
        }
    }

    fn check(table: &str, key: &[(&str, &str)]) -> Guard {
        let mut check = ConditionCheck::builder()
            .table_name(table)
            .condition_expression("attribute_exists(pk)");
        for (name, value) in key {
            check = check.key(*name, AttributeValue::S((*value).into()));
        }
        Guard::item(
            TransactWriteItem::builder()
                .condition_check(check.build().unwrap())
                .build(),
        )
    }

    fn put(table: &str, item: &[(&str, &str)]) -> Guard {
        let mut put = Put::builder().table_name(table);
        for (name, value) in item {
            put = put.item(*name, AttributeValue::S((*value).into()));
        }
        Guard::item(
            TransactWriteItem::builder()
                .put(put.build().unwrap())
                .build(),
        )
    }

    #[test]
    fn counters_merge_in_the_place_of_the_first_and_other_guards_keep_their_order() {
        let tables = Tables::new("c", "d", "h", "i");
        let guards = vec![
            (Guard::counter("t1", "a", 1, 9).unwrap(), 0),
            (check("members", &[("pk", "M#t1"), ("sk", "m1")]), 1),
            (Guard::counter("t1", "a", -3, 4).unwrap(), 2),
            (Guard::counter("t2", "a", 1, 1).unwrap(), 3),
        ];
        let merged = prepare(guards, &keys(&tables, None)).unwrap();
        let refusals: Vec<i32> = merged.iter().map(|(_, r)| *r).collect();
        assert_eq!(refusals, [2, 1, 3]);
        assert!(matches!(
            merged[0].0,
            Guard::Counter {
                delta: -2,
                at_most: 4,
                ..
            }
        ));
    }

    #[test]
    fn the_commands_own_items_and_one_item_twice_are_refused() {
        let tables = Tables::new("c", "d", "h", "i");
        let refused = |guard: Guard, record: Option<&str>| {
            prepare(vec![(guard, ())], &keys(&tables, record)).unwrap_err()
        };
        assert!(matches!(
            refused(check("c", &[("pk", "LOAN#t1"), ("sk", "L1@2")]), None),
            GuardError::OnCommandItem {
                what: "its own version row",
                ..
            }
        ));
        assert!(matches!(
            refused(
                put("c", &[("pk", "LOAN#t1"), ("sk", "L1@2"), ("x", "y")]),
                None
            ),
            GuardError::OnCommandItem {
                what: "its own version row",
                ..
            }
        ));
        assert!(matches!(
            refused(check("i", &[("pk", "HEAD#LOAN#t1@L1")]), None),
            GuardError::OnCommandItem {
                what: "its own head",
                ..
            }
        ));
        assert!(matches!(
            refused(put("i", &[("pk", "rec-1")]), Some("rec-1")),
            GuardError::OnCommandItem {
                what: "its own idempotency record",
                ..
            }
        ));
        // The previous version's row and another table's item are not the command's.
        for guard in [
            check("c", &[("pk", "LOAN#t1"), ("sk", "L1@1")]),
            check("d", &[("pk", "LOAN#t1"), ("sk", "L1")]),
            put("other", &[("pk", "LOAN#t1"), ("sk", "L1@2")]),
        ] {
            assert!(prepare(vec![(guard, ())], &keys(&tables, None)).is_ok());
        }
        // A counter and a check of the same counter item: one item twice.
        let twice = vec![
            (Guard::counter("t1", "a", 1, 3).unwrap(), ()),
            (check("i", &[("pk", "COUNTER#t1#a")]), ()),
        ];
        assert!(matches!(
            prepare(twice, &keys(&tables, None)).unwrap_err(),
            GuardError::SameItem {
                first: 0,
                second: 1,
                ..
            }
        ));
    }

    #[test]
    fn merged_deltas_that_overflow_are_the_hooks_fault() {
        let tables = Tables::new("c", "d", "h", "i");
        let guards = vec![
            (Guard::counter("t1", "a", i64::MAX, i64::MAX).unwrap(), ()),
            (Guard::counter("t1", "a", 1, i64::MAX).unwrap(), ()),
        ];
        assert_eq!(
            prepare(guards, &keys(&tables, None)).unwrap_err(),
            GuardError::Overflow { name: "a".into() }
        );
    }

    #[test]
    fn ninety_seven_guards_fit_and_the_message_says_why_98_do_not() {
        let tables = Tables::new("c", "d", "h", "i");
        let many = |n: usize| -> Vec<(Guard, ())> {
            (0..n)
                .map(|i| (Guard::counter("t1", format!("c{i}"), 1, 1).unwrap(), ()))
                .collect()
        };
        assert_eq!(prepare(many(97), &keys(&tables, None)).unwrap().len(), 97);
        let error = prepare(many(98), &keys(&tables, None)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "added 98 guards (after merging counters of one name): a command takes at most 97, \
             DynamoDB's 100 transaction items less the 3 the command writes itself (its version \
             row, its head, its idempotency record)"
        );
    }
}
