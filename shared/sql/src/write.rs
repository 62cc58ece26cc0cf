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
//! Values travel as text, one array per column (`unnest($1::text[], $2::text[], ...)`), and are cast
//! to their column's type in SQL, so no value needs a Rust type of its own, and a table's statement
//! is the same text whatever the batch's size: PostgreSQL parses and plans it once per connection
//! ([`Writer`] keeps it prepared), where a `VALUES` list of one tuple per row is a new statement
//! each time, parsed, analysed and planned in proportion to the batch.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use tokio_postgres::{Client, Statement, Transaction, types::ToSql};

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
type Destination<'c> = (&'c str, Option<&'c str>);

/// Statements prepared on one connection, by their text.
type Prepared = HashMap<String, Statement>;

/// A connection that writes batches, with its statements prepared once (a table's upsert is the
/// same text for every batch).
///
/// ```no_run
/// # async fn example(client: tokio_postgres::Client, batches: Vec<Vec<cqrs_sql::write::Change>>) {
/// let mut writer = cqrs_sql::write::Writer::new(client);
/// for changes in &batches {
///     writer.apply(changes).await.unwrap();
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct Writer {
    client: Client,
    prepared: Prepared,
}

impl Writer {
    /// A writer on `client` (see the type's example).
    pub fn new(client: Client) -> Writer {
        Writer {
            client,
            prepared: Prepared::new(),
        }
    }

    /// Its connection.
    ///
    /// ```no_run
    /// # async fn example(mut writer: cqrs_sql::write::Writer) {
    /// writer.client().batch_execute("SELECT 1").await.unwrap();
    /// # }
    /// ```
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Whether its connection is closed (then it writes nothing more).
    ///
    /// ```no_run
    /// # fn example(writer: &cqrs_sql::write::Writer) {
    /// if writer.is_closed() { /* connect again */ }
    /// # }
    /// ```
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// [`apply`], with the statements this connection prepared before (see the type's example).
    pub async fn apply(&mut self, changes: &[Change]) -> Result<Written, tokio_postgres::Error> {
        let transaction = self.client.transaction().await?;
        let written = write(&transaction, changes, &mut self.prepared).await?;
        transaction.commit().await?;
        Ok(written)
    }

    /// Writes the changes `changes` yields in one transaction, a chunk of them a statement, and
    /// takes the next chunk from `changes` while PostgreSQL writes the one before: the work the
    /// iterator does (a consumer converting stream records as it yields them) overlaps the
    /// database's, and the first chunk's overlaps the `BEGIN`. The first chunk has `first`
    /// changes, so that PostgreSQL starts early; each next one twice as many, up to `most`. Each
    /// chunk is written as [`apply`] writes a batch; across chunks, newest-wins by version keeps
    /// the same result as one statement.
    ///
    /// It stops at the first `Err` the iterator yields: the changes before it are written and
    /// committed, and the error comes back beside what was written. A database error rolls the
    /// whole transaction back.
    ///
    /// ```no_run
    /// # async fn example(mut writer: cqrs_sql::write::Writer, rows: Vec<cqrs_sql::rows::Row>) {
    /// use cqrs_sql::write::Change;
    /// let changes = rows.into_iter().map(|row| Ok::<_, String>(Change::Upsert(row)));
    /// let (written, stopped) = writer.apply_pipelined(changes, 50, 250).await.unwrap();
    /// assert!(stopped.is_none());
    /// println!("{} rows written", written.rows);
    /// # }
    /// ```
    pub async fn apply_pipelined<E>(
        &mut self,
        changes: impl Iterator<Item = Result<Change, E>>,
        first: usize,
        most: usize,
    ) -> Result<(Written, Option<E>), tokio_postgres::Error> {
        let most = most.max(1);
        let mut chunk = first.clamp(1, most);
        let mut changes = changes;
        let mut stopped = None;
        let mut take = |stopped: &mut Option<E>| {
            let mut out = Vec::with_capacity(chunk);
            if stopped.is_none() {
                for change in changes.by_ref() {
                    match change {
                        Ok(change) => out.push(change),
                        Err(error) => {
                            *stopped = Some(error);
                            break;
                        }
                    }
                    if out.len() == chunk {
                        break;
                    }
                }
            }
            chunk = (chunk * 2).min(most);
            out
        };
        let mut total = Written::default();
        let (transaction, mut current) = {
            // BEGIN goes out while the first chunk is made.
            let mut beginning = std::pin::pin!(self.client.transaction());
            let started = start(beginning.as_mut()).await;
            let current = take(&mut stopped);
            (finish(started, beginning).await?, current)
        };
        let mut written_before: Vec<Change> = Vec::new();
        while !current.is_empty() {
            let next;
            {
                let mut writing = std::pin::pin!(write(&transaction, &current, &mut self.prepared));
                // Free the chunk before and make the next one while PostgreSQL writes this one.
                let started = start(writing.as_mut()).await;
                drop(std::mem::take(&mut written_before));
                next = take(&mut stopped);
                let written = finish(started, writing).await?;
                total.rows += written.rows;
                total.deleted += written.deleted;
                total.stale += written.stale;
            }
            written_before = std::mem::replace(&mut current, next);
        }
        transaction.commit().await?;
        Ok((total, stopped))
    }
}

/// Polls `future` once, so that its first request goes to the connection, and yields once, so that
/// the connection's task puts it on the wire: the caller can then work while the server does.
async fn start<F: Future>(mut future: Pin<&mut F>) -> Poll<F::Output> {
    let started = std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await;
    if started.is_pending() {
        tokio::task::yield_now().await;
    }
    started
}

/// What a future [`start`] started gives, once it is done.
async fn finish<F: Future>(started: Poll<F::Output>, future: Pin<&mut F>) -> F::Output {
    match started {
        Poll::Ready(output) => output,
        Poll::Pending => future.await,
    }
}

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
    write(transaction, changes, &mut Prepared::new()).await
}

async fn write(
    transaction: &Transaction<'_>,
    changes: &[Change],
    prepared: &mut Prepared,
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
    let mut groups: Vec<(Destination<'_>, Vec<&Row>)> = Vec::new();
    let mut removals = Vec::new();
    for at in kept {
        match &changes[at] {
            Change::Upsert(row) => {
                let other = if row.table == GENERIC_TABLE {
                    row.entity.as_deref()
                } else {
                    Some(GENERIC_TABLE)
                };
                let group = (row.table.as_str(), other);
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
            } => removals.push((table.as_deref(), pk.as_str(), sk.as_str(), *version)),
        }
    }

    for ((table, other), rows) in &groups {
        let sql = upsert_statement(table, *other, &rows[0].columns, &rows[0].types);
        let statement = match prepared.get(&sql) {
            Some(statement) => statement.clone(),
            None => {
                let statement = transaction.prepare(&sql).await?;
                prepared.insert(sql, statement.clone());
                statement
            }
        };
        let arrays = arrays(rows);
        let params: Vec<&(dyn ToSql + Sync)> =
            arrays.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
        let answer = transaction.query_one(&statement, &params).await?;
        let upserted = answer.get::<_, i64>(0) as u64;
        written.rows += upserted;
        written.deleted += answer.get::<_, i64>(1) as u64;
        written.stale += rows.len() as u64 - upserted;
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
        for table in table.into_iter().chain([GENERIC_TABLE]) {
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

/// The values of `rows` as one array per column (the parameters of [`unnest`]).
pub(crate) fn arrays<'r>(rows: &[&'r Row]) -> Vec<Vec<Option<&'r str>>> {
    (0..rows[0].values.len())
        .map(|at| rows.iter().map(|row| row.values[at].as_deref()).collect())
        .collect()
}

/// `SELECT` of rows given as one text array per column (`$1::text[]`, `$2::text[]`, ...), each
/// column cast to its type and named as in its table.
pub(crate) fn unnest(columns: &[String], types: &[String]) -> String {
    let names: Vec<String> = columns.iter().map(|c| ident(c)).collect();
    let casts: Vec<String> = names
        .iter()
        .zip(types)
        .map(|(name, ty)| format!("u.{name}::{ty} AS {name}"))
        .collect();
    let arrays: Vec<String> = (1..=columns.len())
        .map(|n| format!("${n}::text[]"))
        .collect();
    format!(
        "SELECT {} FROM unnest({}) AS u ({})",
        casts.join(", "),
        arrays.join(", "),
        names.join(", ")
    )
}

/// The statement that upserts rows of `columns` into `table` (and deletes their older rows from
/// `other`): it answers one row, (rows written, rows deleted).
fn upsert_statement(
    table: &str,
    other: Option<&str>,
    columns: &[String],
    types: &[String],
) -> String {
    let names: Vec<String> = columns.iter().map(|c| ident(c)).collect();
    let target = ident(table);
    let list = names.join(", ");
    let updates: Vec<String> = names
        .iter()
        .filter(|c| *c != "\"pk\"" && *c != "\"sk\"")
        .map(|c| format!("{c} = excluded.{c}"))
        .collect();
    let not_removed = format!(
        "NOT EXISTS (SELECT 1 FROM {} r WHERE r.\"pk\" = v.\"pk\" AND r.\"sk\" = v.\"sk\" \
         AND r.\"version\" >= v.\"version\")",
        ident(REMOVED_TABLE)
    );
    // Each place reads the arrays itself (a subquery, not a CTE both read: that would be
    // materialised, every row written out and read back); the deletion reads only the keys and
    // the version.
    let position = |name: &str| {
        1 + columns
            .iter()
            .position(|c| c == name)
            .expect("every row has the envelope's columns")
    };
    let keys = format!(
        "(SELECT u.\"pk\", u.\"sk\", u.\"version\"::bigint AS \"version\" FROM \
         unnest(${}::text[], ${}::text[], ${}::text[]) AS u (\"pk\", \"sk\", \"version\")) AS v",
        position("pk"),
        position("sk"),
        position("version")
    );
    let (moved, newer_elsewhere) = match other {
        Some(other) => {
            let other = ident(other);
            (
                format!(
                    "moved AS (DELETE FROM {other} o USING {keys} WHERE o.\"pk\" = v.\"pk\" AND o.\"sk\" = v.\"sk\" \
                     AND o.\"version\" < v.\"version\" RETURNING 1)"
                ),
                format!(
                    " WHERE {not_removed} AND NOT EXISTS (SELECT 1 FROM {other} o \
                     WHERE o.\"pk\" = v.\"pk\" AND o.\"sk\" = v.\"sk\" AND o.\"version\" >= v.\"version\")"
                ),
            )
        }
        None => (
            "moved AS (SELECT 1 WHERE false)".to_string(),
            format!(" WHERE {not_removed}"),
        ),
    };
    format!(
        "WITH {moved}, \
         written AS (INSERT INTO {target} ({list}) SELECT {list} FROM ({rows}) AS v{newer_elsewhere} \
         ON CONFLICT (\"pk\", \"sk\") DO UPDATE SET {updates}, \"synced_at\" = now() \
         WHERE {target}.\"version\" < excluded.\"version\" RETURNING 1) \
         SELECT (SELECT count(*) FROM written), (SELECT count(*) FROM moved)",
        rows = unnest(columns, types),
        updates = updates.join(", "),
    )
}
