//! Declared constraints (`unique`, `limits`, `references` of an entity in `model.toml`) as guard
//! moves of a command's own transaction, and their verification and repair.
//!
//! - [`plan`]: the guards one command moves, from the version it is based on (`None` on a create:
//!   no read is added) to the new item, and the head mirror of a referenced entity.
//! - [`verify`] / [`repair`]: a scan of the data table and of the guard items, differences
//!   confirmed on consistent reads, and fixes tied to each item's head (`latest = :v`).
//!
//! Guard items live in the idempotency table under [`cqrs_keys::guard_key`]: a unique value's
//! holder (`o`, `s`), a bounded group's member set (`m`, tokens of [`cqrs_keys::member_token`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_item::Item;
use cqrs_item::entity::EntityAttributes;
use cqrs_model::{AttributeSource, Condition, Entity, Model, Scope, ValueRef};

use crate::guard::{
    GUARD_MEMBERS, GUARD_OWNER_PK, GUARD_OWNER_SK, Guard, HeadCondition, HeadMirror, HeadRefusal,
    MirrorValue,
};
use crate::{Store, StoreError, sdk_error};

/// Which declared constraint a guard enforces, and what the caller is told when it does not hold
/// (the command handler turns it into a problem document, [`explain`] adds what the failed
/// condition found).
///
/// ```
/// let v = cqrs_store::constraints::Violation::Limit {
///     constraint: "loan.loans_out".into(),
///     group: vec!["m1".into()],
///     at_most: 3,
/// };
/// assert_eq!(v.constraint(), "loan.loans_out");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// A unique value is held by another live item (409).
    Unique {
        /// `entity.name`.
        constraint: String,
        /// The values claimed.
        values: Vec<String>,
    },
    /// A bounded group is full (409).
    Limit {
        /// `entity.name`.
        constraint: String,
        /// The group's values.
        group: Vec<String>,
        /// Its bound.
        at_most: u32,
    },
    /// The referenced item is missing, deleted, does not satisfy the condition, or its head's
    /// mirror is stale (422; stale: 503).
    Reference {
        /// `entity.name`.
        constraint: String,
        /// The target's partition key.
        target_pk: String,
        /// The target's base sort key.
        target_sk: String,
    },
    /// A release of a unique value found another holder: the guard items drifted from the data
    /// (a write that bypassed the constraints, a lost guard): a fault of the deployment (500),
    /// which `verify` lists and `repair` fixes.
    Drift {
        /// `entity.name`.
        constraint: String,
        /// The guard item's key.
        key: String,
    },
}

impl Violation {
    /// The constraint's name, `entity.name`.
    pub fn constraint(&self) -> &str {
        match self {
            Violation::Unique { constraint, .. }
            | Violation::Limit { constraint, .. }
            | Violation::Reference { constraint, .. }
            | Violation::Drift { constraint, .. } => constraint,
        }
    }
}

/// The guard moves of one command and the head mirror of its item.
///
/// ```
/// let plan = cqrs_store::constraints::ConstraintPlan::default();
/// assert!(plan.guards.is_empty() && plan.mirror.is_none() && plan.refused.is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct ConstraintPlan {
    /// The guards to add to the transaction (before any hook's), each with its violation.
    pub guards: Vec<(Guard, Violation)>,
    /// The head mirror to write (`Some` when the entity is referenced by some reference).
    pub mirror: Option<HeadMirror>,
    /// A violation found in memory, with no guard to send: a reference of the item to itself
    /// whose condition the new version does not satisfy. The command is refused as if its guard
    /// had failed.
    pub refused: Option<Violation>,
}

/// The text a condition compares and a mirror stores (as `cqrs_model::Condition` compares it).
fn text(value: Option<ValueRef<'_>>) -> Option<MirrorValue> {
    match value? {
        ValueRef::Str(s) | ValueRef::Num(s) => Some(s.to_string()),
        ValueRef::Bool(b) => Some(b.to_string()),
        ValueRef::Null | ValueRef::Other(_) => None,
    }
}

/// The head condition of a reference: the target is live, and its mirrored attributes satisfy the
/// reference's condition.
fn head_condition(condition: &Condition) -> HeadCondition {
    HeadCondition {
        live: true,
        when: condition.when.clone(),
        unless: condition.unless.clone(),
    }
}

/// The guard moves of one command of `entity` in `tenant`: from `base`, the version it is based on
/// (`None` on a create: nothing is read for it), to `new`. For each constraint the value the base
/// holds and the value the new item holds are compared; when they differ the old one is released
/// (a unique `Release`, a limit `Leave`) and the new one claimed (`Claim`, bounded `Join`). A
/// deleted version holds nothing, so a soft delete frees, a restore claims again, and an update of
/// a deleted item moves nothing. A reference is checked ([`Guard::RequireHead`]: the target's head,
/// live, its mirror satisfying the condition) when the new item is live and either was not before
/// (create, restore) or names another target; a reference to the item itself is evaluated on
/// `new` in memory ([`ConstraintPlan::refused`]). When some reference names `entity`, the plan
/// carries the head mirror of `new` ([`Model::mirrored`] attributes as text).
///
/// The head condition of the command (`latest = base`) makes `base` the previous version at commit,
/// so the moves are consistent with every concurrent command.
///
/// ```
/// use cqrs_store::{constraints::plan, guard::Guard};
///
/// let model = cqrs_model::Model::parse(r#"
/// [entities.loan]
/// pk = "LOAN#{tenant}"
/// sk = "{loanId}"
/// attributes.loanId = { type = "string", required = true, max = 26 }
/// attributes.memberId = { type = "string", required = true, max = 40 }
/// attributes.status = { type = "enum", values = ["out", "returned"], required = true }
/// limits.loans_out = { per = "memberId", when = { status = ["out"] }, at_most = 3 }
/// "#).unwrap();
/// let loan = model.entity("loan").unwrap();
/// let mut item = cqrs_item::Item::example();
/// item.pk = "LOAN#t1".into();
/// item.sk = "L1@1".into();
/// item.attributes = serde_json::from_str(r#"{"loanId":"L1","memberId":"m1","status":"out"}"#).unwrap();
/// let moves = plan(&model, loan, "t1", None, &item).unwrap();
/// assert!(matches!(&moves.guards[0].0, Guard::Join { at_most: 3, .. }));
/// ```
///
/// # Errors
///
/// A reference to an entity the model does not declare, or a value that cannot make the target's
/// key (the caller's input: a 4xx).
pub fn plan(
    model: &Model,
    entity: &Entity,
    tenant: &str,
    base: Option<&Item>,
    new: &Item,
) -> Result<ConstraintPlan, String> {
    let constraint = |name: &str| format!("{}.{name}", entity.name);
    let owner_pk = new.pk.clone();
    let owner_sk = new.base_sk().to_string();
    let new_attrs = EntityAttributes::of(&new.attributes);
    let old_attrs = base.map(|b| (EntityAttributes::of(&b.attributes), b.is_deleted));
    let mut out = ConstraintPlan::default();

    for unique in &entity.unique {
        let old = old_attrs
            .as_ref()
            .and_then(|(attrs, deleted)| unique.value(entity, attrs, *deleted));
        let now = unique.value(entity, &new_attrs, new.is_deleted);
        if old == now {
            continue;
        }
        let scope = match unique.scope {
            Scope::Tenant => tenant,
            Scope::Global => cqrs_keys::GUARD_GLOBAL_SCOPE,
        };
        let name = constraint(&unique.name);
        if let Some(values) = old {
            let key = cqrs_keys::guard_key(scope, &entity.name, &unique.name, &values);
            out.guards.push((
                Guard::Release {
                    key: key.clone(),
                    owner_pk: owner_pk.clone(),
                    owner_sk: owner_sk.clone(),
                },
                Violation::Drift {
                    constraint: name.clone(),
                    key,
                },
            ));
        }
        if let Some(values) = now {
            out.guards.push((
                Guard::Claim {
                    key: cqrs_keys::guard_key(scope, &entity.name, &unique.name, &values),
                    owner_pk: owner_pk.clone(),
                    owner_sk: owner_sk.clone(),
                    values: values.clone(),
                    constraint: name.clone(),
                },
                Violation::Unique {
                    constraint: name,
                    values,
                },
            ));
        }
    }

    let token = cqrs_keys::member_token(&owner_pk, &owner_sk);
    for limit in &entity.limits {
        let old = old_attrs
            .as_ref()
            .and_then(|(attrs, deleted)| limit.group(entity, attrs, *deleted));
        let now = limit.group(entity, &new_attrs, new.is_deleted);
        if old == now {
            continue;
        }
        let name = constraint(&limit.name);
        if let Some(group) = old {
            out.guards.push((
                Guard::Leave {
                    key: cqrs_keys::guard_key(tenant, &entity.name, &limit.name, &group),
                    token: token.clone(),
                },
                Violation::Limit {
                    constraint: name.clone(),
                    group,
                    at_most: limit.at_most,
                },
            ));
        }
        if let Some(group) = now {
            out.guards.push((
                Guard::Join {
                    key: cqrs_keys::guard_key(tenant, &entity.name, &limit.name, &group),
                    token: token.clone(),
                    at_most: limit.at_most,
                    values: group.clone(),
                    constraint: name.clone(),
                },
                Violation::Limit {
                    constraint: name,
                    group,
                    at_most: limit.at_most,
                },
            ));
        }
    }

    if !new.is_deleted {
        for reference in &entity.references {
            let entered = old_attrs.as_ref().is_none_or(|(_, deleted)| *deleted);
            let moved = old_attrs
                .as_ref()
                .is_some_and(|(attrs, _)| reference.changed(attrs, &new_attrs));
            if !entered && !moved {
                continue;
            }
            let target = model.entity(&reference.entity).ok_or_else(|| {
                format!(
                    "reference {}: the model declares no entity {}",
                    constraint(&reference.name),
                    reference.entity
                )
            })?;
            let Some(keys) = reference.target_key(target, tenant, &new_attrs) else {
                continue;
            };
            let (target_pk, target_sk) =
                keys.map_err(|e| format!("reference {}: {e}", constraint(&reference.name)))?;
            let violation = Violation::Reference {
                constraint: constraint(&reference.name),
                target_pk: target_pk.clone(),
                target_sk: target_sk.clone(),
            };
            if target_pk == owner_pk && target_sk == owner_sk {
                // The item itself: its new version is the target's latest.
                if !reference.condition.holds(&new_attrs) && out.refused.is_none() {
                    out.refused = Some(violation);
                }
                continue;
            }
            out.guards.push((
                Guard::RequireHead {
                    pk: target_pk,
                    sk: target_sk,
                    condition: head_condition(&reference.condition),
                },
                violation,
            ));
        }
    }

    if model.is_referenced(&entity.name) {
        out.mirror = Some(mirror_of(model, entity, &new_attrs, new.is_deleted));
    }
    Ok(out)
}

/// The head mirror of a version of `entity` (a referenced entity): whether it is deleted and the
/// [`Model::mirrored`] attributes it holds, as text.
///
/// ```
/// let model = cqrs_model::Model::example();
/// let order = model.entity("order").unwrap();
/// let map = cqrs_item::Map::new();
/// let attrs = cqrs_item::entity::EntityAttributes::of(&map);
/// let mirror = cqrs_store::constraints::mirror_of(&model, order, &attrs, true);
/// assert!(mirror.is_deleted && mirror.attributes.is_empty());
/// ```
pub fn mirror_of(
    model: &Model,
    entity: &Entity,
    attributes: &dyn AttributeSource,
    is_deleted: bool,
) -> HeadMirror {
    let attributes: BTreeMap<String, MirrorValue> = model
        .mirrored(&entity.name)
        .into_iter()
        .filter_map(|name| text(attributes.attribute(&name)).map(|value| (name, value)))
        .collect();
    HeadMirror {
        is_deleted,
        attributes,
    }
}

/// What a failed constraint guard found, read from the item its condition returned (`old` of
/// [`StoreError::GuardFailed`]), with no read.
///
/// ```
/// use cqrs_store::constraints::{Explained, Violation, explain};
/// let v = Violation::Reference { constraint: "loan.copy".into(), target_pk: "COPY#t1".into(), target_sk: "C1".into() };
/// assert_eq!(explain(&v, None), Explained::Reference(cqrs_store::guard::HeadRefusal::Missing));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Explained {
    /// The unique value is held by this item (pk, base sk), when the guard named it.
    Taken {
        /// The holder.
        holder: Option<(String, String)>,
    },
    /// The group holds this many members.
    Full {
        /// Members found.
        members: usize,
    },
    /// Why the reference was refused.
    Reference(HeadRefusal),
    /// Drift: another item holds the value being released.
    Drift {
        /// The holder found.
        holder: Option<(String, String)>,
    },
}

/// Explains a failed guard of `violation` from `old`, the item its condition found.
pub fn explain(violation: &Violation, old: Option<&HashMap<String, AttributeValue>>) -> Explained {
    let holder = || {
        let old = old?;
        let s = |name: &str| match old.get(name) {
            Some(AttributeValue::S(s)) => Some(s.clone()),
            _ => None,
        };
        Some((s(GUARD_OWNER_PK)?, s(GUARD_OWNER_SK)?))
    };
    match violation {
        Violation::Unique { .. } => Explained::Taken { holder: holder() },
        Violation::Drift { .. } => Explained::Drift { holder: holder() },
        Violation::Limit { .. } => Explained::Full {
            members: match old.and_then(|o| o.get(GUARD_MEMBERS)) {
                Some(AttributeValue::Ss(set)) => set.len(),
                _ => 0,
            },
        },
        Violation::Reference { .. } => Explained::Reference(HeadRefusal::of(old)),
    }
}

impl Store {
    /// How many members the bounded group whose guard item is `key` holds (0 when the item does
    /// not exist), read strongly consistent.
    ///
    /// ```no_run
    /// # async fn example(store: &cqrs_store::Store) -> Result<(), cqrs_store::StoreError> {
    /// let key = cqrs_keys::guard_key("t1", "loan", "loans_out", &["m1".into()]);
    /// let out = store.limit_members(&key).await?;
    /// # Ok(()) }
    /// ```
    pub async fn limit_members(&self, key: &str) -> Result<usize, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.idempotency)
            .key("pk", AttributeValue::S(key.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem (limit members)", e))?;
        Ok(
            match output.item.as_ref().and_then(|i| i.get(GUARD_MEMBERS)) {
                Some(AttributeValue::Ss(set)) => set.len(),
                _ => 0,
            },
        )
    }
}

/// An item's key: its partition key and base sort key.
type ItemKey = (String, String);

type Attrs = HashMap<String, AttributeValue>;

/// One difference between the data and the guard items, confirmed on consistent re-reads.
///
/// ```
/// let d = cqrs_store::constraints::Difference::StaleMirror { pk: "COPY#t1".into(), sk: "C1".into(), latest: Some(3) };
/// assert!(d.to_string().contains("COPY#t1"));
/// assert!(d.is_repairable());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// A live item holds a unique value whose guard is absent (`guard_holder: None`) or names
    /// another item that does not hold it.
    Unclaimed {
        /// `entity.name`.
        constraint: String,
        /// The guard key.
        key: String,
        /// The values.
        values: Vec<String>,
        /// The item that holds them (the older of two holders).
        holder: ItemKey,
        /// Whom the guard names instead.
        guard_holder: Option<ItemKey>,
    },
    /// A unique guard names an item that does not hold its value, and no live item does.
    StrayClaim {
        /// `entity.name`.
        constraint: String,
        /// The guard key.
        key: String,
        /// Whom the guard names.
        guard_holder: ItemKey,
    },
    /// Two or more live items hold one unique value (not repaired: a person changes one).
    TwoHolders {
        /// `entity.name`.
        constraint: String,
        /// The guard key.
        key: String,
        /// The values.
        values: Vec<String>,
        /// The holders, oldest (`createdAt`) first: the guard goes to the first.
        holders: Vec<ItemKey>,
    },
    /// An item in a bounded group is missing from its guard's member set.
    MissingMember {
        /// `entity.name`.
        constraint: String,
        /// The guard key.
        key: String,
        /// The group.
        group: Vec<String>,
        /// The member.
        member: ItemKey,
    },
    /// A member set holds a token whose item is not in the group (`member: None`: no stored
    /// version has that token).
    ExtraMember {
        /// `entity.name`.
        constraint: String,
        /// The guard key.
        key: String,
        /// The token.
        token: String,
        /// Its item, when known.
        member: Option<ItemKey>,
    },
    /// A group holds more members than its bound (not repaired: the group refuses joins until it
    /// is back under).
    OverLimit {
        /// `entity.name`.
        constraint: String,
        /// The guard key.
        key: String,
        /// The group.
        group: Vec<String>,
        /// Members.
        members: usize,
        /// Its bound.
        at_most: u32,
    },
    /// A referenced item's head does not mirror its latest version.
    StaleMirror {
        /// The item's partition key.
        pk: String,
        /// The item's base sort key.
        sk: String,
        /// The head's latest version.
        latest: Option<i64>,
    },
    /// A live item references a target that is missing, deleted or no longer satisfies the
    /// condition (reported, never repaired: references restrict the referencing write only).
    Dangling {
        /// `entity.name`.
        constraint: String,
        /// The referencing item.
        item: ItemKey,
        /// The target.
        target: ItemKey,
        /// Why.
        reason: HeadRefusal,
    },
}

impl Difference {
    /// Whether this difference breaks a guard (all but [`Difference::Dangling`], which is listed
    /// for information).
    ///
    /// ```
    /// use cqrs_store::constraints::Difference;
    ///
    /// let extra = Difference::ExtraMember {
    ///     constraint: "loan.loans_out".into(),
    ///     key: "GUARD#t1#loan#loans_out#x".into(),
    ///     token: "tok".into(),
    ///     member: None,
    /// };
    /// assert!(extra.is_violation());
    /// ```
    pub fn is_violation(&self) -> bool {
        !matches!(self, Difference::Dangling { .. })
    }

    /// Whether [`repair`] fixes it.
    pub fn is_repairable(&self) -> bool {
        !matches!(
            self,
            Difference::TwoHolders { .. }
                | Difference::OverLimit { .. }
                | Difference::Dangling { .. }
        )
    }
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let item = |(pk, sk): &ItemKey| format!("{pk} / {sk}");
        match self {
            Difference::Unclaimed {
                constraint,
                values,
                holder,
                guard_holder,
                ..
            } => write!(
                f,
                "{constraint}: {values:?} is held by {} but its guard names {}",
                item(holder),
                guard_holder.as_ref().map_or("nobody".to_string(), item)
            ),
            Difference::StrayClaim {
                constraint,
                key,
                guard_holder,
            } => write!(
                f,
                "{constraint}: guard {key} names {}, which does not hold it",
                item(guard_holder)
            ),
            Difference::TwoHolders {
                constraint,
                values,
                holders,
                ..
            } => write!(
                f,
                "{constraint}: {values:?} is held by {} live items: {}",
                holders.len(),
                holders.iter().map(item).collect::<Vec<_>>().join(", ")
            ),
            Difference::MissingMember {
                constraint,
                group,
                member,
                ..
            } => write!(
                f,
                "{constraint}: {} is in group {group:?} but not in its guard",
                item(member)
            ),
            Difference::ExtraMember {
                constraint,
                key,
                token,
                member,
            } => write!(
                f,
                "{constraint}: guard {key} counts {} ({token}), which is not in the group",
                member.as_ref().map_or("an unknown item".to_string(), item)
            ),
            Difference::OverLimit {
                constraint,
                group,
                members,
                at_most,
                ..
            } => write!(
                f,
                "{constraint}: group {group:?} has {members} members (at most {at_most})"
            ),
            Difference::StaleMirror { pk, sk, latest } => write!(
                f,
                "the head of {pk} / {sk} does not mirror its latest version {latest:?}"
            ),
            Difference::Dangling {
                constraint,
                item: from,
                target,
                reason,
            } => write!(
                f,
                "{constraint}: {} references {}: {reason:?}",
                item(from),
                item(target)
            ),
        }
    }
}

/// What [`verify`] found or [`repair`] did.
///
/// ```
/// let report = cqrs_store::constraints::Report::default();
/// assert!(report.is_clean());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The confirmed differences (after [`repair`]: those left).
    pub differences: Vec<Difference>,
    /// What [`repair`] fixed.
    pub repaired: Vec<Difference>,
    /// Repair transactions that a concurrent command cancelled and that were tried again.
    pub retries: usize,
}

impl Report {
    /// Whether every guard agrees with the tables: no difference but dangling references, which
    /// are listed for information (a reference restricts the referencing write only: a copy that
    /// became a reference copy after a loan was accepted breaks no constraint).
    ///
    /// ```
    /// use cqrs_store::constraints::{Difference, Report};
    /// use cqrs_store::guard::HeadRefusal;
    ///
    /// let mut report = Report::default();
    /// report.differences.push(Difference::Dangling {
    ///     constraint: "loan.copy".into(),
    ///     item: ("LOAN#t1".into(), "L1".into()),
    ///     target: ("COPY#t1".into(), "C1".into()),
    ///     reason: HeadRefusal::Deleted,
    /// });
    /// assert!(report.is_clean());
    /// ```
    pub fn is_clean(&self) -> bool {
        self.differences.iter().all(|d| !d.is_violation())
    }
}

/// An item's newest state read on consistent reads: its head's latest version and the version
/// itself (the command row at `latest`, else the data item when it is at `latest`; without a head,
/// the newest command row, else the data item).
#[derive(Debug, Clone)]
struct Fresh {
    latest: Option<i64>,
    item: Option<Item>,
}

/// A difference with the versions of the items it was confirmed at (the repair's ties).
#[derive(Debug, Clone)]
struct Confirmed {
    difference: Difference,
    ties: Vec<(ItemKey, Option<i64>)>,
}

fn s_attr(item: &Attrs, name: &str) -> Option<String> {
    match item.get(name) {
        Some(AttributeValue::S(s)) => Some(s.clone()),
        _ => None,
    }
}

fn holder_of(guard: Option<&Attrs>) -> Option<ItemKey> {
    let guard = guard?;
    Some((
        s_attr(guard, GUARD_OWNER_PK)?,
        s_attr(guard, GUARD_OWNER_SK)?,
    ))
}

fn members_of(guard: Option<&Attrs>) -> Vec<String> {
    match guard.and_then(|g| g.get(GUARD_MEMBERS)) {
        Some(AttributeValue::Ss(set)) => set.clone(),
        _ => Vec::new(),
    }
}

/// A unique key's constraint, values and holders (with `createdAt`).
type ExpectedUnique = (String, Vec<String>, Vec<(ItemKey, String)>);
/// A limit key's constraint, group, bound and members (token -> item).
type ExpectedLimit = (String, Vec<String>, u32, BTreeMap<String, ItemKey>);

/// What the guards should hold, from the newest state of each item.
#[derive(Debug, Default)]
struct Expected {
    /// Unique key -> (constraint, values, holders with createdAt).
    unique: BTreeMap<String, ExpectedUnique>,
    /// Limit key -> (constraint, group, at_most, token -> member).
    limits: BTreeMap<String, ExpectedLimit>,
    /// Live referencing items: (constraint, item, target, condition).
    references: Vec<(String, ItemKey, ItemKey, HeadCondition)>,
}

/// The entity of a stored version, when the model has it.
fn entity_of<'m>(model: &'m Model, item: &Item) -> Option<&'m Entity> {
    model.entity(item.entity.as_deref()?)
}

fn expected(model: &Model, states: &BTreeMap<ItemKey, Item>) -> Expected {
    let mut out = Expected::default();
    for (key, item) in states {
        let Some(entity) = entity_of(model, item) else {
            continue;
        };
        let Ok(moves) = plan(model, entity, &item.tenant_code, None, item) else {
            continue;
        };
        for (guard, _) in moves.guards {
            match guard {
                Guard::Claim {
                    key: guard_key,
                    values,
                    constraint,
                    ..
                } => out
                    .unique
                    .entry(guard_key)
                    .or_insert_with(|| (constraint, values, Vec::new()))
                    .2
                    .push((key.clone(), item.created_at.clone())),
                Guard::Join {
                    key: guard_key,
                    token,
                    at_most,
                    values,
                    constraint,
                } => {
                    out.limits
                        .entry(guard_key)
                        .or_insert_with(|| (constraint, values, at_most, BTreeMap::new()))
                        .3
                        .insert(token, key.clone());
                }
                Guard::RequireHead { pk, sk, condition } => {
                    let constraint = entity
                        .references
                        .iter()
                        .find(|r| {
                            model.entity(&r.entity).is_some_and(|t| {
                                r.target_key(
                                    t,
                                    &item.tenant_code,
                                    &EntityAttributes::of(&item.attributes),
                                )
                                .and_then(Result::ok)
                                    == Some((pk.clone(), sk.clone()))
                            })
                        })
                        .map_or_else(String::new, |r| format!("{}.{}", entity.name, r.name));
                    out.references
                        .push((constraint, key.clone(), (pk, sk), condition));
                }
                _ => {}
            }
        }
    }
    out
}

/// Whether `target`'s newest state satisfies a reference's head condition, evaluated in memory.
fn target_refusal(target: Option<&Item>, condition: &HeadCondition) -> Option<HeadRefusal> {
    let Some(target) = target else {
        return Some(HeadRefusal::Missing);
    };
    if condition.live && target.is_deleted {
        return Some(HeadRefusal::Deleted);
    }
    let holds = Condition {
        when: condition.when.clone(),
        unless: condition.unless.clone(),
    }
    .holds(&EntityAttributes::of(&target.attributes));
    (!holds).then_some(HeadRefusal::Condition)
}

impl Store {
    /// Every item of a table, strongly consistent, optionally filtered on `pk` prefixes.
    async fn scan_all(&self, table: &str, prefixes: &[String]) -> Result<Vec<Attrs>, StoreError> {
        let mut scan = self.client.scan().table_name(table).consistent_read(true);
        if !prefixes.is_empty() {
            let filter: Vec<String> = (0..prefixes.len())
                .map(|i| format!("begins_with(pk, :p{i})"))
                .collect();
            scan = scan.filter_expression(filter.join(" OR "));
            for (i, prefix) in prefixes.iter().enumerate() {
                scan = scan.expression_attribute_values(
                    format!(":p{i}"),
                    AttributeValue::S(prefix.clone()),
                );
            }
        }
        let mut pages = scan.into_paginator().send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("Scan (constraints)", e))?;
            out.extend(page.items().iter().cloned());
        }
        Ok(out)
    }

    /// One item of the idempotency table (a guard, a head), strongly consistent.
    async fn idempotency_item(&self, key: &str) -> Result<Option<Attrs>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.idempotency)
            .key("pk", AttributeValue::S(key.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem (constraints)", e))?;
        Ok(output.item)
    }

    /// An item's newest state on consistent reads ([`Fresh`]).
    async fn fresh(&self, (pk, base): &ItemKey) -> Result<Fresh, StoreError> {
        let head = self.get_head(pk, base).await?;
        let version = match head {
            Some(v) => Some(v),
            None => self.latest_command_version(pk, base).await?,
        };
        let row = match version {
            Some(v) => self.get_command(pk, base, v).await?,
            None => None,
        };
        let item = match row {
            Some(row) => Some(row),
            None => self
                .get_item("GetItem (data)", &self.tables.data, pk, base.clone(), true)
                .await?
                .filter(|data| version.is_none_or(|v| data.version == v)),
        };
        Ok(Fresh { latest: head, item })
    }
}

/// Checks every declared constraint against the stored data: scans the guard items and heads
/// (idempotency table, `GUARD#` and `HEAD#`), then the command table (the newest row of each
/// item) and the data table (items whose rows are gone), all strongly consistent, and compares
/// what the newest version of each item holds with the guard items: a unique value held by no
/// guard or by the wrong item, two live holders, a member missing from or extra in a set, a set
/// over its bound, a stale head mirror, a dangling reference. Each difference is confirmed on
/// fresh consistent reads (each item's head, then its row at `latest`) before it is reported.
///
/// The guards are scanned first: a member a command joined before that scan has its command row
/// written in the same transaction, so the later scan finds it. With `tenant`, only that tenant's
/// items and tenant-scoped guards are checked (global uniques need the whole table). Items whose
/// `entity` is not set are not checked.
///
/// ```no_run
/// # async fn example(store: &cqrs_store::Store, model: &cqrs_model::Model) -> Result<(), cqrs_store::StoreError> {
/// let report = cqrs_store::constraints::verify(store, model, Some("t1")).await?;
/// for difference in &report.differences {
///     println!("{difference}");
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// A DynamoDB failure.
pub async fn verify(
    store: &Store,
    model: &Model,
    tenant: Option<&str>,
) -> Result<Report, StoreError> {
    let confirmed = verify_confirmed(store, model, tenant).await?;
    Ok(Report {
        differences: confirmed.into_iter().map(|c| c.difference).collect(),
        ..Report::default()
    })
}

async fn verify_confirmed(
    store: &Store,
    model: &Model,
    tenant: Option<&str>,
) -> Result<Vec<Confirmed>, StoreError> {
    let guard_prefix = match tenant {
        Some(t) => format!("{}#{t}#", cqrs_keys::GUARD_KEY_PREFIX),
        None => format!("{}#", cqrs_keys::GUARD_KEY_PREFIX),
    };
    let head_prefix = format!("{}#", cqrs_keys::HEAD_KEY_PREFIX);
    // 1. Guards and heads first (see above).
    let mut guards: BTreeMap<String, Attrs> = BTreeMap::new();
    let mut heads: HashMap<String, Attrs> = HashMap::new();
    for item in store
        .scan_all(&store.tables.idempotency, &[guard_prefix, head_prefix])
        .await?
    {
        let Some(pk) = s_attr(&item, "pk") else {
            continue;
        };
        if pk.starts_with(&format!("{}#", cqrs_keys::GUARD_KEY_PREFIX)) {
            guards.insert(pk, item);
        } else {
            heads.insert(pk, item);
        }
    }
    // 2. The newest stored version of every item of the model's constrained or referenced
    //    entities.
    let relevant = |item: &Item| {
        entity_of(model, item).is_some_and(|e| e.has_constraints() || model.is_referenced(&e.name))
    };
    let mut states: BTreeMap<ItemKey, Item> = BTreeMap::new();
    for table in [&store.tables.command, &store.tables.data] {
        for attrs in store.scan_all(table, &[]).await? {
            let Ok(item) = Item::from_attributes(attrs) else {
                continue;
            };
            if !relevant(&item) {
                continue;
            }
            let key = (item.pk.clone(), item.base_sk().to_string());
            let newer = states
                .get(&key)
                .is_none_or(|known| item.version > known.version);
            if newer {
                states.insert(key, item);
            }
        }
    }
    let in_scope = |item: &Item| tenant.is_none_or(|t| item.tenant_code == t);
    let scoped: BTreeMap<ItemKey, Item> = states
        .iter()
        .filter(|(_, item)| in_scope(item))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let expect = expected(model, &scoped);
    let tokens: HashMap<String, ItemKey> = states
        .keys()
        .map(|(pk, sk)| (cqrs_keys::member_token(pk, sk), (pk.clone(), sk.clone())))
        .collect();

    // 3. Candidate differences, by guard key (confirmed below on fresh reads).
    let mut unique_keys: BTreeMap<String, (String, Vec<String>, BTreeSet<ItemKey>)> =
        BTreeMap::new();
    for (key, (constraint, values, holders)) in &expect.unique {
        let holder = holder_of(guards.get(key));
        let fine = holders.len() == 1 && holder.as_ref() == holders.first().map(|(k, _)| k);
        if !fine {
            let mut candidates: BTreeSet<ItemKey> =
                holders.iter().map(|(k, _)| k.clone()).collect();
            candidates.extend(holder);
            unique_keys.insert(
                key.clone(),
                (constraint.clone(), values.clone(), candidates),
            );
        }
    }
    let mut limit_keys: BTreeSet<String> = BTreeSet::new();
    for (key, guard) in &guards {
        let Some((scope, entity_name, name)) = cqrs_keys::parse_guard_key(key) else {
            continue;
        };
        let Some(entity) = model.entity(entity_name) else {
            continue;
        };
        if let Some(holder) = holder_of(Some(guard))
            && !expect.unique.contains_key(key)
        {
            let _ = scope;
            unique_keys.insert(
                key.clone(),
                (
                    format!("{entity_name}.{name}"),
                    Vec::new(),
                    BTreeSet::from([holder]),
                ),
            );
        }
        if entity.limits.iter().any(|l| l.name == name) {
            let actual: BTreeSet<String> = members_of(Some(guard)).into_iter().collect();
            let wanted: BTreeSet<String> = expect
                .limits
                .get(key)
                .map(|(_, _, _, m)| m.keys().cloned().collect())
                .unwrap_or_default();
            if actual != wanted {
                limit_keys.insert(key.clone());
            }
        }
    }
    for (key, (_, _, at_most, members)) in &expect.limits {
        let actual: BTreeSet<String> = members_of(guards.get(key)).into_iter().collect();
        let wanted: BTreeSet<String> = members.keys().cloned().collect();
        if actual != wanted || members.len() > *at_most as usize {
            limit_keys.insert(key.clone());
        }
    }

    // 4. Confirm each on fresh reads.
    let mut out = Vec::new();
    let mut cache: HashMap<ItemKey, Fresh> = HashMap::new();
    macro_rules! fresh {
        ($key:expr) => {{
            let key: ItemKey = $key.clone();
            if !cache.contains_key(&key) {
                let value = store.fresh(&key).await?;
                cache.insert(key.clone(), value);
            }
            cache.get(&key).cloned().unwrap_or(Fresh {
                latest: None,
                item: None,
            })
        }};
    }
    let claims_of = |item: &Item, wanted: &str| -> bool {
        entity_of(model, item)
            .and_then(|e| plan(model, e, &item.tenant_code, None, item).ok())
            .is_some_and(|p| {
                p.guards
                    .iter()
                    .any(|(g, _)| matches!(g, Guard::Claim { key, .. } | Guard::Join { key, .. } if key == wanted))
            })
    };
    for (key, (constraint, values, candidates)) in unique_keys {
        let guard = store.idempotency_item(&key).await?;
        let guard_holder = holder_of(guard.as_ref());
        let mut holders: Vec<(ItemKey, String, Option<i64>)> = Vec::new();
        let mut ties: HashMap<ItemKey, Option<i64>> = HashMap::new();
        for candidate in candidates.iter().chain(guard_holder.iter()) {
            let state = fresh!(candidate);
            ties.insert(candidate.clone(), state.latest);
            if let Some(item) = &state.item
                && claims_of(item, &key)
                && !holders.iter().any(|(k, _, _)| k == candidate)
            {
                holders.push((candidate.clone(), item.created_at.clone(), state.latest));
            }
        }
        holders.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
        let tie = |k: &ItemKey| (k.clone(), ties.get(k).copied().flatten());
        if holders.len() > 1 {
            out.push(Confirmed {
                difference: Difference::TwoHolders {
                    constraint: constraint.clone(),
                    key: key.clone(),
                    values: values.clone(),
                    holders: holders.iter().map(|(k, _, _)| k.clone()).collect(),
                },
                ties: Vec::new(),
            });
        }
        match (holders.first(), &guard_holder) {
            (Some((first, _, _)), held)
                if held.as_ref() != Some(first)
                    && !holders.iter().any(|(k, _, _)| Some(k) == held.as_ref()) =>
            {
                let mut t = vec![tie(first)];
                t.extend(held.iter().map(tie));
                out.push(Confirmed {
                    difference: Difference::Unclaimed {
                        constraint: constraint.clone(),
                        key: key.clone(),
                        values: values.clone(),
                        holder: first.clone(),
                        guard_holder: held.clone(),
                    },
                    ties: t,
                });
            }
            (None, Some(held)) => out.push(Confirmed {
                difference: Difference::StrayClaim {
                    constraint: constraint.clone(),
                    key: key.clone(),
                    guard_holder: held.clone(),
                },
                ties: vec![tie(held)],
            }),
            _ => {}
        }
    }
    for key in limit_keys {
        let Some((_, entity_name, name)) = cqrs_keys::parse_guard_key(&key) else {
            continue;
        };
        let Some(limit) = model
            .entity(entity_name)
            .and_then(|e| e.limits.iter().find(|l| l.name == name))
        else {
            continue;
        };
        let constraint = format!("{entity_name}.{name}");
        let guard = store.idempotency_item(&key).await?;
        let actual: BTreeSet<String> = members_of(guard.as_ref()).into_iter().collect();
        let wanted = expect.limits.get(&key);
        let group = wanted.map(|w| w.1.clone()).unwrap_or_default();
        let mut candidates: BTreeSet<ItemKey> = wanted
            .map(|w| w.3.values().cloned().collect())
            .unwrap_or_default();
        candidates.extend(actual.iter().filter_map(|t| tokens.get(t).cloned()));
        let mut members: BTreeMap<String, (ItemKey, Option<i64>)> = BTreeMap::new();
        let mut latest: HashMap<ItemKey, Option<i64>> = HashMap::new();
        for candidate in &candidates {
            let state = fresh!(candidate);
            latest.insert(candidate.clone(), state.latest);
            if state
                .item
                .as_ref()
                .is_some_and(|item| claims_of(item, &key))
            {
                members.insert(
                    cqrs_keys::member_token(&candidate.0, &candidate.1),
                    (candidate.clone(), state.latest),
                );
            }
        }
        for (token, (member, v)) in &members {
            if !actual.contains(token) {
                out.push(Confirmed {
                    difference: Difference::MissingMember {
                        constraint: constraint.clone(),
                        key: key.clone(),
                        group: group.clone(),
                        member: member.clone(),
                    },
                    ties: vec![(member.clone(), *v)],
                });
            }
        }
        for token in actual.iter().filter(|t| !members.contains_key(*t)) {
            let member = tokens.get(token).cloned();
            let ties = member
                .iter()
                .map(|m| (m.clone(), latest.get(m).copied().flatten()))
                .collect();
            out.push(Confirmed {
                difference: Difference::ExtraMember {
                    constraint: constraint.clone(),
                    key: key.clone(),
                    token: token.clone(),
                    member,
                },
                ties,
            });
        }
        if members.len() > limit.at_most as usize {
            out.push(Confirmed {
                difference: Difference::OverLimit {
                    constraint,
                    key: key.clone(),
                    group,
                    members: members.len(),
                    at_most: limit.at_most,
                },
                ties: Vec::new(),
            });
        }
    }
    // Head mirrors of referenced items.
    for (key, item) in &scoped {
        let Some(entity) = entity_of(model, item) else {
            continue;
        };
        if !model.is_referenced(&entity.name) {
            continue;
        }
        let head = heads.get(&cqrs_keys::head_key(&key.0, &key.1));
        if mirror_matches(model, entity, item, head) {
            continue;
        }
        let state = fresh!(key);
        let Some(newest) = &state.item else {
            continue;
        };
        let head = store
            .idempotency_item(&cqrs_keys::head_key(&key.0, &key.1))
            .await?;
        if state.latest == Some(newest.version)
            && !mirror_matches(model, entity, newest, head.as_ref())
        {
            out.push(Confirmed {
                difference: Difference::StaleMirror {
                    pk: key.0.clone(),
                    sk: key.1.clone(),
                    latest: state.latest,
                },
                ties: vec![(key.clone(), state.latest)],
            });
        }
    }
    // Dangling references (reported only).
    for (constraint, from, target, condition) in &expect.references {
        if target_refusal(states.get(target), condition).is_none() {
            continue;
        }
        let from_state = fresh!(from);
        let still = from_state.item.as_ref().is_some_and(|item| {
            !item.is_deleted
                && entity_of(model, item)
                    .and_then(|e| plan(model, e, &item.tenant_code, None, item).ok())
                    .is_some_and(|p| {
                        p.guards.iter().any(|(g, _)| {
                            matches!(g, Guard::RequireHead { pk, sk, .. } if (pk, sk) == (&target.0, &target.1))
                        })
                    })
        });
        let target_state = fresh!(target);
        if let (true, Some(reason)) = (still, target_refusal(target_state.item.as_ref(), condition))
        {
            out.push(Confirmed {
                difference: Difference::Dangling {
                    constraint: constraint.clone(),
                    item: from.clone(),
                    target: target.clone(),
                    reason,
                },
                ties: Vec::new(),
            });
        }
    }
    Ok(out)
}

/// Whether `head` mirrors `item` (its version, deletion and mirrored attributes).
fn mirror_matches(model: &Model, entity: &Entity, item: &Item, head: Option<&Attrs>) -> bool {
    let Some(head) = head else {
        return false;
    };
    let number = |name: &str| match head.get(name) {
        Some(AttributeValue::N(n)) => n.parse::<i64>().ok(),
        _ => None,
    };
    let wanted = mirror_of(
        model,
        entity,
        &EntityAttributes::of(&item.attributes),
        item.is_deleted,
    );
    let mirrored: BTreeMap<String, String> = match head.get(crate::guard::MIRROR_ATTRIBUTES) {
        Some(AttributeValue::M(m)) => m
            .iter()
            .filter_map(|(k, v)| match v {
                AttributeValue::S(s) => Some((k.clone(), s.clone())),
                _ => None,
            })
            .collect(),
        _ => return false,
    };
    number(crate::guard::MIRROR_VERSION) == Some(item.version)
        && number("latest") == Some(item.version)
        && head.get(crate::guard::MIRROR_DELETED) == Some(&AttributeValue::Bool(wanted.is_deleted))
        && mirrored == wanted.attributes
}

/// The most rounds of [`repair`]: a round's fixes that a concurrent command cancelled are
/// confirmed again and retried in the next.
pub const REPAIR_ROUNDS: usize = 5;

/// Repairs what [`verify`] finds, newest wins: each fix is one transaction tied to the version of
/// every item it is about (a `ConditionCheck` of the item's head, `latest = :v`, the version the
/// difference was confirmed at), so it never races a live command: a command on that item commits
/// either before (the check fails, the difference is confirmed again and the fix retried, up to
/// [`REPAIR_ROUNDS`] rounds) or after (its own move is computed from that version). A missing claim
/// is put (conditional on the guard being absent or still naming the item confirmed wrong), a
/// stray claim deleted (conditional on its holder), a missing member added and an extra one
/// removed (no bound: a group over its bound is reported and refuses joins until it is back
/// under), a stale head mirror written from the newest version (conditional on `latest = :v`).
/// Two live holders of one value, groups over their bound and dangling references are reported,
/// never repaired: the returned report's `differences` are what is left.
///
/// ```no_run
/// # async fn example(store: &cqrs_store::Store, model: &cqrs_model::Model) -> Result<(), cqrs_store::StoreError> {
/// let report = cqrs_store::constraints::repair(store, model, None).await?;
/// println!("{} fixed, {} left", report.repaired.len(), report.differences.len());
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// A DynamoDB failure other than a cancelled fix.
pub async fn repair(
    store: &Store,
    model: &Model,
    tenant: Option<&str>,
) -> Result<Report, StoreError> {
    let mut report = Report::default();
    let mut unknown_tokens = HashSet::new();
    for _ in 0..REPAIR_ROUNDS {
        let confirmed = verify_confirmed(store, model, tenant).await?;
        let mut cancelled = 0;
        for fix in confirmed.iter().filter(|c| c.difference.is_repairable()) {
            if !fix_now(&fix.difference, &mut unknown_tokens) {
                continue;
            }
            if store.apply_fix(model, fix).await? {
                report.repaired.push(fix.difference.clone());
            } else {
                cancelled += 1;
            }
        }
        report.retries += cancelled;
        let fixed_any = confirmed.iter().any(|c| c.difference.is_repairable());
        if !fixed_any {
            report.differences = confirmed.into_iter().map(|c| c.difference).collect();
            return Ok(report);
        }
    }
    report.differences = verify(store, model, tenant).await?.differences;
    Ok(report)
}

/// Whether a round of [`repair`] fixes `difference` now. A member token no stored version has
/// (`ExtraMember` with `member: None`) is removed only when an earlier round found it unknown too:
/// a verify's scans are no snapshot (a Scan may see a command's token in a guard's set before it
/// sees that command's version row), and removing a live member's token would let its group admit
/// a join over the bound until the next repair. A later round's scans start after the first
/// sighting, so a token still unknown then belongs to no committed version.
fn fix_now(difference: &Difference, unknown_tokens: &mut HashSet<(String, String)>) -> bool {
    match difference {
        Difference::ExtraMember {
            key,
            token,
            member: None,
            ..
        } => !unknown_tokens.insert((key.clone(), token.clone())),
        _ => true,
    }
}

impl Store {
    /// Sends one repair transaction; `false` when a condition (a tie) failed or a concurrent
    /// transaction got in the way.
    async fn apply_fix(&self, model: &Model, fix: &Confirmed) -> Result<bool, StoreError> {
        use aws_sdk_dynamodb::types::{ConditionCheck, Delete, Put, TransactWriteItem, Update};
        let build = |e: aws_sdk_dynamodb::error::BuildError| StoreError::Dynamo(e.to_string());
        let s = |v: &str| AttributeValue::S(v.to_string());
        let table = &self.tables.idempotency;
        let mut items: Vec<TransactWriteItem> = Vec::new();
        let tie =
            |((pk, sk), latest): &(ItemKey, Option<i64>)| -> Result<TransactWriteItem, StoreError> {
                let check = ConditionCheck::builder()
                    .table_name(table)
                    .key("pk", s(&cqrs_keys::head_key(pk, sk)));
                let check = match latest {
                    Some(v) => check
                        .condition_expression("#latest = :v")
                        .expression_attribute_names("#latest", "latest")
                        .expression_attribute_values(":v", AttributeValue::N(v.to_string())),
                    None => check.condition_expression("attribute_not_exists(pk)"),
                };
                Ok(TransactWriteItem::builder()
                    .condition_check(check.build().map_err(build)?)
                    .build())
            };
        match &fix.difference {
            Difference::Unclaimed {
                constraint,
                key,
                values,
                holder,
                guard_holder,
            } => {
                let put = Put::builder()
                    .table_name(table)
                    .item("pk", s(key))
                    .item(crate::guard::GUARD_CONSTRAINT, s(constraint))
                    .item(
                        crate::guard::GUARD_VALUES,
                        AttributeValue::L(values.iter().map(|v| s(v)).collect()),
                    )
                    .item(GUARD_OWNER_PK, s(&holder.0))
                    .item(GUARD_OWNER_SK, s(&holder.1));
                let put = match guard_holder {
                    None => put.condition_expression("attribute_not_exists(pk)"),
                    Some((pk, sk)) => put
                        .condition_expression("#o = :o AND #s = :s")
                        .expression_attribute_names("#o", GUARD_OWNER_PK)
                        .expression_attribute_names("#s", GUARD_OWNER_SK)
                        .expression_attribute_values(":o", s(pk))
                        .expression_attribute_values(":s", s(sk)),
                };
                items.push(
                    TransactWriteItem::builder()
                        .put(put.build().map_err(build)?)
                        .build(),
                );
                for t in &fix.ties {
                    items.push(tie(t)?);
                }
            }
            Difference::StrayClaim {
                key, guard_holder, ..
            } => {
                let delete = Delete::builder()
                    .table_name(table)
                    .key("pk", s(key))
                    .condition_expression("#o = :o AND #s = :s")
                    .expression_attribute_names("#o", GUARD_OWNER_PK)
                    .expression_attribute_names("#s", GUARD_OWNER_SK)
                    .expression_attribute_values(":o", s(&guard_holder.0))
                    .expression_attribute_values(":s", s(&guard_holder.1))
                    .build()
                    .map_err(build)?;
                items.push(TransactWriteItem::builder().delete(delete).build());
                for t in &fix.ties {
                    items.push(tie(t)?);
                }
            }
            Difference::MissingMember {
                constraint,
                key,
                group,
                member,
            } => {
                let token = cqrs_keys::member_token(&member.0, &member.1);
                let update = Update::builder()
                    .table_name(table)
                    .key("pk", s(key))
                    .update_expression("SET #c = :c, #v = :v ADD #m :toks")
                    .expression_attribute_names("#c", crate::guard::GUARD_CONSTRAINT)
                    .expression_attribute_names("#v", crate::guard::GUARD_VALUES)
                    .expression_attribute_names("#m", GUARD_MEMBERS)
                    .expression_attribute_values(":c", s(constraint))
                    .expression_attribute_values(
                        ":v",
                        AttributeValue::L(group.iter().map(|v| s(v)).collect()),
                    )
                    .expression_attribute_values(":toks", AttributeValue::Ss(vec![token]))
                    .build()
                    .map_err(build)?;
                items.push(TransactWriteItem::builder().update(update).build());
                for t in &fix.ties {
                    items.push(tie(t)?);
                }
            }
            Difference::ExtraMember { key, token, .. } => {
                let update = Update::builder()
                    .table_name(table)
                    .key("pk", s(key))
                    .update_expression("DELETE #m :toks")
                    .expression_attribute_names("#m", GUARD_MEMBERS)
                    .expression_attribute_values(":toks", AttributeValue::Ss(vec![token.clone()]))
                    .build()
                    .map_err(build)?;
                items.push(TransactWriteItem::builder().update(update).build());
                for t in &fix.ties {
                    items.push(tie(t)?);
                }
            }
            Difference::StaleMirror { pk, sk, latest } => {
                let Some(latest) = latest else {
                    return Ok(false);
                };
                let fresh = self.fresh(&(pk.clone(), sk.clone())).await?;
                let Some(item) = fresh.item.filter(|i| i.version == *latest) else {
                    return Ok(false);
                };
                let Some(entity) = entity_of(model, &item) else {
                    return Ok(false);
                };
                let mirror = mirror_of(
                    model,
                    entity,
                    &EntityAttributes::of(&item.attributes),
                    item.is_deleted,
                );
                let update = Update::builder()
                    .table_name(table)
                    .key("pk", s(&cqrs_keys::head_key(pk, sk)))
                    .update_expression("SET #mv = :v, #del = :del, #m = :m")
                    .condition_expression("#latest = :v")
                    .expression_attribute_names("#latest", "latest")
                    .expression_attribute_names("#mv", crate::guard::MIRROR_VERSION)
                    .expression_attribute_names("#del", crate::guard::MIRROR_DELETED)
                    .expression_attribute_names("#m", crate::guard::MIRROR_ATTRIBUTES)
                    .expression_attribute_values(":v", AttributeValue::N(latest.to_string()))
                    .expression_attribute_values(":del", AttributeValue::Bool(mirror.is_deleted))
                    .expression_attribute_values(
                        ":m",
                        AttributeValue::M(
                            mirror
                                .attributes
                                .iter()
                                .map(|(k, v)| (k.clone(), s(v)))
                                .collect(),
                        ),
                    )
                    .build()
                    .map_err(build)?;
                items.push(TransactWriteItem::builder().update(update).build());
            }
            Difference::TwoHolders { .. }
            | Difference::OverLimit { .. }
            | Difference::Dangling { .. } => return Ok(true),
        }
        let sent = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        match sent {
            Ok(_) => Ok(true),
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(
                        aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(_)
                    )
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(sdk_error("TransactWriteItems (constraint repair)", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tables;

    const MODEL: &str = r#"
[entities.copy]
pk = "COPY#{tenant}"
sk = "{copyId}"
attributes.copyId = { type = "string", required = true, max = 40 }
attributes.copyNo = { type = "number", required = true }
unique.number = { attributes = "copyNo" }
"#;

    fn copy(version: i64, no: u32) -> Item {
        let mut item = Item::example();
        item.pk = "COPY#t1".into();
        item.sk = cqrs_keys::add_sort_key_version("C1", version);
        item.id = cqrs_keys::generate_id("COPY#t1", "C1");
        item.version = version;
        item.tenant_code = "t1".into();
        item.entity = Some("copy".into());
        item.attributes =
            serde_json::from_str(&format!(r#"{{"copyId":"C1","copyNo":{no}}}"#)).unwrap();
        item
    }

    #[test]
    fn an_unknown_member_token_is_removed_only_once_a_later_scan_still_finds_no_item_for_it() {
        // A verify's scans are not one snapshot: a scan may see a command's member token in a
        // guard's set before it sees that command's version row (a transaction's items are not
        // made visible to a Scan together). Removing the token then would let the group admit one
        // join over its bound until the next repair put the member back.
        let unknown = Difference::ExtraMember {
            constraint: "loan.loans_out".into(),
            key: "GUARD#t1#loan#loans_out#abc".into(),
            token: "tok1".into(),
            member: None,
        };
        let known = Difference::ExtraMember {
            constraint: "loan.loans_out".into(),
            key: "GUARD#t1#loan#loans_out#abc".into(),
            token: "tok2".into(),
            member: Some(("LOAN#t1".into(), "L1".into())),
        };
        let mut seen = std::collections::HashSet::new();
        assert!(
            !fix_now(&unknown, &mut seen),
            "first sighting of an unknown token is fixed at once"
        );
        assert!(
            fix_now(&known, &mut seen),
            "a known extra member waits for nothing"
        );
        assert!(
            fix_now(&unknown, &mut seen),
            "a token still unknown on the next round is removed"
        );
    }

    /// A fix is tied to the version its difference was confirmed at: a command that wrote the item
    /// in between makes it fail, and nothing is written.
    #[tokio::test]
    async fn a_fix_confirmed_at_an_older_version_is_not_applied() {
        let model = Model::parse(MODEL).unwrap();
        let t = cqrs_testkit::fresh_tables().await;
        let store = Store::new(
            t.client.clone(),
            Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
        );
        // Version 1 written without its claim: unclaimed.
        store.write_version(&copy(1, 5), None, None).await.unwrap();
        let confirmed = verify_confirmed(&store, &model, None).await.unwrap();
        let [fix] = confirmed.as_slice() else {
            panic!("{confirmed:?}")
        };
        assert!(
            matches!(fix.difference, Difference::Unclaimed { .. }),
            "{fix:?}"
        );
        assert_eq!(
            fix.ties,
            [(("COPY#t1".to_string(), "C1".to_string()), Some(1))]
        );
        // A command moves the item on (to another value, with its own moves) before the fix.
        let moves = plan(
            &model,
            model.entity("copy").unwrap(),
            "t1",
            Some(&copy(1, 5)),
            &copy(2, 6),
        )
        .unwrap();
        // Its base held 5 without a guard: the release of an absent guard holds.
        let guards: Vec<Guard> = moves.guards.into_iter().map(|(g, _)| g).collect();
        store
            .write_version_constrained(&copy(2, 6), Some(1), None, &guards, None)
            .await
            .unwrap();
        assert!(!store.apply_fix(&model, fix).await.unwrap());
        let five = cqrs_keys::guard_key("t1", "copy", "number", &["5".into()]);
        assert_eq!(store.idempotency_item(&five).await.unwrap(), None);
        // Confirmed again, nothing differs: the command's own move claimed 6.
        assert!(verify(&store, &model, None).await.unwrap().is_clean());
    }
}
