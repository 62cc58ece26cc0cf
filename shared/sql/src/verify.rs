//! Comparing the relational read model with the data table, and repairing it (`cqrs verify --sql`,
//! `cqrs rebuild --sql`).
//!
//! Every state of the data table is the row it must be ([`crate::rows::row`]); PostgreSQL is read
//! back from **every** table of the read model it holds ([`tables`]: found in its catalog, so a
//! table whose entity was removed or renamed is read too). An item differs when PostgreSQL lacks it
//! (`missing`), holds an older version (`behind`) or a newer one (`ahead`), holds it in another
//! table than its row goes to, or in two (`misplaced`), holds the same version with other values
//! (`content`: compared in SQL over every column of the table, each expected value cast as a write
//! would cast it; a column the model no longer declares must be `NULL`), or holds a row the data
//! table does not have (`orphan`). An item whose key PostgreSQL cannot store (U+0000) is
//! `unstorable`, and never written.
//!
//! A scan of the data table and a read of PostgreSQL are not one snapshot: while sql-sync writes,
//! a row can be newer than the scan (`ahead`, `orphan`) or removed since (`missing`). So a
//! difference is acted on only as the data table **is**, read again for its key with a consistent
//! read ([`check`], [`repair`]), and a repair is newest-wins as sql-sync's writes are: it writes
//! that state over the same version or an older one, never over a newer one; it removes a row
//! the data table no longer has at the version it had, and records the removal (`cqrs_removed`),
//! never undoing one; it holds each item's lock ([`crate::write::lock_keys`]) while it reads and
//! writes it, so sql-sync's batch of the same item waits for it, or it for the batch.
//!
//! ```no_run
//! # async fn example(client: &mut tokio_postgres::Client, store: &cqrs_store_stand_in::Store, items: Vec<cqrs_item::Item>) {
//! use cqrs_sql::{rows::Rows, verify};
//! let rows = Rows::new(cqrs_model::Model::example());
//! let expected: Vec<_> = items.into_iter().map(|item| rows.row(item)).collect();
//! // The data table's items of some keys, read consistently (here a stand-in for the store's).
//! let reread = |keys: Vec<(String, String)>| async move { store.get(&keys).await };
//! let outcome = verify::reconcile(client, &rows, &expected, true, reread).await.unwrap();
//! println!("{} found, {} repaired, {} remain", outcome.found.len(), outcome.repaired, outcome.remaining.len());
//! # }
//! # mod cqrs_store_stand_in { pub struct Store; impl Store { pub async fn get(&self, _: &[(String, String)]) -> Result<std::collections::HashMap<(String, String), cqrs_item::Item>, String> { Ok(Default::default()) } } }
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;

use cqrs_item::Item;
use tokio_postgres::{Client, error::SqlState, types::ToSql};

use crate::rows::{Row, Rows, key_problem};
use crate::schema::{ENVELOPE, Schema, ident};
use crate::write::{Change, apply_in, lock_id, lock_keys, try_lock_keys};

/// How many keys a repair reads again and writes in one transaction.
const REPAIR_KEYS: usize = 100;

/// How many times a repair's transaction is tried when PostgreSQL broke a deadlock by cancelling
/// it (once it waits for its locks, a sql-sync batch that locks its items chunk by chunk can meet
/// it in a cycle).
const REPAIR_ATTEMPTS: u32 = 5;

/// How many times a repair takes only the free locks of its items (and leaves the others for
/// later, 5 ms, 10 ms, ... on) before it waits for the rest.
const TRY_ROUNDS: u64 = 10;

/// One differing item.
///
/// ```
/// let d = cqrs_sql::verify::SqlDifference {
///     kind: "missing", pk: "LOAN#t1".into(), sk: "L1".into(), data_version: Some(2), sql_version: None,
/// };
/// assert_eq!(d.kind, "missing");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlDifference {
    /// `missing`, `behind`, `ahead`, `misplaced`, `content`, `orphan` or `unstorable`.
    pub kind: &'static str,
    /// The item's partition key.
    pub pk: String,
    /// The item's sort key.
    pub sk: String,
    /// Its version in the data table, if there.
    pub data_version: Option<i64>,
    /// Its (highest) version in PostgreSQL, if there.
    pub sql_version: Option<i64>,
}

/// Why [`repair`] or [`check`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum RepairError<E: std::fmt::Display> {
    /// PostgreSQL refused or failed.
    #[error("the database: {}", database_message(.0))]
    Database(#[from] tokio_postgres::Error),
    /// The data table could not be read again.
    #[error("reading the data table again: {0}")]
    Source(E),
}

/// PostgreSQL's own message of `error` (and its SQLSTATE), or the client's.
fn database_message(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => error.to_string(),
    }
}

/// An item's key: (pk, sk).
type Key = (String, String);

/// Where PostgreSQL holds each item: (pk, sk) to every (table, version) it has for it.
pub type Places = HashMap<(String, String), Vec<(String, i64)>>;

/// The columns every table of the read model has: the envelope and `synced_at`.
fn read_model_columns() -> Vec<String> {
    ENVELOPE
        .iter()
        .map(|(name, _)| name.to_string())
        .chain(["synced_at".to_string()])
        .collect()
}

/// Every table of the relational read model in the connection's schema, by name: each table
/// with every envelope column (and `synced_at`): its entities' tables, those of entities a model
/// no longer declares, and the generic table.
///
/// ```no_run
/// # async fn example(client: &tokio_postgres::Client) {
/// let tables = cqrs_sql::verify::tables(client).await.unwrap();
/// assert!(tables.iter().any(|t| t == "cqrs_items"));
/// # }
/// ```
pub async fn tables(client: &Client) -> Result<Vec<String>, tokio_postgres::Error> {
    let columns = read_model_columns();
    let rows = client
        .query(
            "SELECT c.relname::text FROM pg_class c \
             WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace \
             AND (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 \
                  AND NOT a.attisdropped AND a.attname::text = ANY($1)) = cardinality($1) \
             ORDER BY 1",
            &[&columns],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The columns of `table` (in the connection's schema), in order.
async fn table_columns(client: &Client, table: &str) -> Result<Vec<String>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT a.attname::text FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
             WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace \
             AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&table],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Every row's place and version in PostgreSQL, in every table of the read model ([`tables`]). A
/// key found in two tables is reported as `misplaced` by [`compare`].
///
/// ```no_run
/// # async fn example(client: &tokio_postgres::Client) {
/// let rows = cqrs_sql::verify::read(client).await.unwrap();
/// println!("{} items in PostgreSQL", rows.len());
/// # }
/// ```
pub async fn read(client: &Client) -> Result<Places, tokio_postgres::Error> {
    let mut found = Places::new();
    for table in tables(client).await? {
        for row in client
            .query(
                &format!("SELECT \"pk\", \"sk\", \"version\" FROM {}", ident(&table)),
                &[],
            )
            .await?
        {
            found
                .entry((row.get(0), row.get(1)))
                .or_default()
                .push((table.clone(), row.get(2)));
        }
    }
    Ok(found)
}

/// [`read`] for `keys` only.
async fn read_keys(
    client: &Client,
    tables: &[String],
    keys: &[(String, String)],
) -> Result<Places, tokio_postgres::Error> {
    let mut found = Places::new();
    let (pks, sks): (Vec<&str>, Vec<&str>) = keys
        .iter()
        .map(|(pk, sk)| (pk.as_str(), sk.as_str()))
        .unzip();
    for table in tables {
        for row in client
            .query(
                &format!(
                    "SELECT t.\"pk\", t.\"sk\", t.\"version\" FROM {} t \
                     JOIN unnest($1::text[], $2::text[]) AS k (\"pk\", \"sk\") \
                     ON t.\"pk\" = k.\"pk\" AND t.\"sk\" = k.\"sk\"",
                    ident(table)
                ),
                &[&pks, &sks],
            )
            .await?
        {
            found
                .entry((row.get(0), row.get(1)))
                .or_default()
                .push((table.clone(), row.get(2)));
        }
    }
    Ok(found)
}

/// The keys, among `expected` rows that PostgreSQL holds at the same version in the same table,
/// whose values differ from the expected ones, in any column of the table: one the row does not
/// have (a column of an attribute the model no longer declares) must be `NULL`.
async fn content_differences(
    client: &Client,
    expected: &[&Row],
) -> Result<Vec<(String, String)>, tokio_postgres::Error> {
    let mut by_table: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for row in expected {
        by_table.entry(row.table.as_str()).or_default().push(row);
    }
    let mut differing = Vec::new();
    for (table, rows) in by_table {
        let columns: Vec<String> = rows[0].columns.iter().map(|c| ident(c)).collect();
        let t_list: Vec<String> = columns.iter().map(|c| format!("t.{c}")).collect();
        let v_list: Vec<String> = columns.iter().map(|c| format!("v.{c}")).collect();
        let retired: Vec<String> = table_columns(client, table)
            .await?
            .into_iter()
            .filter(|c| c != "synced_at" && !rows[0].columns.contains(c))
            .map(|c| format!(" OR t.{} IS NOT NULL", ident(&c)))
            .collect();
        let sql = format!(
            "SELECT v.\"pk\", v.\"sk\" FROM ({}) AS v JOIN {} t \
             ON t.\"pk\" = v.\"pk\" AND t.\"sk\" = v.\"sk\" \
             WHERE ({}) IS DISTINCT FROM ({}){}",
            crate::write::unnest(&rows[0].columns, &rows[0].types),
            ident(table),
            t_list.join(", "),
            v_list.join(", "),
            retired.concat(),
        );
        let arrays = crate::write::arrays(&rows);
        let params: Vec<&(dyn ToSql + Sync)> =
            arrays.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
        for row in client.query(&sql, &params).await? {
            differing.push((row.get(0), row.get(1)));
        }
    }
    Ok(differing)
}

/// The differences between `expected` rows and what PostgreSQL holds (`found`: what is left of
/// it once the keys of `expected` are taken out is orphans).
async fn differences(
    client: &Client,
    expected: &[Row],
    mut found: Places,
) -> Result<Vec<SqlDifference>, tokio_postgres::Error> {
    let mut differences = Vec::new();
    let mut same_version = Vec::new();
    for row in expected {
        let (pk, sk) = row.key();
        let version = row.version();
        let difference = |kind, sql_version| SqlDifference {
            kind,
            pk: pk.to_string(),
            sk: sk.to_string(),
            data_version: Some(version),
            sql_version,
        };
        if key_problem(pk, sk).is_some() {
            differences.push(difference("unstorable", None));
            continue;
        }
        let Some(places) = found.remove(&(pk.to_string(), sk.to_string())) else {
            differences.push(difference("missing", None));
            continue;
        };
        let highest = places.iter().map(|(_, v)| *v).max();
        let here = places.iter().find(|(table, _)| *table == row.table);
        match (here, places.len()) {
            (Some((_, v)), 1) if *v == version => same_version.push(row),
            (Some((_, v)), 1) if *v < version => differences.push(difference("behind", Some(*v))),
            (Some((_, v)), 1) => differences.push(difference("ahead", Some(*v))),
            (_, _) => differences.push(difference("misplaced", highest)),
        }
    }
    for (pk, sk) in content_differences(client, &same_version).await? {
        differences.push(SqlDifference {
            kind: "content",
            data_version: same_version
                .iter()
                .find(|r| r.key() == (pk.as_str(), sk.as_str()))
                .map(|r| r.version()),
            sql_version: None,
            pk,
            sk,
        });
    }
    for ((pk, sk), places) in found {
        differences.push(SqlDifference {
            kind: "orphan",
            pk,
            sk,
            data_version: None,
            sql_version: places.iter().map(|(_, v)| *v).max(),
        });
    }
    differences.sort_by(|a, b| (&a.pk, &a.sk, a.kind).cmp(&(&b.pk, &b.sk, b.kind)));
    Ok(differences)
}

/// Compares the rows the data table's states must be (`expected`, read before) with what
/// PostgreSQL holds now; returns the differences in key order. While sql-sync writes, some are
/// only the two reads' distance in time: [`check`] tells them apart.
///
/// ```no_run
/// # async fn example(client: &tokio_postgres::Client, model: &cqrs_model::Model, items: Vec<cqrs_item::Item>) {
/// let schema = cqrs_sql::schema::Schema::of(model);
/// let expected: Vec<_> = items.iter().map(|i| cqrs_sql::rows::row(model, &schema, i)).collect();
/// let differences = cqrs_sql::verify::compare(client, &schema, &expected).await.unwrap();
/// println!("{} differences", differences.len());
/// # }
/// ```
pub async fn compare(
    client: &Client,
    // Kept for callers; every table of the read model PostgreSQL holds is read ([`tables`]).
    _schema: &Schema,
    expected: &[Row],
) -> Result<Vec<SqlDifference>, tokio_postgres::Error> {
    let found = read(client).await?;
    differences(client, expected, found).await
}

/// The keys of `differences`, each once, in order, without those PostgreSQL cannot hold.
fn keys_of(differences: &[SqlDifference]) -> Vec<(String, String)> {
    differences
        .iter()
        .filter(|d| key_problem(&d.pk, &d.sk).is_none())
        .map(|d| (d.pk.clone(), d.sk.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The differences that remain for `keys` as they are now: the data table's items of those keys
/// read again (`reread`, a consistent read), and PostgreSQL read again.
///
/// ```no_run
/// # async fn example(client: &tokio_postgres::Client, rows: &cqrs_sql::rows::Rows) {
/// let reread = |_keys: Vec<(String, String)>| async {
///     Ok::<_, String>(std::collections::HashMap::new()) // the data table holds none of them
/// };
/// let keys = vec![("LOAN#t1".to_string(), "L1".to_string())];
/// let remaining = cqrs_sql::verify::check(client, rows, &keys, reread).await.unwrap();
/// assert!(remaining.iter().all(|d| d.kind == "orphan"));
/// # }
/// ```
pub async fn check<F, Fut, E>(
    client: &Client,
    rows: &Rows,
    keys: &[(String, String)],
    mut reread: F,
) -> Result<Vec<SqlDifference>, RepairError<E>>
where
    F: FnMut(Vec<(String, String)>) -> Fut,
    Fut: Future<Output = Result<HashMap<(String, String), Item>, E>>,
    E: std::fmt::Display,
{
    let tables = tables(client).await?;
    let mut remaining = Vec::new();
    for chunk in keys.chunks(REPAIR_KEYS) {
        let states = reread(chunk.to_vec()).await.map_err(RepairError::Source)?;
        let expected: Vec<Row> = chunk
            .iter()
            .filter_map(|key| states.get(key).map(|item| rows.row(item.clone())))
            .collect();
        let found = read_keys(client, &tables, chunk).await?;
        remaining.extend(differences(client, &expected, found).await?);
    }
    remaining.sort_by(|a, b| (&a.pk, &a.sk, a.kind).cmp(&(&b.pk, &b.sk, b.kind)));
    Ok(remaining)
}

/// Repairs the items of `differences` newest-wins, as the data table holds them now (`reread`: a
/// consistent read of some keys' items; a key it does not return is not in the data table), a
/// transaction per 100 items at most, each item locked while it is written: first those whose lock
/// is free ([`crate::write::try_lock_keys`]: a repair does not wait while it holds locks), the
/// others in a later transaction, waiting for them in the end ([`lock_keys`]):
///
/// - an item the data table holds: its rows of that version or older deleted from every table of
///   the read model, then its row written through sql-sync's newest-wins statement (not over a
///   newer row, nor over a removal of its version or a newer one);
/// - an item it no longer holds: removed at the highest version PostgreSQL had when `differences`
///   were found (its rows of that version or older deleted from every table, the removal recorded,
///   never lowered), so that a state written since (a newer one) stays.
///
/// Returns how many items it wrote or removed. Rows newer than the data table's state stay:
/// [`check`] names them `ahead` afterwards.
///
/// ```no_run
/// # async fn example(client: &mut tokio_postgres::Client, rows: &cqrs_sql::rows::Rows, differences: Vec<cqrs_sql::verify::SqlDifference>) {
/// let reread = |_keys: Vec<(String, String)>| async {
///     Ok::<_, String>(std::collections::HashMap::new())
/// };
/// let repaired = cqrs_sql::verify::repair(client, rows, &differences, reread).await.unwrap();
/// println!("{repaired} items repaired");
/// # }
/// ```
pub async fn repair<F, Fut, E>(
    client: &mut Client,
    rows: &Rows,
    differences: &[SqlDifference],
    mut reread: F,
) -> Result<usize, RepairError<E>>
where
    F: FnMut(Vec<(String, String)>) -> Fut,
    Fut: Future<Output = Result<HashMap<(String, String), Item>, E>>,
    E: std::fmt::Display,
{
    if differences.is_empty() {
        return Ok(0);
    }
    let tables = tables(client).await?;
    let mut seen: HashMap<(&str, &str), i64> = HashMap::new();
    for d in differences {
        if let Some(v) = d.sql_version {
            let highest = seen.entry((d.pk.as_str(), d.sk.as_str())).or_insert(v);
            *highest = (*highest).max(v);
        }
    }
    let mut repaired = 0;
    for chunk in keys_of(differences).chunks(REPAIR_KEYS) {
        let states = reread(chunk.to_vec()).await.map_err(RepairError::Source)?;
        // The keys not repaired yet: first each key whose lock is free (a repair never waits
        // while it holds locks, so it never closes a cycle with a sql-sync batch that locks its
        // items chunk by chunk); after [`TRY_ROUNDS`], the rest waiting for their locks.
        let mut pending: Vec<(String, String)> = chunk.to_vec();
        let (mut round, mut deadlocks) = (0, 0);
        while !pending.is_empty() {
            round += 1;
            let wait = round > TRY_ROUNDS;
            match repair_chunk(client, rows, &tables, &pending, &states, &seen, wait).await {
                Ok((n, left)) => {
                    repaired += n;
                    pending = left;
                    if !pending.is_empty() {
                        tokio::time::sleep(std::time::Duration::from_millis(5 * round)).await;
                    }
                }
                Err(e)
                    if e.code() == Some(&SqlState::T_R_DEADLOCK_DETECTED)
                        && deadlocks + 1 < REPAIR_ATTEMPTS =>
                {
                    deadlocks += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(repaired)
}

/// One transaction of [`repair`].
/// Repairs the keys of `pending` whose lock it takes (all of them when it may `wait` for them);
/// returns how many items it wrote or removed, and the keys it left for another transaction.
async fn repair_chunk(
    client: &mut Client,
    rows: &Rows,
    tables: &[String],
    pending: &[(String, String)],
    states: &HashMap<(String, String), Item>,
    seen: &HashMap<(&str, &str), i64>,
    wait: bool,
) -> Result<(usize, Vec<(String, String)>), tokio_postgres::Error> {
    let transaction = client.transaction().await?;
    let pairs = pending.iter().map(|(pk, sk)| (pk.as_str(), sk.as_str()));
    let (keys, left): (Vec<Key>, Vec<Key>) = if wait {
        lock_keys(&transaction, pairs).await?;
        (pending.to_vec(), Vec::new())
    } else {
        let taken = try_lock_keys(&transaction, pairs).await?;
        pending
            .iter()
            .cloned()
            .partition(|(pk, sk)| taken.contains(&lock_id(pk, sk)))
    };
    // Each key's version: the data table's state's, or the one PostgreSQL had of an item the
    // data table no longer holds. Rows of that version or older go, everywhere.
    let mut changes = Vec::new();
    let (mut pks, mut sks, mut versions) = (Vec::new(), Vec::new(), Vec::new());
    for key in &keys {
        let (version, change) = match states.get(key) {
            Some(item) => {
                let row = rows.row(item.clone());
                (row.version(), Change::Upsert(row))
            }
            None => match seen.get(&(key.0.as_str(), key.1.as_str())) {
                Some(version) => (
                    *version,
                    Change::Remove {
                        table: None,
                        pk: key.0.clone(),
                        sk: key.1.clone(),
                        version: *version,
                    },
                ),
                None => continue,
            },
        };
        pks.push(key.0.as_str());
        sks.push(key.1.as_str());
        versions.push(version);
        changes.push(change);
    }
    for table in tables {
        transaction
            .execute(
                &format!(
                    "DELETE FROM {} t USING unnest($1::text[], $2::text[], $3::bigint[]) \
                     AS k (\"pk\", \"sk\", \"version\") \
                     WHERE t.\"pk\" = k.\"pk\" AND t.\"sk\" = k.\"sk\" AND t.\"version\" <= k.\"version\"",
                    ident(table)
                ),
                &[&pks, &sks, &versions],
            )
            .await?;
    }
    let written = apply_in(&transaction, &changes).await?;
    transaction.commit().await?;
    let removals = changes
        .iter()
        .filter(|c| matches!(c, Change::Remove { .. }))
        .count();
    Ok((written.rows as usize + removals, left))
}

/// What [`reconcile`] found and did.
///
/// ```
/// let nothing = cqrs_sql::verify::Reconciled::default();
/// assert!(nothing.found.is_empty() && nothing.remaining.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// The differences: without a repair, each confirmed by reading its item again on both sides;
    /// with one, as the scan and PostgreSQL's read found them (the repair reads each again).
    pub found: Vec<SqlDifference>,
    /// How many items the repair wrote or removed.
    pub repaired: usize,
    /// The differences that remain after the repair, read again on both sides (without a repair:
    /// `found`).
    pub remaining: Vec<SqlDifference>,
}

/// `verify --sql` (`repair` false) and `rebuild --sql` (`repair` true): the data table's rows
/// (`expected`, from a scan) compared with PostgreSQL ([`compare`]); without `repair`, each
/// difference confirmed as both sides are now ([`check`]); with it, repaired ([`repair`], which
/// reads each item again) and checked again. See the module's example.
pub async fn reconcile<F, Fut, E>(
    client: &mut Client,
    rows: &Rows,
    expected: &[Row],
    repair_them: bool,
    mut reread: F,
) -> Result<Reconciled, RepairError<E>>
where
    F: FnMut(Vec<(String, String)>) -> Fut,
    Fut: Future<Output = Result<HashMap<(String, String), Item>, E>>,
    E: std::fmt::Display,
{
    let candidates = compare(client, rows.schema(), expected).await?;
    let unstorable: Vec<SqlDifference> = candidates
        .iter()
        .filter(|d| d.kind == "unstorable")
        .cloned()
        .collect();
    if !repair_them {
        let mut found = check(client, rows, &keys_of(&candidates), &mut reread).await?;
        found.extend(unstorable);
        found.sort_by(|a, b| (&a.pk, &a.sk, a.kind).cmp(&(&b.pk, &b.sk, b.kind)));
        return Ok(Reconciled {
            remaining: found.clone(),
            found,
            repaired: 0,
        });
    }
    // The repair reads each item again itself: the scan's differences go to it as they are (an
    // empty read model of a large table is read twice more, not three times).
    let found = candidates;
    if found.is_empty() {
        return Ok(Reconciled::default());
    }
    let repaired = repair(client, rows, &found, &mut reread).await?;
    let mut remaining = check(client, rows, &keys_of(&found), &mut reread).await?;
    remaining.extend(unstorable);
    remaining.sort_by(|a, b| (&a.pk, &a.sk, a.kind).cmp(&(&b.pk, &b.sk, b.kind)));
    Ok(Reconciled {
        found,
        repaired,
        remaining,
    })
}
