//! Versioned migrations of the relational read model, from one model revision to the next.
//!
//! A service keeps them in a folder (`migrations/`): `V1__model.sql`, `V2__model.sql`, ... in
//! refinery's naming (the library that applies them, in order, once each, recording them in its
//! history table), and `schema.json`, the schema the last of them leads to. [`next`] compares the
//! model's schema with that file and writes what the next migration must do:
//!
//! - a new entity: its table;
//! - a new attribute: its column (nullable: rows already there lack it; a version that lacks a
//!   required attribute goes to the generic table instead, see `crate::rows`);
//! - a changed constraint (length, enum values, width) or requiredness: the column's old check
//!   found in the catalog by its table and column and dropped, whatever its name, the new one
//!   added, named, `NOT VALID` (rows already there are not checked again); `NOT NULL` dropped;
//! - every name written into a statement is quoted ([`crate::schema::ident`],
//!   [`crate::schema::literal`]), into a comment escaped ([`crate::schema::comment`]);
//! - a removed attribute or entity: kept, so no data is lost (its column is made nullable): a
//!   write sets a removed attribute's column to `NULL` (the value is in `attributes` from then on,
//!   `crate::write`), and `crate::verify` reads every table and column there is, a removed entity's
//!   too (its items go to the generic table; `cqrs rebuild --sql` takes their older rows out);
//! - a changed type: refused, with what to do by hand.
//!
//! [`apply_with`] applies them, safely from many processes at once (every cold start of sql-sync):
//! one runner at a time under the session advisory lock [`MIGRATION_LOCK`] (none taken when there
//! is nothing to do), bounded waits (`lock_timeout`: an `ALTER TABLE` behind a long query fails
//! fast instead of queueing every writer behind it), a database a newer release migrated further
//! accepted (a rollback), an applied migration that was edited refused.
//!
//! ```
//! use cqrs_sql::{migrate, schema::Schema};
//! let v1 = Schema::of(&cqrs_model::Model::parse(r#"
//! [entities.task]
//! pk = "TASK#{tenant}"
//! sk = "{taskId}"
//! attributes.taskId = { type = "string", required = true }
//! "#).unwrap());
//! let v2 = Schema::of(&cqrs_model::Model::parse(r#"
//! [entities.task]
//! pk = "TASK#{tenant}"
//! sk = "{taskId}"
//! attributes.taskId = { type = "string", required = true }
//! attributes.owner = { type = "string", max = 64 }
//! "#).unwrap());
//! let sql = migrate::plan(Some(&v1), &v2).unwrap().unwrap();
//! assert!(sql.contains(r#"ALTER TABLE "task" ADD COLUMN IF NOT EXISTS "owner" text CONSTRAINT "task_owner_check" CHECK (octet_length("owner") <= 64);"#));
//! assert_eq!(migrate::plan(Some(&v2), &v2).unwrap(), None);
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::schema::{Column, Schema, comment, create_table, drop_checks, ident};

/// The schema file of a migrations folder.
pub const SCHEMA_FILE: &str = "schema.json";

/// Why a migration could not be planned or written.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// A column changes its type: data would have to be converted, which a generated migration
    /// does not guess.
    #[error(
        "{table}.{column}: the type changes from {from} to {to}; write that migration by hand \
         (convert or move the column), then update {SCHEMA_FILE}"
    )]
    TypeChange {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// The old SQL type.
        from: String,
        /// The new SQL type.
        to: String,
    },
    /// The database refused a migration, or its history (a migration applied there differs from
    /// the folder's, or is missing from it).
    #[error("applying the migrations: {0}")]
    Apply(String),
    /// A lock the run needs was not granted in time (SQLSTATE 55P03, `lock_not_available`):
    /// another runner holds [`MIGRATION_LOCK`] longer than [`Options::lock_wait`], or a
    /// migration's statement waited longer than [`Options::lock_timeout`] for a table a long
    /// transaction uses. Nothing of the run is applied; trying again later is safe.
    #[error(
        "applying the migrations: {doing}: {detail} (a lock was not granted in time; nothing was \
         applied, the next try applies it)"
    )]
    LockTimeout {
        /// What the run was doing.
        doing: String,
        /// PostgreSQL's message, with its SQLSTATE.
        detail: String,
    },
    /// The folder or a file in it could not be read or written.
    #[error("{path}: {detail}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
}

/// The SQL of the migration from `old` (the schema the last migration leads to; `None`: there is
/// none yet) to `new`, or `None` when there is nothing to do.
pub fn plan(old: Option<&Schema>, new: &Schema) -> Result<Option<String>, MigrateError> {
    let Some(old) = old else {
        return Ok(Some(new.ddl()));
    };
    let mut steps: Vec<String> = Vec::new();
    for table in &new.tables {
        let Some(before) = old.table(&table.name) else {
            steps.push(format!(
                "{}{}",
                note(&format!("new entity {}", table.name)),
                create_table(&table.name, &table.columns, table.common_readable)
            ));
            continue;
        };
        let name = ident(&table.name);
        for column in &table.columns {
            match before.columns.iter().find(|c| c.name == column.name) {
                None => {
                    let nullable = Column {
                        required: false,
                        ..column.clone()
                    };
                    steps.push(format!(
                        "ALTER TABLE {name} ADD COLUMN IF NOT EXISTS {};",
                        nullable.definition(&table.name)
                    ));
                }
                Some(was) if was.sql_type != column.sql_type => {
                    return Err(MigrateError::TypeChange {
                        table: table.name.clone(),
                        column: column.name.clone(),
                        from: was.sql_type.clone(),
                        to: column.sql_type.clone(),
                    });
                }
                Some(was) => {
                    if was.check != column.check {
                        // The old constraint, found by its table and column (unnamed ones, made
                        // before constraints were named, have a name PostgreSQL chose).
                        let check = column.check_name(&table.name);
                        steps.push(drop_checks(&table.name, &column.name));
                        if let Some(expression) = &column.check {
                            steps.push(format!(
                                "ALTER TABLE {name} ADD CONSTRAINT {check} CHECK ({expression}) NOT VALID;"
                            ));
                        }
                    }
                    if was.required && !column.required {
                        steps.push(format!(
                            "ALTER TABLE {name} ALTER COLUMN {} DROP NOT NULL;",
                            ident(&column.name)
                        ));
                    }
                    if !was.required && column.required {
                        steps.push(note(&format!(
                            "{}.{} is required from now on: versions without it go to the generic table; \
                             rows already there keep NULL",
                            table.name, column.name
                        )));
                    }
                }
            }
        }
        for was in &before.columns {
            if !table.columns.iter().any(|c| c.name == was.name) && was.required {
                steps.push(format!(
                    "{}ALTER TABLE {name} ALTER COLUMN {} DROP NOT NULL;",
                    comment(&format!(
                        "{}.{} is no longer declared: its column stays, with its data",
                        table.name, was.name
                    )),
                    ident(&was.name)
                ));
            }
        }
        if before.common_readable != table.common_readable {
            steps.push(crate::schema::tenant_policy(
                &table.name,
                table.common_readable,
            ));
        }
    }
    for before in &old.tables {
        if new.table(&before.name).is_none() {
            steps.push(note(&format!(
                "entity {} is no longer declared: its table stays, with its data",
                before.name
            )));
        }
    }
    if steps.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "-- The relational read model: the changes of model.toml since the last migration (cqrs model sql).\n{}\n",
        steps.join("\n")
    )))
}

/// A comment line of a migration, without its newline ([`comment`]: a name in it stays in it).
fn note(text: &str) -> String {
    comment(text).trim_end_matches('\n').to_string()
}

/// The table in which the applied migrations are recorded (refinery's history table).
pub const HISTORY_TABLE: &str = "cqrs_schema_history";

/// The key of the session advisory lock one runner of the migrations holds while it applies
/// them (`pg_advisory_lock(MIGRATION_LOCK)`, on the database's own lock space): "cqrsmigr" read
/// as a big-endian 64-bit integer, `7165634322205599602`. Another program using advisory locks on
/// the same database must not use this key.
///
/// ```
/// assert_eq!(cqrs_sql::migrate::MIGRATION_LOCK, i64::from_be_bytes(*b"cqrsmigr"));
/// assert_eq!(cqrs_sql::migrate::MIGRATION_LOCK, 7165634322205599602);
/// ```
pub const MIGRATION_LOCK: i64 = i64::from_be_bytes(*b"cqrsmigr");

/// How long a runner waits for [`MIGRATION_LOCK`] (another runner applying the migrations) before
/// it gives up with [`MigrateError::LockTimeout`]: well inside Lambda's 10 s init phase.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The `lock_timeout` of the migrations' statements: an `ALTER TABLE` that must wait longer for a
/// table a long transaction uses (a report query) fails with [`MigrateError::LockTimeout`], so
/// that the writers queued behind it wait at most this long. Nothing of the run is applied (one
/// transaction); the next start tries again.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(3);

/// How [`apply_with`] runs: its bounded waits, and the tables the caller needs beside the
/// migrations.
///
/// ```
/// let options = cqrs_sql::migrate::Options {
///     tables: vec![(
///         cqrs_sql::schema::PARKED_TABLE.to_string(),
///         cqrs_sql::schema::parked_table_ddl(),
///     )],
///     ..Default::default()
/// };
/// assert_eq!(options.lock_wait, cqrs_sql::migrate::LOCK_WAIT);
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// How long to wait for [`MIGRATION_LOCK`] ([`LOCK_WAIT`]).
    pub lock_wait: Duration,
    /// The `lock_timeout` of the migrations' statements ([`LOCK_TIMEOUT`]).
    pub lock_timeout: Duration,
    /// Tables the caller needs whatever the migrations hold: (name, DDL that makes it, safe to run
    /// again), made under the lock, after the migrations, when missing.
    pub tables: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lock_wait: LOCK_WAIT,
            lock_timeout: LOCK_TIMEOUT,
            tables: Vec::new(),
        }
    }
}

/// What [`apply_with`] did.
///
/// ```
/// let report = cqrs_sql::migrate::Report::default();
/// assert!(report.applied.is_empty() && report.unknown.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The migrations applied by this run (`V2__model`, ...), in order.
    pub applied: Vec<String>,
    /// The migrations the database has that the caller does not know (applied by a newer
    /// release: the caller is a rollback), in order. They stop nothing.
    pub unknown: Vec<String>,
}

/// [`apply_with`] with the default [`Options`]; returns how many migrations were applied.
///
/// ```no_run
/// # async fn example(client: &mut tokio_postgres::Client) {
/// let migrations = cqrs_sql::migrate::read_dir("migrations".as_ref()).unwrap();
/// let applied = cqrs_sql::migrate::apply(client, &migrations).await.unwrap();
/// println!("{applied} migration(s) applied");
/// # }
/// ```
pub async fn apply(
    client: &mut tokio_postgres::Client,
    migrations: &[(u32, String, String)],
) -> Result<usize, MigrateError> {
    Ok(apply_with(client, migrations, &Options::default())
        .await?
        .applied
        .len())
}

/// Applies the migrations not applied yet, in order, all of them in one transaction, with refinery:
/// each is recorded in [`HISTORY_TABLE`] with its checksum. Safe to run from many processes at
/// once (every cold start of every shard's function):
///
/// - **one runner at a time**: the history is read first; when every migration is applied and
///   every table of `options.tables` is there (a warm fleet, the common case), nothing is locked
///   and nothing is written. Otherwise the runner takes the session advisory lock
///   [`MIGRATION_LOCK`], waiting at most `options.lock_wait`, reads the history again under it
///   (another runner may have applied them meanwhile), applies what is left, makes the missing
///   tables, and releases the lock, also on error; the session's `lock_timeout` is reset after.
/// - **an `ALTER` never blocks writers for long**: the migrations run with `lock_timeout` set to
///   `options.lock_timeout`; a statement that waits longer (a long transaction uses the table)
///   fails, nothing is applied, and the error is [`MigrateError::LockTimeout`] (SQLSTATE 55P03):
///   the caller tries again later.
/// - **a rollback keeps working**: migrations the database has and the caller does not know
///   (applied by a newer release) stop nothing; they are in [`Report::unknown`].
/// - **an applied migration is never edited**: one whose name or checksum differs from the
///   caller's is refused ([`MigrateError::Apply`], naming both checksums), and so is a migration
///   of the caller's that is not applied while a later one is.
///
/// ```no_run
/// # async fn example(client: &mut tokio_postgres::Client) {
/// use cqrs_sql::migrate::{apply_with, read_dir, Options};
/// let migrations = read_dir("migrations".as_ref()).unwrap();
/// let report = apply_with(client, &migrations, &Options::default()).await.unwrap();
/// for unknown in &report.unknown {
///     eprintln!("{unknown} is applied but not known here (a newer release applied it)");
/// }
/// # }
/// ```
pub async fn apply_with(
    client: &mut tokio_postgres::Client,
    migrations: &[(u32, String, String)],
    options: &Options,
) -> Result<Report, MigrateError> {
    let known = migrations
        .iter()
        .map(|(_, file, sql)| {
            refinery::Migration::unapplied(file.trim_end_matches(".sql"), sql)
                .map_err(|e| MigrateError::Apply(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let first = State::read(client, &known, &options.tables).await?;
    if first.pending.is_empty() && first.missing_tables.is_empty() {
        return Ok(Report {
            applied: Vec::new(),
            unknown: first.unknown,
        });
    }
    lock(client, options.lock_wait).await?;
    let result = locked(client, &known, options).await;
    // Released whatever happened (a failed run's transaction is rolled back before this, on the
    // same connection); a connection that closed released it with its session.
    let released = client
        .batch_execute(&format!(
            "SELECT pg_advisory_unlock({MIGRATION_LOCK}); RESET lock_timeout;"
        ))
        .await;
    let report = result?;
    released.map_err(|e| database("releasing the migration lock", &e))?;
    Ok(report)
}

/// Takes [`MIGRATION_LOCK`], waiting at most `wait`.
async fn lock(client: &tokio_postgres::Client, wait: Duration) -> Result<(), MigrateError> {
    let taken = client
        .batch_execute(&format!(
            "SET lock_timeout = {}; SELECT pg_advisory_lock({MIGRATION_LOCK});",
            wait.as_millis().max(1)
        ))
        .await;
    if let Err(error) = taken {
        // Not taken: only the setting to reset (best effort: a closed connection has none).
        let _ = client.batch_execute("RESET lock_timeout").await;
        return Err(database(
            &format!(
                "waiting for the migration lock (pg_advisory_lock({MIGRATION_LOCK})): another \
                 runner has been applying the migrations for longer than {} ms",
                wait.as_millis()
            ),
            &error,
        ));
    }
    Ok(())
}

/// The run under the lock: the history read again, the migrations left applied, the missing
/// tables made.
async fn locked(
    client: &mut tokio_postgres::Client,
    known: &[refinery::Migration],
    options: &Options,
) -> Result<Report, MigrateError> {
    client
        .batch_execute(&format!(
            "SET lock_timeout = {}",
            options.lock_timeout.as_millis().max(1)
        ))
        .await
        .map_err(|e| database("setting lock_timeout", &e))?;
    let state = State::read(client, known, &options.tables).await?;
    let mut applied = Vec::new();
    if !state.pending.is_empty() {
        let report = refinery::Runner::new(known)
            .set_grouped(true)
            .set_abort_divergent(true)
            // Checked above (State::read): what the database has beyond `known` stops nothing.
            .set_abort_missing(false)
            .set_migration_table_name(HISTORY_TABLE)
            .run_async(client)
            .await
            .map_err(|e| match refused(&e) {
                MigrateError::LockTimeout { detail, .. } => MigrateError::LockTimeout {
                    doing: format!(
                        "applying {}: a statement waited longer than lock_timeout ({} ms) for a \
                         table another transaction uses (a long query?)",
                        state.pending.join(", "),
                        options.lock_timeout.as_millis()
                    ),
                    detail,
                },
                other => other,
            })?;
        applied = report
            .applied_migrations()
            .iter()
            .map(ToString::to_string)
            .collect();
    }
    for (table, ddl) in &options.tables {
        if state.missing_tables.contains(table) {
            client
                .batch_execute(ddl)
                .await
                .map_err(|e| database(&format!("creating {table}"), &e))?;
        }
    }
    Ok(Report {
        applied,
        unknown: state.unknown,
    })
}

/// The history against the caller's migrations.
struct State {
    /// The caller's migrations not applied yet.
    pending: Vec<String>,
    /// Applied migrations the caller does not know.
    unknown: Vec<String>,
    /// The tables of [`Options::tables`] that are not there.
    missing_tables: Vec<String>,
}

impl State {
    async fn read(
        client: &tokio_postgres::Client,
        known: &[refinery::Migration],
        tables: &[(String, String)],
    ) -> Result<State, MigrateError> {
        let names: Vec<String> = tables.iter().map(|(name, _)| ident(name)).collect();
        let row = client
            .query_one(
                "SELECT to_regclass($1) IS NOT NULL, \
                 ARRAY(SELECT t FROM unnest($2::text[]) t WHERE to_regclass(t) IS NULL)",
                &[&HISTORY_TABLE, &names],
            )
            .await
            .map_err(|e| database("reading the migrations' history", &e))?;
        let has_history: bool = row.get(0);
        let missing: Vec<String> = row.get(1);
        let missing_tables = tables
            .iter()
            .filter(|(name, _)| missing.contains(&ident(name)))
            .map(|(name, _)| name.clone())
            .collect();
        let applied: Vec<(i32, String, String)> = if has_history {
            client
                .query(
                    &format!(
                        "SELECT version, coalesce(name, ''), coalesce(checksum, '') FROM {HISTORY_TABLE} ORDER BY version"
                    ),
                    &[],
                )
                .await
                .map_err(|e| database("reading the migrations' history", &e))?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect()
        } else {
            Vec::new()
        };
        let mut unknown = Vec::new();
        for (version, name, checksum) in &applied {
            match known.iter().find(|m| m.version() == *version) {
                None => unknown.push(format!("V{version}__{name}")),
                Some(m) if m.name() != name || m.checksum().to_string() != *checksum => {
                    return Err(MigrateError::Apply(format!(
                        "V{version}__{name} was applied with checksum {checksum}, and this \
                         release's {m} has checksum {}: a migration is never edited once \
                         applied (put it back as it was, and the change in a new migration)",
                        m.checksum()
                    )));
                }
                Some(_) => {}
            }
        }
        let newest = applied.last().map(|(v, _, _)| *v);
        let mut pending = Vec::new();
        for m in known {
            if applied.iter().any(|(v, _, _)| *v == m.version()) {
                continue;
            }
            if let Some(newest) = newest.filter(|newest| *newest > m.version()) {
                return Err(MigrateError::Apply(format!(
                    "{m} is not applied, and V{newest} is: migrations apply in order (give it a \
                     version above V{newest})"
                )));
            }
            pending.push(m.to_string());
        }
        Ok(State {
            pending,
            unknown,
            missing_tables,
        })
    }
}

/// A database error of the run: [`MigrateError::LockTimeout`] for SQLSTATE 55P03, otherwise
/// [`MigrateError::Apply`], with PostgreSQL's own message.
fn database(doing: &str, error: &tokio_postgres::Error) -> MigrateError {
    let detail = crate::write::describe(error);
    if error.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) {
        MigrateError::LockTimeout {
            doing: doing.to_string(),
            detail,
        }
    } else {
        MigrateError::Apply(format!("{doing}: {detail}"))
    }
}

/// refinery's error, with the database's error under it when there is one.
fn refused(error: &refinery::Error) -> MigrateError {
    // Its own text of a database error is "`what`, `db error`": the what, and PostgreSQL's
    // message instead of "db error".
    let doing = match error.kind() {
        refinery::error::Kind::Connection(doing, _) => doing.clone(),
        _ => error.to_string(),
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(db) = cause.downcast_ref::<tokio_postgres::Error>() {
            return database(&doing, db);
        }
        source = cause.source();
    }
    MigrateError::Apply(error.to_string())
}

/// The migrations of a folder, in order: (version, file name, SQL). A folder that does not exist
/// has none.
///
/// ```
/// assert!(cqrs_sql::migrate::read_dir("/nonexistent".as_ref()).unwrap().is_empty());
/// ```
pub fn read_dir(dir: &Path) -> Result<Vec<(u32, String, String)>, MigrateError> {
    let io = |path: &Path, e: std::io::Error| MigrateError::Io {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(version) = name
            .strip_prefix('V')
            .and_then(|rest| rest.split_once("__"))
            .filter(|(_, rest)| rest.ends_with(".sql"))
            .and_then(|(v, _)| v.parse::<u32>().ok())
        else {
            continue;
        };
        let sql = std::fs::read_to_string(entry.path()).map_err(|e| io(&entry.path(), e))?;
        found.push((version, name, sql));
    }
    found.sort_by_key(|(version, _, _)| *version);
    Ok(found)
}

/// The schema the folder's migrations lead to (its `schema.json`), if it has one.
///
/// ```
/// assert_eq!(cqrs_sql::migrate::recorded("/nonexistent".as_ref()).unwrap(), None);
/// ```
pub fn recorded(dir: &Path) -> Result<Option<Schema>, MigrateError> {
    let path = dir.join(SCHEMA_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| MigrateError::Io {
                path,
                detail: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(MigrateError::Io {
            path,
            detail: e.to_string(),
        }),
    }
}

/// Writes the next migration for `schema` into `dir` (`V<n+1>__model.sql`) and records `schema`
/// in its `schema.json`; returns the file written, or `None` when the folder is up to date.
///
/// ```no_run
/// let model = cqrs_model::Model::parse(&std::fs::read_to_string("model.toml").unwrap()).unwrap();
/// let schema = cqrs_sql::schema::Schema::of(&model);
/// if let Some(file) = cqrs_sql::migrate::next("migrations".as_ref(), &schema).unwrap() {
///     println!("wrote {}", file.display());
/// }
/// ```
pub fn next(dir: &Path, schema: &Schema) -> Result<Option<PathBuf>, MigrateError> {
    let old = recorded(dir)?;
    let Some(sql) = plan(old.as_ref(), schema)? else {
        return Ok(None);
    };
    let version = read_dir(dir)?.last().map_or(1, |(v, _, _)| v + 1);
    let io = |path: &Path, e: std::io::Error| MigrateError::Io {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let file = dir.join(format!("V{version}__model.sql"));
    std::fs::write(&file, sql).map_err(|e| io(&file, e))?;
    let json = serde_json::to_string_pretty(schema).expect("a schema serialises") + "\n";
    let path = dir.join(SCHEMA_FILE);
    std::fs::write(&path, json).map_err(|e| io(&path, e))?;
    Ok(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(text: &str) -> Schema {
        Schema::of(&cqrs_model::Model::parse(text).unwrap())
    }

    const V1: &str = r#"
[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
attributes.loanId = { type = "string", required = true, max = 26 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }
attributes.fee = { type = "number" }
"#;

    #[test]
    fn a_model_change_becomes_the_statements_that_keep_every_row() {
        let v2 = r#"
[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
attributes.loanId = { type = "string", required = true, max = 26 }
attributes.status = { type = "enum", values = ["out", "returned", "lost"] }
attributes.due = { type = "timestamp", required = true }

[entities.member]
pk = "MEMBER#{tenant}"
sk = "{memberId}"
attributes.memberId = { type = "string", required = true }
"#;
        let sql = plan(Some(&schema(V1)), &schema(v2)).unwrap().unwrap();
        for needle in [
            r#"ALTER TABLE "loan" ADD COLUMN IF NOT EXISTS "due" timestamptz;"#,
            "DO 'DECLARE c name; BEGIN FOR c IN SELECT con.conname FROM pg_constraint con",
            "WHERE t.relname = ''loan'' AND",
            "a.attname = ''status'' AND NOT a.attisdropped",
            r#"ALTER TABLE "loan" ADD CONSTRAINT "loan_status_check" CHECK ("status" IN ('out', 'returned', 'lost')) NOT VALID;"#,
            r#"ALTER TABLE "loan" ALTER COLUMN "status" DROP NOT NULL;"#,
            "-- new entity member",
            r#"CREATE TABLE IF NOT EXISTS "member" ("#,
        ] {
            assert!(sql.contains(needle), "{needle}\n{sql}");
        }
        // fee is gone from the model, its column (nullable already) stays: nothing to drop.
        assert!(!sql.contains("DROP COLUMN"), "{sql}");
    }

    #[test]
    fn a_name_written_into_a_comment_cannot_end_it() {
        // A schema whose names hold a newline (a schema.json written by hand, or a model that
        // passed an older check): whatever the plan writes about them stays inside its comments.
        let hostile = "x\nDROP TABLE \"loan\"; --";
        let mut old = schema(V1);
        let mut new = schema(V1);
        let required = |name: &str| Column {
            name: name.into(),
            attribute: name.into(),
            sql_type: "text".into(),
            required: true,
            check: None,
        };
        old.tables[0].columns.push(required(hostile));
        new.tables[0].columns.push(Column {
            required: false,
            ..required(hostile)
        });
        old.tables.push(crate::schema::Table {
            name: hostile.into(),
            item_type: "X".into(),
            common_readable: false,
            columns: vec![],
        });
        new.tables[0]
            .columns
            .push(required("y\rDROP TABLE \"loan\"; --"));
        let mut both = old.clone();
        both.tables[0].columns.push(Column {
            required: false,
            ..required("y\rDROP TABLE \"loan\"; --")
        });
        for sql in [
            plan(Some(&old), &new).unwrap().unwrap(),
            plan(Some(&both), &new).unwrap().unwrap(),
        ] {
            assert!(
                !code(&sql).contains("DROP TABLE"),
                "a name became a statement:\n{sql}"
            );
        }
    }

    /// `sql` without its comments, quoted identifiers, string literals and dollar-quoted bodies:
    /// the text PostgreSQL reads as statements.
    fn code(sql: &str) -> String {
        let mut out = String::new();
        let mut chars = sql.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '"' | '\'' => {
                    // To the closing quote; a doubled quote is one quote inside.
                    while let Some(d) = chars.next() {
                        if d == c {
                            if chars.peek() == Some(&c) {
                                chars.next();
                            } else {
                                break;
                            }
                        }
                    }
                    out.push_str(" q ");
                }
                '-' if chars.peek() == Some(&'-') => {
                    // A comment runs to the end of its line (a newline or a carriage return).
                    for d in chars.by_ref() {
                        if d == '\n' || d == '\r' {
                            break;
                        }
                    }
                    out.push('\n');
                }
                '$' if chars.peek() == Some(&'$') => {
                    chars.next();
                    let mut previous = ' ';
                    for d in chars.by_ref() {
                        if previous == '$' && d == '$' {
                            break;
                        }
                        previous = d;
                    }
                }
                c => out.push(c),
            }
        }
        out
    }

    #[test]
    fn a_type_change_is_refused() {
        let v2 = V1.replace(
            r#"attributes.fee = { type = "number" }"#,
            r#"attributes.fee = { type = "string" }"#,
        );
        let error = plan(Some(&schema(V1)), &schema(&v2)).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("loan.fee: the type changes from numeric to text"),
            "{error}"
        );
    }

    #[test]
    fn a_folder_gets_its_migrations_in_order_and_is_then_up_to_date() {
        let dir = std::env::temp_dir().join(format!("cqrs-sql-migrate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = next(&dir, &schema(V1)).unwrap().unwrap();
        assert!(first.ends_with("V1__model.sql"));
        assert_eq!(next(&dir, &schema(V1)).unwrap(), None, "up to date");
        let v2 = format!("{V1}attributes.due = {{ type = \"timestamp\" }}\n");
        let second = next(&dir, &schema(&v2)).unwrap().unwrap();
        assert!(second.ends_with("V2__model.sql"));
        let files: Vec<u32> = read_dir(&dir)
            .unwrap()
            .into_iter()
            .map(|(v, _, _)| v)
            .collect();
        assert_eq!(files, [1, 2]);
        assert_eq!(recorded(&dir).unwrap(), Some(schema(&v2)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
