//! The checks a model must pass before any function uses it. Each problem names the entity (or
//! index, or pattern) and the field:
//!
//! - templates reference only declared attributes (or `tenant`, `createdAt`, `shard`), of a type that
//!   can be a key part, and separate references with `#` (so no value can blur into its neighbour);
//!   enum values and literals hold no separator where the key cannot take one;
//! - a tenant entity's partition key is `PREFIX#{tenant}...`, a common entity's `PREFIX#common...`,
//!   so the caller's tenant rules apply to it; only a common entity takes a read rule
//!   (`read = "system_admin"`); every index partition of a tenant entity holds
//!   `{tenant}` (it would mix tenants otherwise);
//! - no entity's partition starts with a prefix the framework keeps for its own rows
//!   ([`cqrs_keys::RESERVED_PK_PREFIXES`]: the change log's);
//! - no two entities' keys can collide (as sets of strings, not as text);
//! - sort-key templates sort as declared: numbers in string sort keys have a zero-padding width (a
//!   native number key attribute, `N`, sorts by value and needs none);
//! - at most 20 GSIs; native multi-attribute keys have 1 to 4 partition and 0 to 4 sort attributes;
//!   key attribute names are unique and collide with no item field;
//! - keys stay within DynamoDB's limits for the declared maximum lengths;
//! - access patterns name existing entities and indexes, and their parameters are the attributes of
//!   the templates they query;
//! - no name (entity, attribute, index, pattern, parameter, projected attribute) holds a control
//!   character: names are written into generated SQL, OpenAPI and code, where a newline could end a
//!   comment and start a statement;
//! - the relational read model's names fit PostgreSQL's identifiers (63 bytes, which PostgreSQL
//!   would cut silently): an entity's table and its `<entity>_tenant_updated` index, an attribute's
//!   column; no two attributes share a column (`code` is column `attr_code`, see
//!   [`SQL_ENVELOPE_COLUMNS`]), and no entity takes a framework table's name (`cqrs_...`);
//! - declared constraints ([`crate::Unique`], [`crate::Limit`], [`crate::Reference`]) can be kept
//!   by guard items: their attributes are declared and not maps or lists, conditions name declared
//!   enum/string/boolean attributes (of the target, for a reference) and known values, `at_most`
//!   is 1 to 100, a reference's `key` covers the target's key attributes with the same types, a
//!   common entity references no tenant entity, an attribute a target's head mirrors is bounded,
//!   names are key-safe and distinct, `roles` lists are not empty, and one command adds at most
//!   [`crate::MAX_CONSTRAINT_GUARDS`] guard items.

use std::collections::{BTreeMap, BTreeSet};

use cqrs_keys::{
    KEY_SEPARATOR, MAX_BASE_SORT_KEY_BYTES, MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES,
    TENANT_COMMON, VER_SEPARATOR,
};

use crate::attribute::AttrType;
use crate::lang::may_produce_same;
use crate::model::{CREATED_AT, Entity, ITEM_FIELDS, KeyType, Model, ModelError};
use crate::template::{Part, Template, describe};

/// PostgreSQL's longest identifier, in bytes (`NAMEDATALEN - 1`): a longer one is cut silently.
pub const SQL_IDENTIFIER_BYTES: usize = 63;

/// The suffix of an entity's longest derived name in the relational read model (its index
/// `<entity>_tenant_updated`).
const SQL_TABLE_SUFFIX: &str = "_tenant_updated";

/// The relational read model's envelope columns (and `synced_at`): an attribute of one of these
/// names gets the column `attr_<name>` (`cqrs_sql::schema::column_name`; a test of cqrs-sql keeps
/// both lists equal).
pub const SQL_ENVELOPE_COLUMNS: [&str; 21] = [
    "pk",
    "sk",
    "id",
    "tenant_code",
    "item_type",
    "code",
    "name",
    "version",
    "is_deleted",
    "seq",
    "ttl",
    "source",
    "request_id",
    "created_at",
    "created_by",
    "created_ip",
    "updated_at",
    "updated_by",
    "updated_ip",
    "attributes",
    "synced_at",
];

/// The prefix of the relational read model's own tables (`cqrs_items`, `cqrs_removed`, ...).
const SQL_FRAMEWORK_PREFIX: &str = "cqrs_";

/// The column of attribute `name` in the relational read model.
fn sql_column(name: &str) -> String {
    if SQL_ENVELOPE_COLUMNS.contains(&name) {
        format!("attr_{name}")
    } else {
        name.to_string()
    }
}

/// A name with a control character, as the error says it.
fn control_character(name: &str) -> Option<String> {
    name.chars()
        .any(char::is_control)
        .then(|| format!("the name {name:?} holds a control character"))
}

/// DynamoDB's limit of GSIs per table.
pub const MAX_GSIS: usize = 20;
/// DynamoDB's limit of partition (and of sort) attributes in a native multi-attribute GSI key.
pub const MAX_MULTI_ATTRIBUTES: usize = 4;

struct Errors<'a>(&'a mut Vec<ModelError>);

impl Errors<'_> {
    fn push(&mut self, place: &str, field: &str, message: impl Into<String>) {
        self.0.push(ModelError {
            place: place.to_string(),
            field: field.to_string(),
            message: message.into(),
        });
    }
}

pub(crate) fn check(model: &Model, errors: &mut Vec<ModelError>) {
    let mut errors = Errors(errors);
    check_indexes(model, &mut errors);
    for entity in &model.entities {
        check_entity(model, entity, &mut errors);
    }
    check_collisions(model, &mut errors);
    check_patterns(model, &mut errors);
}

fn check_indexes(model: &Model, errors: &mut Errors<'_>) {
    if model.indexes.len() > MAX_GSIS {
        errors.push(
            "model",
            "indexes",
            format!(
                "{} GSIs declared: DynamoDB allows at most {MAX_GSIS} per table",
                model.indexes.len()
            ),
        );
    }
    let mut owners: BTreeMap<&str, &str> = BTreeMap::new();
    for index in &model.indexes {
        let place = format!("index `{}`", index.name);
        let valid_name = (3..=255).contains(&index.name.len())
            && index
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid_name {
            errors.push(
                &place,
                "name",
                "an index name is 3 to 255 characters of a-z, A-Z, 0-9, `_`, `-`, `.`",
            );
        }
        if let Some(message) = control_character(&index.name) {
            errors.push(&place, "name", message);
        }
        for (field, keys, min) in [("pk", &index.pk, 1), ("sk", &index.sk, 0)] {
            if keys.len() < min || keys.len() > MAX_MULTI_ATTRIBUTES {
                errors.push(
                    &place,
                    field,
                    format!(
                        "{} key attributes: DynamoDB takes {min} to {MAX_MULTI_ATTRIBUTES}",
                        keys.len()
                    ),
                );
            }
        }
        for key in index.key_attributes() {
            if ITEM_FIELDS.contains(&key.name.as_str()) {
                errors.push(
                    &place,
                    "pk/sk",
                    format!(
                        "key attribute {:?} is an item field: name it e.g. `{}{}`",
                        key.name, index.name, key.name
                    ),
                );
            }
            if let Some(other) = owners.insert(&key.name, &index.name) {
                if other != index.name {
                    errors.push(
                        &place,
                        "pk/sk",
                        format!(
                            "key attribute {:?} is also a key of index `{other}`: each index needs its own",
                            key.name
                        ),
                    );
                } else {
                    errors.push(
                        &place,
                        "pk/sk",
                        format!("key attribute {:?} appears twice", key.name),
                    );
                }
            }
        }
        if let crate::model::Projection::Include(list) = &index.projection {
            for attr in list {
                if attr.is_empty() {
                    errors.push(&place, "projection", "an empty attribute name");
                }
                if let Some(message) = control_character(attr) {
                    errors.push(&place, "projection", message);
                }
            }
        }
    }
}

fn check_template_refs(
    entity: &Entity,
    template: &Template,
    field: &str,
    errors: &mut Errors<'_>,
    place: &str,
) {
    if let Err(message) = template.segments() {
        errors.push(place, field, format!("{}: {message}", template.text()));
    }
    for part in template.parts() {
        match part {
            Part::Lit(text) => {
                if field.ends_with("sk") && text.contains(VER_SEPARATOR) {
                    errors.push(
                        place,
                        field,
                        format!("literal {text:?} holds `{VER_SEPARATOR}`, the version separator"),
                    );
                }
                if text.chars().any(char::is_control) {
                    errors.push(place, field, format!("literal {text:?} holds a control character"));
                }
                if text.contains('\u{10FFFF}') {
                    errors.push(
                        place,
                        field,
                        format!(
                            "literal {text:?} holds U+10FFFF, which no key part may hold (it ends every range read of a prefix)"
                        ),
                    );
                }
            }
            Part::Attr { name, bucket } => match entity.attributes.get(name) {
                None if name == CREATED_AT => {}
                None => errors.push(
                    place,
                    field,
                    format!(
                        "{} references {name:?}, which is not an attribute of the entity: declare it under `attributes`",
                        template.text()
                    ),
                ),
                Some(attr) => {
                    if !attr.ty.is_key_type() {
                        errors.push(
                            place,
                            field,
                            format!("{name:?} is a {}: it cannot be part of a key", attr.ty.name()),
                        );
                    }
                    if bucket.is_some() && attr.ty != AttrType::Timestamp {
                        errors.push(
                            place,
                            field,
                            format!("{} cuts {name:?} to a bucket, but it is not a timestamp", describe(part)),
                        );
                    }
                }
            },
            Part::Tenant | Part::Shard(_) => {}
        }
    }
    // Segments that are nothing (`A##B`, a leading or trailing `#`) would make empty key parts.
    if let Ok(segments) = template.segments()
        && segments
            .iter()
            .any(|s| s.reference.is_none() && s.prefix.is_empty())
    {
        errors.push(
            place,
            field,
            format!("{} has an empty `#`-separated part", template.text()),
        );
    }
}

/// The longest key a template can make, `None` when some part is unbounded.
fn max_len(model: &Model, entity: &Entity, template: &Template) -> Option<usize> {
    template.parts().iter().try_fold(0usize, |sum, part| {
        let len = match part {
            Part::Lit(text) => Some(text.len()),
            Part::Tenant => Some(model.tenant_max),
            Part::Shard(n) => Some(n.saturating_sub(1).to_string().len()),
            Part::Attr { name, bucket } => match entity.attributes.get(name) {
                Some(attr) => attr.max_key_len(*bucket),
                None => Some(bucket.map_or(crate::attribute::TIMESTAMP_WIDTH, |b| b.width())),
            },
        }?;
        Some(sum + len)
    })
}

fn check_sorts(
    entity: &Entity,
    template: &Template,
    field: &str,
    errors: &mut Errors<'_>,
    place: &str,
) {
    for name in template.attribute_names() {
        if let Some(attr) = entity.attributes.get(name)
            && attr.ty == AttrType::Number
            && attr.width.is_none()
        {
            errors.push(
                place,
                field,
                format!(
                    "{name:?} is a number in a sort key without `width`: its text would sort 10 before 9; declare e.g. `width = 10`"
                ),
            );
        }
    }
}

fn check_entity(model: &Model, entity: &Entity, errors: &mut Errors<'_>) {
    let place = format!("entity `{}`", entity.name);
    let place = place.as_str();
    let valid_name = !entity.name.is_empty()
        && entity
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid_name {
        errors.push(
            place,
            "name",
            "an entity name is lower-case letters, digits and `_`",
        );
    }
    if let Some(message) = control_character(&entity.name) {
        errors.push(place, "name", message);
    }
    if entity.name.len() + SQL_TABLE_SUFFIX.len() > SQL_IDENTIFIER_BYTES {
        errors.push(
            place,
            "name",
            format!(
                "{} bytes: the relational read model's table and its index `{}{SQL_TABLE_SUFFIX}` \
                 must fit PostgreSQL's identifiers of {SQL_IDENTIFIER_BYTES} bytes (which it would \
                 cut): an entity name has at most {} bytes",
                entity.name.len(),
                entity.name,
                SQL_IDENTIFIER_BYTES - SQL_TABLE_SUFFIX.len()
            ),
        );
    }
    if entity.name.starts_with(SQL_FRAMEWORK_PREFIX) {
        errors.push(
            place,
            "name",
            format!(
                "`{SQL_FRAMEWORK_PREFIX}` starts the names of the relational read model's own \
                 tables (cqrs_items, cqrs_removed, ...): name the entity otherwise"
            ),
        );
    }
    let mut columns: BTreeMap<String, &str> = BTreeMap::new();
    for (name, attr) in &entity.attributes {
        let field = format!("attributes.{name}");
        if name.is_empty() || name.contains(['#', '@', '.', '{', '}']) {
            errors.push(
                place,
                &field,
                "an attribute name holds no `#`, `@`, `.`, `{` or `}`",
            );
        }
        if let Some(message) = control_character(name) {
            errors.push(place, &field, message);
        }
        let column = sql_column(name);
        if column.len() > SQL_IDENTIFIER_BYTES {
            errors.push(
                place,
                &field,
                format!(
                    "its column in the relational read model ({} bytes) must fit PostgreSQL's \
                     identifiers of {SQL_IDENTIFIER_BYTES} bytes (which it would cut)",
                    column.len()
                ),
            );
        }
        if let Some(other) = columns.insert(column.clone(), name) {
            let (first, second) = if other < name.as_str() {
                (other, name.as_str())
            } else {
                (name.as_str(), other)
            };
            errors.push(
                place,
                &format!("attributes.{second}"),
                format!(
                    "{first:?} and {second:?} would have the same column `{column}` in the \
                     relational read model: rename one"
                ),
            );
        }
        if attr.ty == AttrType::Enum {
            if attr.values.is_empty() {
                errors.push(place, &field, "an enum needs `values`");
            }
            for value in &attr.values {
                if let Err(error) = cqrs_keys::validate_component("enum value", value) {
                    errors.push(
                        place,
                        &field,
                        format!("enum value {value:?} would break keys: {error}"),
                    );
                }
            }
        } else if !attr.values.is_empty() {
            errors.push(place, &field, "`values` belongs to enums only");
        }
        if attr.width.is_some() && attr.ty != AttrType::Number {
            errors.push(place, &field, "`width` belongs to numbers only");
        }
        if matches!(attr.width, Some(0) | Some(39..)) {
            errors.push(
                place,
                &field,
                "`width` is 1 to 38 (DynamoDB numbers hold 38 digits)",
            );
        }
        if attr.case.is_some() && attr.ty != AttrType::String {
            errors.push(place, &field, "`case` belongs to strings only");
        }
        if name == CREATED_AT {
            errors.push(
                place,
                &field,
                "createdAt is set by the server: do not declare it",
            );
        }
    }
    if let Some(id) = &entity.id {
        match entity.attributes.get(id) {
            Some(attr) if attr.ty == AttrType::String => {}
            Some(_) => errors.push(
                place,
                "id",
                format!("the id attribute {id:?} must be a string (a ULID)"),
            ),
            None => errors.push(
                place,
                "id",
                format!("the id attribute {id:?} is not declared under `attributes`"),
            ),
        }
        if !entity
            .pk
            .attribute_names()
            .chain(entity.sk.attribute_names())
            .any(|n| n == id)
        {
            errors.push(
                place,
                "id",
                format!("the id attribute {id:?} is in neither key template"),
            );
        }
    }

    // Table keys.
    check_template_refs(entity, &entity.pk, "pk", errors, place);
    check_template_refs(entity, &entity.sk, "sk", errors, place);
    check_sorts(entity, &entity.sk, "sk", errors, place);
    if entity.pk.shards().is_some() || entity.sk.shards().is_some() {
        errors.push(place, "pk", "write shards belong in index templates: a table key must be computable from the item's id");
    }
    // The caller's tenant rules read the tenant from the second segment of `pk`.
    let pk_parts = entity.pk.parts();
    let head_ok = match pk_parts.first() {
        Some(Part::Lit(text)) => {
            let mut pieces = text.split(KEY_SEPARATOR);
            let prefix = pieces.next().unwrap_or_default();
            let second = pieces.next();
            !prefix.is_empty()
                && match (entity.common, second) {
                    (false, Some("")) => matches!(pk_parts.get(1), Some(Part::Tenant)),
                    (true, Some(rest)) => {
                        rest == TENANT_COMMON
                            || rest.starts_with(&format!("{TENANT_COMMON}{KEY_SEPARATOR}"))
                    }
                    _ => false,
                }
        }
        _ => false,
    };
    if !head_ok {
        let want = if entity.common {
            format!("`PREFIX#{TENANT_COMMON}...` (a common entity)")
        } else {
            "`PREFIX#{tenant}...`".to_string()
        };
        errors.push(
            place,
            "pk",
            format!(
                "{} must start {want}, so that tenant rules apply to it",
                entity.pk.text()
            ),
        );
    }
    if let Some(Part::Lit(text)) = pk_parts.first()
        && let Some(reserved) = cqrs_keys::reserved_prefix(text)
    {
        errors.push(
            place,
            "pk",
            format!(
                "{} starts with {reserved:?}, a prefix the framework keeps for its own rows (the \
                 change log, which may share the data table): choose another prefix",
                entity.pk.text()
            ),
        );
    }
    if let Some(rule) = entity.read
        && !entity.common
    {
        errors.push(
            place,
            "read",
            format!(
                "read = {:?} on a tenant entity: its partitions belong to one tenant, which reads them \
                 (and a global system_admin); a read rule belongs to common entities (`common = true`)",
                rule.as_str()
            ),
        );
    }
    if entity.common && entity.pk.has_tenant() {
        errors.push(
            place,
            "pk",
            "a common entity lives in the `common` tenant: its pk has no {tenant}",
        );
    }
    if let Some(len) = max_len(model, entity, &entity.pk)
        && len > MAX_PARTITION_KEY_BYTES
    {
        errors.push(place, "pk", format!("keys can reach {len} bytes, over DynamoDB's {MAX_PARTITION_KEY_BYTES}: lower the attributes' `max`"));
    }
    if let Some(len) = max_len(model, entity, &entity.sk)
        && len > MAX_BASE_SORT_KEY_BYTES
    {
        errors.push(place, "sk", format!("keys can reach {len} bytes, over {MAX_BASE_SORT_KEY_BYTES} (DynamoDB's 1024 less room for `@version`): lower the attributes' `max`"));
    }

    // Indexes.
    let mut seen = BTreeSet::new();
    for ei in &entity.indexes {
        let field_pk = format!("indexes.{}.pk", ei.index);
        let field_sk = format!("indexes.{}.sk", ei.index);
        if !seen.insert(&ei.index) {
            errors.push(place, &field_pk, "the index is given twice");
        }
        let Some(index) = model.index(&ei.index) else {
            errors.push(
                place,
                &field_pk,
                format!("there is no index `{}` under [indexes]", ei.index),
            );
            continue;
        };
        for (field, templates, keys) in [
            (&field_pk, &ei.pk, &index.pk),
            (&field_sk, &ei.sk, &index.sk),
        ] {
            if templates.len() != keys.len() {
                errors.push(
                    place,
                    field,
                    format!(
                        "index `{}` has {} key attribute(s) here, the entity gives {} template(s)",
                        index.name,
                        keys.len(),
                        templates.len()
                    ),
                );
            }
            for (template, key) in templates.iter().zip(keys) {
                check_template_refs(entity, template, field, errors, place);
                match key.ty {
                    KeyType::S => {}
                    KeyType::N => {
                        let numeric = match template.single_reference() {
                            Some(Part::Attr { name, bucket: None }) => entity
                                .attributes
                                .get(name)
                                .is_some_and(|a| a.ty == AttrType::Number),
                            Some(Part::Shard(_)) => true,
                            _ => false,
                        };
                        if !numeric {
                            errors.push(place, field, format!("key attribute {:?} is a number: its template must be one number attribute, e.g. {{amount}}", key.name));
                        }
                    }
                    KeyType::B => errors.push(
                        place,
                        field,
                        format!(
                            "key attribute {:?} is binary: templates make strings and numbers only",
                            key.name
                        ),
                    ),
                }
            }
        }
        // A native number key attribute (`N`) sorts by value: only string sort keys need `width`.
        for (template, key) in ei.sk.iter().zip(&index.sk) {
            if key.ty != KeyType::N {
                check_sorts(entity, template, &field_sk, errors, place);
            }
        }
        if !entity.common && !ei.pk.iter().any(Template::has_tenant) {
            errors.push(
                place,
                &field_pk,
                "the index partition has no {tenant}: it would mix tenants' items (common entities say `common = true`)",
            );
        }
        for template in ei.pk.iter() {
            if let Some(len) = max_len(model, entity, template)
                && len > MAX_PARTITION_KEY_BYTES
            {
                errors.push(
                    place,
                    &field_pk,
                    format!(
                        "keys can reach {len} bytes, over DynamoDB's {MAX_PARTITION_KEY_BYTES}"
                    ),
                );
            }
        }
        for template in ei.sk.iter() {
            if let Some(len) = max_len(model, entity, template)
                && len > MAX_SORT_KEY_BYTES
            {
                errors.push(
                    place,
                    &field_sk,
                    format!("keys can reach {len} bytes, over DynamoDB's {MAX_SORT_KEY_BYTES}"),
                );
            }
        }
        for (attr, values) in &ei.when {
            let field = format!("indexes.{}.when.{attr}", ei.index);
            check_condition_attribute(
                place,
                &field,
                entity,
                "the entity",
                attr,
                values,
                false,
                errors,
            );
            if values.is_empty() {
                errors.push(
                    place,
                    &field,
                    "an empty list would keep every item out of the index",
                );
            }
        }
    }
    check_constraints(model, entity, errors);
}

/// One attribute of a condition (an index's `when`, a constraint's `when`/`unless`): declared by
/// `owner` (the entity the condition reads; `whose` says it in the message), enum values known,
/// of a type a condition can compare (enum, string, boolean). `booleans`: a boolean's values must
/// be `"true"`/`"false"` (constraints; an index's `when` keeps its rule as it was).
#[allow(clippy::too_many_arguments)]
fn check_condition_attribute(
    place: &str,
    field: &str,
    owner: &Entity,
    whose: &str,
    attr: &str,
    values: &[String],
    booleans: bool,
    errors: &mut Errors<'_>,
) {
    match owner.attributes.get(attr) {
        None => errors.push(
            place,
            field,
            format!("{attr:?} is not an attribute of {whose}"),
        ),
        Some(a) if a.ty == AttrType::Enum => {
            for v in values {
                if !a.values.contains(v) {
                    errors.push(
                        place,
                        field,
                        format!("{v:?} is not one of {attr}'s values {:?}", a.values),
                    );
                }
            }
        }
        Some(a) if a.ty == AttrType::Boolean && booleans => {
            for v in values {
                if v != "true" && v != "false" {
                    errors.push(
                        place,
                        field,
                        format!("{v:?}: {attr} is a boolean, compared as \"true\" or \"false\""),
                    );
                }
            }
        }
        Some(a) if matches!(a.ty, AttrType::String | AttrType::Boolean) => {}
        Some(a) => errors.push(
            place,
            field,
            format!(
                "conditions take enum, string or boolean attributes, {attr:?} is a {}",
                a.ty.name()
            ),
        ),
    }
}

/// A constraint's `when` and `unless` ([`crate::Condition`]), read on `owner`'s items.
fn check_condition(
    place: &str,
    field: &str,
    owner: &Entity,
    whose: &str,
    condition: &crate::Condition,
    errors: &mut Errors<'_>,
) {
    for (part, map) in [("when", &condition.when), ("unless", &condition.unless)] {
        for (attr, values) in map {
            let field = format!("{field}.{part}.{attr}");
            check_condition_attribute(place, &field, owner, whose, attr, values, true, errors);
            if values.is_empty() {
                errors.push(
                    place,
                    &field,
                    if part == "when" {
                        "an empty list never holds: give the values that count"
                    } else {
                        "an empty list excludes nothing: give the values that exclude, or remove it"
                    },
                );
            }
        }
    }
}

/// The declared constraints and write rule of an entity (`unique`, `limits`, `references`,
/// `roles`): what a guard item in the command's transaction cannot enforce is refused here.
fn check_constraints(model: &Model, entity: &Entity, errors: &mut Errors<'_>) {
    let place = format!("entity `{}`", entity.name);
    let place = place.as_str();
    // Names: a guard item's key holds the constraint's name, so one name is one constraint.
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    let kinds = entity
        .unique
        .iter()
        .map(|u| ("unique", u.name.as_str()))
        .chain(entity.limits.iter().map(|l| ("limits", l.name.as_str())))
        .chain(
            entity
                .references
                .iter()
                .map(|r| ("references", r.name.as_str())),
        );
    for (kind, name) in kinds {
        let field = format!("{kind}.{name}");
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            errors.push(
                place,
                &field,
                "a constraint name is lower-case letters, digits and `_` (it is part of its guard items' keys)",
            );
        }
        if let Some(other) = names.insert(name, kind) {
            errors.push(
                place,
                &field,
                format!(
                    "`{other}.{name}` has the same name: constraints of one entity share guard-item \
                     names, rename one"
                ),
            );
        }
    }
    let value_attribute =
        |field: &str, attr: &str, errors: &mut Errors<'_>| match entity.attributes.get(attr) {
            None => errors.push(
                place,
                field,
                format!("{attr:?} is not an attribute of the entity"),
            ),
            Some(a) if matches!(a.ty, AttrType::Map | AttrType::List) => errors.push(
                place,
                field,
                format!(
                    "{attr:?} is a {}: a constraint compares values, not maps or lists",
                    a.ty.name()
                ),
            ),
            Some(_) => {}
        };
    for unique in &entity.unique {
        let field = format!("unique.{}.attributes", unique.name);
        if unique.attributes.is_empty() {
            errors.push(place, &field, "name at least one attribute");
        }
        let mut seen = BTreeSet::new();
        for attr in &unique.attributes {
            value_attribute(&field, attr, errors);
            if !seen.insert(attr) {
                errors.push(place, &field, format!("{attr:?} is named twice"));
            }
        }
    }
    for limit in &entity.limits {
        let field = format!("limits.{}", limit.name);
        let mut seen = BTreeSet::new();
        for attr in &limit.per {
            value_attribute(&format!("{field}.per"), attr, errors);
            if !seen.insert(attr) {
                errors.push(
                    place,
                    &format!("{field}.per"),
                    format!("{attr:?} is named twice"),
                );
            }
        }
        check_condition(
            place,
            &field,
            entity,
            "the entity",
            &limit.condition,
            errors,
        );
    }
    for reference in &entity.references {
        let field = format!("references.{}", reference.name);
        let Some(target) = model.entity(&reference.entity) else {
            errors.push(
                place,
                &format!("{field}.entity"),
                format!("there is no entity {:?}", reference.entity),
            );
            continue;
        };
        if entity.common && !target.common {
            errors.push(
                place,
                &format!("{field}.entity"),
                format!(
                    "a common entity cannot reference the tenant entity `{}`: a common item has \
                     no tenant to find it in (a tenant entity may reference its own tenant's and \
                     common entities)",
                    target.name
                ),
            );
        }
        let key_field = format!("{field}.key");
        let target_keys = target.key_attribute_names();
        for name in &target_keys {
            if !reference.key.contains_key(*name) {
                errors.push(
                    place,
                    &key_field,
                    format!(
                        "`{}`'s keys ({} / {}) use {name:?}: map it to an attribute of this entity \
                         (`key = {{ {name} = \"...\" }}`)",
                        target.name,
                        target.pk.text(),
                        target.sk.text()
                    ),
                );
            }
        }
        for (target_attr, own) in &reference.key {
            let field = format!("{key_field}.{target_attr}");
            if !target_keys.contains(&target_attr.as_str()) {
                errors.push(
                    place,
                    &field,
                    format!(
                        "{target_attr:?} is not an attribute of `{}`'s keys ({} / {})",
                        target.name,
                        target.pk.text(),
                        target.sk.text()
                    ),
                );
                continue;
            }
            let Some(theirs) = target.attributes.get(target_attr) else {
                errors.push(
                    place,
                    &field,
                    format!(
                        "{target_attr:?} is not a declared attribute of `{}` (`createdAt` is set \
                         by the server: a reference cannot name an item whose key holds it)",
                        target.name
                    ),
                );
                continue;
            };
            match entity.attributes.get(own) {
                None => errors.push(
                    place,
                    &field,
                    format!("{own:?} is not an attribute of the entity"),
                ),
                Some(ours) if ours.ty != theirs.ty => errors.push(
                    place,
                    &field,
                    format!(
                        "{own:?} is a {} but `{}`.{target_attr} is a {}: the types must be the same",
                        ours.ty.name(),
                        target.name,
                        theirs.ty.name()
                    ),
                ),
                Some(_) => {}
            }
        }
        let whose = format!("the target entity `{}`", target.name);
        check_condition(place, &field, target, &whose, &reference.condition, errors);
        // What the target's head mirrors must be small: an enum, a boolean, a bounded string.
        for attr in reference.condition.attributes() {
            if let Some(a) = target.attributes.get(attr)
                && a.ty == AttrType::String
                && a.max.is_none()
            {
                let part = if reference.condition.when.contains_key(attr) {
                    "when"
                } else {
                    "unless"
                };
                errors.push(
                    place,
                    &format!("{field}.{part}.{attr}"),
                    format!(
                        "`{}`.{attr} is mirrored on its items' heads for this condition: declare \
                         its `max` (an enum, a boolean or a string with `max`)",
                        target.name
                    ),
                );
            }
        }
    }
    for (op, roles) in [
        ("create", &entity.roles.create),
        ("update", &entity.roles.update),
        ("delete", &entity.roles.delete),
    ] {
        let Some(roles) = roles else { continue };
        let field = format!("roles.{op}");
        if roles.is_empty() {
            errors.push(
                place,
                &field,
                "an empty list would let nobody but a system_admin write: name the roles, or remove it",
            );
        }
        for role in roles {
            if role.is_empty() || role.chars().any(|c| c.is_control() || c.is_whitespace()) {
                errors.push(
                    place,
                    &field,
                    format!("{role:?} is not a role name (no spaces, no control characters)"),
                );
            }
        }
    }
    let budget = crate::guard_budget(entity);
    if budget > crate::MAX_CONSTRAINT_GUARDS {
        errors.push(
            place,
            "unique, limits, references",
            format!(
                "one command of the entity can add {budget} guard items (2 per unique, 2 per \
                 limit, 1 per reference): a transaction holds 100 items and every command writes \
                 3 of its own (version row, head, idempotency record), so at most 100 - 3 = {} \
                 guard items",
                crate::MAX_CONSTRAINT_GUARDS
            ),
        );
    }
}

fn check_collisions(model: &Model, errors: &mut Errors<'_>) {
    for (i, a) in model.entities.iter().enumerate() {
        for b in model.entities.iter().skip(i + 1) {
            if may_produce_same(&a.pk, a, &b.pk, b) && may_produce_same(&a.sk, a, &b.sk, b) {
                errors.push(
                    &format!("entity `{}`", a.name),
                    "pk/sk",
                    format!(
                        "its keys ({} / {}) can equal those of entity `{}` ({} / {}): give one a distinct literal",
                        a.pk.text(),
                        a.sk.text(),
                        b.name,
                        b.pk.text(),
                        b.sk.text()
                    ),
                );
            }
        }
    }
}

fn check_patterns(model: &Model, errors: &mut Errors<'_>) {
    for pattern in &model.patterns {
        let place = format!("pattern `{}`", pattern.name);
        let place = place.as_str();
        if let Some(message) = control_character(&pattern.name) {
            errors.push(place, "name", message);
        }
        for param in &pattern.params {
            if let Some(message) = control_character(param) {
                errors.push(place, "params", message);
            }
        }
        if let Some(index) = &pattern.index
            && model.index(index).is_none()
        {
            errors.push(
                place,
                "index",
                format!("there is no index `{index}` (use \"table\" for the table)"),
            );
        }
        if pattern.params.iter().any(|p| p == "tenant" || p == "shard") {
            errors.push(place, "params", "tenant and shard are never parameters: the tenant comes from the caller, shards are fanned out");
        }
        let mut partitions = BTreeSet::new();
        for name in &pattern.entities {
            let Some(entity) = model.entity(name) else {
                errors.push(place, "entity", format!("there is no entity `{name}`"));
                continue;
            };
            let (pk, sk): (Vec<&Template>, Vec<&Template>) = match &pattern.index {
                None => (vec![&entity.pk], vec![&entity.sk]),
                Some(index) => match entity.indexes.iter().find(|i| &i.index == index) {
                    Some(ei) => (ei.pk.iter().collect(), ei.sk.iter().collect()),
                    None => {
                        errors.push(
                            place,
                            "index",
                            format!("entity `{name}` does not fill index `{index}`"),
                        );
                        continue;
                    }
                },
            };
            let pk_params: BTreeSet<&str> = pk.iter().flat_map(|t| t.attribute_names()).collect();
            let sk_params: BTreeSet<&str> = sk.iter().flat_map(|t| t.attribute_names()).collect();
            for p in &pk_params {
                if !pattern.params.iter().any(|q| q == p) {
                    errors.push(
                        place,
                        "params",
                        format!(
                            "{p:?} is in the partition of entity `{name}` and must be a parameter"
                        ),
                    );
                }
            }
            for p in &pattern.params {
                if !pk_params.contains(p.as_str()) && !sk_params.contains(p.as_str()) {
                    errors.push(
                        place,
                        "params",
                        format!("{p:?} is in no key template of entity `{name}` for this pattern"),
                    );
                }
            }
            partitions.insert(pk.iter().map(|t| t.text().to_string()).collect::<Vec<_>>());
        }
        if partitions.len() > 1 {
            errors.push(
                place,
                "entities",
                "a collection's entities must share one partition template",
            );
        }
    }
}
