//! Access patterns as queries: what one named pattern, with the parameters a caller gives and the
//! caller's tenant, reads ([`Model::query`] gives a [`PatternQuery`]), and whether a key or an item
//! lies inside that read ([`PatternQuery::in_range`], [`PatternQuery::matches`]).
//!
//! The rules, the same for the table, an overloaded GSI and a native multi-attribute GSI:
//!
//! - `{tenant}` is always the caller's tenant, never a parameter;
//! - every reference of the partition template must be given (a `{shard:N}` partition is `N`
//!   partitions, one per shard, read together); a timestamp cut to a bucket (`{at:month}`) takes a
//!   whole timestamp or the bucket's own form (`2024-01`), and does not also narrow the sort key;
//! - the sort template is read left to right: each given parameter fixes its part, and the read is
//!   the prefix up to the first part not given, ending on a whole part (so `orderId=1` never matches
//!   `10`); a parameter given after a missing one is refused;
//! - `from` / `to` (inclusive) and `after` / `before` (exclusive) bound that first open part; a
//!   timestamp bound may be shortened to a period (`to=2024-01-15` holds the whole day);
//! - on a timestamp part cut to a bucket (`{at:month}`), one rule for all four bounds: a bound at
//!   most as fine as the bucket (`2024`, `2024-01`) bounds whole buckets, exactly; a finer one (a
//!   whole timestamp, or `2024-01-15`) falls inside its bucket, which holds values on both sides of
//!   it, so the keys keep that bucket whatever the bound (`after` and `before` too) and the item's
//!   own timestamp decides ([`PatternQuery::admits_values`]; an item without a readable one is
//!   kept, as it may satisfy the bound): `before=2024-01-15T00:00:00Z` answers 1 to 14 January,
//!   and `after=...&before=...` may both fall inside one month;
//! - on a native multi-attribute index the sort attributes follow DynamoDB's rule: equality on each
//!   attribute left to right, a condition only on the last one given, none skipped.
//!
//! Key conditions are as narrow as DynamoDB can express; where a bound cannot be expressed exactly
//! (an exclusive bound, a shortened period, an upper bound that a shorter part is a proper prefix
//! of: `ui` is at most `ui x`, but its key continues `ui#`, which sorts after `ui x`) the condition
//! reads a little more and [`PatternQuery::matches`] is exact on the keys (with
//! [`PatternQuery::admits_values`], on a bound inside a bucket). Bounds between which no value lies
//! are refused, naming the lower one. An open read ends at `prefix + U+10FFFF`, which no key part
//! may hold ([`cqrs_keys::KeyError::HighestCodePoint`]), so it is past every key of the prefix.
//!
//! ```
//! use cqrs_model::{KeyValue, Model, SortOp};
//!
//! let model = Model::example();
//! let q = model.query("items_of_order", "t1", &[("orderId", "o1")]).unwrap();
//! assert_eq!(q.partitions, [vec![KeyValue::S("ORDER#t1".into())]]);
//! assert_eq!(q.sort.as_ref().unwrap().op, SortOp::BeginsWith("ORDER_ITEM#o1#".into()));
//!
//! let by_status = model.query("orders_by_status", "t1", &[("status", "PENDING")]).unwrap();
//! assert_eq!(by_status.partitions.len(), 10);
//! assert_eq!(model.query("orders_by_status", "t1", &[]).unwrap_err().param, "status");
//! ```

use std::cmp::Ordering;
use std::collections::BTreeSet;

use cqrs_keys::{MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES, fnv1a_64, validate_component};

use crate::attribute::{AttrType, Attribute};
use crate::derive::ItemView;
use crate::model::{CREATED_AT, Entity, Index, KeyAttr, KeyType, Model, Pattern, SortCondition};
use crate::template::{Bucket, Part, Template};
use crate::value::{KeyValue, ValueRef};

/// The parameters that bound the first open part of the sort key: `from` and `to` are inclusive,
/// `after` and `before` exclusive.
///
/// ```
/// assert_eq!(cqrs_model::RANGE_PARAMS, ["from", "to", "after", "before"]);
/// ```
pub const RANGE_PARAMS: [&str; 4] = ["from", "to", "after", "before"];

/// The highest code point: appended to a bound, it sorts after every key that begins with it, as
/// no key part holds it (the key crate refuses it).
const MAX_CHAR: char = '\u{10FFFF}';

/// A request that no query can answer, naming the parameter (or `pattern`) for a 400.
///
/// ```
/// let e = cqrs_model::Model::example().query("nope", "t1", &[]).unwrap_err();
/// assert_eq!(e.param, "pattern");
/// assert!(e.to_string().starts_with("pattern: "));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{param}: {message}")]
pub struct PlanError {
    /// The parameter (`status`, `from`), or `pattern`.
    pub param: String,
    /// What is wrong.
    pub message: String,
}

fn plan_error(param: &str, message: impl Into<String>) -> PlanError {
    PlanError {
        param: param.to_string(),
        message: message.into(),
    }
}

/// The condition on one sort key attribute.
///
/// ```
/// let op = cqrs_model::SortOp::BeginsWith("ORDER#".into());
/// assert!(op.holds(&cqrs_model::KeyValue::S("ORDER#o1".into())));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortOp {
    /// `attr = :v`.
    Equal(KeyValue),
    /// `begins_with(attr, :prefix)`.
    BeginsWith(String),
    /// `attr BETWEEN :lo AND :hi` (inclusive).
    Between(String, String),
    /// `attr <= :hi`: an upper bound with nothing before the bounded part (DynamoDB refuses the
    /// empty string a `BETWEEN "" AND :hi` would need).
    AtMost(String),
}

impl SortOp {
    /// Whether a key value satisfies the condition, as DynamoDB compares (strings byte-wise).
    ///
    /// ```
    /// use cqrs_model::{KeyValue, SortOp};
    /// let between = SortOp::Between("a".into(), "c".into());
    /// assert!(between.holds(&KeyValue::S("b".into())));
    /// assert!(!between.holds(&KeyValue::S("d".into())));
    /// assert!(!between.holds(&KeyValue::N("1".into())));
    /// assert!(SortOp::AtMost("b".into()).holds(&KeyValue::S("a".into())));
    /// ```
    pub fn holds(&self, value: &KeyValue) -> bool {
        match (self, value) {
            (SortOp::Equal(expected), value) => expected == value,
            (SortOp::BeginsWith(prefix), KeyValue::S(s)) => s.starts_with(prefix.as_str()),
            (SortOp::Between(lo, hi), KeyValue::S(s)) => {
                s.as_bytes() >= lo.as_bytes() && s.as_bytes() <= hi.as_bytes()
            }
            (SortOp::AtMost(hi), KeyValue::S(s)) => s.as_bytes() <= hi.as_bytes(),
            _ => false,
        }
    }
}

/// The condition on the last sort key attribute a pattern query narrows.
///
/// ```
/// let model = cqrs_model::Model::example();
/// let q = model.query("orders_of_user", "t1", &[("userId", "u1")]).unwrap();
/// assert_eq!(q.sort.unwrap().attribute, "gsi1sk");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKeyCondition {
    /// The sort key attribute (`sk`, `gsi1sk`, `locCity`).
    pub attribute: String,
    /// The condition.
    pub op: SortOp,
}

/// A bound on the open part, formatted as keys hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bound {
    text: String,
    /// A shortened timestamp (`2024-01-15`): every value that begins with it is "equal".
    period: bool,
    /// A bound finer than the bucket the part is cut to (`2024-01-15T10:00:00Z`, or the period
    /// `2024-01-15`, on `{at:month}`): `text` is then its bucket (`2024-01`), which holds values on
    /// both sides of the bound, so the key admits the bucket whatever the bound (inclusively, for
    /// `after` and `before` too), and this is the bound on the whole timestamp, which
    /// [`PatternQuery::admits_values`] applies to the item's attribute.
    exact: Option<Cut>,
}

/// A bound on a whole timestamp: canonical (`2024-01-15T10:00:00.000Z`) or a period (`2024-01-15`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cut {
    text: String,
    period: bool,
}

impl Cut {
    fn compare(&self, value: &str) -> Ordering {
        compare_cut(&self.text, self.period, value)
    }
}

/// How `value` compares with a bound `text`; a period is equal to every value that begins with it.
fn compare_cut(text: &str, period: bool, value: &str) -> Ordering {
    if period && value.starts_with(text) {
        Ordering::Equal
    } else {
        value.as_bytes().cmp(text.as_bytes())
    }
}

impl Bound {
    fn compare(&self, part: &str) -> Ordering {
        compare_cut(&self.text, self.period, part)
    }

    /// The bound as [`crossed`] compares it: on the whole timestamp when it is finer than the
    /// bucket.
    fn finest(&self) -> (&str, bool) {
        match &self.exact {
            Some(cut) => (&cut.text, cut.period),
            None => (&self.text, self.period),
        }
    }
}

/// The first sort part no parameter fixed, and the bounds asked on it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OpenPart {
    /// Which sort attribute (position in [`PatternQuery::sort_attrs`]).
    attr: usize,
    /// Which reference of that attribute's template (counting every reference).
    reference: usize,
    /// What the template writes right after the open part: its literal (`#`), `None` when the
    /// part ends the key. A part that is a proper prefix of an upper bound is followed by it in
    /// the key, and the upper end of the key condition must still read it.
    follower: Option<String>,
    /// The attribute the open part holds (`None` for a tenant or shard part, never bounded).
    attribute: Option<String>,
    from: Option<Bound>,
    to: Option<Bound>,
    after: Option<Bound>,
    before: Option<Bound>,
}

impl OpenPart {
    /// Whether the part, as the key holds it, may satisfy the bounds. A bound finer than the
    /// part's bucket admits its bucket whatever the bound: the bucket holds values on both sides.
    fn admits(&self, part: &str) -> bool {
        let strict = |b: &Bound, order: Ordering, want: Ordering| {
            order == want || (b.exact.is_some() && order == Ordering::Equal)
        };
        self.from.as_ref().is_none_or(|b| b.compare(part).is_ge())
            && self.to.as_ref().is_none_or(|b| b.compare(part).is_le())
            && self
                .after
                .as_ref()
                .is_none_or(|b| strict(b, b.compare(part), Ordering::Greater))
            && self
                .before
                .as_ref()
                .is_none_or(|b| strict(b, b.compare(part), Ordering::Less))
    }

    /// Whether a whole timestamp satisfies the bounds finer than the part's bucket.
    fn admits_exact(&self, value: &str) -> bool {
        fn exact(b: &Option<Bound>) -> Option<&Cut> {
            b.as_ref().and_then(|b| b.exact.as_ref())
        }
        exact(&self.from).is_none_or(|c| c.compare(value).is_ge())
            && exact(&self.to).is_none_or(|c| c.compare(value).is_le())
            && exact(&self.after).is_none_or(|c| c.compare(value).is_gt())
            && exact(&self.before).is_none_or(|c| c.compare(value).is_lt())
    }

    /// Whether a bound is finer than the part's bucket (the keys cannot tell it alone).
    fn has_exact(&self) -> bool {
        [&self.from, &self.to, &self.after, &self.before]
            .into_iter()
            .any(|b| b.as_ref().is_some_and(|b| b.exact.is_some()))
    }

    fn is_bounded(&self) -> bool {
        self.from.is_some() || self.to.is_some() || self.after.is_some() || self.before.is_some()
    }
}

/// What one access pattern reads for one caller and one set of parameters: the table or an index,
/// the partitions (one per write shard), and the condition on the sort key attributes.
///
/// ```
/// let model = cqrs_model::Model::example();
/// let q = model
///     .query("readings_of_sensor", "t1", &[("sensorId", "s1"), ("from", "2024-01-15T10:00:00Z")])
///     .unwrap();
/// assert_eq!(q.index, None);
/// assert_eq!(q.partition_attrs[0].name, "pk");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternQuery<'m> {
    /// The pattern.
    pub pattern: &'m Pattern,
    /// The index read, `None` for the data table.
    pub index: Option<&'m Index>,
    /// The partition key attributes (`pk`, `gsi2pk`, or up to 4 native ones).
    pub partition_attrs: Vec<KeyAttr>,
    /// The partitions read, one per write shard (shard `i` at position `i`), each a value per
    /// partition key attribute.
    pub partitions: Vec<Vec<KeyValue>>,
    /// The sort key attributes (`sk`, `gsi2sk`, or up to 4 native ones); may be empty.
    pub sort_attrs: Vec<KeyAttr>,
    /// Values the leading sort attributes must equal, left to right.
    pub sort_equal: Vec<KeyValue>,
    /// The condition on the next sort attribute, if any.
    pub sort: Option<SortKeyCondition>,
    entities: Vec<&'m Entity>,
    tenant: String,
    open: Option<OpenPart>,
    fingerprint: u64,
}

/// What a template rendered for a query: the text up to the first reference not given.
struct Rendered {
    text: String,
    /// The first reference not given, counted among every reference, and the part.
    open: Option<(usize, Part)>,
}

impl Model {
    /// What `pattern` reads for a caller of `tenant` with `params` (name, value; only the
    /// pattern's parameters and the [`RANGE_PARAMS`] the pattern allows). The rules: `{tenant}` is
    /// the caller's; every partition reference must be given (one partition per write shard); the
    /// sort template is fixed left to right up to the first part not given, ending on a whole part;
    /// `from` / `to` / `after` / `before` bound that part. Every refusal names the parameter.
    ///
    /// ```
    /// use cqrs_model::{KeyValue, Model, SortOp};
    ///
    /// let model = Model::example();
    /// let q = model.query("stores_in_region", "t1", &[("country", "us"), ("region", "ca")]).unwrap();
    /// assert_eq!(q.partitions[0], [KeyValue::S("t1".into()), KeyValue::S("US".into()), KeyValue::S("CA".into())]);
    /// assert_eq!(q.sort, None);
    ///
    /// let e = model.query("items_of_order", "t1", &[("itemId", "001")]).unwrap_err();
    /// assert_eq!(e.to_string(), "itemId: needs orderId first (sort key parts are given left to right)");
    /// let e = model.query("orders_of_user", "t1", &[("userId", "a#b")]).unwrap_err();
    /// assert_eq!(e.param, "userId");
    /// ```
    pub fn query<'m>(
        &'m self,
        pattern: &str,
        tenant: &str,
        params: &[(&str, &str)],
    ) -> Result<PatternQuery<'m>, PlanError> {
        let pattern = self.pattern(pattern).ok_or_else(|| {
            plan_error(
                "pattern",
                format!(
                    "there is no access pattern {pattern:?}; the model has {}",
                    self.patterns()
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
        validate_component("tenant", tenant).map_err(|e| plan_error("tenant", e.to_string()))?;
        let allows_range = pattern.sort.contains(&SortCondition::Range);
        let mut seen = BTreeSet::new();
        for (name, _) in params {
            let known = pattern.params.iter().any(|p| p == name)
                || (allows_range && RANGE_PARAMS.contains(name));
            if !known {
                let mut accepted: Vec<&str> = pattern.params.iter().map(String::as_str).collect();
                if allows_range {
                    accepted.extend(RANGE_PARAMS);
                }
                return Err(plan_error(
                    name,
                    format!(
                        "pattern {:?} takes no parameter {name:?}; it takes {}",
                        pattern.name,
                        accepted.join(", ")
                    ),
                ));
            }
            if !seen.insert(*name) {
                return Err(plan_error(name, "is given more than once"));
            }
        }
        let get = |name: &str| params.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        let entities: Vec<&Entity> = pattern
            .entities
            .iter()
            .filter_map(|name| self.entity(name))
            .collect();
        let Some(first) = entities.first().copied() else {
            return Err(plan_error("pattern", "names no entity of the model"));
        };
        let index = match &pattern.index {
            Some(name) => Some(
                self.index(name)
                    .ok_or_else(|| plan_error("pattern", format!("no index {name:?}")))?,
            ),
            None => None,
        };
        let (pk_templates, sk_templates, partition_attrs, sort_attrs) = key_shape(first, index)?;

        // The partition: every reference given; one partition per shard.
        let shards = pk_templates
            .iter()
            .find_map(|t| t.shards())
            .unwrap_or(1)
            .max(1);
        let mut used: BTreeSet<String> = BTreeSet::new();
        let mut bucketed: BTreeSet<&str> = BTreeSet::new();
        let mut partitions = Vec::with_capacity(shards as usize);
        for shard in 0..shards {
            let mut values = Vec::with_capacity(partition_attrs.len());
            for (template, key) in pk_templates.iter().zip(&partition_attrs) {
                // Every entity of a collection shares the partition template; each checks the
                // values against its own attribute declarations.
                let mut text = None;
                for entity in &entities {
                    let rendered = render(entity, template, tenant, &get, Some(shard), &mut used)?;
                    if let Some((_, part)) = rendered.open {
                        let name = part_name(&part);
                        return Err(plan_error(
                            &name,
                            format!(
                                "is part of pattern {:?}'s partition ({}) and must be given",
                                pattern.name,
                                template.text()
                            ),
                        ));
                    }
                    text = Some(rendered.text);
                }
                let text = text.unwrap_or_default();
                for part in template.parts() {
                    if let Part::Attr {
                        name,
                        bucket: Some(_),
                    } = part
                    {
                        bucketed.insert(name.as_str());
                    }
                }
                values.push(key_value(key, text, true)?);
            }
            partitions.push(values);
        }

        // The sort key: left to right.
        let mut all_sk = vec![sk_templates.clone()];
        for entity in entities.iter().skip(1) {
            all_sk.push(key_shape(entity, index)?.1);
        }
        let collection = all_sk.iter().any(|ts| *ts != sk_templates);
        let mut sort_equal = Vec::new();
        let mut sort = None;
        let mut open = None;
        let mut open_name = None;
        if collection {
            // Several entities with their own sort templates: the whole partition, or the literal
            // prefix their templates share.
            let prefix = common_literal_prefix(&all_sk);
            if let Some(attr) = sort_attrs.first()
                && !prefix.is_empty()
                && attr.ty == KeyType::S
            {
                sort = Some(SortKeyCondition {
                    attribute: attr.name.clone(),
                    op: SortOp::BeginsWith(prefix),
                });
            }
        } else {
            let templates = &sk_templates;
            let prefix_allowed = pattern.sort.contains(&SortCondition::Prefix);
            for (position, (template, key)) in templates.iter().zip(&sort_attrs).enumerate() {
                let fixed = |name: &str| {
                    if !prefix_allowed || bucketed.contains(name) {
                        None
                    } else {
                        get(name)
                    }
                };
                let rendered = render(first, template, tenant, &fixed, None, &mut used)?;
                match rendered.open {
                    None => sort_equal.push(key_value(key, rendered.text, false)?),
                    Some((reference, part)) => {
                        let part_open = OpenPart {
                            attr: position,
                            reference,
                            follower: follower(template, reference),
                            attribute: match &part {
                                Part::Attr { name, .. } => Some(name.clone()),
                                _ => None,
                            },
                            from: bound(first, &part, &get, "from")?,
                            to: bound(first, &part, &get, "to")?,
                            after: bound(first, &part, &get, "after")?,
                            before: bound(first, &part, &get, "before")?,
                        };
                        sort = condition(key, &rendered.text, &part_open)?;
                        open_name = Some(part_name(&part));
                        open = Some(part_open);
                        break;
                    }
                }
            }
            // A complete sort key on an overloaded index or the table is one item.
            if sort.is_none()
                && open.is_none()
                && let (Some(last), Some(key)) =
                    (sort_equal.pop(), sort_attrs.get(sort_equal.len()))
            {
                sort = Some(SortKeyCondition {
                    attribute: key.name.clone(),
                    op: SortOp::Equal(last),
                });
            }
        }
        if open.is_none() {
            for name in RANGE_PARAMS {
                if get(name).is_some() {
                    return Err(plan_error(
                        name,
                        "there is no open sort key part to bound: the parameters fix the whole sort key",
                    ));
                }
            }
        }
        for (name, _) in params {
            if !RANGE_PARAMS.contains(name) && !used.contains(*name) {
                let reason = if bucketed.contains(name) {
                    "is used only for the partition".to_string()
                } else if !pattern.sort.contains(&SortCondition::Prefix) {
                    format!(
                        "pattern {:?} allows only from / to / after / before on the sort key",
                        pattern.name
                    )
                } else {
                    match &open_name {
                        Some(missing) => format!(
                            "needs {missing} first (sort key parts are given left to right)"
                        ),
                        None => "is not part of this pattern's keys".to_string(),
                    }
                };
                return Err(plan_error(name, reason));
            }
        }

        let mut canonical: Vec<(&str, &str)> = params.to_vec();
        canonical.sort_unstable();
        let mut text = format!("{}\u{0}{tenant}", pattern.name);
        for (name, value) in canonical {
            text.push('\u{0}');
            text.push_str(name);
            text.push('=');
            text.push_str(value);
        }
        Ok(PatternQuery {
            pattern,
            index,
            partition_attrs,
            partitions,
            sort_attrs,
            sort_equal,
            sort,
            entities,
            tenant: tenant.to_string(),
            open,
            fingerprint: fnv1a_64(text.as_bytes()),
        })
    }
}

impl<'m> PatternQuery<'m> {
    /// A stable hash of the pattern, the tenant and the parameters: a cursor made for another
    /// pattern, parameter set or tenant carries another one.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// let a = model.query("orders_of_user", "t1", &[("userId", "u1")]).unwrap();
    /// let b = model.query("orders_of_user", "t2", &[("userId", "u1")]).unwrap();
    /// assert_ne!(a.fingerprint(), b.fingerprint());
    /// ```
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// Whether the read fans out over write shards.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// assert!(model.query("orders_by_status", "t1", &[("status", "PAID")]).unwrap().is_sharded());
    /// ```
    pub fn is_sharded(&self) -> bool {
        self.partitions.len() > 1
    }

    /// Whether sort key values (one per sort attribute, as an index entry holds them) lie inside
    /// the key condition: what DynamoDB would read. A cursor's positions must.
    ///
    /// ```
    /// use cqrs_model::KeyValue;
    /// let model = cqrs_model::Model::example();
    /// let q = model.query("items_of_order", "t1", &[("orderId", "o1")]).unwrap();
    /// assert!(q.in_range(&[KeyValue::S("ORDER_ITEM#o1#001".into())]));
    /// assert!(!q.in_range(&[KeyValue::S("ORDER_ITEM#o10#001".into())]));
    /// ```
    pub fn in_range(&self, sort: &[KeyValue]) -> bool {
        if sort.len() != self.sort_attrs.len() {
            return false;
        }
        let mut values = sort.iter();
        for expected in &self.sort_equal {
            if values.next() != Some(expected) {
                return false;
            }
        }
        match (&self.sort, values.next()) {
            (Some(condition), Some(value)) => condition.op.holds(value),
            (Some(_), None) => false,
            (None, _) => true,
        }
    }

    /// Whether an item of `entity` with these index key values belongs to the answer: one of the
    /// pattern's entities, in one of the partitions (the shard is returned), inside the key
    /// condition, and its open sort part inside the bounds exactly.
    ///
    /// ```
    /// use cqrs_model::KeyValue;
    /// let model = cqrs_model::Model::example();
    /// let q = model
    ///     .query("readings_of_sensor", "t1", &[("sensorId", "s1"), ("after", "2024-01-15T10:00:00Z")])
    ///     .unwrap();
    /// let reading = model.entity("reading").unwrap();
    /// let pk = [KeyValue::S("SENSOR#t1#s1".into())];
    /// let at = |t: &str| [KeyValue::S(format!("READING#{t}"))];
    /// assert_eq!(q.matches(reading, &pk, &at("2024-01-15T10:00:00.001Z")), Some(0));
    /// assert_eq!(q.matches(reading, &pk, &at("2024-01-15T10:00:00.000Z")), None);
    /// ```
    pub fn matches(
        &self,
        entity: &Entity,
        partition: &[KeyValue],
        sort: &[KeyValue],
    ) -> Option<usize> {
        if !self.pattern.entities.contains(&entity.name) {
            return None;
        }
        let shard = self.partitions.iter().position(|p| p == partition)?;
        if !self.in_range(sort) {
            return None;
        }
        if let Some(open) = &self.open
            && open.is_bounded()
        {
            let template = sort_template(entity, self.index, open.attr)?;
            let KeyValue::S(value) = sort.get(open.attr)? else {
                return None;
            };
            let parts = template.read(value)?;
            let (_, text) = parts.get(open.reference)?;
            if !open.admits(text) {
                return None;
            }
        }
        Some(shard)
    }

    /// The exact filter on what the keys cannot show: whether an item's values satisfy a bound
    /// finer than the bucket its open sort part is cut to (`before=2024-01-15T00:00:00Z` on
    /// `{at:month}`: the key holds `2024-01`, the item's `at` decides). Call it on every item
    /// [`PatternQuery::matches`] keeps. An item without a readable timestamp in that attribute is
    /// kept (it may satisfy the bound); with no such bound, every item is admitted.
    ///
    /// ```
    /// use cqrs_model::{ItemView, KeyValue, Model, ValueRef};
    ///
    /// let model = Model::parse(r#"
    /// [indexes.gsi1]
    /// pk = "gsi1pk"
    /// sk = "gsi1sk"
    ///
    /// [entities.event]
    /// pk = "EVENT#{tenant}"
    /// sk = "{eventId}"
    /// id = "eventId"
    /// attributes.eventId = { type = "string", required = true }
    /// attributes.at = { type = "timestamp", required = true }
    /// indexes.gsi1 = { pk = "BYMONTH#{tenant}", sk = "{at:month}#{eventId}" }
    ///
    /// [patterns.events_by_month]
    /// entity = "event"
    /// index = "gsi1"
    /// params = ["at", "eventId"]
    /// description = "events by month"
    /// "#).unwrap();
    /// let event = model.entity("event").unwrap();
    /// let q = model.query("events_by_month", "t1", &[("before", "2024-01-15T00:00:00Z")]).unwrap();
    /// // The key holds only the month: January is read and kept by the keys ...
    /// let pk = [KeyValue::S("BYMONTH#t1".into())];
    /// assert!(q.matches(event, &pk, &[KeyValue::S("2024-01#e1".into())]).is_some());
    /// // ... and the item's timestamp decides.
    /// let view = |at: &'static str| (at, [("eventId", ValueRef::Str("e1")), ("at", ValueRef::Str(at))]);
    /// let (_, early) = view("2024-01-10T08:00:00Z");
    /// let (_, late) = view("2024-01-20T08:00:00Z");
    /// let item = |attributes: &[(&str, ValueRef<'_>)]| {
    ///     q.admits_values(event, &ItemView { tenant: "t1", created_at: "2024-01-01T00:00:00.000Z", attributes: &attributes.to_vec() })
    /// };
    /// assert!(item(&early));
    /// assert!(!item(&late));
    /// ```
    pub fn admits_values(&self, entity: &Entity, item: &ItemView<'_>) -> bool {
        let Some(open) = &self.open else {
            return true;
        };
        if !open.has_exact() {
            return true;
        }
        let Some(name) = open.attribute.as_deref() else {
            return true;
        };
        let Some(attr) = attribute_of(entity, name) else {
            return true;
        };
        let raw = if name == CREATED_AT && !entity.attributes.contains_key(name) {
            Some(item.created_at)
        } else {
            match item.attributes.attribute(name) {
                Some(ValueRef::Str(s)) => Some(s),
                _ => None,
            }
        };
        match raw.map(|raw| attr.key_part(ValueRef::Str(raw), None)) {
            Some(Ok(whole)) => open.admits_exact(&whole),
            // Nothing to compare: the item may satisfy the bound, and is kept.
            _ => true,
        }
    }

    /// The pattern's entity whose table keys `pk` / `sk` are, when they belong to this caller's
    /// tenant (or to `common`, for a common entity): a cursor's table keys must.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// let q = model.query("orders_of_user", "t1", &[("userId", "u1")]).unwrap();
    /// assert_eq!(q.entity_of_table_key("ORDER#t1", "ORDER#o1").unwrap().name, "order");
    /// assert!(q.entity_of_table_key("ORDER#t2", "ORDER#o1").is_none());
    /// ```
    pub fn entity_of_table_key(&self, pk: &str, sk: &str) -> Option<&'m Entity> {
        self.entities.iter().copied().find(|entity| {
            entity.read_keys(pk, sk).is_some_and(|values| {
                entity.common
                    || values
                        .iter()
                        .any(|(n, v)| n == "tenant" && *v == self.tenant)
            })
        })
    }
}

/// The templates and key attributes of `entity` for the table (`index` `None`) or an index.
#[allow(clippy::type_complexity)]
fn key_shape(
    entity: &Entity,
    index: Option<&Index>,
) -> Result<(Vec<Template>, Vec<Template>, Vec<KeyAttr>, Vec<KeyAttr>), PlanError> {
    match index {
        None => Ok((
            vec![entity.pk.clone()],
            vec![entity.sk.clone()],
            vec![KeyAttr {
                name: "pk".into(),
                ty: KeyType::S,
            }],
            vec![KeyAttr {
                name: "sk".into(),
                ty: KeyType::S,
            }],
        )),
        Some(index) => {
            let ei = entity
                .indexes
                .iter()
                .find(|i| i.index == index.name)
                .ok_or_else(|| {
                    plan_error(
                        "pattern",
                        format!(
                            "entity {:?} does not fill index {:?}",
                            entity.name, index.name
                        ),
                    )
                })?;
            Ok((
                ei.pk.clone(),
                ei.sk.clone(),
                index.pk.clone(),
                index.sk.clone(),
            ))
        }
    }
}

/// The template of sort attribute `position` of `entity` on the table or an index.
fn sort_template<'e>(
    entity: &'e Entity,
    index: Option<&Index>,
    position: usize,
) -> Option<&'e Template> {
    match index {
        None => (position == 0).then_some(&entity.sk),
        Some(index) => entity
            .indexes
            .iter()
            .find(|i| i.index == index.name)?
            .sk
            .get(position),
    }
}

fn part_name(part: &Part) -> String {
    match part {
        Part::Attr { name, .. } => name.clone(),
        Part::Tenant => "tenant".into(),
        Part::Shard(_) => "shard".into(),
        Part::Lit(text) => text.clone(),
    }
}

/// The attribute declaration a reference is formatted with (`createdAt` is a timestamp).
fn attribute_of<'e>(entity: &'e Entity, name: &str) -> Option<std::borrow::Cow<'e, Attribute>> {
    match entity.attributes.get(name) {
        Some(attr) => Some(std::borrow::Cow::Borrowed(attr)),
        None if name == CREATED_AT => {
            Some(std::borrow::Cow::Owned(Attribute::new(AttrType::Timestamp)))
        }
        None => None,
    }
}

/// A parameter value as the key part the model writes for it.
fn format_param(
    entity: &Entity,
    name: &str,
    bucket: Option<Bucket>,
    value: &str,
) -> Result<String, PlanError> {
    let attr = attribute_of(entity, name).ok_or_else(|| {
        plan_error(
            name,
            format!("is not an attribute of entity {:?}", entity.name),
        )
    })?;
    let view = match attr.ty {
        AttrType::Number => ValueRef::Num(value),
        AttrType::Boolean => match value {
            "true" => ValueRef::Bool(true),
            "false" => ValueRef::Bool(false),
            _ => return Err(plan_error(name, format!("{value:?} is not true or false"))),
        },
        _ => ValueRef::Str(value),
    };
    if attr.ty == AttrType::Timestamp
        && let Some(bucket) = bucket
        && attr.produces(value, Some(bucket))
    {
        // The bucket's own form (`2024-01` for a month).
        return Ok(value.to_string());
    }
    attr.key_part(view, bucket).map_err(|m| plan_error(name, m))
}

/// Renders a template for a query: literals, the tenant, the shard, and each reference `given`
/// returns a value for, up to the first one it does not (reported as `open`).
fn render<'p>(
    entity: &Entity,
    template: &Template,
    tenant: &str,
    given: &dyn Fn(&str) -> Option<&'p str>,
    shard: Option<u32>,
    used: &mut BTreeSet<String>,
) -> Result<Rendered, PlanError> {
    let mut text = String::new();
    let mut reference = 0;
    for part in template.parts() {
        match part {
            Part::Lit(lit) => text.push_str(lit),
            Part::Tenant => text.push_str(tenant),
            Part::Shard(_) => match shard {
                Some(s) => text.push_str(&s.to_string()),
                None => {
                    return Ok(Rendered {
                        text,
                        open: Some((reference, part.clone())),
                    });
                }
            },
            Part::Attr { name, bucket } => match given(name) {
                Some(value) => {
                    text.push_str(&format_param(entity, name, *bucket, value)?);
                    used.insert(name.clone());
                }
                None => {
                    return Ok(Rendered {
                        text,
                        open: Some((reference, part.clone())),
                    });
                }
            },
        }
        if part.is_reference() {
            reference += 1;
        }
    }
    Ok(Rendered { text, open: None })
}

/// The literal text every template of a collection begins with.
fn common_literal_prefix(templates: &[Vec<Template>]) -> String {
    let mut prefixes = templates
        .iter()
        .map(|ts| match ts.first().map(|t| t.parts()) {
            Some([Part::Lit(lit), ..]) => lit.clone(),
            _ => String::new(),
        });
    let Some(mut common) = prefixes.next() else {
        return String::new();
    };
    for prefix in prefixes {
        let len = common
            .char_indices()
            .zip(prefix.chars())
            .take_while(|((_, a), b)| a == b)
            .last()
            .map_or(0, |((i, a), _)| i + a.len_utf8());
        common.truncate(len);
    }
    common
}

fn key_value(key: &KeyAttr, text: String, partition: bool) -> Result<KeyValue, PlanError> {
    let limit = if partition {
        MAX_PARTITION_KEY_BYTES
    } else {
        MAX_SORT_KEY_BYTES
    };
    if text.len() > limit {
        return Err(plan_error(
            &key.name,
            format!(
                "the parameters make this key {} bytes long, over DynamoDB's {limit}",
                text.len()
            ),
        ));
    }
    Ok(match key.ty {
        KeyType::N => KeyValue::N(text),
        KeyType::S | KeyType::B => KeyValue::S(text),
    })
}

/// A range parameter's value formatted for the open part.
fn bound<'p>(
    entity: &Entity,
    part: &Part,
    get: &dyn Fn(&str) -> Option<&'p str>,
    param: &str,
) -> Result<Option<Bound>, PlanError> {
    let Some(value) = get(param) else {
        return Ok(None);
    };
    let Part::Attr { name, bucket } = part else {
        return Err(plan_error(
            param,
            format!(
                "the open sort key part is {}, which cannot be bounded",
                part_name(part)
            ),
        ));
    };
    let attr = attribute_of(entity, name)
        .ok_or_else(|| plan_error(param, format!("{name:?} is not an attribute")))?;
    match attr.ty {
        AttrType::Number if attr.width.is_none() => Err(plan_error(
            param,
            format!(
                "{name} is a number without a `width` in the model: its keys do not sort by value, so it cannot be bounded"
            ),
        )),
        AttrType::Timestamp => {
            // A whole timestamp, or a shortened period (`2024`, `2024-01`, `2024-01-15`,
            // `2024-01-15T10`).
            let mut cut = None;
            for period in [Bucket::Year, Bucket::Month, Bucket::Day, Bucket::Hour] {
                if attr.produces(value, Some(period)) {
                    // A real period: completed to a whole timestamp, it must parse.
                    let start = "0000-01-01T00:00:00.000Z";
                    let whole = format!("{value}{}", start.get(value.len()..).unwrap_or_default());
                    if crate::attribute::parse_timestamp(&whole).is_err() {
                        return Err(plan_error(
                            param,
                            format!("{value:?} is not a date or period"),
                        ));
                    }
                    cut = Some(Cut {
                        text: value.to_string(),
                        period: true,
                    });
                    break;
                }
            }
            let cut = match cut {
                Some(cut) => cut,
                None => Cut {
                    text: format_param(entity, name, None, value).map_err(|e| {
                        plan_error(
                            param,
                            format!("{} (or a period such as 2024-01-15)", e.message),
                        )
                    })?,
                    period: false,
                },
            };
            // On a part cut to a bucket, a bound at most as fine as the bucket (`2024`, `2024-01`
            // on `{at:month}`) bounds whole buckets; a finer one falls inside its bucket, which the
            // key admits whatever the bound, and the item's whole timestamp decides.
            Ok(Some(match bucket {
                Some(b) if cut.text.len() > b.width() => Bound {
                    text: cut.text.get(..b.width()).unwrap_or_default().to_string(),
                    period: true,
                    exact: Some(cut),
                },
                _ => Bound {
                    text: cut.text,
                    period: cut.period,
                    exact: None,
                },
            }))
        }
        _ => {
            let text = format_param(entity, name, *bucket, value)
                .map_err(|e| plan_error(param, e.message))?;
            Ok(Some(Bound {
                text,
                period: false,
                exact: None,
            }))
        }
    }
}

/// The key condition on the open sort attribute: its given prefix, narrowed by the bounds.
fn condition(
    key: &KeyAttr,
    prefix: &str,
    open: &OpenPart,
) -> Result<Option<SortKeyCondition>, PlanError> {
    if key.ty != KeyType::S {
        if open.is_bounded() {
            return Err(plan_error(
                "from",
                format!(
                    "{} is a number key attribute: bounds on it are not supported",
                    key.name
                ),
            ));
        }
        return Ok(None);
    }
    if !open.is_bounded() {
        return Ok((!prefix.is_empty()).then(|| SortKeyCondition {
            attribute: key.name.clone(),
            op: SortOp::BeginsWith(prefix.to_string()),
        }));
    }
    for (name, a, b) in [
        ("from", &open.from, &open.after),
        ("to", &open.to, &open.before),
    ] {
        if a.is_some() && b.is_some() {
            let other = if name == "from" { "after" } else { "before" };
            return Err(plan_error(
                name,
                format!("give {name} or {other}, not both"),
            ));
        }
    }
    let lower = open.from.as_ref().or(open.after.as_ref());
    let upper = open.to.as_ref().or(open.before.as_ref());
    if let (Some(l), Some(u)) = (lower, upper)
        && crossed(l, open.after.is_some(), u, open.before.is_some())
    {
        let name = if open.from.is_some() { "from" } else { "after" };
        let other = if open.to.is_some() { "to" } else { "before" };
        return Err(plan_error(
            name,
            format!("must not sort after {other}: no value lies between them"),
        ));
    }
    let lo = match lower {
        Some(b) => format!("{prefix}{}", b.text),
        None => prefix.to_string(),
    };
    let hi = match upper {
        Some(b) => upper_end(prefix, &b.text, open.follower.as_deref()),
        None => format!("{prefix}{MAX_CHAR}"),
    };
    for (name, text) in [("from", &lo), ("to", &hi)] {
        if text.len() > MAX_SORT_KEY_BYTES {
            return Err(plan_error(
                name,
                format!(
                    "makes the sort key bound {} bytes long, over DynamoDB's {MAX_SORT_KEY_BYTES}",
                    text.len()
                ),
            ));
        }
    }
    Ok(Some(SortKeyCondition {
        attribute: key.name.clone(),
        // Every stored key is at least the empty string: no lower end to give.
        op: if lo.is_empty() {
            SortOp::AtMost(hi)
        } else {
            SortOp::Between(lo, hi)
        },
    }))
}

/// What the template writes right after reference `reference`: the literal, `None` at the end
/// (and an empty literal if another reference followed directly, which the model refuses).
fn follower(template: &Template, reference: usize) -> Option<String> {
    let mut seen = 0;
    let mut parts = template.parts().iter();
    for part in parts.by_ref() {
        if part.is_reference() {
            if seen == reference {
                break;
            }
            seen += 1;
        }
    }
    match parts.next() {
        None => None,
        Some(Part::Lit(lit)) => Some(lit.clone()),
        Some(_) => Some(String::new()),
    }
}

/// The upper end of the key condition for parts at most `bound`: every key whose part sorts at
/// or below it. A key is `prefix + part + follower + rest`; a part that is a proper prefix of the
/// bound sorts below it, but its key continues with the follower, which may sort above the
/// bound's next character (`ui#...` against `ui x`): the end is the highest of
/// `prefix + bound + U+10FFFF` and, for each proper prefix of the bound,
/// `prefix + that prefix + follower + U+10FFFF`. Entries it reads beyond the exact bound are
/// dropped by [`PatternQuery::matches`].
///
/// Only a prefix whose next byte in the bound sorts at or below the follower's first byte can
/// reach past the bound (otherwise its key sorts below the bound at that byte), so only those are
/// built: with the `#` follower, the characters a space, `!` and `"`.
fn upper_end(prefix: &str, bound: &str, follower: Option<&str>) -> String {
    let mut end = format!("{prefix}{bound}{MAX_CHAR}");
    if let Some(follower) = follower {
        let first = follower.bytes().next().unwrap_or(u8::MAX);
        for (cut, _) in bound
            .char_indices()
            .skip(1)
            .filter(|(cut, _)| bound.as_bytes().get(*cut).is_some_and(|b| *b <= first))
        {
            let candidate = format!("{prefix}{}{follower}{MAX_CHAR}", &bound[..cut]);
            if candidate.as_bytes() > end.as_bytes() {
                end = candidate;
            }
        }
    }
    end
}

/// Whether no part can lie between a lower and an upper bound (`strict`: `after` / `before`). A
/// period is all the values that begin with it: as an upper bound it reaches past every one of
/// them, and as an exclusive lower bound it starts after every one of them.
///
/// A bound finer than its part's bucket is compared as given (on the whole timestamp), not as its
/// bucket: `after=2024-01-14T23:59:59.999Z` and `before=2024-01-20T00:00:00Z` on `{at:month}` hold
/// six days, though both fall in `2024-01`.
fn crossed(lower: &Bound, lower_strict: bool, upper: &Bound, upper_strict: bool) -> bool {
    let (lower_text, lower_period) = lower.finest();
    let (upper_text, upper_period) = upper.finest();
    let low = if lower_period && lower_strict {
        format!("{lower_text}{MAX_CHAR}")
    } else {
        lower_text.to_string()
    };
    let high = if upper_period && !upper_strict {
        format!("{upper_text}{MAX_CHAR}")
    } else {
        upper_text.to_string()
    };
    match low.as_bytes().cmp(high.as_bytes()) {
        Ordering::Greater => true,
        Ordering::Equal => lower_strict || upper_strict,
        Ordering::Less => false,
    }
}
