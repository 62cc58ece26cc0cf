//! `cqrs rebuild --sql` beside a live writer: for 30 s a writer puts new versions of 40 items into
//! the data table (some that do not fit their entity and go to the generic table, some removed as
//! DynamoDB's TTL removes them, some created again), and hands each change in order to a sql-sync
//! that writes them into PostgreSQL in batches, a little late (as the data table's stream does);
//! meanwhile the relational read model is rebuilt from the data table again and again (scan,
//! compare, repair, check), as `cqrs rebuild --sql` does it.
//!
//! A trigger records every version each row of PostgreSQL takes. In the end, once the writer has
//! stopped and sql-sync has caught up, `verify --sql` finds no difference, and no row's version
//! ever went down (a repair wrote no older state over a newer one; a removed item did not come
//! back).
//!
//! `RELIABILITY_SQL_REBUILD_SECS` changes the 30 s; `RELIABILITY_SEED` replays a run's choices.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Rng, scan_items, seed};
use cqrs_item::{Item, Value};
use cqrs_model::Model;
use cqrs_sql::rows::Rows;
use cqrs_sql::write::{Change, Writer};
use tokio::sync::mpsc;
use tokio_postgres::{Client, NoTls};

const DEFAULT_SEED: u64 = 0x5EED_5A1D_2026;
const KEYS: u64 = 40;

/// How long the writer and the rebuilds run.
fn run_for() -> Duration {
    let secs = std::env::var("RELIABILITY_SQL_REBUILD_SECS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(30);
    Duration::from_secs(secs)
}

/// Version `version` of order `n` as data-sync writes it into the data table; one that does not
/// fit its entity (a status the model does not know) when `fits` is false.
fn order(n: u64, version: i64, fits: bool) -> Item {
    let id = format!("O{n:03}");
    let mut item = Item::example();
    item.pk = "ORDER#t1".into();
    item.sk = cqrs_keys::add_sort_key_version(&format!("ORDER#{id}"), version);
    item.id = cqrs_keys::generate_id("ORDER#t1", &format!("ORDER#{id}"));
    item.code = id.clone();
    item.name = format!("{id} v{version}");
    item.version = version;
    item.tenant_code = "t1".into();
    item.item_type = "ORDER".into();
    item.attributes.clear();
    item.attributes
        .insert("orderId".into(), Value::from(id.as_str()));
    item.attributes.insert("userId".into(), Value::from("u1"));
    let status = if fits { "PAID" } else { "LOST" };
    item.attributes.insert("status".into(), Value::from(status));
    item.attributes
        .insert("totalCents".into(), Value::from(version));
    item.into_data_item()
}

async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("connects");
    tokio::spawn(connection);
    client
}

/// A table and a trigger per read-model table that record every version a row takes.
async fn watch_versions(client: &Client, tables: &[String]) {
    client
        .batch_execute(
            "CREATE TABLE watched_versions (id bigserial PRIMARY KEY, tbl text NOT NULL, \
               pk text NOT NULL, sk text NOT NULL, version bigint NOT NULL);
             CREATE FUNCTION watch_version() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               INSERT INTO watched_versions (tbl, pk, sk, version)
               VALUES (TG_TABLE_NAME, NEW.pk, NEW.sk, NEW.version);
               RETURN NULL;
             END $$;",
        )
        .await
        .unwrap();
    for table in tables {
        client
            .batch_execute(&format!(
                "CREATE TRIGGER watch_version AFTER INSERT OR UPDATE ON {} \
                 FOR EACH ROW EXECUTE FUNCTION watch_version()",
                cqrs_sql::schema::ident(table)
            ))
            .await
            .unwrap();
    }
}

/// Every key whose versions (in the order PostgreSQL wrote them, in any table) went down once at
/// least: (pk, sk, the version before, the lower one after).
async fn versions_that_went_down(client: &Client) -> (usize, Vec<(String, String, i64, i64)>) {
    let rows = client
        .query(
            "SELECT pk, sk, version FROM watched_versions ORDER BY id",
            &[],
        )
        .await
        .unwrap();
    let mut last: HashMap<(String, String), i64> = HashMap::new();
    let mut down = Vec::new();
    for row in &rows {
        let key: (String, String) = (row.get(0), row.get(1));
        let version: i64 = row.get(2);
        if let Some(before) = last.get(&key)
            && version < *before
        {
            down.push((key.0.clone(), key.1.clone(), *before, version));
        }
        last.insert(key, version);
    }
    (rows.len(), down)
}

#[derive(Default)]
struct Counts {
    puts: AtomicUsize,
    removals: AtomicUsize,
    to_generic: AtomicUsize,
    batches: AtomicUsize,
    /// Batches PostgreSQL refused (a deadlock it broke), written again as Lambda retries them.
    retried: AtomicUsize,
}

/// The writer: new versions, versions that do not fit, removals and re-creations, each handed to
/// sql-sync in order once the data table holds it.
async fn writer(
    tables: cqrs_testkit::TestTables,
    rows: Rows,
    seed: u64,
    stop: Arc<AtomicBool>,
    changes: mpsc::UnboundedSender<Change>,
    counts: Arc<Counts>,
) {
    let mut rng = Rng::new(seed);
    // Each key's last version, and whether the data table holds it.
    let mut keys: HashMap<u64, (i64, bool)> = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        let n = rng.below(KEYS);
        let (version, present) = keys.get(&n).copied().unwrap_or((0, false));
        if present && rng.chance(80) {
            // The item expires: DynamoDB's TTL deletes it, the stream says REMOVE.
            let item = order(n, version, true);
            tables
                .client
                .delete_item()
                .table_name(&tables.data)
                .key("pk", item.pk.clone().into_attr())
                .key("sk", item.sk.clone().into_attr())
                .send()
                .await
                .expect("DeleteItem");
            keys.insert(n, (version, false));
            counts.removals.fetch_add(1, Ordering::Relaxed);
            changes
                .send(Change::Remove {
                    table: Some("order".into()),
                    pk: item.pk,
                    sk: item.sk,
                    version,
                })
                .ok();
            continue;
        }
        let fits = !rng.chance(150);
        let item = order(n, version + 1, fits);
        tables
            .client
            .put_item()
            .table_name(&tables.data)
            .set_item(Some(item.to_attributes().expect("an item")))
            .send()
            .await
            .expect("PutItem");
        keys.insert(n, (version + 1, true));
        counts.puts.fetch_add(1, Ordering::Relaxed);
        if !fits {
            counts.to_generic.fetch_add(1, Ordering::Relaxed);
        }
        changes.send(Change::Upsert(rows.row(item))).ok();
    }
}

trait IntoAttr {
    fn into_attr(self) -> aws_sdk_dynamodb::types::AttributeValue;
}

impl IntoAttr for String {
    fn into_attr(self) -> aws_sdk_dynamodb::types::AttributeValue {
        aws_sdk_dynamodb::types::AttributeValue::S(self)
    }
}

/// sql-sync: the changes in order, in batches of up to 100, each written 0 to 20 ms late.
async fn sql_sync(
    url: String,
    seed: u64,
    mut changes: mpsc::UnboundedReceiver<Change>,
    counts: Arc<Counts>,
) {
    let mut rng = Rng::new(seed ^ 0x5A5A);
    let mut writer = Writer::new(connect(&url).await);
    while let Some(first) = changes.recv().await {
        tokio::time::sleep(Duration::from_millis(rng.below(21))).await;
        let mut batch = vec![first];
        while batch.len() < 100 {
            match changes.try_recv() {
                Ok(change) => batch.push(change),
                Err(_) => break,
            }
        }
        // Lambda retries a batch that failed; a deadlock PostgreSQL broke is the only failure
        // expected here (any other stops the test).
        let mut attempts = 0;
        while let Err(error) = writer.apply(&batch).await {
            let deadlock =
                error.code() == Some(&tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED);
            attempts += 1;
            assert!(deadlock && attempts < 100, "sql-sync's batch: {error:?}");
            counts.retried.fetch_add(1, Ordering::Relaxed);
        }
        counts.batches.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the rebuilds did, summed.
#[derive(Default, Debug)]
struct Rebuilds {
    runs: usize,
    found: usize,
    repaired: usize,
    remaining: usize,
    /// Rebuilds that stopped with an error.
    failed: usize,
}

/// One `cqrs rebuild --sql` (as the CLI runs it): the data table scanned, compared with
/// PostgreSQL, each difference confirmed by reading its item again on both sides (a consistent
/// read of the data table), repaired newest-wins, and checked again.
async fn rebuild_once(
    tables: &cqrs_testkit::TestTables,
    store: &cqrs_store::Store,
    client: &mut Client,
    rows: &Rows,
    totals: &mut Rebuilds,
) {
    let items = scan_items(tables, &tables.data).await;
    let expected: Vec<_> = items.into_iter().map(|item| rows.row(item)).collect();
    let reread = |keys: Vec<(String, String)>| async move { store.get_data_items(&keys).await };
    let outcome = match cqrs_sql::verify::reconcile(client, rows, &expected, true, reread).await {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("a rebuild stopped: {error}");
            totals.failed += 1;
            return;
        }
    };
    totals.runs += 1;
    totals.found += outcome.found.len();
    totals.repaired += outcome.repaired;
    totals.remaining += outcome.remaining.len();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_beside_a_writer_never_lowers_a_version_and_leaves_no_difference() {
    let seed = seed(DEFAULT_SEED);
    let run = run_for();
    let tables = cqrs_testkit::fresh_tables().await;
    let pg = cqrs_local_stack::postgres::Throwaway::start("reliability-sql-rebuild")
        .expect("a cluster starts");
    let url = pg.instance().url();
    let model = Model::example();
    let rows = Rows::new(model.clone());
    let v1 = cqrs_sql::migrate::plan(None, rows.schema())
        .unwrap()
        .unwrap();
    let mut admin = connect(&url).await;
    cqrs_sql::migrate::apply(&mut admin, &[(1, "V1__model.sql".into(), v1)])
        .await
        .unwrap();
    let watched: Vec<String> = rows
        .schema()
        .tables
        .iter()
        .map(|t| t.name.clone())
        .chain([cqrs_sql::schema::GENERIC_TABLE.to_string()])
        .collect();
    watch_versions(&admin, &watched).await;

    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let (send, receive) = mpsc::unbounded_channel();
    let writing = tokio::spawn(writer(
        tables.clone(),
        rows.clone(),
        seed,
        stop.clone(),
        send,
        counts.clone(),
    ));
    let syncing = tokio::spawn(sql_sync(url.clone(), seed, receive, counts.clone()));

    let started = Instant::now();
    let mut rebuilds = Rebuilds::default();
    let mut rebuilder = connect(&url).await;
    let store = common::store(&tables);
    while started.elapsed() < run {
        rebuild_once(&tables, &store, &mut rebuilder, &rows, &mut rebuilds).await;
    }
    stop.store(true, Ordering::Relaxed);
    writing.await.unwrap();
    syncing.await.unwrap();

    // `verify --sql` once everything is written.
    let items = scan_items(&tables, &tables.data).await;
    let expected: Vec<_> = items.iter().map(|item| rows.row(item.clone())).collect();
    let differences = cqrs_sql::verify::compare(&admin, rows.schema(), &expected)
        .await
        .unwrap();
    let (watched_versions, down) = versions_that_went_down(&admin).await;
    println!(
        "sql rebuild beside a writer: {:.0?}: {} versions put, {} of them to the generic table, {} \
         removals, {} sql-sync batches ({} written again after a deadlock); {} rebuilds ({} \
         stopped by an error) found {} differences, repaired {}, {} remained right after a repair \
         (the writer moving on); then verify --sql: {} items, {} differences; {} row versions \
         watched, {} went down (seed {seed})",
        started.elapsed(),
        counts.puts.load(Ordering::Relaxed),
        counts.to_generic.load(Ordering::Relaxed),
        counts.removals.load(Ordering::Relaxed),
        counts.batches.load(Ordering::Relaxed),
        counts.retried.load(Ordering::Relaxed),
        rebuilds.runs,
        rebuilds.failed,
        rebuilds.found,
        rebuilds.repaired,
        rebuilds.remaining,
        items.len(),
        differences.len(),
        watched_versions,
        down.len(),
    );
    assert!(rebuilds.runs > 1 && counts.puts.load(Ordering::Relaxed) > 0);
    assert_eq!(
        (rebuilds.failed, counts.retried.load(Ordering::Relaxed)),
        (0, 0),
        "no rebuild failed, no sql-sync batch met a deadlock (each takes its items' locks in one order)"
    );
    assert!(
        differences.is_empty(),
        "verify --sql after the run (seed {seed}): {:?}",
        &differences[..differences.len().min(5)]
    );
    assert!(
        down.is_empty(),
        "versions went down (seed {seed}), (pk, sk, before, after): {:?}",
        &down[..down.len().min(5)]
    );
}
