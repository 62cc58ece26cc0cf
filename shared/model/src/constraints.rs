//! Declared constraints and write rules of an entity: `unique`, `limits`, `references` and `roles`
//! under `[entities.<name>]` in `model.toml`, every one optional (a model without them behaves
//! exactly as before).
//!
//! ```toml
//! [entities.loan]
//! # ... keys and attributes ...
//! limits.loans_out = { per = "memberId", when = { status = ["out"] }, at_most = 3 }
//! references.copy = { entity = "copy", unless = { reference = ["true"] } }
//! roles = { create = ["librarian"], update = ["librarian"], delete = ["librarian"] }
//!
//! [entities.copy]
//! # ... keys and attributes ...
//! unique.copy_number = { attributes = ["isbn", "copyNo"] }   # scope "tenant" (default) or "global"
//! ```
//!
//! This module holds the pure semantics the store and the command handler share:
//! - an item *holds* a [`Unique`] value when it is live and every listed attribute is present
//!   ([`Unique::value`]): each attribute formatted as a key part, so `case = "lower"` makes the
//!   constraint case-insensitive;
//! - an item is a *member* of a [`Limit`]'s group when it is live, the [`Condition`] holds and every
//!   `per` attribute is present ([`Limit::group`]);
//! - a [`Reference`] names the target item by the target's key attributes
//!   ([`Reference::target_attributes`]); its condition applies to the target's current version,
//!   whose head mirrors the attributes the conditions name ([`Model::mirrored`]);
//! - [`WriteRule`]: the roles that may create, update and delete ([`WriteOp`]).
//!
//! Every constraint is enforced by guard items in the command's own transaction; one command of an
//! entity adds at most [`guard_budget`] of them, which the model check keeps within
//! [`MAX_CONSTRAINT_GUARDS`].

use std::collections::{BTreeMap, BTreeSet};

use crate::attribute::AttrType;
use crate::derive::{DeriveError, ItemView};
use crate::model::{Entity, Model};
use crate::value::{AttributeSource, ValueRef};

/// The most guard items one command may add: a transaction holds 100 items, and every command
/// writes its version row, its head and (with an idempotency key) its idempotency record: 100 - 3.
/// The same cap as the store's `MAX_GUARDS`.
///
/// ```
/// assert_eq!(cqrs_model::MAX_CONSTRAINT_GUARDS, 97);
/// ```
pub const MAX_CONSTRAINT_GUARDS: usize = 97;

/// The largest `at_most` of a limit (a limit's guard item holds the set of its members).
///
/// ```
/// assert_eq!(cqrs_model::MAX_AT_MOST, 100);
/// ```
pub const MAX_AT_MOST: u32 = 100;

/// Whether a unique value is unique within each tenant or across every tenant.
///
/// ```
/// use cqrs_model::Scope;
/// assert_eq!(Scope::parse("global"), Some(Scope::Global));
/// assert_eq!(Scope::parse("everywhere"), None);
/// assert_eq!(Scope::Tenant.as_str(), "tenant");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Unique within the item's tenant (the default).
    Tenant,
    /// Unique across every tenant.
    Global,
}

impl Scope {
    /// Reads `tenant` or `global`.
    ///
    /// ```
    /// assert_eq!(cqrs_model::Scope::parse("tenant"), Some(cqrs_model::Scope::Tenant));
    /// ```
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "tenant" => Some(Scope::Tenant),
            "global" => Some(Scope::Global),
            _ => None,
        }
    }

    /// The scope as the model file writes it.
    ///
    /// ```
    /// assert_eq!(cqrs_model::Scope::Global.as_str(), "global");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Tenant => "tenant",
            Scope::Global => "global",
        }
    }
}

/// A condition on an item's attributes: `when = { status = ["out"] }` (each named attribute holds one
/// of its values) and `unless = { reference = ["true"] }` (no named attribute holds one of its
/// values; an absent attribute holds none). The index `when` syntax, plus `unless`.
///
/// ```
/// use std::collections::BTreeMap;
/// use cqrs_model::{Condition, ValueRef};
///
/// let condition = Condition {
///     when: BTreeMap::from([("status".to_string(), vec!["out".to_string()])]),
///     unless: BTreeMap::from([("lost".to_string(), vec!["true".to_string()])]),
/// };
/// assert!(condition.holds(&[("status", ValueRef::Str("out"))]));
/// assert!(!condition.holds(&[("status", ValueRef::Str("returned"))]));
/// assert!(!condition.holds(&[("status", ValueRef::Str("out")), ("lost", ValueRef::Bool(true))]));
/// assert!(Condition::default().holds(&[("status", ValueRef::Null)]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Condition {
    /// Each attribute must be present with one of its values.
    pub when: BTreeMap<String, Vec<String>>,
    /// No attribute may be present with one of its values.
    pub unless: BTreeMap<String, Vec<String>>,
}

/// The text a condition compares: strings as they are, booleans as `true`/`false`, numbers as their
/// text; `None` for an absent or `null` attribute (and maps and lists, which conditions never name).
fn condition_text<'v>(value: Option<ValueRef<'v>>) -> Option<std::borrow::Cow<'v, str>> {
    match value? {
        ValueRef::Str(s) | ValueRef::Num(s) => Some(std::borrow::Cow::Borrowed(s)),
        ValueRef::Bool(b) => Some(std::borrow::Cow::Borrowed(if b { "true" } else { "false" })),
        ValueRef::Null | ValueRef::Other(_) => None,
    }
}

impl Condition {
    /// True when every `when` attribute is present with one of its values and no `unless` attribute
    /// is present with one of its values (booleans compared as `"true"`/`"false"`, numbers as their
    /// text).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use cqrs_model::{Condition, ValueRef};
    ///
    /// let not_reference = Condition {
    ///     unless: BTreeMap::from([("reference".to_string(), vec!["true".to_string()])]),
    ///     ..Condition::default()
    /// };
    /// assert!(not_reference.holds(&[("reference", ValueRef::Bool(false))]));
    /// assert!(not_reference.holds(&[("shelf", ValueRef::Str("A1"))])); // absent: not a reference
    /// assert!(!not_reference.holds(&[("reference", ValueRef::Bool(true))]));
    /// ```
    pub fn holds(&self, attributes: &dyn AttributeSource) -> bool {
        let holds_one = |name: &str, values: &[String]| {
            condition_text(attributes.attribute(name))
                .is_some_and(|text| values.iter().any(|v| *v == *text))
        };
        self.when
            .iter()
            .all(|(name, values)| holds_one(name, values))
            && !self
                .unless
                .iter()
                .any(|(name, values)| holds_one(name, values))
    }

    /// Whether the condition names no attribute (it always holds).
    ///
    /// ```
    /// assert!(cqrs_model::Condition::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.when.is_empty() && self.unless.is_empty()
    }

    /// Every attribute the condition names, `when` first, each once.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// let c = cqrs_model::Condition {
    ///     when: BTreeMap::from([("status".to_string(), vec!["out".to_string()])]),
    ///     unless: BTreeMap::from([("status".to_string(), vec!["lost".to_string()])]),
    /// };
    /// assert_eq!(c.attributes().collect::<Vec<_>>(), ["status"]);
    /// ```
    pub fn attributes(&self) -> impl Iterator<Item = &str> {
        let mut seen = BTreeSet::new();
        self.when
            .keys()
            .chain(self.unless.keys())
            .map(String::as_str)
            .filter(move |name| seen.insert(*name))
    }
}

/// `unique.<name> = { attributes = ["isbn", "copyNo"], scope = "tenant" }`: no two live items of the
/// entity hold the same values (per tenant, or across tenants).
///
/// ```
/// let model = cqrs_model::Model::parse(r#"
/// [entities.user]
/// pk = "USER#{tenant}"
/// sk = "{userId}"
/// attributes.userId = { type = "string", required = true, max = 26 }
/// attributes.email = { type = "string", max = 254, case = "lower" }
/// unique.email = { attributes = "email" }
/// "#).unwrap();
/// let user = model.entity("user").unwrap();
/// assert_eq!(user.unique[0].name, "email");
/// assert_eq!(user.unique[0].attributes, ["email"]);
/// assert_eq!(user.unique[0].scope, cqrs_model::Scope::Tenant);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unique {
    /// The constraint's name (`copy_number`), unique within the entity.
    pub name: String,
    /// The attributes whose values together are unique, in the declared order.
    pub attributes: Vec<String>,
    /// Per tenant or global.
    pub scope: Scope,
}

/// One attribute value as a constraint value: formatted as a key part, as key templates format it
/// ([`crate::Attribute::key_part`]: `case`, `width`, timestamps in fixed-width UTC), so two values that
/// would make the same key are the same value. A value no key could hold (a string with `#`, a
/// number that is not a non-negative integer) keeps a canonical text of its own instead, since a
/// constraint value goes into a digest, never into a key: strings with their case applied,
/// numbers in a normal form that agrees with the key part for every whole number. `None` for an
/// absent or `null` attribute.
fn value_part(entity: &Entity, name: &str, value: Option<ValueRef<'_>>) -> Option<String> {
    let value = match value? {
        ValueRef::Null => return None,
        v => v,
    };
    let attr = entity.attributes.get(name);
    if let Some(attr) = attr
        && let Ok(part) = attr.key_part(value, None)
    {
        return Some(part);
    }
    Some(match value {
        ValueRef::Str(s) => match attr.and_then(|a| a.case) {
            Some(case) if attr.is_some_and(|a| a.ty == AttrType::String) => case.apply(s),
            _ => s.to_string(),
        },
        ValueRef::Num(n) => canonical_number(n).unwrap_or_else(|| n.to_string()),
        ValueRef::Bool(b) => b.to_string(),
        // Maps and lists: the model check refuses them in constraints.
        ValueRef::Other(kind) => format!("<{kind}>"),
        ValueRef::Null => return None,
    })
}

/// A number's normal form: a whole number as its digits without leading zeros (as its key part),
/// any other as `[-]<digits>E<exponent>` with no leading or trailing zero digit. `None` when the text
/// is not a number.
fn canonical_number(text: &str) -> Option<String> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (rest.get(..at)?, rest.get(at + 1..)?.parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let digits = format!("{int}{frac}");
    let mut exponent = exponent.checked_sub(i64::try_from(frac.len()).ok()?)?;
    let digits = digits.trim_start_matches('0');
    let trimmed = digits.trim_end_matches('0');
    exponent = exponent.checked_add(i64::try_from(digits.len() - trimmed.len()).ok()?)?;
    if trimmed.is_empty() {
        return Some("0".into());
    }
    let sign = if negative { "-" } else { "" };
    if (0..=40).contains(&exponent) {
        let zeros = "0".repeat(usize::try_from(exponent).ok()?);
        Some(format!("{sign}{trimmed}{zeros}"))
    } else {
        Some(format!("{sign}{trimmed}E{exponent}"))
    }
}

/// The formatted values of `names`, `None` when any is absent or `null`.
fn values_of(
    entity: &Entity,
    names: &[String],
    attributes: &dyn AttributeSource,
) -> Option<Vec<String>> {
    names
        .iter()
        .map(|name| value_part(entity, name, attributes.attribute(name)))
        .collect()
}

impl Unique {
    /// The values the item holds (each attribute formatted as a key part, as key templates format
    /// it, so `case = "lower"` makes the constraint case-insensitive): `None` when the item is
    /// deleted or any listed attribute is absent or `null` (not constrained, as SQL's NULL).
    ///
    /// ```
    /// use cqrs_model::{Model, ValueRef};
    ///
    /// let model = Model::parse(r#"
    /// [entities.copy]
    /// pk = "COPY#{tenant}"
    /// sk = "{copyId}"
    /// attributes.copyId = { type = "string", required = true, max = 40 }
    /// attributes.isbn = { type = "string", max = 13, case = "upper" }
    /// attributes.copyNo = { type = "number", width = 4 }
    /// unique.copy_number = { attributes = ["isbn", "copyNo"] }
    /// "#).unwrap();
    /// let copy = model.entity("copy").unwrap();
    /// let unique = &copy.unique[0];
    /// let attrs = [("isbn", ValueRef::Str("97801x")), ("copyNo", ValueRef::Num("7"))];
    /// assert_eq!(unique.value(copy, &attrs, false), Some(vec!["97801X".to_string(), "0007".to_string()]));
    /// assert_eq!(unique.value(copy, &attrs, true), None);
    /// assert_eq!(unique.value(copy, &[("isbn", ValueRef::Str("1"))], false), None);
    /// ```
    pub fn value(
        &self,
        entity: &Entity,
        attributes: &dyn AttributeSource,
        is_deleted: bool,
    ) -> Option<Vec<String>> {
        if is_deleted {
            return None;
        }
        values_of(entity, &self.attributes, attributes)
    }
}

/// `limits.<name> = { per = "memberId", when = { status = ["out"] }, at_most = 3 }`: at most
/// `at_most` live items of the entity for which the condition holds, per value of the `per`
/// attributes (one group per tenant when `per` is empty).
///
/// ```
/// let model = cqrs_model::Model::parse(r#"
/// [entities.loan]
/// pk = "LOAN#{tenant}"
/// sk = "{loanId}"
/// attributes.loanId = { type = "string", required = true, max = 26 }
/// attributes.memberId = { type = "string", required = true, max = 40 }
/// attributes.status = { type = "enum", values = ["out", "returned"], required = true }
/// limits.loans_out = { per = "memberId", when = { status = ["out"] }, at_most = 3 }
/// "#).unwrap();
/// let limit = &model.entity("loan").unwrap().limits[0];
/// assert_eq!((limit.name.as_str(), limit.at_most), ("loans_out", 3));
/// assert_eq!(limit.per, ["memberId"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// The constraint's name (`loans_out`), unique within the entity.
    pub name: String,
    /// The grouping attributes (empty: one group per tenant).
    pub per: Vec<String>,
    /// Which items count.
    pub condition: Condition,
    /// The most members a group may have (1 to [`MAX_AT_MOST`]).
    pub at_most: u32,
}

impl Limit {
    /// The group the item is a member of: `None` when it is deleted, the condition does not hold,
    /// or a `per` attribute is absent or `null`; `Some(vec![])` for an empty `per` (one group per
    /// tenant). Values are formatted as [`Unique::value`] formats them.
    ///
    /// ```
    /// use cqrs_model::{Model, ValueRef};
    ///
    /// let model = Model::parse(r#"
    /// [entities.loan]
    /// pk = "LOAN#{tenant}"
    /// sk = "{loanId}"
    /// attributes.loanId = { type = "string", required = true, max = 26 }
    /// attributes.memberId = { type = "string", required = true, max = 40 }
    /// attributes.status = { type = "enum", values = ["out", "returned"], required = true }
    /// limits.loans_out = { per = "memberId", when = { status = ["out"] }, at_most = 3 }
    /// "#).unwrap();
    /// let loan = model.entity("loan").unwrap();
    /// let limit = &loan.limits[0];
    /// let out = [("memberId", ValueRef::Str("m1")), ("status", ValueRef::Str("out"))];
    /// let back = [("memberId", ValueRef::Str("m1")), ("status", ValueRef::Str("returned"))];
    /// assert_eq!(limit.group(loan, &out, false), Some(vec!["m1".to_string()]));
    /// assert_eq!(limit.group(loan, &back, false), None);
    /// assert_eq!(limit.group(loan, &out, true), None);
    /// ```
    pub fn group(
        &self,
        entity: &Entity,
        attributes: &dyn AttributeSource,
        is_deleted: bool,
    ) -> Option<Vec<String>> {
        if is_deleted || !self.condition.holds(attributes) {
            return None;
        }
        values_of(entity, &self.per, attributes)
    }
}

/// `references.<name> = { entity = "copy", key = { copyId = "copyId" }, unless = { reference =
/// ["true"] } }`: the item's mapped attributes name an existing, live item of the target entity,
/// for which the condition holds. `key` maps each key attribute of the target (the attributes its
/// `pk`/`sk` templates use) to an attribute of this entity; by default the same names.
///
/// ```
/// let model = cqrs_model::Model::parse(r#"
/// [entities.copy]
/// pk = "COPY#{tenant}"
/// sk = "{copyId}"
/// attributes.copyId = { type = "string", required = true, max = 40 }
/// attributes.reference = { type = "boolean" }
///
/// [entities.loan]
/// pk = "LOAN#{tenant}"
/// sk = "{loanId}"
/// attributes.loanId = { type = "string", required = true, max = 26 }
/// attributes.copyId = { type = "string", required = true, max = 40 }
/// references.copy = { entity = "copy", unless = { reference = ["true"] } }
/// "#).unwrap();
/// let reference = &model.entity("loan").unwrap().references[0];
/// assert_eq!(reference.entity, "copy");
/// assert_eq!(reference.key["copyId"], "copyId"); // the default: the same name
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The constraint's name (`copy`), unique within the entity.
    pub name: String,
    /// The target entity.
    pub entity: String,
    /// Target key attribute -> this entity's attribute that holds its value.
    pub key: BTreeMap<String, String>,
    /// What the target's current version must satisfy (its head mirrors the named attributes).
    pub condition: Condition,
}

impl Reference {
    /// The target's key attribute values, taken from this item: (target attribute, value) pairs,
    /// borrowed from the reference's names and the item's values, ready to be an
    /// [`AttributeSource`] of the target (a `Vec<(&str, ValueRef)>` is one). `None` when a mapped
    /// attribute is absent or `null`: the item references nothing.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use cqrs_model::{Condition, Reference, ValueRef};
    ///
    /// let reference = Reference {
    ///     name: "copy".into(),
    ///     entity: "copy".into(),
    ///     key: BTreeMap::from([("copyId".to_string(), "bookCopy".to_string())]),
    ///     condition: Condition::default(),
    /// };
    /// let attrs = [("bookCopy", ValueRef::Str("C-1"))];
    /// assert_eq!(reference.target_attributes(&attrs), Some(vec![("copyId", ValueRef::Str("C-1"))]));
    /// assert_eq!(reference.target_attributes(&[("copyId", ValueRef::Str("C-1"))]), None);
    /// ```
    pub fn target_attributes<'r, 's>(
        &'r self,
        attributes: &'s dyn AttributeSource,
    ) -> Option<Vec<(&'r str, ValueRef<'s>)>> {
        self.key
            .iter()
            .map(|(target, own)| match attributes.attribute(own) {
                None | Some(ValueRef::Null) => None,
                Some(value) => Some((target.as_str(), value)),
            })
            .collect()
    }

    /// The target item's table keys (`pk`, `sk` without version) for this item, in `tenant` (the
    /// command's tenant; a common target's keys take `common`): `None` when the item references
    /// nothing ([`Reference::target_attributes`]), an error when a value cannot make the target's
    /// key. `target` is the entity [`Reference::entity`] names.
    ///
    /// ```
    /// use cqrs_model::{Model, ValueRef};
    ///
    /// let model = Model::parse(r#"
    /// [entities.copy]
    /// pk = "COPY#{tenant}"
    /// sk = "{copyId}"
    /// attributes.copyId = { type = "string", required = true, max = 40 }
    ///
    /// [entities.loan]
    /// pk = "LOAN#{tenant}"
    /// sk = "{loanId}"
    /// attributes.loanId = { type = "string", required = true, max = 26 }
    /// attributes.copyId = { type = "string", max = 40 }
    /// references.copy = { entity = "copy" }
    /// "#).unwrap();
    /// let reference = &model.entity("loan").unwrap().references[0];
    /// let copy = model.entity("copy").unwrap();
    /// let keys = reference.target_key(copy, "t1", &[("copyId", ValueRef::Str("C-1"))]);
    /// assert_eq!(keys, Some(Ok(("COPY#t1".to_string(), "C-1".to_string()))));
    /// assert_eq!(reference.target_key(copy, "t1", &[("loanId", ValueRef::Str("L1"))]), None);
    /// ```
    pub fn target_key(
        &self,
        target: &Entity,
        tenant: &str,
        attributes: &dyn AttributeSource,
    ) -> Option<Result<(String, String), DeriveError>> {
        let values = self.target_attributes(attributes)?;
        let tenant = if target.common {
            cqrs_keys::TENANT_COMMON
        } else {
            tenant
        };
        let view = ItemView {
            tenant,
            created_at: "",
            attributes: &values,
        };
        Some(target.primary_key(&view))
    }

    /// Whether the mapped attributes differ between two versions (a reference is checked again
    /// only when it names another item, or when the item comes back to life).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use cqrs_model::{Condition, Reference, ValueRef};
    ///
    /// let reference = Reference {
    ///     name: "copy".into(),
    ///     entity: "copy".into(),
    ///     key: BTreeMap::from([("copyId".to_string(), "copyId".to_string())]),
    ///     condition: Condition::default(),
    /// };
    /// let old = [("copyId", ValueRef::Str("C-1")), ("status", ValueRef::Str("out"))];
    /// let returned = [("copyId", ValueRef::Str("C-1")), ("status", ValueRef::Str("returned"))];
    /// let moved = [("copyId", ValueRef::Str("C-2"))];
    /// assert!(!reference.changed(&old, &returned));
    /// assert!(reference.changed(&old, &moved));
    /// ```
    pub fn changed(&self, old: &dyn AttributeSource, new: &dyn AttributeSource) -> bool {
        fn present(v: Option<ValueRef<'_>>) -> Option<ValueRef<'_>> {
            v.filter(|v| *v != ValueRef::Null)
        }
        self.key
            .values()
            .any(|own| present(old.attribute(own)) != present(new.attribute(own)))
    }
}

/// Which write a role rule applies to.
///
/// ```
/// assert_eq!(cqrs_model::WriteOp::Delete.as_str(), "delete");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOp {
    /// A command that writes version 1 (or restores a deleted item: that is a delete's rule).
    Create,
    /// A command that writes a later version of a live item.
    Update,
    /// A soft delete, and a restore.
    Delete,
}

impl WriteOp {
    /// The operation as the model file writes it.
    ///
    /// ```
    /// assert_eq!(cqrs_model::WriteOp::Create.as_str(), "create");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            WriteOp::Create => "create",
            WriteOp::Update => "update",
            WriteOp::Delete => "delete",
        }
    }
}

/// `roles = { create = ["librarian"], update = ["librarian"], delete = ["librarian"] }`: the roles
/// (within the caller's tenant) that may create, update and delete the entity's items. An absent
/// operation is open to every caller of the tenant (the rule of a model without `roles`); a global
/// `system_admin` always may.
///
/// ```
/// use cqrs_model::{WriteOp, WriteRule};
///
/// let rule = WriteRule { delete: Some(vec!["librarian".into()]), ..WriteRule::default() };
/// assert_eq!(rule.roles(WriteOp::Delete), Some(&["librarian".to_string()][..]));
/// assert_eq!(rule.roles(WriteOp::Create), None);
/// assert!(!rule.is_empty());
/// assert!(WriteRule::default().is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteRule {
    /// Who may create.
    pub create: Option<Vec<String>>,
    /// Who may update.
    pub update: Option<Vec<String>>,
    /// Who may delete (and restore).
    pub delete: Option<Vec<String>>,
}

impl WriteRule {
    /// The roles that may perform `op`, `None` when every caller of the tenant may.
    ///
    /// ```
    /// let rule = cqrs_model::WriteRule { create: Some(vec!["clerk".into()]), ..Default::default() };
    /// assert_eq!(rule.roles(cqrs_model::WriteOp::Create).unwrap(), ["clerk"]);
    /// ```
    pub fn roles(&self, op: WriteOp) -> Option<&[String]> {
        match op {
            WriteOp::Create => self.create.as_deref(),
            WriteOp::Update => self.update.as_deref(),
            WriteOp::Delete => self.delete.as_deref(),
        }
    }

    /// Whether no operation is restricted (today's rule).
    ///
    /// ```
    /// assert!(cqrs_model::WriteRule::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.create.is_none() && self.update.is_none() && self.delete.is_none()
    }
}

/// Worst-case guard items one command of `entity` adds: 2 per unique (release the old value, claim
/// the new one) + 2 per limit (leave the old group, join the new one) + 1 per reference (a check of
/// the target's head).
///
/// ```
/// let model = cqrs_model::Model::example();
/// assert_eq!(cqrs_model::guard_budget(model.entity("order").unwrap()), 0);
/// ```
pub fn guard_budget(entity: &Entity) -> usize {
    2 * entity.unique.len() + 2 * entity.limits.len() + entity.references.len()
}

impl Entity {
    /// The attributes this entity's `pk` and `sk` templates use, each once, in template order
    /// (`createdAt` included when a template uses it; `tenant` and shards never): what names one
    /// item within a tenant, and what a reference's `key` must cover.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// assert_eq!(model.entity("order_item").unwrap().key_attribute_names(), ["orderId", "itemId"]);
    /// ```
    pub fn key_attribute_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for name in self.pk.attribute_names().chain(self.sk.attribute_names()) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// Whether the entity declares any constraint (`unique`, `limits` or `references`).
    ///
    /// ```
    /// assert!(!cqrs_model::Model::example().entity("order").unwrap().has_constraints());
    /// ```
    pub fn has_constraints(&self) -> bool {
        !(self.unique.is_empty() && self.limits.is_empty() && self.references.is_empty())
    }
}

impl Model {
    /// The references of every entity that name `target`: (referencing entity, reference).
    ///
    /// ```
    /// let model = cqrs_model::Model::parse(r#"
    /// [entities.member]
    /// pk = "MEMBER#{tenant}"
    /// sk = "{memberId}"
    /// attributes.memberId = { type = "string", required = true, max = 40 }
    ///
    /// [entities.loan]
    /// pk = "LOAN#{tenant}"
    /// sk = "{loanId}"
    /// attributes.loanId = { type = "string", required = true, max = 26 }
    /// attributes.memberId = { type = "string", required = true, max = 40 }
    /// references.member = { entity = "member" }
    /// "#).unwrap();
    /// let refs = model.referenced_by("member");
    /// assert_eq!(refs.len(), 1);
    /// assert_eq!((refs[0].0.name.as_str(), refs[0].1.name.as_str()), ("loan", "member"));
    /// assert!(model.referenced_by("loan").is_empty());
    /// ```
    pub fn referenced_by(&self, target: &str) -> Vec<(&Entity, &Reference)> {
        self.entities
            .iter()
            .flat_map(|e| e.references.iter().map(move |r| (e, r)))
            .filter(|(_, r)| r.entity == target)
            .collect()
    }

    /// The target attributes some reference's condition names: what the target's head must
    /// mirror. Empty when `target` is not referenced, or referenced without conditions.
    ///
    /// ```
    /// let model = cqrs_model::Model::parse(r#"
    /// [entities.copy]
    /// pk = "COPY#{tenant}"
    /// sk = "{copyId}"
    /// attributes.copyId = { type = "string", required = true, max = 40 }
    /// attributes.reference = { type = "boolean" }
    ///
    /// [entities.loan]
    /// pk = "LOAN#{tenant}"
    /// sk = "{loanId}"
    /// attributes.loanId = { type = "string", required = true, max = 26 }
    /// attributes.copyId = { type = "string", required = true, max = 40 }
    /// references.copy = { entity = "copy", unless = { reference = ["true"] } }
    /// "#).unwrap();
    /// assert_eq!(model.mirrored("copy").into_iter().collect::<Vec<_>>(), ["reference"]);
    /// assert!(model.mirrored("loan").is_empty());
    /// ```
    pub fn mirrored(&self, target: &str) -> BTreeSet<String> {
        self.referenced_by(target)
            .into_iter()
            .flat_map(|(_, r)| r.condition.attributes().map(str::to_string))
            .collect()
    }

    /// Whether some reference names `target` (its heads carry the mirror: version, `isDeleted` and
    /// the [`Model::mirrored`] attributes).
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// assert!(!model.is_referenced("order"));
    /// ```
    pub fn is_referenced(&self, target: &str) -> bool {
        self.entities
            .iter()
            .any(|e| e.references.iter().any(|r| r.entity == target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_one_normal_form() {
        for (text, normal) in [
            ("5", "5"),
            ("005", "5"),
            ("5.0", "5"),
            ("+5", "5"),
            ("5e1", "50"),
            ("1.50", "15E-1"),
            ("1.5", "15E-1"),
            ("0.15e1", "15E-1"),
            ("-0", "0"),
            ("0.000", "0"),
            ("-2.50", "-25E-1"),
            ("-7", "-7"),
        ] {
            assert_eq!(canonical_number(text).as_deref(), Some(normal), "{text}");
        }
        assert_eq!(canonical_number("x"), None);
        assert_eq!(canonical_number("."), None);
        assert_eq!(canonical_number("1e"), None);
    }
}
