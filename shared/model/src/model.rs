//! The checked model: [`Model`] and its [`Entity`], [`Index`] and [`Pattern`] types, built from the
//! model file by [`Model::parse`], which runs every check of [`crate::check`] and refuses a model with
//! any error.

use std::collections::BTreeMap;
use std::fmt;

use cqrs_keys::fnv1a_64;

use crate::attribute::{AttrType, Attribute, Case};
use crate::constraints::{Condition, Limit, Reference, Scope, Unique, WriteRule};
use crate::spec::{
    RawIndexKey, RawLimit, RawModel, RawNames, RawProjection, RawReference, RawRoles, RawUnique,
};
use crate::template::Template;

/// The largest tenant code the model assumes when it computes key lengths, unless `[model]` says
/// `tenant_max`.
///
/// ```
/// assert_eq!(cqrs_model::DEFAULT_TENANT_MAX, 64);
/// ```
pub const DEFAULT_TENANT_MAX: usize = 64;

/// The item fields of every version: index key attributes may not take these names.
///
/// ```
/// assert!(cqrs_model::ITEM_FIELDS.contains(&"version"));
/// ```
pub const ITEM_FIELDS: &[&str] = &[
    "pk",
    "sk",
    "id",
    "code",
    "name",
    "version",
    "tenantCode",
    "type",
    "isDeleted",
    "seq",
    "ttl",
    "attributes",
    "source",
    "requestId",
    "createdAt",
    "createdBy",
    "createdIp",
    "updatedAt",
    "updatedBy",
    "updatedIp",
    "cpk",
    "csk",
    "entity",
    "modelRevision",
];

/// The server-set attribute a template may reference besides the declared ones: when version 1 was
/// written, so it never moves.
///
/// ```
/// assert_eq!(cqrs_model::CREATED_AT, "createdAt");
/// ```
pub const CREATED_AT: &str = "createdAt";

/// One problem of a model, naming where it is.
///
/// ```
/// let errors = cqrs_model::Model::parse("[entities.a]\npk = \"A#{tenant}\"\nsk = \"{nope}\"\n").unwrap_err();
/// let first = &errors.0[0];
/// assert_eq!(first.place, "entity `a`");
/// assert_eq!(first.field, "sk");
/// assert!(first.message.contains("nope"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    /// The entity, index or pattern (`entity `order``).
    pub place: String,
    /// The field within it (`indexes.gsi1.pk`).
    pub field: String,
    /// What is wrong, and the fix where there is one.
    pub message: String,
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, field `{}`: {}",
            self.place, self.field, self.message
        )
    }
}

/// Every problem of a model at once.
///
/// ```
/// let errors = cqrs_model::Model::parse("not toml [").unwrap_err();
/// assert!(errors.to_string().contains("model file"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ModelErrors(pub Vec<ModelError>);

impl fmt::Display for ModelErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the entity model has {} error(s):", self.0.len())?;
        for e in &self.0 {
            write!(f, "\n  - {e}")?;
        }
        Ok(())
    }
}

/// The type of one attribute of a native multi-attribute GSI key.
///
/// ```
/// assert_eq!(cqrs_model::KeyType::parse("N"), Some(cqrs_model::KeyType::N));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyType {
    /// String.
    S,
    /// Number.
    N,
    /// Binary.
    B,
}

impl KeyType {
    /// Reads `S`, `N` or `B`.
    ///
    /// ```
    /// assert_eq!(cqrs_model::KeyType::parse("X"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "S" => Some(KeyType::S),
            "N" => Some(KeyType::N),
            "B" => Some(KeyType::B),
            _ => None,
        }
    }

    /// `S`, `N` or `B`, as CloudFormation's `AttributeType` says it.
    ///
    /// ```
    /// assert_eq!(cqrs_model::KeyType::S.as_str(), "S");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            KeyType::S => "S",
            KeyType::N => "N",
            KeyType::B => "B",
        }
    }
}

/// One key attribute of an index.
///
/// ```
/// let a = cqrs_model::KeyAttr { name: "gsi1pk".into(), ty: cqrs_model::KeyType::S };
/// assert_eq!(a.ty.as_str(), "S");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyAttr {
    /// The top-level item attribute that holds it.
    pub name: String,
    /// Its type.
    pub ty: KeyType,
}

/// An index's key: up to 4 partition and 4 sort attributes (one each for an overloaded
/// `gsi1pk`/`gsi1sk` index).
///
/// ```
/// let model = cqrs_model::Model::example();
/// let gsi1 = model.index("gsi1").unwrap();
/// assert_eq!(gsi1.pk[0].name, "gsi1pk");
/// assert!(!gsi1.is_native_multi_attribute());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// The GSI name.
    pub name: String,
    /// Partition key attributes (HASH), in order.
    pub pk: Vec<KeyAttr>,
    /// Sort key attributes (RANGE), in order; may be empty.
    pub sk: Vec<KeyAttr>,
    /// What the index copies of each item.
    pub projection: Projection,
    /// Whether the file declared the keys as lists (native multi-attribute keys).
    pub native: bool,
}

impl Index {
    /// Whether the index uses DynamoDB's native multi-attribute keys.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// assert!(model.index("location").unwrap().is_native_multi_attribute());
    /// ```
    pub fn is_native_multi_attribute(&self) -> bool {
        self.native
    }

    /// Every key attribute, partition first.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// assert_eq!(model.index("gsi1").unwrap().key_attributes().count(), 2);
    /// ```
    pub fn key_attributes(&self) -> impl Iterator<Item = &KeyAttr> {
        self.pk.iter().chain(self.sk.iter())
    }
}

/// What a GSI copies of each item.
///
/// ```
/// assert_eq!(cqrs_model::Projection::KeysOnly.type_name(), "KEYS_ONLY");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Projection {
    /// Every attribute.
    All,
    /// The table's and the index's keys only.
    KeysOnly,
    /// The keys and these attributes.
    Include(Vec<String>),
}

impl Projection {
    /// CloudFormation's `ProjectionType`.
    ///
    /// ```
    /// assert_eq!(cqrs_model::Projection::All.type_name(), "ALL");
    /// ```
    pub fn type_name(&self) -> &'static str {
        match self {
            Projection::All => "ALL",
            Projection::KeysOnly => "KEYS_ONLY",
            Projection::Include(_) => "INCLUDE",
        }
    }
}

/// How an entity fills one index: one template per key attribute, and when it is in the index.
///
/// ```
/// let model = cqrs_model::Model::example();
/// let order = model.entity("order").unwrap();
/// let by_status = order.indexes.iter().find(|i| i.index == "gsi2").unwrap();
/// assert_eq!(by_status.pk[0].shards(), Some(10));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntityIndex {
    /// The index name.
    pub index: String,
    /// One template per partition key attribute.
    pub pk: Vec<Template>,
    /// One template per sort key attribute.
    pub sk: Vec<Template>,
    /// Membership condition: the item is in the index only when each named attribute holds one of
    /// the listed values (a sparse index). Empty: whenever every referenced attribute is present.
    pub when: BTreeMap<String, Vec<String>>,
    /// The index's partition key attributes, as declared under `[indexes]` (filled by the model).
    pub pk_keys: Vec<KeyAttr>,
    /// The index's sort key attributes, as declared under `[indexes]` (filled by the model).
    pub sk_keys: Vec<KeyAttr>,
}

/// One declared entity.
///
/// ```
/// let model = cqrs_model::Model::example();
/// let order = model.entity("order").unwrap();
/// assert_eq!(order.pk.text(), "ORDER#{tenant}");
/// assert_eq!(order.item_type, "ORDER");
/// assert_eq!(order.id.as_deref(), Some("orderId"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    /// The entity name (`order`).
    pub name: String,
    /// The item `type` (default: the partition key's first literal).
    pub item_type: String,
    /// Whether the items live in the `common` tenant (shared by every tenant).
    pub common: bool,
    /// Who reads the entity's partition through the generic read routes, as the file declares it
    /// (`read = "..."`, common entities only); `None` is [`ReadRule::Everyone`]. See
    /// [`Entity::read_rule`].
    pub read: Option<ReadRule>,
    /// The partition key template.
    pub pk: Template,
    /// The sort key template (without version).
    pub sk: Template,
    /// The id attribute, filled with a ULID when a create gives none.
    pub id: Option<String>,
    /// Declared attributes.
    pub attributes: BTreeMap<String, Attribute>,
    /// The indexes this entity fills.
    pub indexes: Vec<EntityIndex>,
    /// Expected size, for the key-design lint (`small`, `large`).
    pub size: Option<String>,
    /// Expected write rate, for the key-design lint (`low`, `high`).
    pub writes: Option<String>,
    /// Deliberate exceptions to the key-design lint (`allow.<rule> = "reason"`): rule id to reason.
    pub allow: BTreeMap<String, String>,
    /// Unique constraints (`unique.<name>`), by name.
    pub unique: Vec<Unique>,
    /// Bounded counts (`limits.<name>`), by name.
    pub limits: Vec<Limit>,
    /// References to other entities' items (`references.<name>`), by name.
    pub references: Vec<Reference>,
    /// Who may create, update and delete (`roles`); empty: every caller of the tenant.
    pub roles: WriteRule,
}

/// Who may read a common entity through the query handler's generic routes (`/items/...`,
/// `/settings/...`, `/query/{pattern}`): the entity's `read = "..."` in the model file.
///
/// `common` holds two kinds of data: data every tenant shares (master data, settings: read by
/// everyone, the default) and per-tenant facts kept in one place (mbc's `USER#common` and
/// `USER_TENANT#common`: which users exist, which tenant each belongs to), which no tenant should
/// list. Only common entities take a rule: a tenant's own partitions are read by that tenant (and
/// a global `system_admin`) whatever the model says.
///
/// ```
/// use cqrs_model::ReadRule;
/// assert_eq!(ReadRule::parse("system_admin"), Some(ReadRule::SystemAdmin));
/// assert_eq!(ReadRule::parse("everyone"), Some(ReadRule::Everyone));
/// assert_eq!(ReadRule::parse("admin"), None);
/// // The narrower rule wins where two meet (a partition two entities share).
/// assert!(ReadRule::SystemAdmin > ReadRule::Everyone);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum ReadRule {
    /// Every caller (the default, and the only rule of a tenant entity).
    #[default]
    Everyone,
    /// A global `system_admin` only (a `system_admin` role scoped to one tenant does not count).
    SystemAdmin,
}

impl ReadRule {
    /// Reads `everyone` or `system_admin`.
    ///
    /// ```
    /// assert_eq!(cqrs_model::ReadRule::parse("System_Admin"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "everyone" => Some(ReadRule::Everyone),
            "system_admin" => Some(ReadRule::SystemAdmin),
            _ => None,
        }
    }

    /// The rule as the model file writes it.
    ///
    /// ```
    /// assert_eq!(cqrs_model::ReadRule::SystemAdmin.as_str(), "system_admin");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ReadRule::Everyone => "everyone",
            ReadRule::SystemAdmin => "system_admin",
        }
    }
}

impl Entity {
    /// Who reads this entity through the generic read routes: the declared rule, else
    /// [`ReadRule::Everyone`].
    ///
    /// ```
    /// use cqrs_model::{Model, ReadRule};
    /// let model = Model::example();
    /// assert_eq!(model.entity("user_tenant").unwrap().read_rule(), ReadRule::SystemAdmin);
    /// assert_eq!(model.entity("master_data").unwrap().read_rule(), ReadRule::Everyone);
    /// ```
    pub fn read_rule(&self) -> ReadRule {
        self.read.unwrap_or_default()
    }
}

/// A sort-key condition a pattern allows.
///
/// ```
/// assert_eq!(cqrs_model::SortCondition::parse("range"), Some(cqrs_model::SortCondition::Range));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SortCondition {
    /// A prefix of the sort template (given parameters left to right).
    Prefix,
    /// `from` / `to` / `before` / `after` on the next part.
    Range,
}

impl SortCondition {
    /// Reads `prefix` or `range`.
    ///
    /// ```
    /// assert_eq!(cqrs_model::SortCondition::parse("eq"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "prefix" => Some(SortCondition::Prefix),
            "range" => Some(SortCondition::Range),
            _ => None,
        }
    }
}

/// A named access pattern: one query on the table or one index.
///
/// ```
/// let model = cqrs_model::Model::example();
/// let p = model.pattern("orders_of_user").unwrap();
/// assert_eq!(p.index.as_deref(), Some("gsi1"));
/// assert_eq!(p.params, ["userId"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The pattern name.
    pub name: String,
    /// The entities it returns (several: a collection sharing one partition).
    pub entities: Vec<String>,
    /// The index, `None` for the table.
    pub index: Option<String>,
    /// The parameters a caller gives (never `tenant`).
    pub params: Vec<String>,
    /// What it answers, for people.
    pub description: String,
    /// The sort-key conditions allowed.
    pub sort: Vec<SortCondition>,
}

/// The whole checked model.
///
/// ```
/// let model = cqrs_model::Model::parse(r#"
/// [indexes.gsi1]
/// pk = "gsi1pk"
/// sk = "gsi1sk"
///
/// [entities.task]
/// pk = "TASK#{tenant}"
/// sk = "{taskId}"
/// id = "taskId"
/// attributes.taskId = { type = "string", max = 26 }
/// attributes.owner = { type = "string", required = true, max = 64 }
/// indexes.gsi1 = { pk = "OWNER#{tenant}#{owner}", sk = "{createdAt}#{taskId}" }
///
/// [patterns.tasks_of_owner]
/// entity = "task"
/// index = "gsi1"
/// params = ["owner"]
/// "#).unwrap();
/// assert_eq!(model.entities().len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    pub(crate) strict: bool,
    pub(crate) tenant_max: usize,
    pub(crate) indexes: Vec<Index>,
    pub(crate) entities: Vec<Entity>,
    pub(crate) patterns: Vec<Pattern>,
    pub(crate) routes: Vec<crate::routes::RouteFunction>,
    pub(crate) consumers: Vec<crate::consumers::ConsumerFunction>,
    pub(crate) revision: String,
}

/// The example service's model (an online shop: the six key patterns of the mbc-cqrs-serverless key
/// guide), the fixture of this crate's tests and of the doc examples across the framework. A
/// service brings its own model: `Model::parse(include_str!("../model.toml"))`, never this one.
///
/// ```
/// assert!(cqrs_model::EXAMPLE_TOML.contains("[entities.order]"));
/// ```
pub const EXAMPLE_TOML: &str = include_str!("../example/model.toml");

impl Model {
    /// Parses and checks a model file. Every problem is reported at once, each naming the entity (or
    /// index, or pattern) and the field.
    pub fn parse(text: &str) -> Result<Model, ModelErrors> {
        let (model, errors) = Model::parse_unchecked(text)?;
        if errors.is_empty() {
            Ok(model)
        } else {
            Err(ModelErrors(errors))
        }
    }

    /// Parses a model file and runs the checks, but hands back the model with the problems found
    /// (for the key-design lint, which reports on a model that does not check too). `Err` only when
    /// the file is not a model at all (bad TOML, unknown fields).
    pub(crate) fn parse_unchecked(text: &str) -> Result<(Model, Vec<ModelError>), ModelErrors> {
        let raw: RawModel = toml::from_str(text).map_err(|e| {
            ModelErrors(vec![ModelError {
                place: "model file".into(),
                field: e
                    .span()
                    .map(|s| format!("bytes {}..{}", s.start, s.end))
                    .unwrap_or_default(),
                message: e.message().to_string(),
            }])
        })?;
        let mut errors = Vec::new();
        let model = build(raw, text, &mut errors);
        crate::check::check(&model, &mut errors);
        Ok((model, errors))
    }

    /// The example service's model ([`EXAMPLE_TOML`]); panics when it does not check (tests and
    /// examples only: a service parses its own model with [`Model::parse`] and reports the errors).
    ///
    /// ```
    /// assert!(cqrs_model::Model::example().entities().len() > 5);
    /// ```
    #[allow(clippy::expect_used)]
    pub fn example() -> Model {
        Model::parse(EXAMPLE_TOML).expect("the example model checks")
    }

    /// Whether raw `pk`/`sk` commands that match no entity are refused.
    ///
    /// ```
    /// assert!(!cqrs_model::Model::example().is_strict());
    /// ```
    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// A short, stable digest of the model file's text: items carry it as `modelRevision`, so a
    /// rebuild knows which model computed their index keys.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// assert_eq!(model.revision().len(), 16);
    /// ```
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// The entities, by name.
    ///
    /// ```
    /// assert!(cqrs_model::Model::example().entities().iter().any(|e| e.name == "product"));
    /// ```
    pub fn entities(&self) -> &[Entity] {
        &self.entities
    }

    /// One entity by name.
    ///
    /// ```
    /// assert!(cqrs_model::Model::example().entity("nope").is_none());
    /// ```
    pub fn entity(&self, name: &str) -> Option<&Entity> {
        self.entities.iter().find(|e| e.name == name)
    }

    /// The GSIs of the data table.
    ///
    /// ```
    /// assert!(cqrs_model::Model::example().indexes().len() <= 20);
    /// ```
    pub fn indexes(&self) -> &[Index] {
        &self.indexes
    }

    /// One index by name.
    ///
    /// ```
    /// assert!(cqrs_model::Model::example().index("gsi2").is_some());
    /// ```
    pub fn index(&self, name: &str) -> Option<&Index> {
        self.indexes.iter().find(|i| i.name == name)
    }

    /// The service's own route functions (`[routes.<function>]`), by name.
    ///
    /// ```
    /// assert_eq!(cqrs_model::Model::example().routes()[0].name, "order-summary");
    /// ```
    pub fn routes(&self) -> &[crate::routes::RouteFunction] {
        &self.routes
    }

    /// The service's consumers of its change events (`[consumers.<function>]`), by name.
    ///
    /// ```
    /// let model = cqrs_model::Model::parse("[consumers.audit]").unwrap();
    /// assert_eq!(model.consumers()[0].name, "audit");
    /// ```
    pub fn consumers(&self) -> &[crate::consumers::ConsumerFunction] {
        &self.consumers
    }

    /// The consumer `name` (`[consumers.<name>]`).
    ///
    /// ```
    /// let model = cqrs_model::Model::parse("[consumers.audit]").unwrap();
    /// assert_eq!(model.consumer("audit").unwrap().max_receive, 5);
    /// assert!(model.consumer("other").is_none());
    /// ```
    pub fn consumer(&self, name: &str) -> Option<&crate::consumers::ConsumerFunction> {
        self.consumers.iter().find(|c| c.name == name)
    }

    /// The service's own route function `name` (`[routes.<name>]`).
    ///
    /// ```
    /// assert!(cqrs_model::Model::example().route("nope").is_none());
    /// ```
    pub fn route(&self, name: &str) -> Option<&crate::routes::RouteFunction> {
        self.routes.iter().find(|r| r.name == name)
    }

    /// The named access patterns.
    ///
    /// ```
    /// assert!(!cqrs_model::Model::example().patterns().is_empty());
    /// ```
    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }

    /// One access pattern by name.
    ///
    /// ```
    /// assert!(cqrs_model::Model::example().pattern("user_of_order").is_some());
    /// ```
    pub fn pattern(&self, name: &str) -> Option<&Pattern> {
        self.patterns.iter().find(|p| p.name == name)
    }

    /// Every index key attribute name of the model (what a version may carry at top level besides
    /// the item fields).
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// assert!(model.index_attribute_names().contains(&"gsi1pk"));
    /// ```
    pub fn index_attribute_names(&self) -> Vec<&str> {
        self.indexes
            .iter()
            .flat_map(|i| i.key_attributes().map(|k| k.name.as_str()))
            .collect()
    }

    /// The entities with a read rule narrower than [`ReadRule::Everyone`] whose partition template
    /// has the shape of `pk` (its literals, and a non-empty value for each reference): the
    /// entities whose items `pk` could hold. A pk of no such entity yields none.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// let names: Vec<&str> = model.restricted_in_partition("USER_TENANT#common").map(|e| e.name.as_str()).collect();
    /// assert_eq!(names, ["user_tenant"]);
    /// assert_eq!(model.restricted_in_partition("MASTER#common").count(), 0);
    /// assert_eq!(model.restricted_in_partition("USER_TENANT#common#x").count(), 0);
    /// ```
    pub fn restricted_in_partition<'m>(&'m self, pk: &'m str) -> impl Iterator<Item = &'m Entity> {
        self.entities
            .iter()
            .filter(move |e| e.read_rule() != ReadRule::Everyone && e.pk.read(pk).is_some())
    }

    /// Who may read the partition `pk` through the generic read routes: the narrowest rule of
    /// the entities it could hold ([`Model::restricted_in_partition`]), [`ReadRule::Everyone`]
    /// when it could hold none of them.
    ///
    /// ```
    /// use cqrs_model::{Model, ReadRule};
    /// let model = Model::example();
    /// assert_eq!(model.partition_read_rule("USER#common"), ReadRule::SystemAdmin);
    /// assert_eq!(model.partition_read_rule("MASTER#common"), ReadRule::Everyone);
    /// assert_eq!(model.partition_read_rule("NOTE#common"), ReadRule::Everyone);
    /// ```
    pub fn partition_read_rule(&self, pk: &str) -> ReadRule {
        self.restricted_in_partition(pk)
            .map(Entity::read_rule)
            .max()
            .unwrap_or_default()
    }

    /// Who may read an access pattern's answers: the narrowest rule of its entities.
    ///
    /// ```
    /// use cqrs_model::{Model, ReadRule};
    /// let model = Model::example();
    /// let auth = model.pattern("auth_of_provider").unwrap();
    /// assert_eq!(model.pattern_read_rule(auth), ReadRule::SystemAdmin);
    /// assert_eq!(model.pattern_read_rule(model.pattern("settings").unwrap()), ReadRule::Everyone);
    /// ```
    pub fn pattern_read_rule(&self, pattern: &Pattern) -> ReadRule {
        pattern
            .entities
            .iter()
            .filter_map(|name| self.entity(name))
            .map(Entity::read_rule)
            .max()
            .unwrap_or_default()
    }
}

type Constraints = (Vec<Unique>, Vec<Limit>, Vec<Reference>, WriteRule);

/// The constraints and write rule of one entity, as declared; what can be refused without the rest
/// of the model (a scope, an `at_most` out of range) is refused here, the rest by the model check.
fn build_constraints(
    place: &str,
    unique: BTreeMap<String, RawUnique>,
    limits: BTreeMap<String, RawLimit>,
    references: BTreeMap<String, RawReference>,
    roles: Option<RawRoles>,
    err: &mut impl FnMut(String, &str, String),
) -> Constraints {
    let unique = unique
        .into_iter()
        .map(|(name, u)| {
            let scope = match u.scope.as_deref() {
                None => Scope::Tenant,
                Some(text) => Scope::parse(text).unwrap_or_else(|| {
                    err(
                        place.to_string(),
                        &format!("unique.{name}.scope"),
                        format!("{text:?} is not \"tenant\" or \"global\""),
                    );
                    Scope::Tenant
                }),
            };
            Unique {
                attributes: u.attributes.into_vec(),
                name,
                scope,
            }
        })
        .collect();
    let limits = limits
        .into_iter()
        .map(|(name, l)| {
            let at_most = match u32::try_from(l.at_most) {
                Ok(n) if (1..=crate::constraints::MAX_AT_MOST).contains(&n) => n,
                _ => {
                    err(
                        place.to_string(),
                        &format!("limits.{name}.at_most"),
                        format!(
                            "{} is not from 1 to {}: a limit's guard item holds the set of its \
                             members, at most {} of them",
                            l.at_most,
                            crate::constraints::MAX_AT_MOST,
                            crate::constraints::MAX_AT_MOST
                        ),
                    );
                    0
                }
            };
            Limit {
                per: l.per.map(RawNames::into_vec).unwrap_or_default(),
                condition: Condition {
                    when: l.when,
                    unless: l.unless,
                },
                at_most,
                name,
            }
        })
        .collect();
    let references = references
        .into_iter()
        .map(|(name, r)| Reference {
            entity: r.entity,
            key: r.key.unwrap_or_default(),
            condition: Condition {
                when: r.when,
                unless: r.unless,
            },
            name,
        })
        .collect();
    let roles = roles
        .map(|r| WriteRule {
            create: r.create,
            update: r.update,
            delete: r.delete,
        })
        .unwrap_or_default();
    (unique, limits, references, roles)
}

fn build(mut raw: RawModel, text: &str, errors: &mut Vec<ModelError>) -> Model {
    let routes = crate::routes::build(std::mem::take(&mut raw.routes), errors);
    let mut err = |place: String, field: &str, message: String| {
        errors.push(ModelError {
            place,
            field: field.to_string(),
            message,
        })
    };
    let mut indexes = Vec::new();
    for (name, ix) in raw.indexes {
        let place = format!("index `{name}`");
        let mut key =
            |raw: Option<RawIndexKey>, field: &str, suffix: &str| -> (Vec<KeyAttr>, bool) {
                match raw {
                    None => (Vec::new(), false),
                    Some(RawIndexKey::Single(attr)) => (
                        vec![KeyAttr {
                            name: attr,
                            ty: KeyType::S,
                        }],
                        false,
                    ),
                    Some(RawIndexKey::Multi(list)) => {
                        let attrs = list
                        .into_iter()
                        .filter_map(|a| match KeyType::parse(&a.ty) {
                            Some(ty) => Some(KeyAttr { name: a.name, ty }),
                            None => {
                                err(
                                    place.clone(),
                                    field,
                                    format!(
                                        "key attribute {:?} has type {:?}: use S, N or B{suffix}",
                                        a.name, a.ty
                                    ),
                                );
                                None
                            }
                        })
                        .collect();
                        (attrs, true)
                    }
                }
            };
        let (pk, native_pk) = key(Some(ix.pk), "pk", "");
        let (sk, native_sk) = key(ix.sk, "sk", "");
        let projection = match ix.projection {
            RawProjection::Kind(k) if k == "all" => Projection::All,
            RawProjection::Kind(k) if k == "keys_only" => Projection::KeysOnly,
            RawProjection::Kind(k) => {
                err(
                    place.clone(),
                    "projection",
                    format!("{k:?} is not \"all\", \"keys_only\" or a list of attributes"),
                );
                Projection::All
            }
            RawProjection::Include(list) => Projection::Include(list),
        };
        indexes.push(Index {
            name,
            pk,
            sk,
            projection,
            native: native_pk || native_sk,
        });
    }

    let mut entities = Vec::new();
    for (name, e) in raw.entities {
        let place = format!("entity `{name}`");
        let mut template = |field: &str, text: &str| match Template::parse(text) {
            Ok(t) => Some(t),
            Err(m) => {
                err(place.clone(), field, m);
                None
            }
        };
        let pk = template("pk", &e.pk);
        let sk = template("sk", &e.sk);
        let mut entity_indexes = Vec::new();
        for (index, ix) in e.indexes {
            let pk_list: Vec<Template> = ix
                .pk
                .into_vec()
                .iter()
                .filter_map(|t| template(&format!("indexes.{index}.pk"), t))
                .collect();
            let sk_list: Vec<Template> = ix
                .sk
                .map(|s| s.into_vec())
                .unwrap_or_default()
                .iter()
                .filter_map(|t| template(&format!("indexes.{index}.sk"), t))
                .collect();
            let declared = indexes.iter().find(|i: &&Index| i.name == index);
            entity_indexes.push(EntityIndex {
                pk_keys: declared.map(|i| i.pk.clone()).unwrap_or_default(),
                sk_keys: declared.map(|i| i.sk.clone()).unwrap_or_default(),
                index,
                pk: pk_list,
                sk: sk_list,
                when: ix.when,
            });
        }
        let mut attributes = BTreeMap::new();
        for (attr, a) in e.attributes {
            let field = format!("attributes.{attr}");
            let Some(ty) = AttrType::parse(&a.ty) else {
                err(
                    place.clone(),
                    &field,
                    format!(
                        "type {:?} is not string, number, boolean, timestamp, enum, map or list",
                        a.ty
                    ),
                );
                continue;
            };
            let case = match a.case.as_deref() {
                None => None,
                Some("upper") => Some(Case::Upper),
                Some("lower") => Some(Case::Lower),
                Some(other) => {
                    err(
                        place.clone(),
                        &field,
                        format!("case {other:?} is not \"upper\" or \"lower\""),
                    );
                    None
                }
            };
            attributes.insert(
                attr,
                Attribute {
                    ty,
                    required: a.required,
                    values: a.values.unwrap_or_default(),
                    width: a.width,
                    max: a.max,
                    case,
                    sequential: a.sequential,
                },
            );
        }
        let read = e.read.as_deref().and_then(|text| {
            let rule = ReadRule::parse(text);
            if rule.is_none() {
                err(
                    place.clone(),
                    "read",
                    format!("{text:?} is not \"everyone\" or \"system_admin\""),
                );
            }
            rule
        });
        let (unique, limits, references, roles) =
            build_constraints(&place, e.unique, e.limits, e.references, e.roles, &mut err);
        let (Some(pk), Some(sk)) = (pk, sk) else {
            continue;
        };
        let item_type = e.item_type.unwrap_or_else(|| match pk.parts().first() {
            Some(crate::template::Part::Lit(text)) => text
                .split(cqrs_keys::KEY_SEPARATOR)
                .next()
                .unwrap_or_default()
                .to_string(),
            _ => name.to_uppercase(),
        });
        entities.push(Entity {
            name,
            item_type,
            common: e.common,
            read,
            pk,
            sk,
            id: e.id,
            attributes,
            indexes: entity_indexes,
            size: e.size,
            writes: e.writes,
            allow: e.allow,
            unique,
            limits,
            references,
            roles,
        });
    }
    // A reference without `key` names the target's key attributes by the same names.
    let defaults: Vec<(usize, usize, BTreeMap<String, String>)> = entities
        .iter()
        .enumerate()
        .flat_map(|(e, entity)| {
            entity
                .references
                .iter()
                .enumerate()
                .map(move |(r, reference)| (e, r, reference))
        })
        .filter(|(_, _, reference)| reference.key.is_empty())
        .filter_map(|(e, r, reference)| {
            let target = entities.iter().find(|t| t.name == reference.entity)?;
            let key = target
                .key_attribute_names()
                .into_iter()
                .map(|name| (name.to_string(), name.to_string()))
                .collect();
            Some((e, r, key))
        })
        .collect();
    for (e, r, key) in defaults {
        if let Some(reference) = entities.get_mut(e).and_then(|x| x.references.get_mut(r)) {
            reference.key = key;
        }
    }

    let mut patterns = Vec::new();
    for (name, p) in raw.patterns {
        let place = format!("pattern `{name}`");
        let entities = match (p.entity, p.entities) {
            (Some(one), None) => vec![one],
            (None, Some(many)) if !many.is_empty() => many,
            _ => {
                err(
                    place.clone(),
                    "entity",
                    "give either `entity` or a non-empty `entities` list".into(),
                );
                continue;
            }
        };
        let mut sort = Vec::new();
        for s in p
            .sort
            .unwrap_or_else(|| vec!["prefix".into(), "range".into()])
        {
            match SortCondition::parse(&s) {
                Some(c) => sort.push(c),
                None => err(
                    place.clone(),
                    "sort",
                    format!("{s:?} is not \"prefix\" or \"range\""),
                ),
            }
        }
        patterns.push(Pattern {
            name,
            entities,
            index: (p.index != "table").then_some(p.index),
            params: p.params,
            description: p.description.unwrap_or_default(),
            sort,
        });
    }

    let consumers = {
        let entity_names: Vec<&str> = entities.iter().map(|e| e.name.as_str()).collect();
        let route_names: Vec<&str> = routes.iter().map(|r| r.name.as_str()).collect();
        crate::consumers::build(
            std::mem::take(&mut raw.consumers),
            &entity_names,
            &route_names,
            errors,
        )
    };
    Model {
        strict: raw.model.strict,
        tenant_max: raw.model.tenant_max.unwrap_or(DEFAULT_TENANT_MAX),
        indexes,
        entities,
        patterns,
        routes,
        consumers,
        revision: format!("{:016x}", fnv1a_64(text.as_bytes())),
    }
}
