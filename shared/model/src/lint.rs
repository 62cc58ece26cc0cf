//! The key-design lint: the anti-patterns of DynamoDB key design, found in the model before DynamoDB
//! throttles them. Each [`Finding`] names its rule, a severity, the entity, the field and template,
//! and the fix.
//!
//! Rules ([`RULES`]):
//! - `low-cardinality-partition` (error): an entity declared `size = "large"` or `writes = "high"`
//!   whose partition (table or index) holds no high-cardinality part (only literals, `{tenant}`,
//!   enum and boolean attributes) and no write shard;
//! - `sequential-partition` (error): a timestamp, `createdAt` or an attribute declared
//!   `sequential = true` as the first variable part of a partition (after `{tenant}`): every new
//!   item goes to the newest partition;
//! - `undelimited-references` (error): two references without a `#` between them (`{a}{b}`,
//!   `{a}-{b}`): values blur into each other (the model check refuses these too);
//! - `complex-key` (warning): more than [`MAX_KEY_PARTS`] variable parts in one key;
//! - `unsharded-index-partition` (error for large or write-heavy entities, else warning): a GSI
//!   partition that is the same for every item of a tenant (`ALL#{tenant}`) without `{shard:N}`;
//! - `declaration` (error): `size` or `writes` with a value the lint does not know;
//! - `unused-allow` (warning): an exception that names an unknown rule or one that no longer fires;
//! - `hot-guard` (error for `writes = "high"`, else warning): a limit whose `per` is empty or only
//!   enum and boolean attributes: every counted write of the tenant (or of one enum value) is a
//!   transaction on one guard item, and concurrent transactions on one item are cancelled
//!   (`TransactionConflict`, a 409 to the client) long before a partition's 1,000 WCU/s;
//! - `unique-low-cardinality` (warning): a unique over only enum and boolean attributes admits a
//!   handful of live items per tenant;
//! - `large-guard` (warning): a limit with `at_most` over [`LARGE_GUARD_AT_MOST`]: its guard item
//!   holds a member token per counted item, over 1 KB (each guard write costs 2 WCU per KB).
//!
//! A deliberate exception is written next to the entity, with its reason:
//! `allow.low-cardinality-partition = "why this is fine here"`. Allowed findings are still
//! reported, with the reason, and never fail the lint.

use std::fmt;

use serde::Serialize;

use crate::attribute::AttrType;
use crate::model::{CREATED_AT, Entity, Model, ModelError, ModelErrors};
use crate::template::{Part, Template};

/// More variable parts than this in one key is the `complex-key` warning.
///
/// ```
/// assert_eq!(cqrs_model::MAX_KEY_PARTS, 5);
/// ```
pub const MAX_KEY_PARTS: usize = 5;

/// Every rule of the lint: its id and what it finds.
///
/// ```
/// assert!(cqrs_model::RULES.iter().any(|(id, _)| *id == "sequential-partition"));
/// ```
pub const RULES: &[(&str, &str)] = &[
    (
        LOW_CARDINALITY,
        "a large or write-heavy entity's partition holds only literals, {tenant} and enums",
    ),
    (
        SEQUENTIAL,
        "a timestamp or sequential attribute is the first variable part of a partition",
    ),
    (UNDELIMITED, "two references without a `#` between them"),
    (COMPLEX, "more than 5 variable parts in one key"),
    (
        UNSHARDED_INDEX,
        "a GSI partition that is the same for every item of a tenant, without shards",
    ),
    (DECLARATION, "`size` or `writes` with an unknown value"),
    (
        UNUSED_ALLOW,
        "an exception that names an unknown rule or one that does not fire",
    ),
    (
        HOT_GUARD,
        "a limit grouped by nothing or only by enums and booleans: one guard item takes every counted write",
    ),
    (
        UNIQUE_LOW_CARDINALITY,
        "a unique over only enum and boolean attributes admits a handful of items",
    ),
    (
        LARGE_GUARD,
        "a limit's at_most over 40: its guard item grows over 1 KB",
    ),
];

/// A limit with an `at_most` over this is the `large-guard` warning: its guard item holds one
/// 22-character member token per counted item, so 40 of them and the item's own attributes make
/// about 1 KB, the unit of a write's cost.
///
/// ```
/// assert_eq!(cqrs_model::LARGE_GUARD_AT_MOST, 40);
/// ```
pub const LARGE_GUARD_AT_MOST: u32 = 40;

const LOW_CARDINALITY: &str = "low-cardinality-partition";
const SEQUENTIAL: &str = "sequential-partition";
const UNDELIMITED: &str = "undelimited-references";
const COMPLEX: &str = "complex-key";
const UNSHARDED_INDEX: &str = "unsharded-index-partition";
const DECLARATION: &str = "declaration";
const UNUSED_ALLOW: &str = "unused-allow";
const HOT_GUARD: &str = "hot-guard";
const UNIQUE_LOW_CARDINALITY: &str = "unique-low-cardinality";
const LARGE_GUARD: &str = "large-guard";

/// How bad a finding is: an error fails the lint (unless allowed), a warning does not.
///
/// ```
/// assert_eq!(cqrs_model::Severity::Error.as_str(), "error");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth a look; never fails the lint.
    Warning,
    /// Fails the lint unless the entity allows it with a reason.
    Error,
}

impl Severity {
    /// `error` or `warning`.
    ///
    /// ```
    /// assert_eq!(cqrs_model::Severity::Warning.as_str(), "warning");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One finding of the lint.
///
/// ```
/// let model = cqrs_model::Model::parse(r#"
/// [entities.event]
/// pk = "EVENT#{tenant}#{at}"
/// sk = "{eventId}"
/// attributes.at = { type = "timestamp", required = true }
/// attributes.eventId = { type = "string", required = true, max = 26 }
/// "#).unwrap();
/// let findings = cqrs_model::lint(&model);
/// assert_eq!(findings[0].rule, "sequential-partition");
/// assert_eq!(findings[0].entity, "event");
/// assert_eq!(findings[0].template, "EVENT#{tenant}#{at}");
/// assert!(findings[0].fails());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule id (`sequential-partition`).
    pub rule: &'static str,
    /// Error or warning.
    pub severity: Severity,
    /// The entity's name.
    pub entity: String,
    /// The field of the entity (`pk`, `indexes.gsi2.pk`, `allow.<rule>`).
    pub field: String,
    /// The template (for a native multi-attribute key, its templates joined by `, `).
    pub template: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
    /// The reason given in the model when the entity allows this rule (a deliberate exception).
    pub allowed: Option<String>,
}

impl Finding {
    /// Whether this finding fails the lint: an error the model does not allow.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// assert!(cqrs_model::lint(&model).iter().all(|f| !f.fails()));
    /// ```
    pub fn fails(&self) -> bool {
        self.severity == Severity::Error && self.allowed.is_none()
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = if self.allowed.is_some() {
            "allowed"
        } else {
            self.severity.as_str()
        };
        write!(
            f,
            "{severity}[{}] entity `{}`, {} `{}`: {}\n  fix: {}",
            self.rule, self.entity, self.field, self.template, self.message, self.fix
        )?;
        if let Some(reason) = &self.allowed {
            write!(f, "\n  allowed: {reason}")?;
        }
        Ok(())
    }
}

/// What [`lint_source`] finds in a model file: the model check's errors and the lint's findings.
///
/// ```
/// let report = cqrs_model::lint_source(cqrs_model::EXAMPLE_TOML).unwrap();
/// assert!(report.check_errors.is_empty());
/// assert!(!report.fails());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LintReport {
    /// The errors of the model check ([`Model::parse`] would refuse the model for these).
    pub check_errors: Vec<ModelError>,
    /// The lint's findings, errors first.
    pub findings: Vec<Finding>,
}

impl LintReport {
    /// Whether the model fails: a check error, or a lint error the model does not allow.
    ///
    /// ```
    /// let report = cqrs_model::lint_source("[entities.a]\npk = \"A#{tenant}\"\nsk = \"{x}{y}\"\n").unwrap();
    /// assert!(report.fails());
    /// ```
    pub fn fails(&self) -> bool {
        !self.check_errors.is_empty() || self.findings.iter().any(Finding::fails)
    }
}

/// Lints a model file: runs the model check and the lint, also on a model that does not check (so
/// every rule is reported, not only the first refusal). `Err` when the text is not a model file at
/// all (bad TOML, an unknown field).
///
/// ```
/// let report = cqrs_model::lint_source(r#"
/// [entities.pair]
/// pk = "PAIR#{tenant}"
/// sk = "{left}{right}"
/// attributes.left = { type = "string", required = true, max = 8 }
/// attributes.right = { type = "string", required = true, max = 8 }
/// "#).unwrap();
/// assert_eq!(report.findings[0].rule, "undelimited-references");
/// assert!(report.fails());
/// ```
pub fn lint_source(text: &str) -> Result<LintReport, ModelErrors> {
    let (model, check_errors) = Model::parse_unchecked(text)?;
    Ok(LintReport {
        check_errors,
        findings: lint(&model),
    })
}

/// Lints a model: every finding of every rule, errors first, then by entity and field.
///
/// ```
/// let model = cqrs_model::Model::example();
/// let findings = cqrs_model::lint(&model);
/// // The example's deliberate exceptions are reported with their reasons.
/// assert!(findings.iter().any(|f| f.entity == "log" && f.allowed.is_some()));
/// ```
pub fn lint(model: &Model) -> Vec<Finding> {
    let mut findings = Vec::new();
    for entity in model.entities() {
        let mut own = Vec::new();
        lint_entity(entity, &mut own);
        lint_constraints(entity, &mut own);
        apply_allows(entity, &mut own);
        findings.extend(own);
    }
    findings.sort_by(|a, b| {
        b.fails()
            .cmp(&a.fails())
            .then(b.severity.cmp(&a.severity))
            .then(a.entity.cmp(&b.entity))
            .then(a.field.cmp(&b.field))
    });
    findings
}

/// One key of an entity: the field, its templates, and whether it is a partition of an index.
struct Key<'a> {
    field: String,
    templates: Vec<&'a Template>,
    partition: bool,
    index: bool,
}

impl Key<'_> {
    fn text(&self) -> String {
        self.templates
            .iter()
            .map(|t| t.text())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn parts(&self) -> impl Iterator<Item = &Part> {
        self.templates.iter().flat_map(|t| t.parts())
    }
}

fn keys(entity: &Entity) -> Vec<Key<'_>> {
    let mut keys = vec![
        Key {
            field: "pk".into(),
            templates: vec![&entity.pk],
            partition: true,
            index: false,
        },
        Key {
            field: "sk".into(),
            templates: vec![&entity.sk],
            partition: false,
            index: false,
        },
    ];
    for ei in &entity.indexes {
        keys.push(Key {
            field: format!("indexes.{}.pk", ei.index),
            templates: ei.pk.iter().collect(),
            partition: true,
            index: true,
        });
        if !ei.sk.is_empty() {
            keys.push(Key {
                field: format!("indexes.{}.sk", ei.index),
                templates: ei.sk.iter().collect(),
                partition: false,
                index: true,
            });
        }
    }
    keys
}

/// How many distinct values a part can take within one tenant.
#[derive(PartialEq, Eq)]
enum Cardinality {
    /// One value (a literal, the tenant).
    One,
    /// A handful (an enum, a boolean).
    Few,
    /// Many (a string, a number, a timestamp).
    Many,
    /// A write shard.
    Shard,
}

fn cardinality(entity: &Entity, part: &Part) -> Cardinality {
    match part {
        Part::Lit(_) | Part::Tenant => Cardinality::One,
        Part::Shard(_) => Cardinality::Shard,
        Part::Attr { name, .. } => match entity.attributes.get(name).map(|a| a.ty) {
            Some(AttrType::Enum | AttrType::Boolean) => Cardinality::Few,
            _ => Cardinality::Many,
        },
    }
}

fn is_heavy(entity: &Entity) -> bool {
    entity.size.as_deref() == Some("large") || entity.writes.as_deref() == Some("high")
}

fn heavy_reason(entity: &Entity) -> &'static str {
    match (entity.size.as_deref(), entity.writes.as_deref()) {
        (Some("large"), Some("high")) => "declared large and write-heavy",
        (Some("large"), _) => "declared large",
        _ => "declared write-heavy",
    }
}

fn lint_entity(entity: &Entity, findings: &mut Vec<Finding>) {
    let mut push = |rule, severity, key: &Key<'_>, message: String, fix: String| {
        findings.push(Finding {
            rule,
            severity,
            entity: entity.name.clone(),
            field: key.field.clone(),
            template: key.text(),
            message,
            fix,
            allowed: None,
        })
    };
    for key in keys(entity) {
        let cards: Vec<Cardinality> = key.parts().map(|p| cardinality(entity, p)).collect();
        let sharded = cards.contains(&Cardinality::Shard);
        let constant = cards.iter().all(|c| *c == Cardinality::One);
        // A GSI partition the same for every item of a tenant.
        if key.partition && key.index && constant {
            let severity = if is_heavy(entity) {
                Severity::Error
            } else {
                Severity::Warning
            };
            push(
                UNSHARDED_INDEX,
                severity,
                &key,
                "every item of a tenant lands in this one index partition: its writes share one partition's 1,000 WCU/s".into(),
                format!(
                    "add write shards (`{}#SHARD#{{shard:10}}`, queries fan out over them) or an attribute that spreads the items",
                    key.text()
                ),
            );
        } else if key.partition
            && is_heavy(entity)
            && !sharded
            && !cards.contains(&Cardinality::Many)
        {
            let fix = if key.index {
                format!(
                    "add write shards (`{}#SHARD#{{shard:10}}`) or a high-cardinality attribute",
                    key.text()
                )
            } else {
                match &entity.id {
                    Some(id) => format!(
                        "partition by a high-cardinality attribute (e.g. `{}#{{{id}}}`), or declare the entity small",
                        key.text()
                    ),
                    None => "partition by a high-cardinality attribute (an owner, an id), or declare the entity small".into(),
                }
            };
            push(
                LOW_CARDINALITY,
                Severity::Error,
                &key,
                format!(
                    "the entity is {} but its partition holds only literals, {{tenant}} and enums: a few partitions take all its items and writes",
                    heavy_reason(entity)
                ),
                fix,
            );
        }
        // The first variable part after the tenant.
        if key.partition
            && let Some(Part::Attr { name, .. }) = key
                .parts()
                .find(|p| p.is_reference() && **p != Part::Tenant)
        {
            let attr = entity.attributes.get(name);
            let what = if name == CREATED_AT || attr.is_some_and(|a| a.ty == AttrType::Timestamp) {
                Some("a timestamp")
            } else if attr.is_some_and(|a| a.sequential) {
                Some("declared sequential")
            } else {
                None
            };
            if let Some(what) = what {
                push(
                    SEQUENTIAL,
                    Severity::Error,
                    &key,
                    format!(
                        "{{{name}}} is {what} and the first variable part of the partition: new items all go to the newest partition, which runs hot while the rest sit idle"
                    ),
                    format!(
                        "partition by who or what the items belong to and put {{{name}}} in the sort key (`SENSOR#{{tenant}}#{{sensorId}}` / `READING#{{{name}}}`){}",
                        if key.index {
                            ", or put `{shard:N}` before it"
                        } else {
                            ""
                        }
                    ),
                );
            }
        }
        for template in &key.templates {
            if let Err(message) = template.segments() {
                push(
                    UNDELIMITED,
                    Severity::Error,
                    &key,
                    message,
                    "separate every two references with `#` (`{a}#{b}`): values never hold `#`, so keys read back one way".into(),
                );
            }
        }
        let variable = key.parts().filter(|p| p.is_reference()).count();
        if variable > MAX_KEY_PARTS {
            push(
                COMPLEX,
                Severity::Warning,
                &key,
                format!("{variable} variable parts (more than {MAX_KEY_PARTS}): every write must know them all, and queries can use them only left to right"),
                "keep in the key what the access patterns query; keep the rest as attributes, or use a native multi-attribute GSI key".into(),
            );
        }
    }
    for (field, value, known) in [
        ("size", &entity.size, ["small", "large"]),
        ("writes", &entity.writes, ["low", "high"]),
    ] {
        if let Some(value) = value
            && !known.contains(&value.as_str())
        {
            push(
                DECLARATION,
                Severity::Error,
                &Key {
                    field: field.into(),
                    templates: Vec::new(),
                    partition: false,
                    index: false,
                },
                format!("{field} = {value:?} is not one of {known:?}"),
                format!("write {field} = {:?} or {:?}", known[0], known[1]),
            );
        }
    }
}

/// Whether every attribute of `names` takes a handful of values (an enum, a boolean).
fn only_few_values(entity: &Entity, names: &[String]) -> bool {
    names.iter().all(|name| {
        entity
            .attributes
            .get(name)
            .is_some_and(|a| matches!(a.ty, AttrType::Enum | AttrType::Boolean))
    })
}

/// `[a, b]` as the model file writes a list of names.
fn name_list(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// The rules on declared constraints: `hot-guard`, `unique-low-cardinality`, `large-guard`.
fn lint_constraints(entity: &Entity, findings: &mut Vec<Finding>) {
    let mut push =
        |rule, severity, field: String, template: String, message: String, fix: String| {
            findings.push(Finding {
                rule,
                severity,
                entity: entity.name.clone(),
                field,
                template,
                message,
                fix,
                allowed: None,
            })
        };
    for limit in &entity.limits {
        let field = format!("limits.{}", limit.name);
        let template = format!("per = {}", name_list(&limit.per));
        if only_few_values(entity, &limit.per) {
            let (severity, why) = if entity.writes.as_deref() == Some("high") {
                (Severity::Error, " (the entity is declared write-heavy)")
            } else {
                (Severity::Warning, "")
            };
            let groups = if limit.per.is_empty() {
                "one group per tenant".to_string()
            } else {
                format!(
                    "a handful of groups per tenant ({} only enums and booleans)",
                    name_list(&limit.per)
                )
            };
            push(
                HOT_GUARD,
                severity,
                field.clone(),
                template.clone(),
                format!(
                    "{groups}: every counted write goes through one guard item, and concurrent \
                     transactions on one item are cancelled (TransactionConflict, a 409 to the \
                     client) well before a partition's 1,000 WCU/s{why}"
                ),
                "group by a high-cardinality attribute (an owner, a member), or keep the count \
                 out of the write path"
                    .into(),
            );
        }
        if limit.at_most > LARGE_GUARD_AT_MOST {
            push(
                LARGE_GUARD,
                Severity::Warning,
                field,
                template,
                format!(
                    "at_most = {}: the guard item holds a member token per counted item, over 1 KB \
                     past {LARGE_GUARD_AT_MOST} members, and every counted write rewrites it (2 WCU \
                     per KB in a transaction)",
                    limit.at_most
                ),
                format!(
                    "keep at_most at {LARGE_GUARD_AT_MOST} or less, or count in the read model"
                ),
            );
        }
    }
    for unique in &entity.unique {
        if !unique.attributes.is_empty() && only_few_values(entity, &unique.attributes) {
            push(
                UNIQUE_LOW_CARDINALITY,
                Severity::Warning,
                format!("unique.{}", unique.name),
                format!("attributes = {}", name_list(&unique.attributes)),
                format!(
                    "{} only enums and booleans: at most as many live items as their values \
                     combine ({} scope)",
                    name_list(&unique.attributes),
                    unique.scope.as_str()
                ),
                "add the attribute that tells the items apart (an id, a name), or use a limit"
                    .into(),
            );
        }
    }
}

/// Marks the findings an entity allows with the reason, and reports allows that match nothing.
fn apply_allows(entity: &Entity, findings: &mut Vec<Finding>) {
    for (rule, reason) in &entity.allow {
        let mut used = false;
        for f in findings.iter_mut().filter(|f| f.rule == rule) {
            f.allowed = Some(reason.clone());
            used = true;
        }
        if used {
            continue;
        }
        let known = RULES.iter().any(|(id, _)| id == rule);
        findings.push(Finding {
            rule: UNUSED_ALLOW,
            severity: Severity::Warning,
            entity: entity.name.clone(),
            field: format!("allow.{rule}"),
            template: String::new(),
            message: if known {
                format!("the exception for `{rule}` matches no finding of this entity")
            } else {
                format!("there is no rule `{rule}`")
            },
            fix: "remove the stale exception".into(),
            allowed: None,
        });
    }
}
