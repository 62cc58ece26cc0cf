//! DynamoDB table definitions read from the SAM/CloudFormation template.
//!
//! The service's `template.yaml` ([`service_template`]) is the single source of truth for the
//! tables. This module turns each `AWS::DynamoDB::Table` resource into a
//! [`TableSpec`] (keys, attribute definitions, secondary indexes, stream view
//! type, TTL attribute) that [`crate::tables::create_table`] can create in
//! DynamoDB Local under any name.
//!
//! CloudFormation short tags (`!Sub`, `!Ref`, `!GetAtt`, ...) are read by
//! `serde_yaml` as tagged values; they never break parsing. Only `TableName`
//! keeps its `!Sub` text (see [`TableSpec::table_name`]); other tagged values
//! in places where the spec needs a literal are reported as errors.
//!
//! Not carried over (meaningless for DynamoDB Local): point-in-time recovery,
//! SSE, deletion policies, tags. Only `PAY_PER_REQUEST` billing is supported.

use std::path::{Path, PathBuf};

use aws_sdk_dynamodb::types::{KeyType, ProjectionType, ScalarAttributeType, StreamViewType};
use serde_yaml::{Mapping, Value};

/// The service's `template.yaml`: `$CQRS_TEMPLATE` when set, else the nearest `template.yaml` in
/// the current directory or one of its parents (a test runs in its package's folder, which is the
/// service's root or below it; the local stack runs in the service's root). `template.yaml` when
/// there is none, so that reading it names the file that is missing.
///
/// ```
/// let path = cqrs_testkit::template::service_template();
/// assert!(path.ends_with("template.yaml"));
/// ```
pub fn service_template() -> PathBuf {
    if let Some(path) = std::env::var_os("CQRS_TEMPLATE") {
        return PathBuf::from(path);
    }
    std::env::current_dir()
        .ok()
        .and_then(|dir| {
            dir.ancestors()
                .map(|d| d.join("template.yaml"))
                .find(|candidate| candidate.is_file())
        })
        .unwrap_or_else(|| PathBuf::from("template.yaml"))
}

/// Logical id of the command table in `template.yaml`.
pub const COMMAND_TABLE: &str = "CommandTable";
/// Logical id of the data table in `template.yaml`.
pub const DATA_TABLE: &str = "DataTable";
/// Logical id of the history table in `template.yaml`.
pub const HISTORY_TABLE: &str = "HistoryTable";
/// Logical id of the idempotency table in `template.yaml`.
pub const IDEMPOTENCY_TABLE: &str = "IdempotencyTable";

/// One `AttributeDefinitions` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributeSpec {
    /// Attribute name, e.g. `pk`.
    pub name: String,
    /// `S`, `N` or `B`.
    pub attribute_type: ScalarAttributeType,
}

/// One `KeySchema` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec {
    /// Attribute name, e.g. `pk`.
    pub name: String,
    /// `HASH` or `RANGE`.
    pub key_type: KeyType,
}

/// A global or local secondary index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpec {
    /// `IndexName`.
    pub name: String,
    /// The index key (hash, then optional range).
    pub key_schema: Vec<KeySpec>,
    /// `Projection.ProjectionType`.
    pub projection_type: ProjectionType,
    /// `Projection.NonKeyAttributes` (for `INCLUDE`).
    pub non_key_attributes: Vec<String>,
}

/// What `template.yaml` says about one `AWS::DynamoDB::Table` resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    /// Logical id of the resource, e.g. `CommandTable`.
    pub logical_id: String,
    /// `TableName` as written: the text of a `!Sub` / `Fn::Sub`, or a literal.
    /// `None` when the template lets CloudFormation choose the name.
    pub table_name_template: Option<String>,
    /// `AttributeDefinitions`.
    pub attributes: Vec<AttributeSpec>,
    /// Table `KeySchema` (hash, then optional range).
    pub key_schema: Vec<KeySpec>,
    /// `GlobalSecondaryIndexes`.
    pub global_secondary_indexes: Vec<IndexSpec>,
    /// `LocalSecondaryIndexes`.
    pub local_secondary_indexes: Vec<IndexSpec>,
    /// `StreamSpecification.StreamViewType`, if the table has a stream.
    pub stream_view_type: Option<StreamViewType>,
    /// `TimeToLiveSpecification.AttributeName`, if TTL is enabled.
    pub ttl_attribute: Option<String>,
}

impl TableSpec {
    /// The attribute name of the table's `HASH` key.
    ///
    /// # Examples
    ///
    /// ```
    /// let specs = cqrs_testkit::template::workspace_tables().unwrap();
    /// assert_eq!(specs[0].hash_key(), Some("pk"));
    /// ```
    pub fn hash_key(&self) -> Option<&str> {
        key_of(&self.key_schema, KeyType::Hash)
    }

    /// The attribute name of the table's `RANGE` key, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// let specs = cqrs_testkit::template::workspace_tables().unwrap();
    /// assert_eq!(specs[0].range_key(), Some("sk"));
    /// ```
    pub fn range_key(&self) -> Option<&str> {
        key_of(&self.key_schema, KeyType::Range)
    }

    /// The table name the template would produce with the given parameter
    /// values: `${Name}` references in [`Self::table_name_template`] are
    /// replaced. Returns `None` if there is no `TableName` or a reference has
    /// no value (pseudo parameters such as `${AWS::Region}` included).
    ///
    /// # Examples
    ///
    /// ```
    /// let specs = cqrs_testkit::template::workspace_tables().unwrap();
    /// let command = cqrs_testkit::template::find(&specs, "CommandTable").unwrap();
    /// assert_eq!(
    ///     command.table_name(&[("Prefix", "dev")]).as_deref(),
    ///     Some("dev-command")
    /// );
    /// ```
    pub fn table_name(&self, parameters: &[(&str, &str)]) -> Option<String> {
        let template = self.table_name_template.as_deref()?;
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            if let Some(literal) = after.strip_prefix('!') {
                // `${!Literal}` is an escaped, literal `${Literal}`.
                let end = literal.find('}')?;
                out.push_str("${");
                out.push_str(&literal[..=end]);
                rest = &literal[end + 1..];
                continue;
            }
            let end = after.find('}')?;
            let name = &after[..end];
            let (_, value) = parameters.iter().find(|(n, _)| *n == name)?;
            out.push_str(value);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Some(out)
    }
}

fn key_of(keys: &[KeySpec], kind: KeyType) -> Option<&str> {
    keys.iter()
        .find(|k| k.key_type == kind)
        .map(|k| k.name.as_str())
}

/// Finds the spec with the given logical id.
///
/// # Examples
///
/// ```
/// use cqrs_testkit::template::{find, workspace_tables, HISTORY_TABLE};
///
/// let specs = workspace_tables().unwrap();
/// let history = find(&specs, HISTORY_TABLE).unwrap();
/// assert_eq!(history.global_secondary_indexes[0].name, "id-version-index");
/// ```
pub fn find<'a>(specs: &'a [TableSpec], logical_id: &str) -> Option<&'a TableSpec> {
    specs.iter().find(|s| s.logical_id == logical_id)
}

/// A problem reading the template.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not YAML.
    #[error("template is not valid YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
    /// The YAML does not have the expected shape.
    #[error("{at}: {message}")]
    Invalid {
        /// Where, e.g. `Resources.CommandTable.Properties.KeySchema[0]`.
        at: String,
        /// What is wrong.
        message: String,
    },
}

fn invalid(at: &str, message: impl Into<String>) -> TemplateError {
    TemplateError::Invalid {
        at: at.to_owned(),
        message: message.into(),
    }
}

/// Parses every `AWS::DynamoDB::Table` resource of a template, in the order
/// of the resources in the file.
///
/// # Examples
///
/// ```
/// use cqrs_testkit::template::parse_template;
///
/// let yaml = r#"
/// Parameters: { Prefix: { Type: String } }
/// Resources:
///   Things:
///     Type: AWS::DynamoDB::Table
///     Properties:
///       TableName: !Sub '${Prefix}-things'
///       BillingMode: PAY_PER_REQUEST
///       AttributeDefinitions: [{ AttributeName: id, AttributeType: S }]
///       KeySchema: [{ AttributeName: id, KeyType: HASH }]
///       StreamSpecification: { StreamViewType: NEW_AND_OLD_IMAGES }
///       TimeToLiveSpecification: { AttributeName: expires, Enabled: true }
///   Other:
///     Type: AWS::S3::Bucket
/// Outputs:
///   Arn: { Value: !GetAtt Things.Arn }
/// "#;
/// let specs = parse_template(yaml).unwrap();
/// assert_eq!(specs.len(), 1);
/// assert_eq!(specs[0].logical_id, "Things");
/// assert_eq!(specs[0].hash_key(), Some("id"));
/// assert_eq!(specs[0].range_key(), None);
/// assert_eq!(specs[0].ttl_attribute.as_deref(), Some("expires"));
/// assert_eq!(
///     specs[0].table_name(&[("Prefix", "x")]).as_deref(),
///     Some("x-things")
/// );
/// ```
pub fn parse_template(yaml: &str) -> Result<Vec<TableSpec>, TemplateError> {
    let root: Value = serde_yaml::from_str(yaml)?;
    let resources = get(&root, "Resources")
        .ok_or_else(|| invalid("Resources", "missing"))?
        .as_mapping()
        .ok_or_else(|| invalid("Resources", "not a mapping"))?;
    let mut specs = Vec::new();
    for (id, resource) in resources {
        let id = id
            .as_str()
            .ok_or_else(|| invalid("Resources", "non-string logical id"))?;
        let at = format!("Resources.{id}");
        if get(resource, "Type").and_then(Value::as_str) != Some("AWS::DynamoDB::Table") {
            continue;
        }
        let props = get(resource, "Properties")
            .and_then(Value::as_mapping)
            .ok_or_else(|| invalid(&at, "missing Properties"))?;
        specs.push(parse_table(id, props, &format!("{at}.Properties"))?);
    }
    Ok(specs)
}

/// Reads and parses a template file (see [`parse_template`]).
///
/// # Examples
///
/// ```
/// use cqrs_testkit::template::{load_template, service_template};
///
/// let specs = load_template(service_template()).unwrap();
/// assert_eq!(specs.len(), 6);
/// assert!(load_template("/nonexistent/template.yaml").is_err());
/// ```
pub fn load_template(path: impl AsRef<Path>) -> Result<Vec<TableSpec>, TemplateError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| TemplateError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse_template(&text)
}

/// The tables of the service's `template.yaml` ([`service_template`]).
///
/// # Examples
///
/// ```
/// let specs = cqrs_testkit::template::workspace_tables().unwrap();
/// let ids: Vec<_> = specs.iter().map(|s| s.logical_id.as_str()).collect();
/// assert_eq!(ids, ["CommandTable", "DataTable", "HistoryTable", "IdempotencyTable", "ParkedTable", "SequencesTable"]);
/// ```
pub fn workspace_tables() -> Result<Vec<TableSpec>, TemplateError> {
    load_template(service_template())
}

fn get<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    match value {
        Value::Mapping(map) => map.get(key),
        _ => None,
    }
}

fn get_in<'a>(map: &'a Mapping, key: &str) -> Option<&'a Value> {
    map.get(key)
}

/// A literal string, or an error naming the place (tags are rejected here).
fn string(value: Option<&Value>, at: &str) -> Result<String, TemplateError> {
    match value {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Tagged(t)) => Err(invalid(
            at,
            format!("{} is not supported here; a literal is needed", t.tag),
        )),
        Some(other) => Err(invalid(at, format!("expected a string, got {other:?}"))),
        None => Err(invalid(at, "missing")),
    }
}

fn list<'a>(value: Option<&'a Value>, at: &str) -> Result<&'a [Value], TemplateError> {
    match value {
        Some(Value::Sequence(seq)) => Ok(seq),
        None => Ok(&[]),
        Some(other) => Err(invalid(at, format!("expected a list, got {other:?}"))),
    }
}

fn boolean(value: Option<&Value>, at: &str) -> Result<bool, TemplateError> {
    match value {
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(true),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(false),
        None => Ok(false),
        Some(other) => Err(invalid(at, format!("expected a boolean, got {other:?}"))),
    }
}

/// `TableName`: a literal, `!Sub 'text'`, `!Sub ['text', {..}]` or `Fn::Sub`.
fn table_name(value: Option<&Value>, at: &str) -> Result<Option<String>, TemplateError> {
    let sub_text = |v: &Value| -> Result<String, TemplateError> {
        match v {
            Value::String(s) => Ok(s.clone()),
            Value::Sequence(seq) => string(seq.first(), &format!("{at}[0]")),
            other => Err(invalid(at, format!("unsupported Sub form {other:?}"))),
        }
    };
    match value {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Tagged(t)) if t.tag == "Sub" => sub_text(&t.value).map(Some),
        Some(v @ Value::Mapping(_)) if get(v, "Fn::Sub").is_some() => {
            get(v, "Fn::Sub").map(sub_text).transpose()
        }
        Some(other) => Err(invalid(
            at,
            format!("TableName must be a literal or !Sub, got {other:?}"),
        )),
    }
}

fn parse_attributes(value: Option<&Value>, at: &str) -> Result<Vec<AttributeSpec>, TemplateError> {
    list(value, at)?
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let at = format!("{at}[{i}]");
            let name = string(get(a, "AttributeName"), &format!("{at}.AttributeName"))?;
            let ty_at = format!("{at}.AttributeType");
            let attribute_type = match string(get(a, "AttributeType"), &ty_at)?.as_str() {
                "S" => ScalarAttributeType::S,
                "N" => ScalarAttributeType::N,
                "B" => ScalarAttributeType::B,
                other => return Err(invalid(&ty_at, format!("unknown type {other:?}"))),
            };
            Ok(AttributeSpec {
                name,
                attribute_type,
            })
        })
        .collect()
}

/// How many key attributes a key schema may have.
#[derive(Clone, Copy)]
enum KeyShape {
    /// A table or an LSI: one HASH, at most one RANGE.
    Single,
    /// A GSI: DynamoDB's native multi-attribute keys, 1 to 4 HASH then 0 to 4 RANGE.
    MultiAttribute,
}

fn parse_keys(
    value: Option<&Value>,
    at: &str,
    shape: KeyShape,
) -> Result<Vec<KeySpec>, TemplateError> {
    let keys = list(value, at)?
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let at = format!("{at}[{i}]");
            let name = string(get(k, "AttributeName"), &format!("{at}.AttributeName"))?;
            let kt_at = format!("{at}.KeyType");
            let key_type = match string(get(k, "KeyType"), &kt_at)?.as_str() {
                "HASH" => KeyType::Hash,
                "RANGE" => KeyType::Range,
                other => return Err(invalid(&kt_at, format!("unknown key type {other:?}"))),
            };
            Ok(KeySpec { name, key_type })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let hashes = keys.iter().filter(|k| k.key_type == KeyType::Hash).count();
    let ranges = keys.iter().filter(|k| k.key_type == KeyType::Range).count();
    // HASH attributes come first, then RANGE attributes.
    let ordered = keys
        .iter()
        .skip(hashes)
        .all(|k| k.key_type == KeyType::Range);
    match shape {
        KeyShape::Single if hashes != 1 || ranges > 1 || !ordered => Err(invalid(
            at,
            "needs exactly one HASH and at most one RANGE key",
        )),
        KeyShape::MultiAttribute if !(1..=4).contains(&hashes) || ranges > 4 || !ordered => Err(
            invalid(at, "needs 1 to 4 HASH keys, then at most 4 RANGE keys"),
        ),
        _ => Ok(keys),
    }
}

fn parse_indexes(
    value: Option<&Value>,
    at: &str,
    shape: KeyShape,
) -> Result<Vec<IndexSpec>, TemplateError> {
    list(value, at)?
        .iter()
        .enumerate()
        .map(|(i, ix)| {
            let at = format!("{at}[{i}]");
            let name = string(get(ix, "IndexName"), &format!("{at}.IndexName"))?;
            let key_schema = parse_keys(get(ix, "KeySchema"), &format!("{at}.KeySchema"), shape)?;
            let proj = get(ix, "Projection");
            let pt_at = format!("{at}.Projection.ProjectionType");
            let projection_type =
                match string(proj.and_then(|p| get(p, "ProjectionType")), &pt_at)?.as_str() {
                    "ALL" => ProjectionType::All,
                    "KEYS_ONLY" => ProjectionType::KeysOnly,
                    "INCLUDE" => ProjectionType::Include,
                    other => return Err(invalid(&pt_at, format!("unknown projection {other:?}"))),
                };
            let nk_at = format!("{at}.Projection.NonKeyAttributes");
            let non_key_attributes = list(proj.and_then(|p| get(p, "NonKeyAttributes")), &nk_at)?
                .iter()
                .enumerate()
                .map(|(j, v)| string(Some(v), &format!("{nk_at}[{j}]")))
                .collect::<Result<_, _>>()?;
            Ok(IndexSpec {
                name,
                key_schema,
                projection_type,
                non_key_attributes,
            })
        })
        .collect()
}

fn parse_table(logical_id: &str, props: &Mapping, at: &str) -> Result<TableSpec, TemplateError> {
    let field = |name: &str| format!("{at}.{name}");

    let billing = string(get_in(props, "BillingMode"), &field("BillingMode"))
        .map_err(|_| invalid(&field("BillingMode"), "must be PAY_PER_REQUEST"))?;
    if billing != "PAY_PER_REQUEST" {
        return Err(invalid(
            &field("BillingMode"),
            format!("only PAY_PER_REQUEST is supported, got {billing:?}"),
        ));
    }

    let attributes = parse_attributes(
        get_in(props, "AttributeDefinitions"),
        &field("AttributeDefinitions"),
    )?;
    let key_schema = parse_keys(
        get_in(props, "KeySchema"),
        &field("KeySchema"),
        KeyShape::Single,
    )?;
    let global_secondary_indexes = parse_indexes(
        get_in(props, "GlobalSecondaryIndexes"),
        &field("GlobalSecondaryIndexes"),
        KeyShape::MultiAttribute,
    )?;
    let local_secondary_indexes = parse_indexes(
        get_in(props, "LocalSecondaryIndexes"),
        &field("LocalSecondaryIndexes"),
        KeyShape::Single,
    )?;

    // Every key attribute must be defined, and every definition used.
    let used: Vec<&str> = key_schema
        .iter()
        .chain(global_secondary_indexes.iter().flat_map(|i| &i.key_schema))
        .chain(local_secondary_indexes.iter().flat_map(|i| &i.key_schema))
        .map(|k| k.name.as_str())
        .collect();
    for name in &used {
        if !attributes.iter().any(|a| a.name == *name) {
            return Err(invalid(
                &field("AttributeDefinitions"),
                format!("key attribute {name:?} is not defined"),
            ));
        }
    }
    if let Some(unused) = attributes.iter().find(|a| !used.contains(&a.name.as_str())) {
        return Err(invalid(
            &field("AttributeDefinitions"),
            format!("{:?} is defined but not used in any key", unused.name),
        ));
    }

    let stream_view_type = match get_in(props, "StreamSpecification") {
        None => None,
        Some(s) => {
            let sv_at = field("StreamSpecification.StreamViewType");
            Some(match string(get(s, "StreamViewType"), &sv_at)?.as_str() {
                "NEW_IMAGE" => StreamViewType::NewImage,
                "OLD_IMAGE" => StreamViewType::OldImage,
                "NEW_AND_OLD_IMAGES" => StreamViewType::NewAndOldImages,
                "KEYS_ONLY" => StreamViewType::KeysOnly,
                other => return Err(invalid(&sv_at, format!("unknown view {other:?}"))),
            })
        }
    };

    let ttl_attribute = match get_in(props, "TimeToLiveSpecification") {
        None => None,
        Some(t) => {
            let enabled = boolean(get(t, "Enabled"), &field("TimeToLiveSpecification.Enabled"))?;
            let name = string(
                get(t, "AttributeName"),
                &field("TimeToLiveSpecification.AttributeName"),
            )?;
            enabled.then_some(name)
        }
    };

    Ok(TableSpec {
        logical_id: logical_id.to_owned(),
        table_name_template: table_name(get_in(props, "TableName"), &field("TableName"))?,
        attributes,
        key_schema,
        global_secondary_indexes,
        local_secondary_indexes,
        stream_view_type,
        ttl_attribute,
    })
}
