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
//! - A table's column that its rows no longer have (an attribute the model declared once, whose
//!   migration kept its column) is set to `NULL` by every upsert, so that no newer version keeps an
//!   older one's value there (the connection reads the table's columns once, from the catalog).
//! - Writers of one item take turns: each batch (and each repair, [`crate::verify`]) first takes a
//!   transaction-level advisory lock per item ([`lock_keys`]), in one order, so that the checks of
//!   the other table and of `cqrs_removed` read what the other writer committed, not a snapshot
//!   from before it (under `READ COMMITTED`, two writers of one item could otherwise both write,
//!   and leave it in two tables, or bring it back after its removal).
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

/// Statements prepared on one connection, by their text, and what the connection learnt of each
/// table's columns.
#[derive(Debug, Default)]
struct Prepared {
    statements: HashMap<String, Statement>,
    /// [`LOCK_KEYS`], prepared once per connection, so that it goes out in one message and in
    /// the same round trip as the statements after it.
    lock: Option<Statement>,
    /// Each table's columns that its rows do not have: those of attributes the model no longer
    /// declares (their migration kept them), which a write sets to `NULL` ([`retired_columns`]).
    retired: HashMap<String, Vec<String>>,
}

impl Prepared {
    fn new() -> Prepared {
        Prepared::default()
    }
}

/// The columns of `table` (in the connection's schema) that rows of `columns` do not have, but
/// `synced_at`: the columns of attributes a model declared once and no longer does. A write sets
/// them to `NULL`, so that no newer version of an item keeps an older version's value there (and
/// `cqrs verify --sql` expects `NULL` there).
async fn retired_columns(
    transaction: &Transaction<'_>,
    table: &str,
    columns: &[String],
) -> Result<Vec<String>, tokio_postgres::Error> {
    let rows = transaction
        .query(
            "SELECT a.attname::text FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
             WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace \
             AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&table],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| r.get::<_, String>(0))
        .filter(|c| c != "synced_at" && !columns.contains(c))
        .collect())
}

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

/// The advisory lock of an item: a 64-bit FNV-1a hash of its key (`pk`, a byte no UTF-8 text
/// holds, `sk`), the same in every process and release. Two keys may share one: they then take
/// turns too.
///
/// ```
/// use cqrs_sql::write::lock_id;
/// assert_eq!(lock_id("LOAN#t1", "L1"), lock_id("LOAN#t1", "L1"));
/// assert_ne!(lock_id("LOAN#t1", "L1"), lock_id("LOAN#t1L", "1"));
/// ```
pub fn lock_id(pk: &str, sk: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in pk.bytes().chain([0xff]).chain(sk.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}

/// Takes the advisory lock of each key ([`lock_id`]) for the rest of `transaction`
/// (`pg_advisory_xact_lock`), in ascending order of the locks, so that two transactions that
/// lock their keys at their start cannot wait for each other in a cycle; waits while another
/// transaction holds one. A statement after it reads what the holder committed. Returns how many
/// distinct locks it took.
///
/// ```no_run
/// # async fn example(client: &mut tokio_postgres::Client) {
/// let transaction = client.transaction().await.unwrap();
/// cqrs_sql::write::lock_keys(&transaction, [("LOAN#t1", "L1")]).await.unwrap();
/// // ... read and write L1's rows: no other writer of L1 runs until the commit.
/// transaction.commit().await.unwrap();
/// # }
/// ```
pub async fn lock_keys<'k>(
    transaction: &Transaction<'_>,
    keys: impl IntoIterator<Item = (&'k str, &'k str)>,
) -> Result<usize, tokio_postgres::Error> {
    let locks = sorted_locks(keys);
    if !locks.is_empty() {
        transaction.execute(LOCK_KEYS, &[&locks]).await?;
    }
    Ok(locks.len())
}

/// Takes the advisory locks of `$1`, a `bigint[]`, in the array's order (a function scan yields
/// its elements in order).
const LOCK_KEYS: &str = "SELECT pg_advisory_xact_lock(u.k) FROM unnest($1::bigint[]) AS u (k)";

/// The distinct locks of `keys` ([`lock_id`]), ascending.
fn sorted_locks<'k>(keys: impl IntoIterator<Item = (&'k str, &'k str)>) -> Vec<i64> {
    let mut locks: Vec<i64> = keys.into_iter().map(|(pk, sk)| lock_id(pk, sk)).collect();
    locks.sort_unstable();
    locks.dedup();
    locks
}

/// Takes the advisory lock of each key ([`lock_id`]) that no other transaction holds, without
/// waiting for the others, for the rest of `transaction`; returns the locks it took. A repair
/// takes its locks so: it never waits while it holds some, so it never closes a cycle.
///
/// ```no_run
/// # async fn example(client: &mut tokio_postgres::Client) {
/// use cqrs_sql::write::{lock_id, try_lock_keys};
/// let transaction = client.transaction().await.unwrap();
/// let taken = try_lock_keys(&transaction, [("LOAN#t1", "L1")]).await.unwrap();
/// if taken.contains(&lock_id("LOAN#t1", "L1")) { /* L1 is this transaction's until it ends */ }
/// # }
/// ```
pub async fn try_lock_keys<'k>(
    transaction: &Transaction<'_>,
    keys: impl IntoIterator<Item = (&'k str, &'k str)>,
) -> Result<std::collections::HashSet<i64>, tokio_postgres::Error> {
    let mut locks: Vec<i64> = keys.into_iter().map(|(pk, sk)| lock_id(pk, sk)).collect();
    locks.sort_unstable();
    locks.dedup();
    if locks.is_empty() {
        return Ok(std::collections::HashSet::new());
    }
    let rows = transaction
        .query(
            "SELECT u.k FROM unnest($1::bigint[]) AS u (k) WHERE pg_try_advisory_xact_lock(u.k)",
            &[&locks],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

async fn write(
    transaction: &Transaction<'_>,
    changes: &[Change],
    prepared: &mut Prepared,
) -> Result<Written, tokio_postgres::Error> {
    // One writer of an item at a time (see the module's documentation), before anything is read.
    // The locks go out first and the statements after them in the same round trip, without
    // waiting for the locks' answer: PostgreSQL runs a connection's statements in order, so none
    // of them reads before every lock is held (and after a failed lock they fail too: the lock's
    // error is the one returned).
    let lock = match &prepared.lock {
        Some(lock) => lock.clone(),
        None => {
            let lock = transaction.prepare(LOCK_KEYS).await?;
            prepared.lock = Some(lock.clone());
            lock
        }
    };
    let locks = sorted_locks(changes.iter().map(Change::key));
    let locking = async {
        if locks.is_empty() {
            Ok(0)
        } else {
            transaction.execute(&lock, &[&locks]).await
        }
    };
    let (locked, wrote) =
        tokio::join!(biased; locking, write_locked(transaction, changes, prepared));
    locked?;
    wrote
}

/// [`write`] once the items' locks are requested.
async fn write_locked(
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
        let retired = match prepared.retired.get(*table) {
            Some(retired) => retired.clone(),
            None => {
                let retired = retired_columns(transaction, table, &rows[0].columns).await?;
                prepared.retired.insert(table.to_string(), retired.clone());
                retired
            }
        };
        let sql = upsert_statement(table, *other, &rows[0].columns, &rows[0].types, &retired);
        let statement = match prepared.statements.get(&sql) {
            Some(statement) => statement.clone(),
            None => {
                let statement = transaction.prepare(&sql).await?;
                prepared.statements.insert(sql, statement.clone());
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
/// `other`), setting the table's `retired` columns to `NULL`: it answers one row, (rows written,
/// rows deleted).
fn upsert_statement(
    table: &str,
    other: Option<&str>,
    columns: &[String],
    types: &[String],
    retired: &[String],
) -> String {
    let names: Vec<String> = columns.iter().map(|c| ident(c)).collect();
    let target = ident(table);
    let list = names.join(", ");
    let updates: Vec<String> = names
        .iter()
        .filter(|c| *c != "\"pk\"" && *c != "\"sk\"")
        .map(|c| format!("{c} = excluded.{c}"))
        .chain(retired.iter().map(|c| format!("{} = NULL", ident(c))))
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

// ---------------------------------------------------------------------------------------------
// sql-sync's batches: every record written or parked, errors classified by SQLSTATE.

/// What a database error means for the records being written, by SQLSTATE
/// ([`tokio_postgres::error::DbError::code`]), or by what failed when PostgreSQL said nothing.
///
/// ```
/// use cqrs_sql::write::ErrorClass;
/// assert_eq!(ErrorClass::of_sqlstate("22021"), ErrorClass::Data);
/// assert_eq!(ErrorClass::of_sqlstate("23514"), ErrorClass::Data);
/// assert_eq!(ErrorClass::of_sqlstate("57P01"), ErrorClass::Transient);
/// assert_eq!(ErrorClass::of_sqlstate("40P01"), ErrorClass::Transient);
/// assert_eq!(ErrorClass::of_sqlstate("42P01"), ErrorClass::Other);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The row itself is refused (class 22, data exception; class 23, integrity constraint
    /// violation; 54000, a value past a limit such as an index row's size): writing it again
    /// fails again. It is isolated and parked, never retried.
    Data,
    /// The connection or the server's state, not the rows: a closed or broken connection (an
    /// I/O error, class 08), the server shutting down or starting (57P01, 57P02, 57P03), a
    /// cancelled statement (57014), a serialization failure or deadlock (class 40), missing
    /// resources (class 53), a lock not available (55P03). Writing again later succeeds.
    Transient,
    /// Anything else (a missing table or column, a permission, a bug): no row is to blame, and
    /// writing again succeeds only once an operator fixed the cause.
    Other,
}

impl ErrorClass {
    /// The class of a SQLSTATE (see the type's example).
    pub fn of_sqlstate(code: &str) -> ErrorClass {
        match code {
            "54000" => ErrorClass::Data,
            "57P01" | "57P02" | "57P03" | "57014" | "55P03" => ErrorClass::Transient,
            _ => match code.get(..2) {
                Some("22" | "23") => ErrorClass::Data,
                Some("08" | "40" | "53") => ErrorClass::Transient,
                _ => ErrorClass::Other,
            },
        }
    }

    /// The class of `error`: by its SQLSTATE when PostgreSQL answered; a closed connection, an
    /// I/O error or a timeout is [`ErrorClass::Transient`].
    ///
    /// ```no_run
    /// # async fn example(client: &tokio_postgres::Client) {
    /// use cqrs_sql::write::ErrorClass;
    /// let error = client.batch_execute("SELECT 1/0").await.unwrap_err();
    /// assert_eq!(ErrorClass::of(&error), ErrorClass::Data); // 22012 division_by_zero
    /// # }
    /// ```
    pub fn of(error: &tokio_postgres::Error) -> ErrorClass {
        if let Some(db) = error.as_db_error() {
            return ErrorClass::of_sqlstate(db.code().code());
        }
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            if cause.is::<std::io::Error>() {
                return ErrorClass::Transient;
            }
            source = cause.source();
        }
        if error.is_closed() || error.to_string().contains("timeout") {
            ErrorClass::Transient
        } else {
            ErrorClass::Other
        }
    }
}

/// `error` in words: PostgreSQL's own message, its SQLSTATE, detail, hint and where (table,
/// column, constraint) when PostgreSQL answered; otherwise the error and its causes
/// (`tokio_postgres::Error`'s own text is only `db error` for an answer of PostgreSQL's).
///
/// ```no_run
/// # async fn example(client: &tokio_postgres::Client) {
/// let error = client.batch_execute("SELECT 1/0").await.unwrap_err();
/// assert_eq!(cqrs_sql::write::describe(&error), "ERROR 22012: division by zero");
/// # }
/// ```
pub fn describe(error: &tokio_postgres::Error) -> String {
    let Some(db) = error.as_db_error() else {
        let mut text = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            let cause_text = cause.to_string();
            if !text.ends_with(&cause_text) {
                text.push_str(": ");
                text.push_str(&cause_text);
            }
            source = cause.source();
        }
        return text;
    };
    let mut text = format!("{} {}: {}", db.severity(), db.code().code(), db.message());
    if let Some(detail) = db.detail() {
        text.push_str(&format!(" (detail: {detail})"));
    }
    if let Some(hint) = db.hint() {
        text.push_str(&format!(" (hint: {hint})"));
    }
    let place: Vec<String> = [
        ("table", db.table()),
        ("column", db.column()),
        ("constraint", db.constraint()),
    ]
    .into_iter()
    .filter_map(|(what, name)| name.map(|name| format!("{what} {name}")))
    .collect();
    if !place.is_empty() {
        text.push_str(&format!(" ({})", place.join(", ")));
    }
    text
}

/// A stream record that is not written into the read model but parked in
/// [`crate::schema::PARKED_TABLE`], with why, in the batch's own transaction: a key holding
/// U+0000, a record that is not an item, a row PostgreSQL refused ([`ErrorClass::Data`]). A
/// record parked again (a retried or replayed batch) is kept once, by its sequence number.
///
/// ```
/// let parked = cqrs_sql::write::Parked {
///     sequence_number: "000000000000000000042".into(),
///     pk: Some("LOAN#t1".into()),
///     sk: Some("L\u{0}1".into()),
///     version: Some(3),
///     event_name: "MODIFY".into(),
///     reason: "its key (sk) holds U+0000".into(),
///     record: "{}".into(),
/// };
/// assert_eq!(parked.version, Some(3));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parked {
    /// The stream record's sequence number.
    pub sequence_number: String,
    /// The item's partition key, exactly (kept as bytes: it may hold U+0000), when known.
    pub pk: Option<String>,
    /// Its sort key, likewise.
    pub sk: Option<String>,
    /// Its version, when known.
    pub version: Option<i64>,
    /// The record's `eventName` (`INSERT`, `MODIFY`, `REMOVE`).
    pub event_name: String,
    /// Why it is parked: PostgreSQL's message ([`describe`]) or what could not be converted.
    pub reason: String,
    /// The record as text (JSON: the stream image, or the row sql-sync made of it), for the
    /// operator who writes it again.
    pub record: String,
}

impl Parked {
    /// The change `change` of the record `sequence_number`, parked for `reason` (PostgreSQL
    /// refused it): the record is the row (or the removal) as JSON, its values as sql-sync
    /// sends them.
    ///
    /// ```
    /// let model = cqrs_model::Model::example();
    /// let row = cqrs_sql::rows::row(&model, &cqrs_sql::schema::Schema::of(&model), &cqrs_item::Item::example());
    /// let change = cqrs_sql::write::Change::Upsert(row);
    /// let parked = cqrs_sql::write::Parked::refused("000000000000000000007", &change, "ERROR 23514: ...");
    /// assert_eq!(parked.pk.as_deref(), Some("PRODUCT#t1"));
    /// assert!(parked.record.contains("\"table\""));
    /// ```
    pub fn refused(sequence_number: &str, change: &Change, reason: &str) -> Parked {
        let (pk, sk) = change.key();
        let record = match change {
            Change::Upsert(row) => {
                let values: serde_json::Map<String, serde_json::Value> = row
                    .columns
                    .iter()
                    .zip(&row.values)
                    .map(|(column, value)| (column.clone(), value.clone().into()))
                    .collect();
                serde_json::json!({ "upsert": { "table": row.table, "values": values } })
            }
            Change::Remove {
                table,
                pk,
                sk,
                version,
            } => serde_json::json!({
                "remove": { "table": table, "pk": pk, "sk": sk, "version": version }
            }),
        };
        Parked {
            sequence_number: sequence_number.to_string(),
            pk: Some(pk.to_string()),
            sk: Some(sk.to_string()),
            version: Some(change.version()),
            event_name: match change {
                Change::Upsert(_) => "MODIFY".into(),
                Change::Remove { .. } => "REMOVE".into(),
            },
            reason: reason.to_string(),
            record: record.to_string(),
        }
    }
}

/// One record of a batch for [`Writer::write_batch`]: a change to write, or a record to park.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// The change of the record with this sequence number.
    Write(String, Change),
    /// A record parked instead (it cannot be written).
    Park(Parked),
}

/// What [`Writer::write_batch`] did: what it wrote, and every record it parked (those it was
/// given, and the rows PostgreSQL refused).
///
/// ```
/// let outcome = cqrs_sql::write::BatchOutcome::default();
/// assert!(outcome.parked.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// What was written.
    pub written: Written,
    /// What was parked, in the batch's order of chunks.
    pub parked: Vec<Parked>,
}

/// A chunk of a batch: its changes (with their records' sequence numbers), and what it parks.
#[derive(Default)]
struct Chunk {
    changes: Vec<Change>,
    sequence_numbers: Vec<String>,
    parked: Vec<Parked>,
}

impl Chunk {
    fn len(&self) -> usize {
        self.changes.len() + self.parked.len()
    }

    /// Its entries again, into `spent`.
    fn spend(self, spent: &mut Vec<Entry>) {
        spent.extend(
            self.sequence_numbers
                .into_iter()
                .zip(self.changes)
                .map(|(sequence, change)| Entry::Write(sequence, change)),
        );
        spent.extend(self.parked.into_iter().map(Entry::Park));
    }
}

impl Writer {
    /// Writes a batch of sql-sync in one transaction, so that no record can stop it: each entry
    /// of `entries` is written ([`Entry::Write`]) or parked ([`Entry::Park`],
    /// [`crate::schema::PARKED_TABLE`]), and a row PostgreSQL refuses ([`ErrorClass::Data`]) is
    /// parked with PostgreSQL's message while the others are written:
    ///
    /// - chunks are pipelined as in [`Writer::apply_pipelined`] (`first`, then twice as many, up
    ///   to `most`), each under a savepoint sent with its first statement;
    /// - a chunk that fails with a data error goes back to its savepoint and is written again row
    ///   by row, each under a savepoint of its own (an `unnest` statement's error never names
    ///   the row): a row refused again is parked, with [`describe`] of the error as its reason;
    /// - any other error ([`ErrorClass::Transient`], [`ErrorClass::Other`]) rolls the whole
    ///   transaction back and comes back, for the caller to retry the batch.
    ///
    /// Every entry taken from `entries` ends up in `spent` (written, parked, or in flight when
    /// an error came back), so a caller can write the same batch again, `spent` then the rest of
    /// `entries`, on a new connection.
    ///
    /// ```no_run
    /// # async fn example(mut writer: cqrs_sql::write::Writer, rows: Vec<cqrs_sql::rows::Row>) {
    /// use cqrs_sql::write::{Change, Entry};
    /// let mut entries = rows
    ///     .into_iter()
    ///     .enumerate()
    ///     .map(|(n, row)| Entry::Write(format!("{n:021}"), Change::Upsert(row)));
    /// let mut spent = Vec::new();
    /// let outcome = writer.write_batch(&mut entries, &mut spent, 50, 250).await.unwrap();
    /// println!("{} rows written, {} parked", outcome.written.rows, outcome.parked.len());
    /// # }
    /// ```
    pub async fn write_batch(
        &mut self,
        entries: &mut dyn Iterator<Item = Entry>,
        spent: &mut Vec<Entry>,
        first: usize,
        most: usize,
    ) -> Result<BatchOutcome, tokio_postgres::Error> {
        let most = most.max(1);
        let mut size = first.clamp(1, most);
        let mut outcome = BatchOutcome::default();
        let (transaction, mut current) = {
            let mut beginning = std::pin::pin!(self.client.transaction());
            let started = start(beginning.as_mut()).await;
            let (current, started) =
                take(entries, &mut size, most, beginning.as_mut(), started).await;
            match finish(started, beginning).await {
                Ok(transaction) => (transaction, current),
                Err(error) => {
                    current.spend(spent);
                    return Err(error);
                }
            }
        };
        while current.len() > 0 {
            let (next, result) = {
                let mut writing =
                    std::pin::pin!(write_chunk(&transaction, &current, &mut self.prepared));
                let started = start(writing.as_mut()).await;
                let (next, started) =
                    take(entries, &mut size, most, writing.as_mut(), started).await;
                (next, finish(started, writing).await)
            };
            let finished = std::mem::replace(&mut current, next);
            match result {
                Ok((written, parked)) => {
                    outcome.written.rows += written.rows;
                    outcome.written.deleted += written.deleted;
                    outcome.written.stale += written.stale;
                    outcome.parked.extend(parked);
                    finished.spend(spent);
                }
                Err(error) => {
                    finished.spend(spent);
                    current.spend(spent);
                    return Err(error);
                }
            }
        }
        transaction.commit().await?;
        Ok(outcome)
    }
}

/// How many entries [`take`] converts between two turns of the statements in flight.
const NUDGE: usize = 16;

/// Takes the next chunk (`size` entries; the one after it twice as large, up to `most`) from
/// `entries` while `pending` (the statements of the chunk before, [`start`]ed: `started`) goes on:
/// every [`NUDGE`] entries the connection's task gets a turn and `pending` is polled again, so that
/// its next statement goes out as soon as the one before is answered (a chunk is several
/// statements: its savepoint, its locks, its upserts), not once the whole chunk is converted.
async fn take<F: Future>(
    entries: &mut dyn Iterator<Item = Entry>,
    size: &mut usize,
    most: usize,
    mut pending: Pin<&mut F>,
    mut started: Poll<F::Output>,
) -> (Chunk, Poll<F::Output>) {
    let mut chunk = Chunk::default();
    for entry in &mut *entries {
        match entry {
            Entry::Write(sequence, change) => {
                chunk.sequence_numbers.push(sequence);
                chunk.changes.push(change);
            }
            Entry::Park(parked) => chunk.parked.push(parked),
        }
        if chunk.len() == *size {
            break;
        }
        if chunk.len() % NUDGE == 0 && started.is_pending() {
            tokio::task::yield_now().await;
            started = std::future::poll_fn(|cx| Poll::Ready(pending.as_mut().poll(cx))).await;
        }
    }
    *size = (*size * 2).min(most);
    (chunk, started)
}

/// Writes one chunk under a savepoint (see [`Writer::write_batch`]): what it wrote and what it
/// parked.
async fn write_chunk(
    transaction: &Transaction<'_>,
    chunk: &Chunk,
    prepared: &mut Prepared,
) -> Result<(Written, Vec<Parked>), tokio_postgres::Error> {
    let mut parked = chunk.parked.clone();
    let mut written = Written::default();
    if !chunk.changes.is_empty() {
        // The savepoint goes out with the chunk's first statement (one round trip).
        let (saved, wrote) = tokio::join!(
            transaction.batch_execute("SAVEPOINT cqrs_chunk"),
            write(transaction, &chunk.changes, prepared)
        );
        saved?;
        match wrote {
            Ok(all) => written = all,
            Err(error) if ErrorClass::of(&error) == ErrorClass::Data => {
                transaction
                    .batch_execute("ROLLBACK TO SAVEPOINT cqrs_chunk")
                    .await?;
                for (sequence, change) in chunk.sequence_numbers.iter().zip(&chunk.changes) {
                    transaction.batch_execute("SAVEPOINT cqrs_row").await?;
                    match write(transaction, std::slice::from_ref(change), prepared).await {
                        Ok(one) => {
                            transaction
                                .batch_execute("RELEASE SAVEPOINT cqrs_row")
                                .await?;
                            written.rows += one.rows;
                            written.deleted += one.deleted;
                            written.stale += one.stale;
                        }
                        Err(error) if ErrorClass::of(&error) == ErrorClass::Data => {
                            transaction
                                .batch_execute("ROLLBACK TO SAVEPOINT cqrs_row")
                                .await?;
                            parked.push(Parked::refused(sequence, change, &describe(&error)));
                        }
                        Err(error) => return Err(error),
                    }
                }
            }
            Err(error) => return Err(error),
        }
    }
    park(transaction, &parked).await?;
    Ok((written, parked))
}

/// Inserts `parked` into [`crate::schema::PARKED_TABLE`]; a record parked before (by its
/// sequence number) is kept as it was.
async fn park(
    transaction: &Transaction<'_>,
    parked: &[Parked],
) -> Result<(), tokio_postgres::Error> {
    if parked.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "INSERT INTO {} (\"sequence_number\", \"pk\", \"sk\", \"version\", \"event_name\", \"reason\", \"record\") \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (\"sequence_number\") DO NOTHING",
        ident(crate::schema::PARKED_TABLE)
    );
    for record in parked {
        let text = |s: &str| crate::rows::storable(s).into_owned();
        let pk = record.pk.as_deref().map(str::as_bytes);
        let sk = record.sk.as_deref().map(str::as_bytes);
        transaction
            .execute(
                &sql,
                &[
                    &text(&record.sequence_number),
                    &pk,
                    &sk,
                    &record.version,
                    &text(&record.event_name),
                    &text(&record.reason),
                    &text(&record.record),
                ],
            )
            .await?;
    }
    Ok(())
}
