//! An item of the data table as a row of the relational read model: the table it goes to (its
//! entity's, or the generic table), and its values as text, in the table's column order (each
//! value is cast to its column's type in SQL).
//!
//! A version goes to the generic table, with the reason, when its keys match no entity, or when a
//! value does not fit its entity's column (a required attribute missing, a value of another type,
//! longer than its maximum, not one of the enum's values): its entity's constraints would refuse it,
//! and a refused row would stop the whole batch. Nothing is lost: the generic table holds every
//! attribute.
//!
//! PostgreSQL stores no U+0000 (NUL) in `text` nor in `jsonb` (`invalid byte sequence for encoding
//! "UTF8": 0x00`, `unsupported Unicode escape sequence`), and DynamoDB does. A row holds every
//! string **value** as [`storable`] makes it: each U+0000 replaced by U+FFFD (the replacement
//! character), in the envelope's text columns, in typed columns and in the `jsonb` attributes at any
//! depth (an attribute *name* holding U+0000 too). `cqrs verify --sql` compares through the same
//! transform, since its expected rows are made here. A **key** (`pk`, `sk`, `id`) is never
//! rewritten (it would become another item's key): an item whose key holds U+0000 has no row;
//! [`unstorable_key`] says why, and sql-sync parks the record with that reason.
//!
//! ```
//! let model = cqrs_model::Model::parse(r#"
//! [entities.task]
//! pk = "TASK#{tenant}"
//! sk = "{taskId}"
//! attributes.taskId = { type = "string", required = true, max = 26 }
//! attributes.done = { type = "boolean" }
//! "#).unwrap();
//! let schema = cqrs_sql::schema::Schema::of(&model);
//! let mut item = cqrs_item::Item::example();
//! (item.pk, item.sk, item.attributes) = ("TASK#t1".into(), "T1".into(), Default::default());
//! item.attributes.insert("taskId".into(), cqrs_item::Value::from("T1"));
//! item.attributes.insert("done".into(), cqrs_item::Value::Bool(true));
//! item.attributes.insert("colour".into(), cqrs_item::Value::from("red"));
//! let row = cqrs_sql::rows::row(&model, &schema, &item);
//! assert_eq!((row.table.as_str(), row.reason.as_deref()), ("task", None));
//! assert_eq!(row.value("done"), Some("true"));
//! assert_eq!(row.value("attributes"), Some(r#"{"colour":"red"}"#));
//! ```

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use cqrs_item::{Item, Map, Value};
use cqrs_model::{AttrType, Model, ValueRef};

use crate::schema::{ENVELOPE, GENERIC_TABLE, Schema, Table};

/// The generic table's own columns, after the envelope: the entity the keys name (if any) and why
/// the row is here.
pub const GENERIC_COLUMNS: [(&str, &str); 2] = [("entity", "text"), ("reason", "text NOT NULL")];

/// Where `pk`, `sk` and `version` are in every row (the envelope comes first).
const PK: usize = 0;
const SK: usize = 1;
const VERSION: usize = 7;

/// One row: where it goes and its values ([`row`] makes it; see the module's example). The rows of
/// one table share its column names and types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The table.
    pub table: String,
    /// Column names, in order.
    pub columns: Arc<[String]>,
    /// Column types, in order (what each value is cast to).
    pub types: Arc<[String]>,
    /// The values as text (`None`: SQL `NULL`), in order.
    pub values: Vec<Option<String>>,
    /// The entity table it would have gone to, when it is in the generic table for not fitting it.
    pub entity: Option<String>,
    /// Why it is in the generic table.
    pub reason: Option<String>,
}

impl Row {
    /// The value of `column` (see the module's example).
    pub fn value(&self, column: &str) -> Option<&str> {
        let at = self.columns.iter().position(|c| c == column)?;
        self.values[at].as_deref()
    }

    /// The value of the envelope's column `column`, found at its place (`at`) first.
    fn envelope_value(&self, at: usize, column: &str) -> Option<&str> {
        match self.columns.get(at) {
            Some(name) if name == column => self.values[at].as_deref(),
            _ => self.value(column),
        }
    }

    /// The item's key.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// let row = cqrs_sql::rows::row(&model, &cqrs_sql::schema::Schema::of(&model), &cqrs_item::Item::example());
    /// assert_eq!(row.key(), ("PRODUCT#t1", "P001@1"));
    /// ```
    pub fn key(&self) -> (&str, &str) {
        (
            self.envelope_value(PK, "pk").unwrap_or(""),
            self.envelope_value(SK, "sk").unwrap_or(""),
        )
    }

    /// The item's version.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// let row = cqrs_sql::rows::row(&model, &cqrs_sql::schema::Schema::of(&model), &cqrs_item::Item::example());
    /// assert_eq!(row.version(), 1);
    /// ```
    pub fn version(&self) -> i64 {
        self.envelope_value(VERSION, "version")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

/// The column names and types of one table's rows.
#[derive(Debug, Clone)]
struct Shape {
    columns: Arc<[String]>,
    types: Arc<[String]>,
}

impl Shape {
    /// The shape of `table`'s rows, or of the generic table's (`None`).
    fn of(table: Option<&Table>) -> Shape {
        let own: Vec<(String, String)> = match table {
            Some(table) => table
                .columns
                .iter()
                .map(|c| (c.name.clone(), c.sql_type.clone()))
                .collect(),
            None => GENERIC_COLUMNS
                .iter()
                .map(|(c, d)| (c.to_string(), sql_type(d)))
                .collect(),
        };
        let (columns, types): (Vec<String>, Vec<String>) = ENVELOPE
            .iter()
            .map(|(c, d)| (c.to_string(), sql_type(d)))
            .chain(own)
            .unzip();
        Shape {
            columns: columns.into(),
            types: types.into(),
        }
    }
}

/// The rows of a model's items, with each table's column names and types made once (what a
/// consumer of the data table's stream keeps): [`Rows::row`] gives what [`row`] gives.
///
/// ```
/// let model = cqrs_model::Model::example();
/// let rows = cqrs_sql::rows::Rows::new(model.clone());
/// let item = cqrs_item::Item::example();
/// let once = cqrs_sql::rows::row(&model, rows.schema(), &item);
/// assert_eq!(rows.row(item), once);
/// ```
#[derive(Debug, Clone)]
pub struct Rows {
    model: Model,
    schema: Schema,
    shapes: HashMap<String, Shape>,
    generic: Shape,
}

impl Rows {
    /// The rows of `model`'s items, into its schema ([`Schema::of`]); see the type's example.
    pub fn new(model: Model) -> Rows {
        let schema = Schema::of(&model);
        let shapes = schema
            .tables
            .iter()
            .map(|t| (t.name.clone(), Shape::of(Some(t))))
            .collect();
        Rows {
            model,
            schema,
            shapes,
            generic: Shape::of(None),
        }
    }

    /// The model.
    ///
    /// ```
    /// let rows = cqrs_sql::rows::Rows::new(cqrs_model::Model::example());
    /// assert!(!rows.model().entities().is_empty());
    /// ```
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Its schema.
    ///
    /// ```
    /// let rows = cqrs_sql::rows::Rows::new(cqrs_model::Model::example());
    /// assert_eq!(rows.schema().tables.len(), rows.model().entities().len());
    /// ```
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The row of `item` (a state of the data table), taking its values (see the type's example).
    pub fn row(&self, item: Item) -> Row {
        build(&self.model, &self.schema, item, &|table| match table {
            Some(table) => self.shapes[&table.name].clone(),
            None => self.generic.clone(),
        })
    }
}

/// What stands for U+0000 in a stored value: U+FFFD, the replacement character.
pub const NUL_REPLACEMENT: char = '\u{FFFD}';

/// `text` as PostgreSQL can store it: each U+0000 replaced by [`NUL_REPLACEMENT`]; borrowed when
/// it holds none (the usual case costs a scan, nothing else). Rows hold their string values so, and
/// whatever compares a row with the data table (`cqrs verify --sql`) compares through it.
///
/// ```
/// use cqrs_sql::rows::storable;
/// assert_eq!(storable("bad\u{0}name"), "bad\u{FFFD}name");
/// assert!(matches!(storable("fine"), std::borrow::Cow::Borrowed("fine")));
/// ```
pub fn storable(text: &str) -> Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(text)
    }
}

/// Makes `text` [`storable`] in place.
fn make_storable(text: &mut String) {
    if text.contains('\0') {
        *text = text.replace('\0', "\u{FFFD}");
    }
}

/// Makes every string inside `value` [`storable`], at any depth, map keys included.
///
/// ```
/// use cqrs_item::Value;
/// let mut value = Value::List(vec![Value::from("a\u{0}"), Value::Bool(true)]);
/// cqrs_sql::rows::make_value_storable(&mut value);
/// assert_eq!(value, Value::List(vec![Value::from("a\u{FFFD}"), Value::Bool(true)]));
/// ```
pub fn make_value_storable(value: &mut Value) {
    match value {
        Value::String(s) => make_storable(s),
        Value::List(values) => values.iter_mut().for_each(make_value_storable),
        Value::Map(map) => make_map_storable(map),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// [`make_value_storable`] for every value of `map`, and its keys.
fn make_map_storable(map: &mut Map) {
    if map.keys().any(|k| k.contains('\0')) {
        *map = std::mem::take(map)
            .into_iter()
            .map(|(k, v)| (storable(&k).into_owned(), v))
            .collect();
    }
    map.values_mut().for_each(make_value_storable);
}

/// Why `item` can have no row, if so: its key (`pk`, `sk` or `id`) holds U+0000, which PostgreSQL
/// cannot store and which is never rewritten (that would be another item's key). sql-sync parks
/// such a record with this reason.
///
/// ```
/// let mut item = cqrs_item::Item::example();
/// assert_eq!(cqrs_sql::rows::unstorable_key(&item), None);
/// item.sk = "P\u{0}1".into();
/// assert!(cqrs_sql::rows::unstorable_key(&item).unwrap().contains("U+0000"));
/// ```
pub fn unstorable_key(item: &Item) -> Option<String> {
    key_problem(&item.pk, &item.sk).or_else(|| {
        item.id.contains('\0').then(|| {
            "its id holds U+0000, which PostgreSQL cannot store (a key is never rewritten)"
                .to_string()
        })
    })
}

/// Why the key `pk`, `sk` can have no row, if so ([`unstorable_key`]).
///
/// ```
/// assert!(cqrs_sql::rows::key_problem("LOAN#t1", "L\u{0}1").is_some());
/// assert!(cqrs_sql::rows::key_problem("LOAN#t1", "L1").is_none());
/// ```
pub fn key_problem(pk: &str, sk: &str) -> Option<String> {
    let which = match (pk.contains('\0'), sk.contains('\0')) {
        (false, false) => return None,
        (true, false) => "pk",
        (false, true) => "sk",
        (true, true) => "pk and sk",
    };
    Some(format!(
        "its key ({which}) holds U+0000, which PostgreSQL cannot store (a key is never rewritten)"
    ))
}

/// Every string value of `item` but its keys made [`storable`].
fn make_item_storable(item: &mut Item) {
    let Item {
        code,
        name,
        tenant_code,
        item_type,
        source,
        request_id,
        created_at,
        created_by,
        created_ip,
        updated_at,
        updated_by,
        updated_ip,
        attributes,
        ..
    } = item;
    for text in [
        code,
        name,
        tenant_code,
        item_type,
        source,
        request_id,
        created_at,
        created_by,
        created_ip,
        updated_at,
        updated_by,
        updated_ip,
    ] {
        make_storable(text);
    }
    make_map_storable(attributes);
}

fn timestamp(value: String) -> Option<String> {
    // An audit time that does not parse stays NULL rather than failing the batch.
    let check = cqrs_model::Attribute::new(AttrType::Timestamp);
    check.check(ValueRef::Str(&value)).ok().map(|_| value)
}

fn json(map: &Map) -> String {
    serde_json::to_string(map).expect("an item's attributes serialise")
}

fn value_ref(value: &Value) -> ValueRef<'_> {
    match value {
        Value::Null => ValueRef::Null,
        Value::Bool(b) => ValueRef::Bool(*b),
        Value::Number(n) => ValueRef::Num(n.as_str()),
        Value::String(s) => ValueRef::Str(s),
        Value::List(_) => ValueRef::Other("list"),
        Value::Map(_) => ValueRef::Other("map"),
    }
}

/// The text of a typed column's value.
fn cell(value: Value) -> String {
    match value {
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.as_str().to_string(),
        Value::String(s) => s,
        Value::Null => String::new(),
        Value::List(_) | Value::Map(_) => {
            serde_json::to_string(&value).expect("a value serialises")
        }
    }
}

/// The envelope's values of `item` (its attributes are left out), taking them, with `attributes`
/// (the ones without a column) as JSON.
fn envelope(item: Item, rest: &Map) -> Vec<Option<String>> {
    let Item {
        pk,
        sk,
        id,
        code,
        name,
        version,
        tenant_code,
        item_type,
        is_deleted,
        seq,
        ttl,
        source,
        request_id,
        created_at,
        created_by,
        created_ip,
        updated_at,
        updated_by,
        updated_ip,
        ..
    } = item;
    vec![
        Some(pk),
        Some(sk),
        Some(id),
        Some(tenant_code),
        Some(item_type),
        Some(code),
        Some(name),
        Some(version.to_string()),
        Some(is_deleted.to_string()),
        seq.map(|s| s.to_string()),
        ttl.map(|t| t.to_string()),
        Some(source),
        Some(request_id),
        timestamp(created_at),
        Some(created_by),
        Some(created_ip),
        timestamp(updated_at),
        Some(updated_by),
        Some(updated_ip),
        Some(json(rest)),
    ]
}

fn sql_type(definition: &str) -> String {
    definition
        .split_whitespace()
        .next()
        .unwrap_or("text")
        .to_string()
}

/// The row of `item` (a state of the data table: `sk` without version); see the module's example.
/// [`Rows::row`] gives the same, without making the table's column names and types again.
pub fn row(model: &Model, schema: &Schema, item: &Item) -> Row {
    build(model, schema, item.clone(), &Shape::of)
}

/// The row of `item`, taking its values; `shape` gives a table's column names and types (the
/// generic table's for `None`).
fn build(
    model: &Model,
    schema: &Schema,
    mut item: Item,
    shape: &dyn Fn(Option<&Table>) -> Shape,
) -> Row {
    make_item_storable(&mut item);
    let entity = model.entity_of_keys(&item.pk, &item.sk);
    let reason = match entity {
        None => "its keys match no entity of the model".to_string(),
        Some(entity) => {
            let table = schema
                .table(&entity.name)
                .expect("the schema has a table per entity");
            let mut typed = Vec::with_capacity(table.columns.len());
            let mut misfit = None;
            for column in &table.columns {
                let attribute = &entity.attributes[&column.attribute];
                let value = item.attributes.get(&column.attribute);
                match value {
                    None | Some(Value::Null) if attribute.required => {
                        misfit = Some(format!(
                            "the required attribute {} is missing",
                            column.attribute
                        ));
                    }
                    None | Some(Value::Null) => typed.push(None),
                    Some(value) => {
                        if let Err(message) = attribute.check(value_ref(value)) {
                            misfit = Some(format!("attribute {}: {message}", column.attribute));
                        } else {
                            typed.push(Some(column.attribute.as_str()));
                        }
                    }
                }
                if misfit.is_some() {
                    break;
                }
            }
            match misfit {
                None => {
                    // Every typed value fits: take them out of the attributes, the rest is JSON.
                    let typed: Vec<Option<String>> = typed
                        .into_iter()
                        .map(|name| name.and_then(|name| item.attributes.remove(name)).map(cell))
                        .collect();
                    let attributes = std::mem::take(&mut item.attributes);
                    let Shape { columns, types } = shape(Some(table));
                    let mut values = envelope(item, &attributes);
                    values.extend(typed);
                    return Row {
                        table: table.name.clone(),
                        columns,
                        types,
                        values,
                        entity: None,
                        reason: None,
                    };
                }
                Some(reason) => format!("it does not fit entity {}: {reason}", entity.name),
            }
        }
    };
    let entity = entity.map(|e| e.name.clone());
    let attributes = std::mem::take(&mut item.attributes);
    let Shape { columns, types } = shape(None);
    let mut values = envelope(item, &attributes);
    values.push(entity.clone());
    values.push(Some(reason.clone()));
    Row {
        table: GENERIC_TABLE.to_string(),
        columns,
        types,
        values,
        entity,
        reason: Some(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: &str = r#"
[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
attributes.loanId = { type = "string", required = true, max = 26 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }
attributes.fee = { type = "number", width = 4 }
attributes.notes = { type = "map" }
attributes.code = { type = "string" }
"#;

    fn item(pk: &str, sk: &str, version: i64) -> Item {
        let mut item = Item::example();
        (item.pk, item.sk, item.version) = (pk.into(), sk.into(), version);
        item.id = cqrs_keys::generate_id(pk, sk);
        item.tenant_code = "t1".into();
        item.attributes.clear();
        item
    }

    fn loan(attributes: &[(&str, Value)]) -> Item {
        let mut item = item("LOAN#t1", "L1", 3);
        for (name, value) in attributes {
            item.attributes.insert(name.to_string(), value.clone());
        }
        item
    }

    #[test]
    fn a_fitting_version_goes_to_its_entity_with_typed_values() {
        let model = Model::parse(MODEL).unwrap();
        let schema = Schema::of(&model);
        let mut notes = Map::new();
        notes.insert("a".into(), Value::from("b"));
        let item = loan(&[
            ("loanId", Value::from("L1")),
            ("status", Value::from("out")),
            ("fee", Value::Number("12".parse().unwrap())),
            ("notes", Value::Map(notes)),
            ("code", Value::from("C-7")),
            ("extra", Value::Bool(false)),
        ]);
        let row = row(&model, &schema, &item);
        assert_eq!(
            Rows::new(model.clone()).row(item),
            row,
            "made once or each time"
        );
        assert_eq!(row.table, "loan");
        assert_eq!(row.reason, None);
        assert_eq!(row.value("fee"), Some("12"));
        assert_eq!(row.value("notes"), Some(r#"{"a":"b"}"#));
        assert_eq!(row.value("attr_code"), Some("C-7"));
        assert_eq!(
            row.value("code"),
            Some("P001"),
            "the envelope's code is the item's own"
        );
        assert_eq!(row.value("attributes"), Some(r#"{"extra":false}"#));
        assert_eq!(row.version(), 3);
        assert_eq!(row.columns.len(), row.values.len());
        assert_eq!(row.types.len(), row.values.len());
    }

    #[test]
    fn a_nul_in_any_value_is_written_as_u_fffd_and_a_key_is_never_rewritten() {
        let model = Model::parse(MODEL).unwrap();
        let schema = Schema::of(&model);
        let mut notes = Map::new();
        notes.insert("k\u{0}".into(), Value::List(vec![Value::from("x\u{0}y")]));
        let mut item = loan(&[
            ("loanId", Value::from("L1")),
            ("status", Value::from("out")),
            ("code", Value::from("c\u{0}")),
            ("notes", Value::Map(notes)),
            ("extra", Value::from("\u{0}\u{0}")),
        ]);
        item.name = "n\u{0}".into();
        item.updated_by = "\u{0}u".into();
        let row = row(&model, &schema, &item);
        assert_eq!(Rows::new(model.clone()).row(item.clone()), row);
        assert_eq!(row.table, "loan", "{:?}", row.reason);
        assert!(
            row.values.iter().flatten().all(|v| !v.contains('\0')),
            "{:?}",
            row.values
        );
        assert_eq!(row.value("name"), Some("n\u{FFFD}"));
        assert_eq!(row.value("updated_by"), Some("\u{FFFD}u"));
        assert_eq!(row.value("attr_code"), Some("c\u{FFFD}"));
        assert_eq!(row.value("notes"), Some("{\"k\u{FFFD}\":[\"x\u{FFFD}y\"]}"));
        assert_eq!(
            row.value("attributes"),
            Some("{\"extra\":\"\u{FFFD}\u{FFFD}\"}")
        );
        assert_eq!(unstorable_key(&item), None);
        // A key is never rewritten: the item is refused, the key as it was.
        item.sk = "L\u{0}1".into();
        assert!(unstorable_key(&item).unwrap().contains("(sk)"));
        let mut item = loan(&[]);
        item.id = "x\u{0}".into();
        assert!(unstorable_key(&item).unwrap().contains("id"));
    }

    #[test]
    fn a_version_that_does_not_fit_goes_to_the_generic_table_whole() {
        let model = Model::parse(MODEL).unwrap();
        let schema = Schema::of(&model);
        for (item, why) in [
            (
                loan(&[("loanId", Value::from("L1"))]),
                "the required attribute status is missing",
            ),
            (
                loan(&[
                    ("loanId", Value::from("L1")),
                    ("status", Value::from("lost")),
                ]),
                "attribute status: \"lost\" is not one of",
            ),
            (
                loan(&[
                    ("loanId", Value::from("L1")),
                    ("status", Value::from("out")),
                    ("fee", Value::Number("12345".parse().unwrap())),
                ]),
                "attribute fee:",
            ),
        ] {
            let row = row(&model, &schema, &item);
            assert_eq!(Rows::new(model.clone()).row(item), row);
            assert_eq!(row.table, GENERIC_TABLE);
            assert_eq!(row.entity.as_deref(), Some("loan"));
            let reason = row.reason.clone().unwrap();
            assert!(reason.contains(why), "{reason}");
            assert_eq!(row.value("reason"), Some(reason.as_str()));
            let attributes: serde_json::Value =
                serde_json::from_str(row.value("attributes").unwrap()).unwrap();
            assert_eq!(attributes["loanId"], "L1", "every attribute is kept");
        }
        let stranger = item("OTHER#t1", "x", 1);
        let row = row(&model, &schema, &stranger);
        assert_eq!(
            (row.table.as_str(), row.entity.as_deref()),
            (GENERIC_TABLE, None)
        );
    }
}
