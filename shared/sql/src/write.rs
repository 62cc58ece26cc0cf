//! Writing changes into the relational read model: idempotent, newest-wins by version, a batch in
//! one transaction.
//!
//! - An upsert writes a row only over an older version of the same item (`ON CONFLICT (pk, sk) DO
//!   UPDATE ... WHERE version < excluded.version`), so a duplicate, a replay or a reordered older
//!   version changes nothing.
//! - An item lives in one place: its entity's table, or the generic table when a version does not
//!   fit it. A version that moves it deletes the older row from the other place, and a version is
//!   not written where the other place already holds a newer one.
//! - A removal (the data table's item expired) deletes the row at that version or older, and is
//!   remembered (`cqrs_removed`): a replayed state of that version or older does not bring the row
//!   back.
//! - Within a batch, only each item's last change counts (the stream keeps an item's records in
//!   order).
//!
//! Values travel as text and are cast to their column's type in SQL (`($1::text)::bigint`), so no
//! value needs a Rust type of its own.

use std::collections::HashMap;

use tokio_postgres::{Client, Transaction, types::ToSql};

use crate::rows::Row;
use crate::schema::{GENERIC_TABLE, REMOVED_TABLE, ident};

/// One change of the data table.
///
/// ```
/// let expired = cqrs_sql::write::Change::Remove {
///     table: Some("loan".into()), pk: "LOAN#t1".into(), sk: "L1".into(), version: 3,
/// };
/// assert!(matches!(expired, cqrs_sql::write::Change::Remove { version: 3, .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A new state of an item.
    Upsert(Row),
    /// The item left the data table (its TTL expired) at this version.
    Remove {
        /// Its entity's table, if its keys name one.
        table: Option<String>,
        /// Its partition key.
        pk: String,
        /// Its sort key.
        sk: String,
        /// The version it had.
        version: i64,
    },
}

impl Change {
    fn key(&self) -> (&str, &str) {
        match self {
            Change::Upsert(row) => row.key(),
            Change::Remove { pk, sk, .. } => (pk, sk),
        }
    }

    fn version(&self) -> i64 {
        match self {
            Change::Upsert(row) => row.version(),
            Change::Remove { version, .. } => *version,
        }
    }
}

/// What a batch did.
///
/// ```
/// let nothing = cqrs_sql::write::Written::default();
/// assert_eq!((nothing.rows, nothing.deleted, nothing.stale), (0, 0, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Rows inserted or updated.
    pub rows: u64,
    /// Rows deleted (an item moved between its entity's table and the generic table, or removed).
    pub deleted: u64,
    /// Changes that wrote nothing: a newer version was there already (duplicates, replays,
    /// reordered versions), or a newer change of the same item came later in the batch.
    pub stale: u64,
}

/// Where a group of upserts goes: its table, and the other place its items may be.
type Destination = (String, Option<String>);

/// How many values one statement binds at most (PostgreSQL's limit is 65,535).
const MAX_PARAMETERS: usize = 30_000;

/// Writes `changes` in one transaction: all of them, or none.
///
/// ```no_run
/// # async fn example(client: &mut tokio_postgres::Client, row: cqrs_sql::rows::Row) {
/// use cqrs_sql::write::{Change, apply};
/// let written = apply(client, &[Change::Upsert(row.clone()), Change::Upsert(row)]).await.unwrap();
/// assert_eq!(written.stale, 1, "the duplicate wrote nothing");
/// # }
/// ```
pub async fn apply(
    client: &mut Client,
    changes: &[Change],
) -> Result<Written, tokio_postgres::Error> {
    let transaction = client.transaction().await?;
    let written = apply_in(&transaction, changes).await?;
    transaction.commit().await?;
    Ok(written)
}

/// [`apply`] inside a transaction of the caller's, which commits it (or not).
///
/// ```no_run
/// # async fn example(client: &mut tokio_postgres::Client, changes: Vec<cqrs_sql::write::Change>) {
/// let transaction = client.transaction().await.unwrap();
/// cqrs_sql::write::apply_in(&transaction, &changes).await.unwrap();
/// transaction.commit().await.unwrap();
/// # }
/// ```
pub async fn apply_in(
    transaction: &Transaction<'_>,
    changes: &[Change],
) -> Result<Written, tokio_postgres::Error> {
    // Each item's newest change of the batch; on a tie the later one.
    let mut newest: HashMap<(&str, &str), usize> = HashMap::new();
    for (at, change) in changes.iter().enumerate() {
        newest
            .entry(change.key())
            .and_modify(|kept| {
                if change.version() >= changes[*kept].version() {
                    *kept = at;
                }
            })
            .or_insert(at);
    }
    let mut kept: Vec<usize> = newest.into_values().collect();
    kept.sort_unstable();
    let mut written = Written {
        stale: (changes.len() - kept.len()) as u64,
        ..Written::default()
    };

    // Upserts by (table, the other place of their items).
    let mut groups: Vec<(Destination, Vec<&Row>)> = Vec::new();
    let mut removals = Vec::new();
    for at in kept {
        match &changes[at] {
            Change::Upsert(row) => {
                let other = if row.table == GENERIC_TABLE {
                    row.entity.clone()
                } else {
                    Some(GENERIC_TABLE.to_string())
                };
                let group = (row.table.clone(), other);
                match groups.iter_mut().find(|(g, _)| *g == group) {
                    Some((_, rows)) => rows.push(row),
                    None => groups.push((group, vec![row])),
                }
            }
            Change::Remove {
                table,
                pk,
                sk,
                version,
            } => removals.push((table.clone(), pk.as_str(), sk.as_str(), *version)),
        }
    }

    for ((table, other), rows) in &groups {
        let per_row = rows[0].values.len();
        for chunk in rows.chunks((MAX_PARAMETERS / per_row).max(1)) {
            let (sql, params) = upsert_statement(table, other.as_deref(), chunk);
            let refs: Vec<&(dyn ToSql + Sync)> =
                params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
            let rows_written = transaction.query(&sql, &refs).await?;
            let (mut upserted, mut moved) = (0u64, 0u64);
            if let Some(row) = rows_written.first() {
                upserted = row.get::<_, i64>(0) as u64;
                moved = row.get::<_, i64>(1) as u64;
            }
            written.rows += upserted;
            written.deleted += moved;
            written.stale += chunk.len() as u64 - upserted;
        }
    }
    for (table, pk, sk, version) in removals {
        transaction
            .execute(
                &format!(
                    "INSERT INTO {removed} (\"pk\", \"sk\", \"version\") VALUES ($1, $2, $3) \
                     ON CONFLICT (\"pk\", \"sk\") DO UPDATE SET \"version\" = excluded.\"version\", \
                     \"removed_at\" = now() WHERE {removed}.\"version\" < excluded.\"version\"",
                    removed = ident(REMOVED_TABLE)
                ),
                &[&pk, &sk, &version],
            )
            .await?;
        let mut deleted = 0;
        for table in table.iter().map(String::as_str).chain([GENERIC_TABLE]) {
            deleted += transaction
                .execute(
                    &format!(
                        "DELETE FROM {} WHERE \"pk\" = $1 AND \"sk\" = $2 AND \"version\" <= $3",
                        ident(table)
                    ),
                    &[&pk, &sk, &version],
                )
                .await?;
        }
        if deleted == 0 {
            written.stale += 1;
        }
        written.deleted += deleted;
    }
    Ok(written)
}

/// The `VALUES` tuples of `rows`, each value a parameter sent as text and cast to its column's type
/// (`($1::text)::bigint`), and the parameters in order.
pub(crate) fn values(rows: &[&Row]) -> (Vec<String>, Vec<Option<String>>) {
    let mut params = Vec::with_capacity(rows.len() * rows[0].values.len());
    let mut tuples = Vec::with_capacity(rows.len());
    for row in rows {
        let cells: Vec<String> = row
            .values
            .iter()
            .zip(&row.types)
            .map(|(value, ty)| {
                params.push(value.clone());
                format!("(${}::text)::{ty}", params.len())
            })
            .collect();
        tuples.push(format!("({})", cells.join(", ")));
    }
    (tuples, params)
}

/// The statement that upserts `rows` into `table` (and deletes their older rows from `other`):
/// it answers one row, (rows written, rows deleted).
fn upsert_statement(
    table: &str,
    other: Option<&str>,
    rows: &[&Row],
) -> (String, Vec<Option<String>>) {
    let columns: Vec<String> = rows[0].columns.iter().map(|c| ident(c)).collect();
    let (tuples, params) = values(rows);
    let target = ident(table);
    let list = columns.join(", ");
    let updates: Vec<String> = columns
        .iter()
        .filter(|c| *c != "\"pk\"" && *c != "\"sk\"")
        .map(|c| format!("{c} = excluded.{c}"))
        .collect();
    let not_removed = format!(
        "NOT EXISTS (SELECT 1 FROM {} r WHERE r.\"pk\" = v.\"pk\" AND r.\"sk\" = v.\"sk\" \
         AND r.\"version\" >= v.\"version\")",
        ident(REMOVED_TABLE)
    );
    let (moved, newer_elsewhere) = match other {
        Some(other) => {
            let other = ident(other);
            (
                format!(
                    ", moved AS (DELETE FROM {other} o USING v WHERE o.\"pk\" = v.\"pk\" AND o.\"sk\" = v.\"sk\" \
                     AND o.\"version\" < v.\"version\" RETURNING 1)"
                ),
                format!(
                    " WHERE {not_removed} AND NOT EXISTS (SELECT 1 FROM {other} o \
                     WHERE o.\"pk\" = v.\"pk\" AND o.\"sk\" = v.\"sk\" AND o.\"version\" >= v.\"version\")"
                ),
            )
        }
        None => (
            ", moved AS (SELECT 1 WHERE false)".to_string(),
            format!(" WHERE {not_removed}"),
        ),
    };
    let sql = format!(
        "WITH v ({list}) AS (VALUES {tuples}){moved}, \
         written AS (INSERT INTO {target} ({list}) SELECT {list} FROM v{newer_elsewhere} \
         ON CONFLICT (\"pk\", \"sk\") DO UPDATE SET {updates}, \"synced_at\" = now() \
         WHERE {target}.\"version\" < excluded.\"version\" RETURNING 1) \
         SELECT (SELECT count(*) FROM written), (SELECT count(*) FROM moved)",
        tuples = tuples.join(", "),
        updates = updates.join(", "),
    );
    (sql, params)
}
