//! The relational schema of a model: one table per entity (the item's keys, tenant, version, audit
//! columns and soft delete; a typed column per declared attribute with its constraints; the other
//! attributes as `jsonb`), and one generic table for rows that match no entity, or whose values do
//! not fit their entity's columns. Every table carries its tenant and has row-level security per
//! tenant for the service's readers.
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
//! let ddl = schema.ddl();
//! assert!(ddl.contains(r#"CREATE TABLE IF NOT EXISTS "task""#));
//! assert!(ddl.contains(r#""taskId" text NOT NULL CONSTRAINT "task_taskId_check" CHECK (octet_length("taskId") <= 26)"#));
//! assert!(ddl.contains(r#"CREATE TABLE IF NOT EXISTS "cqrs_items""#));
//! ```

use std::collections::BTreeMap;

use cqrs_model::{AttrType, Attribute, Model, ReadRule};
use serde::{Deserialize, Serialize};

/// The generic table: rows of no entity, and rows whose values do not fit their entity's columns.
pub const GENERIC_TABLE: &str = "cqrs_items";

/// The table of removals: the last version of each item that left the data table (its TTL
/// expired), so that a replayed older state does not bring it back. Not for readers.
pub const REMOVED_TABLE: &str = "cqrs_removed";

/// The table of parked records: what sql-sync could not write (a key holding U+0000, a record that
/// is not an item, a row PostgreSQL refused), with the reason, so that nothing is lost and no such
/// record holds its shard. Keys are `bytea` (their UTF-8 bytes, a NUL kept as is). Not for readers.
/// sql-sync creates it at cold start ([`parked_table_ddl`]).
pub const PARKED_TABLE: &str = "cqrs_parked";

/// `CREATE TABLE IF NOT EXISTS` of [`PARKED_TABLE`] (safe to run again).
///
/// ```
/// assert!(cqrs_sql::schema::parked_table_ddl().contains(r#""cqrs_parked""#));
/// ```
pub fn parked_table_ddl() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\n  \"sequence_number\" text PRIMARY KEY,\n  \"pk\" bytea,\n  \
         \"sk\" bytea,\n  \"version\" bigint,\n  \"event_name\" text NOT NULL,\n  \"reason\" text NOT NULL,\n  \
         \"record\" text NOT NULL,\n  \"parked_at\" timestamptz NOT NULL DEFAULT now()\n);\n",
        ident(PARKED_TABLE)
    )
}

/// The role the service's readers use: it sees the rows of the tenant in the session setting
/// [`TENANT_SETTING`] (and the shared `common` rows where the model lets every tenant read them).
pub const READER_ROLE: &str = "cqrs_reader";

/// The database user of the service's own routes (`[routes.<name>]` of model.toml that read
/// `sql`): a login user without a password, which signs in with an IAM authentication token through
/// RDS Proxy (over TLS, `cqrs_sql::connect`, feature `connect`), and may do one thing: `SET ROLE`
/// [`READER_ROLE`] ([`crate::read::as_tenant`]), so that it reads a tenant's rows and nothing else.
/// Without the role it reads no table (on PostgreSQL 16+ its grant has `INHERIT FALSE`; on 15 the
/// user is `NOINHERIT`); it writes nothing, and never reads sql-sync's own tables. The schema's DDL
/// makes it ([`routes_user_ddl`], in [`access_ddl`]).
///
/// ```
/// assert_eq!(cqrs_sql::schema::ROUTES_USER, "cqrs_routes");
/// assert!(cqrs_sql::schema::routes_user_ddl().contains(r#"CREATE ROLE "cqrs_routes" LOGIN NOINHERIT"#));
/// ```
pub const ROUTES_USER: &str = "cqrs_routes";

/// RDS's role of IAM database authentication: a member of it signs in with an IAM token (and only
/// so: its password no longer works). It exists on RDS and Aurora only; [`routes_user_ddl`] grants
/// it where it exists.
pub const RDS_IAM_ROLE: &str = "rds_iam";

/// The session setting that names the reader's tenant (`SET cqrs.tenant = 't1'`, or `set_config`).
pub const TENANT_SETTING: &str = "cqrs.tenant";

/// The columns every table has, before the entity's own: the item's envelope.
///
/// ```
/// assert_eq!(cqrs_sql::schema::ENVELOPE[0].0, "pk");
/// ```
pub const ENVELOPE: [(&str, &str); 20] = [
    ("pk", "text NOT NULL"),
    ("sk", "text NOT NULL"),
    ("id", "text NOT NULL"),
    ("tenant_code", "text NOT NULL"),
    ("item_type", "text NOT NULL"),
    ("code", "text NOT NULL DEFAULT ''"),
    ("name", "text NOT NULL DEFAULT ''"),
    ("version", "bigint NOT NULL"),
    ("is_deleted", "boolean NOT NULL DEFAULT false"),
    ("seq", "bigint"),
    ("ttl", "bigint"),
    ("source", "text NOT NULL DEFAULT ''"),
    ("request_id", "text NOT NULL DEFAULT ''"),
    ("created_at", "timestamptz"),
    ("created_by", "text NOT NULL DEFAULT ''"),
    ("created_ip", "text NOT NULL DEFAULT ''"),
    ("updated_at", "timestamptz"),
    ("updated_by", "text NOT NULL DEFAULT ''"),
    ("updated_ip", "text NOT NULL DEFAULT ''"),
    // The attributes without a column of their own (all of them, in the generic table).
    ("attributes", "jsonb NOT NULL DEFAULT '{}'::jsonb"),
];

/// A typed column of a declared attribute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    /// The column's name: the attribute's, as the model spells it (quoted in SQL), or `attr_` and
    /// the attribute's name when that is an envelope column's ([`column_name`]).
    pub name: String,
    /// The attribute's name in the item's `attributes`.
    pub attribute: String,
    /// The SQL type: `text`, `numeric`, `boolean`, `timestamptz` or `jsonb`.
    pub sql_type: String,
    /// `NOT NULL` (a required attribute).
    pub required: bool,
    /// The `CHECK` expression of its constraints (length, enum values, integer width), if any.
    pub check: Option<String>,
}

impl Column {
    /// The column's definition in `CREATE TABLE` / `ADD COLUMN` of `table`, its `CHECK` named
    /// ([`Column::check_name`]).
    ///
    /// ```
    /// let mut c = cqrs_sql::schema::Column { name: "n".into(), attribute: "n".into(), sql_type: "numeric".into(), required: false, check: None };
    /// assert_eq!(c.definition("t"), r#""n" numeric"#);
    /// c.check = Some(r#""n" >= 0"#.into());
    /// assert_eq!(c.definition("t"), r#""n" numeric CONSTRAINT "t_n_check" CHECK ("n" >= 0)"#);
    /// ```
    pub fn definition(&self, table: &str) -> String {
        let mut out = format!("{} {}", ident(&self.name), self.sql_type);
        if self.required {
            out.push_str(" NOT NULL");
        }
        if let Some(check) = &self.check {
            out.push_str(&format!(
                " CONSTRAINT {} CHECK ({check})",
                self.check_name(table)
            ));
        }
        out
    }

    /// The name of its `CHECK` constraint in `table` (quoted): `<table>_<column>_check`, the name
    /// PostgreSQL gives an unnamed one, when that fits an identifier's
    /// [`cqrs_model::SQL_IDENTIFIER_BYTES`]; else its first 40 bytes, a hash of the whole name and
    /// `_check`, so that PostgreSQL never shortens it and two long names never become one. A
    /// migration finds a column's constraint in the catalog by its table and column
    /// ([`drop_checks`]), not by this name: constraints made before it was given are unnamed.
    ///
    /// ```
    /// let c = cqrs_sql::schema::Column { name: "fee".into(), attribute: "fee".into(), sql_type: "numeric".into(), required: false, check: None };
    /// assert_eq!(c.check_name("loan"), r#""loan_fee_check""#);
    /// let long = cqrs_sql::schema::Column { name: "x".repeat(60), ..c };
    /// assert_eq!(long.check_name("loan").len(), 63 + 2);
    /// ```
    pub fn check_name(&self, table: &str) -> String {
        let full = format!("{table}_{}_check", self.name);
        if full.len() <= cqrs_model::SQL_IDENTIFIER_BYTES {
            return ident(&full);
        }
        let stem = format!("{table}_{}", self.name);
        let mut cut = 40;
        while !stem.is_char_boundary(cut) {
            cut -= 1;
        }
        ident(&format!("{}_{:016x}_check", &stem[..cut], fnv1a(&full)))
    }
}

/// A 64-bit FNV-1a hash: the same in every process and release.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The statement that drops every `CHECK` constraint of column `column` of `table` (and only of
/// it), found in the catalog (`pg_constraint`) whatever its name: one PostgreSQL named, shortened
/// or not, or one [`Column::check_name`] named. The names travel as string literals, quoted by
/// [`literal`], inside a `DO` block that is itself one literal.
///
/// ```
/// let sql = cqrs_sql::schema::drop_checks("loan", "fee");
/// assert!(sql.starts_with("DO '"), "{sql}");
/// assert!(sql.contains("pg_constraint"));
/// ```
pub fn drop_checks(table: &str, column: &str) -> String {
    let body = format!(
        "DECLARE c name; BEGIN FOR c IN SELECT con.conname FROM pg_constraint con JOIN pg_class t ON t.oid = con.conrelid WHERE t.relname = {table} AND t.relnamespace = current_schema()::regnamespace AND con.contype = 'c' AND con.conkey = ARRAY[(SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = t.oid AND a.attname = {column} AND NOT a.attisdropped)] LOOP EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', {table}, c); END LOOP; END",
        table = literal(table),
        column = literal(column),
    );
    format!("DO {};", literal(&body))
}

/// One entity's table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Table {
    /// The table's name: the entity's name.
    pub name: String,
    /// The entity's item `type`.
    pub item_type: String,
    /// Whether every tenant's readers also see its `common` rows.
    pub common_readable: bool,
    /// The typed columns of its declared attributes, by attribute name.
    pub columns: Vec<Column>,
}

/// The schema of a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    /// One table per entity, in the model's order.
    pub tables: Vec<Table>,
}

/// The column of attribute `attribute`: its own name, unless an envelope column (or `synced_at`)
/// has it: then `attr_` and its name.
///
/// ```
/// assert_eq!(cqrs_sql::schema::column_name("price"), "price");
/// assert_eq!(cqrs_sql::schema::column_name("code"), "attr_code");
/// ```
pub fn column_name(attribute: &str) -> String {
    if cqrs_model::SQL_ENVELOPE_COLUMNS.contains(&attribute) {
        format!("attr_{attribute}")
    } else {
        attribute.to_string()
    }
}

/// A SQL identifier, always quoted (entity names such as `order` are SQL keywords).
///
/// ```
/// assert_eq!(cqrs_sql::schema::ident("order"), r#""order""#);
/// assert_eq!(cqrs_sql::schema::ident(r#"a"b"#), r#""a""b""#);
/// ```
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A SQL string literal.
///
/// ```
/// assert_eq!(cqrs_sql::schema::literal("it's"), "'it''s'");
/// ```
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A SQL comment line (`-- text`, and its newline), whatever `text` holds: a control character
/// (a newline or a carriage return would end the comment, and what follows would run as a
/// statement) is written escaped, as Rust writes it (`\n`, `\u{7}`).
///
/// ```
/// assert_eq!(cqrs_sql::schema::comment("entity a"), "-- entity a\n");
/// assert_eq!(
///     cqrs_sql::schema::comment("x\nDROP TABLE t; --"),
///     "-- x\\nDROP TABLE t; --\n"
/// );
/// ```
pub fn comment(text: &str) -> String {
    let mut out = String::from("-- ");
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('\n');
    out
}

fn column(attribute_name: &str, attribute: &Attribute) -> Column {
    let name = column_name(attribute_name);
    let id = ident(&name);
    let (sql_type, check) = match attribute.ty {
        AttrType::String => (
            "text",
            attribute
                .max
                .map(|max| format!("octet_length({id}) <= {max}")),
        ),
        AttrType::Enum => {
            let values: Vec<String> = attribute.values.iter().map(|v| literal(v)).collect();
            ("text", Some(format!("{id} IN ({})", values.join(", "))))
        }
        AttrType::Number => (
            "numeric",
            attribute
                .width
                .map(|width| format!("{id} >= 0 AND {id} < 1e{width} AND {id} = trunc({id})")),
        ),
        AttrType::Boolean => ("boolean", None),
        AttrType::Timestamp => ("timestamptz", None),
        AttrType::Map | AttrType::List => ("jsonb", None),
    };
    Column {
        attribute: attribute_name.to_string(),
        name,
        sql_type: sql_type.to_string(),
        required: attribute.required,
        check,
    }
}

impl Schema {
    /// The schema of `model` (see the module's example).
    pub fn of(model: &Model) -> Schema {
        Schema {
            tables: model
                .entities()
                .iter()
                .map(|entity| Table {
                    name: entity.name.clone(),
                    item_type: entity.item_type.clone(),
                    common_readable: entity.common && entity.read_rule() == ReadRule::Everyone,
                    columns: entity
                        .attributes
                        .iter()
                        .map(|(name, attribute)| column(name, attribute))
                        .collect(),
                })
                .collect(),
        }
    }

    /// The table of entity `name`.
    ///
    /// ```
    /// let schema = cqrs_sql::schema::Schema { tables: vec![] };
    /// assert!(schema.table("task").is_none());
    /// ```
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// The whole schema as DDL, safe to run again (`IF NOT EXISTS`): the reader role, every table
    /// with its indexes and row-level security, and the generic table.
    pub fn ddl(&self) -> String {
        let mut out = String::from(
            "-- The relational read model of the service's model.toml (cqrs model sql).\n",
        );
        out.push_str(&reader_role());
        for table in &self.tables {
            out.push_str(&create_table(
                &table.name,
                &table.columns,
                table.common_readable,
            ));
        }
        out.push_str(&create_table(GENERIC_TABLE, &generic_columns(), false));
        out.push_str(&format!(
            "\nCREATE TABLE IF NOT EXISTS {} (\n  \"pk\" text NOT NULL,\n  \"sk\" text NOT NULL,\n  \
             \"version\" bigint NOT NULL,\n  \"removed_at\" timestamptz NOT NULL DEFAULT now(),\n  \
             PRIMARY KEY (\"pk\", \"sk\")\n);\n",
            ident(REMOVED_TABLE)
        ));
        out
    }

    /// The typed columns by table and attribute: what a migration compares.
    pub fn columns(&self) -> BTreeMap<(&str, &str), &Column> {
        self.tables
            .iter()
            .flat_map(|t| {
                t.columns
                    .iter()
                    .map(move |c| ((t.name.as_str(), c.name.as_str()), c))
            })
            .collect()
    }
}

/// The generic table's own columns ([`crate::rows::GENERIC_COLUMNS`]).
fn generic_columns() -> Vec<Column> {
    crate::rows::GENERIC_COLUMNS
        .iter()
        .map(|(name, definition)| Column {
            name: name.to_string(),
            attribute: String::new(),
            sql_type: "text".into(),
            required: definition.contains("NOT NULL"),
            check: None,
        })
        .collect()
}

fn reader_role() -> String {
    format!(
        "DO $$ BEGIN\n  CREATE ROLE {role} NOLOGIN;\nEXCEPTION WHEN duplicate_object THEN NULL;\nEND $$;\n{}",
        access_ddl(),
        role = ident(READER_ROLE)
    )
}

/// The roles' DDL that follows `CREATE ROLE cqrs_reader` in the schema's first migration
/// ([`Schema::ddl`]), and that sql-sync runs again at every cold start, after the migrations, so
/// that a database migrated by an earlier release gets it too: [`reader_grant_ddl`], then
/// [`routes_user_ddl`]. Safe to run again and from several sessions at once; where everything is
/// there already it only reads the catalog.
///
/// ```
/// let ddl = cqrs_sql::schema::access_ddl();
/// assert!(ddl.starts_with(&cqrs_sql::schema::reader_grant_ddl()));
/// assert!(ddl.ends_with(&cqrs_sql::schema::routes_user_ddl()));
/// ```
pub fn access_ddl() -> String {
    format!("{}{}", reader_grant_ddl(), routes_user_ddl())
}

/// The DDL of [`ROUTES_USER`], run by the user that runs the migrations (on Aurora the master user,
/// `CREATEROLE`, not a superuser):
///
/// - `CREATE ROLE cqrs_routes LOGIN NOINHERIT` when it does not exist: no password (it signs in
///   with IAM through RDS Proxy), no other attribute;
/// - [`READER_ROLE`] granted to it so that it may `SET ROLE` it and nothing more: on PostgreSQL 16+
///   `WITH INHERIT FALSE, SET TRUE` (16+ syntax, hence the branch on `server_version_num`); on 15
///   a plain membership, which lets a member `SET ROLE` and whose privileges a member uses without
///   it only when it is `INHERIT`: hence `NOINHERIT`, without which it would read the tables (as
///   the reader role, row-level security applying) without `SET ROLE`;
/// - where the role [`RDS_IAM_ROLE`] exists (RDS, Aurora: checked in `pg_roles`), it granted
///   directly to `cqrs_routes` and to the migrating user (`CURRENT_USER`), so that both sign in
///   with IAM (RDS Proxy's end-to-end IAM authentication signs in to the database as them). On
///   16+ `WITH INHERIT TRUE`, as `GRANT rds_iam` gives a default user; RDS's sign-in checks
///   membership, which `NOINHERIT` does not change on 15. Such a user's password no longer
///   works. Nothing is done where the role does not exist (a local cluster).
///
/// Safe to run again (only catalog reads where all is there) and from several sessions at once
/// (sql-sync runs it at every cold start, outside the migration lock: a session that meets
/// another's `CREATE ROLE` or `GRANT` of the same moment goes on). A user that may not create the
/// role or grant a role gets a warning, not an error (then `cqrs_routes` cannot sign in or read,
/// naming what is missing, until someone who may runs it).
///
/// ```
/// let ddl = cqrs_sql::schema::routes_user_ddl();
/// assert!(ddl.contains("server_version_num"));
/// assert!(ddl.contains(r#"GRANT "cqrs_reader" TO "cqrs_routes" WITH INHERIT FALSE, SET TRUE"#));
/// assert!(ddl.contains("rolname = 'rds_iam'"));
/// ```
pub fn routes_user_ddl() -> String {
    let user = ident(ROUTES_USER);
    let warning = "RAISE WARNING '%: % (a superuser or the role''s administrator must do it)', \
                   current_user, SQLERRM;";
    format!(
        "DO $$\nDECLARE\n  modern boolean := current_setting('server_version_num')::int >= 160000;\n  \
         grantee name;\n\
         BEGIN\n  \
         -- The routes' login user: no password (IAM), no attribute but LOGIN.\n  \
         IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {name}) THEN\n    \
         BEGIN\n      \
         CREATE ROLE {user} LOGIN NOINHERIT;\n    \
         EXCEPTION\n      \
         WHEN duplicate_object OR unique_violation THEN NULL; -- made by another session just now\n      \
         WHEN insufficient_privilege THEN {warning}\n    \
         END;\n  \
         END IF;\n  \
         IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {name}) THEN\n    \
         RETURN;\n  \
         END IF;\n  \
         -- The reader role: SET ROLE only.\n  \
         IF EXISTS (SELECT FROM pg_roles WHERE rolname = {reader})\n     \
         AND NOT pg_has_role({name}, {reader}, CASE WHEN modern THEN 'SET' ELSE 'MEMBER' END) THEN\n    \
         BEGIN\n      \
         IF modern THEN\n        \
         EXECUTE {reader_modern};\n      \
         ELSE\n        \
         EXECUTE {reader_old};\n      \
         END IF;\n    \
         EXCEPTION\n      \
         WHEN unique_violation THEN NULL; -- granted by another session just now\n      \
         WHEN insufficient_privilege THEN {warning}\n    \
         END;\n  \
         END IF;\n  \
         -- IAM sign-in, on RDS: both users, directly.\n  \
         IF EXISTS (SELECT FROM pg_roles WHERE rolname = {iam}) THEN\n    \
         FOREACH grantee IN ARRAY ARRAY[{name}, current_user]::name[] LOOP\n      \
         IF NOT EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid \
         JOIN pg_roles u ON u.oid = m.member WHERE r.rolname = {iam} AND u.rolname = grantee) THEN\n        \
         BEGIN\n          \
         IF modern THEN\n            \
         EXECUTE format('GRANT %I TO %I WITH INHERIT TRUE', {iam}, grantee);\n          \
         ELSE\n            \
         EXECUTE format('GRANT %I TO %I', {iam}, grantee);\n          \
         END IF;\n        \
         EXCEPTION\n          \
         WHEN unique_violation THEN NULL; -- granted by another session just now\n          \
         WHEN insufficient_privilege THEN {warning}\n        \
         END;\n      \
         END IF;\n    \
         END LOOP;\n  \
         END IF;\n\
         END $$;\n",
        name = literal(ROUTES_USER),
        reader = literal(READER_ROLE),
        iam = literal(RDS_IAM_ROLE),
        reader_modern = literal(&format!(
            "GRANT {} TO {user} WITH INHERIT FALSE, SET TRUE",
            ident(READER_ROLE)
        )),
        reader_old = literal(&format!("GRANT {} TO {user}", ident(READER_ROLE))),
    )
}

/// The grant that lets the user who runs the migrations `SET ROLE` [`READER_ROLE`] (as
/// [`crate::read::as_tenant`] does), safe to run again and a no-op where it may already: a
/// superuser, or a user granted it before. It is needed where that user is not a superuser, as
/// Aurora's master user is not (it has `CREATEROLE`): on PostgreSQL 15 such a user is not a member
/// of the roles it creates (`GRANT … TO CURRENT_USER`), and on 16+ it is a member with `ADMIN`
/// only, neither `SET` nor `INHERIT` (`GRANT … WITH INHERIT FALSE, SET TRUE`, 16+ syntax, hence the
/// branch on `server_version_num`). Nothing is done where the role does not exist; a user that may
/// not grant it (neither its creator nor a superuser) gets a warning, not an error (then
/// `SET ROLE` fails, naming the role, until someone who may grants it). Part of the
/// schema's DDL ([`Schema::ddl`], the first migration); a database whose first migration predates
/// it gets it by running this once more (sql-sync does at cold start).
///
/// A reader's own user is granted the role by that user, who administers it:
/// `GRANT "cqrs_reader" TO <user>` (with `SET` by default on 16+).
///
/// ```
/// let ddl = cqrs_sql::schema::reader_grant_ddl();
/// assert!(ddl.contains("server_version_num"));
/// assert!(ddl.contains(r#"GRANT "cqrs_reader" TO CURRENT_USER WITH INHERIT FALSE, SET TRUE"#));
/// ```
pub fn reader_grant_ddl() -> String {
    format!(
        "DO $$\nDECLARE\n  modern boolean := current_setting('server_version_num')::int >= 160000;\n\
         BEGIN\n  \
         IF EXISTS (SELECT FROM pg_roles WHERE rolname = {name})\n     \
         AND NOT pg_has_role(current_user, {name}, CASE WHEN modern THEN 'SET' ELSE 'MEMBER' END) THEN\n    \
         IF modern THEN\n      \
         EXECUTE {modern};\n    \
         ELSE\n      \
         EXECUTE {old};\n    \
         END IF;\n  \
         END IF;\n\
         EXCEPTION\n  \
         WHEN unique_violation THEN NULL; -- another session granted it at the same time\n  \
         WHEN insufficient_privilege THEN\n    \
         RAISE WARNING '%: % (a superuser or the role''s creator must grant it)', current_user, SQLERRM;\n\
         END $$;\n",
        name = literal(READER_ROLE),
        modern = literal(&format!(
            "GRANT {} TO CURRENT_USER WITH INHERIT FALSE, SET TRUE",
            ident(READER_ROLE)
        )),
        old = literal(&format!("GRANT {} TO CURRENT_USER", ident(READER_ROLE))),
    )
}

/// `CREATE TABLE` of one table (envelope, then `columns`), its indexes, its grant to the reader
/// role and its tenant policy.
pub(crate) fn create_table(name: &str, columns: &[Column], common_readable: bool) -> String {
    let table = ident(name);
    let mut lines: Vec<String> = ENVELOPE
        .iter()
        .map(|(column, definition)| format!("  {} {definition}", ident(column)))
        .collect();
    lines.extend(columns.iter().map(|c| format!("  {}", c.definition(name))));
    lines.push("  \"synced_at\" timestamptz NOT NULL DEFAULT now()".into());
    lines.push("  PRIMARY KEY (\"pk\", \"sk\")".into());
    let mut out = format!(
        "\nCREATE TABLE IF NOT EXISTS {table} (\n{}\n);\n",
        lines.join(",\n")
    );
    out.push_str(&format!(
        "CREATE INDEX IF NOT EXISTS {} ON {table} (\"tenant_code\", \"updated_at\");\n",
        ident(&format!("{name}_tenant_updated"))
    ));
    out.push_str(&tenant_policy(name, common_readable));
    out
}

pub(crate) fn tenant_policy(name: &str, common_readable: bool) -> String {
    let table = ident(name);
    let tenant = format!(
        "\"tenant_code\" = current_setting({}, true)",
        literal(TENANT_SETTING)
    );
    let rule = if common_readable {
        format!("{tenant} OR \"tenant_code\" = 'common'")
    } else {
        tenant
    };
    format!(
        "ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n\
         GRANT SELECT ON {table} TO {role};\n\
         DROP POLICY IF EXISTS \"tenant_rows\" ON {table};\n\
         CREATE POLICY \"tenant_rows\" ON {table} FOR SELECT TO {role} USING ({rule});\n",
        role = ident(READER_ROLE)
    )
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
attributes.due = { type = "timestamp" }
attributes.notes = { type = "map" }

[entities.setting]
pk = "SETTING#common"
sk = "{code}"
common = true
attributes.code = { type = "string", required = true }
"#;

    #[test]
    fn the_model_check_knows_the_envelopes_columns() {
        // The model refuses two attributes that would share a column (`code` and `attr_code`):
        // it must know the same envelope.
        let envelope: Vec<&str> = ENVELOPE
            .iter()
            .map(|(name, _)| *name)
            .chain(["synced_at"])
            .collect();
        assert_eq!(envelope, cqrs_model::SQL_ENVELOPE_COLUMNS);
    }

    #[test]
    fn every_declared_attribute_gets_a_typed_column_with_its_constraints() {
        let schema = Schema::of(&Model::parse(MODEL).unwrap());
        let loan = schema.table("loan").unwrap();
        let defs: Vec<String> = loan.columns.iter().map(|c| c.definition("loan")).collect();
        assert_eq!(
            defs,
            [
                r#""due" timestamptz"#,
                r#""fee" numeric CONSTRAINT "loan_fee_check" CHECK ("fee" >= 0 AND "fee" < 1e4 AND "fee" = trunc("fee"))"#,
                r#""loanId" text NOT NULL CONSTRAINT "loan_loanId_check" CHECK (octet_length("loanId") <= 26)"#,
                r#""notes" jsonb"#,
                r#""status" text NOT NULL CONSTRAINT "loan_status_check" CHECK ("status" IN ('out', 'returned'))"#,
            ]
        );
        assert!(!loan.common_readable);
        assert!(schema.table("setting").unwrap().common_readable);
    }

    #[test]
    fn the_ddl_has_keys_tenant_policies_and_the_generic_table() {
        let ddl = Schema::of(&Model::parse(MODEL).unwrap()).ddl();
        for needle in [
            r#"CREATE TABLE IF NOT EXISTS "loan" ("#,
            r#"PRIMARY KEY ("pk", "sk")"#,
            r#"CREATE POLICY "tenant_rows" ON "loan" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));"#,
            r#"USING ("tenant_code" = current_setting('cqrs.tenant', true) OR "tenant_code" = 'common');"#,
            r#"CREATE TABLE IF NOT EXISTS "cqrs_items" ("#,
            r#"ALTER TABLE "cqrs_items" ENABLE ROW LEVEL SECURITY;"#,
        ] {
            assert!(ddl.contains(needle), "{needle}\n{ddl}");
        }
    }
}
