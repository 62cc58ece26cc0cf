//! The model file as written (TOML), before any check: the serde shapes of `model.toml`. Unknown
//! fields are refused, so a misspelt key is an error, never silently ignored.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawModel {
    #[serde(default)]
    pub model: RawSettings,
    #[serde(default)]
    pub indexes: BTreeMap<String, RawIndex>,
    #[serde(default)]
    pub entities: BTreeMap<String, RawEntity>,
    #[serde(default)]
    pub patterns: BTreeMap<String, RawPattern>,
    /// `[routes.<function>]`: the service's own routes ([`crate::routes`]).
    #[serde(default)]
    pub routes: BTreeMap<String, crate::routes::RawRouteFunction>,
    /// `[consumers.<function>]`: the service's consumers of its change events
    /// ([`crate::consumers`]).
    #[serde(default)]
    pub consumers: BTreeMap<String, crate::consumers::RawConsumer>,
}

/// `[model]`: settings of the whole model.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSettings {
    #[serde(default)]
    pub strict: bool,
    pub tenant_max: Option<usize>,
}

/// `[indexes.<name>]`: one GSI of the data table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIndex {
    pub pk: RawIndexKey,
    pub sk: Option<RawIndexKey>,
    #[serde(default)]
    pub projection: RawProjection,
}

/// An index key: one string attribute (`"gsi1pk"`) or a native multi-attribute key.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawIndexKey {
    Single(String),
    Multi(Vec<RawKeyAttr>),
}

/// One attribute of a native multi-attribute key.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKeyAttr {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
}

/// `projection = "all" | "keys_only" | ["attr", ...]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawProjection {
    Kind(String),
    Include(Vec<String>),
}

impl Default for RawProjection {
    fn default() -> Self {
        RawProjection::Kind("all".into())
    }
}

/// `[entities.<name>]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEntity {
    pub pk: String,
    pub sk: String,
    pub id: Option<String>,
    #[serde(rename = "type")]
    pub item_type: Option<String>,
    #[serde(default)]
    pub common: bool,
    /// Who reads a common entity through the generic read routes: `everyone` (the default) or
    /// `system_admin`.
    pub read: Option<String>,
    #[serde(default)]
    pub attributes: BTreeMap<String, RawAttribute>,
    #[serde(default)]
    pub indexes: BTreeMap<String, RawEntityIndex>,
    pub size: Option<String>,
    pub writes: Option<String>,
    /// Deliberate exceptions to the key-design lint: rule id to the reason.
    #[serde(default)]
    pub allow: BTreeMap<String, String>,
    /// `unique.<name> = { attributes = ..., scope = ... }` ([`crate::Unique`]).
    #[serde(default)]
    pub unique: BTreeMap<String, RawUnique>,
    /// `limits.<name> = { per = ..., when = ..., unless = ..., at_most = N }` ([`crate::Limit`]).
    #[serde(default)]
    pub limits: BTreeMap<String, RawLimit>,
    /// `references.<name> = { entity = ..., key = ..., when = ..., unless = ... }`
    /// ([`crate::Reference`]).
    #[serde(default)]
    pub references: BTreeMap<String, RawReference>,
    /// `roles = { create = [...], update = [...], delete = [...] }` ([`crate::WriteRule`]).
    pub roles: Option<RawRoles>,
}

/// One name or a list of names (`"email"` or `["isbn", "copyNo"]`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawNames {
    One(String),
    Many(Vec<String>),
}

impl RawNames {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            RawNames::One(name) => vec![name],
            RawNames::Many(names) => names,
        }
    }
}

/// `unique.<name>`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUnique {
    pub attributes: RawNames,
    pub scope: Option<String>,
}

/// `limits.<name>`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimit {
    pub per: Option<RawNames>,
    #[serde(default)]
    pub when: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub unless: BTreeMap<String, Vec<String>>,
    /// Read wide, so that 0 or a negative number is the model check's error naming the field.
    pub at_most: i64,
}

/// `references.<name>`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReference {
    pub entity: String,
    /// Target key attribute -> this entity's attribute; absent: the same names.
    pub key: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub when: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub unless: BTreeMap<String, Vec<String>>,
}

/// `roles`: who may write (an unknown operation is refused as an unknown field).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoles {
    pub create: Option<Vec<String>>,
    pub update: Option<Vec<String>>,
    pub delete: Option<Vec<String>>,
}

/// `[entities.<name>.attributes]`: one attribute.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAttribute {
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default)]
    pub required: bool,
    pub values: Option<Vec<String>>,
    pub width: Option<u32>,
    pub max: Option<usize>,
    pub case: Option<String>,
    #[serde(default)]
    pub sequential: bool,
}

/// `[entities.<name>.indexes.<index>]`: the templates that fill one index for this entity.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEntityIndex {
    pub pk: RawTemplates,
    pub sk: Option<RawTemplates>,
    #[serde(default)]
    pub when: BTreeMap<String, Vec<String>>,
}

/// One template, or one per attribute of a native multi-attribute key.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawTemplates {
    One(String),
    Many(Vec<String>),
}

impl RawTemplates {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            RawTemplates::One(t) => vec![t],
            RawTemplates::Many(ts) => ts,
        }
    }
}

/// `[patterns.<name>]`: one named access pattern.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPattern {
    pub entity: Option<String>,
    pub entities: Option<Vec<String>>,
    #[serde(default = "table")]
    pub index: String,
    #[serde(default)]
    pub params: Vec<String>,
    pub description: Option<String>,
    pub sort: Option<Vec<String>>,
}

fn table() -> String {
    "table".into()
}
