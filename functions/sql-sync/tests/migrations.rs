//! sql-sync's cold-start migrations against a real PostgreSQL (one throwaway cluster for the
//! file, a database per test):
//!
//! - a rollback keeps working: a function that knows V1..V2 starts on a database a newer release
//!   took to V3, says so at warn level, and writes its batches;
//! - a migration edited after it was applied is still refused, whether or not there is something
//!   else to apply;
//! - a migration that must wait for a table a long transaction uses (an `ALTER TABLE` behind a
//!   report query) fails fast with SQLSTATE 55P03 (`lock_timeout`) instead of queueing every
//!   writer behind it; nothing of it is applied, the lock and the session's settings are released,
//!   and the next try applies it.

mod common;

use common::{Logs, borrowed};
use std::sync::{Arc, Mutex, Weak};

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use cqrs_item::{Item, Value};
use cqrs_local_stack::postgres::Throwaway;
use cqrs_model::Model;
use cqrs_sql::{migrate, schema::Schema};
use cqrs_sql_sync::SqlSync;
use tokio_postgres::{Client, NoTls};

const MODEL: &str = r#"
[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
attributes.loanId = { type = "string", required = true, max = 26 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }
"#;

/// The file's cluster, shared by the tests that run at the same time; stopped (its folder
/// removed) when the last of them drops it, also when one fails.
static CLUSTER: Mutex<Weak<Throwaway>> = Mutex::new(Weak::new());

/// A database of the test's own on the file's cluster: (the cluster, its URL, an admin connection).
async fn database(name: &str) -> (Arc<Throwaway>, String, Client) {
    let pg = {
        let mut shared = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
        match shared.upgrade() {
            Some(pg) => pg,
            None => {
                let pg = Arc::new(Throwaway::start("cqrs-sql-sync-migrations").unwrap());
                *shared = Arc::downgrade(&pg);
                pg
            }
        }
    };
    let (root, connection) = tokio_postgres::connect(&pg.url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    root.batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    // The reader role is the cluster's: made once here, so that the tests' first migrations,
    // in their own databases at the same time, do not race on it (the race test has its own
    // cluster).
    root.batch_execute(
        "DO $$ BEGIN CREATE ROLE cqrs_reader NOLOGIN; EXCEPTION WHEN OTHERS THEN NULL; END $$",
    )
    .await
    .unwrap();
    let url = format!(
        "{}/{name}",
        pg.url()
            .strip_suffix("/postgres")
            .expect("the postgres database")
    );
    let (admin, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    (pg, url, admin)
}

/// The model's revisions (each adds an attribute to `loan`): the last model and the migrations
/// leading to it.
fn revisions(n: usize) -> (Model, Vec<(u32, String, String)>) {
    let mut text = MODEL.to_string();
    let mut before: Option<Schema> = None;
    let mut out = Vec::new();
    for k in 0..n {
        if k > 0 {
            text.push_str(&format!("attributes.extra{k} = {{ type = \"string\" }}\n"));
        }
        let schema = Schema::of(&Model::parse(&text).unwrap());
        let sql = migrate::plan(before.as_ref(), &schema).unwrap().unwrap();
        out.push((k as u32 + 1, format!("V{}__model.sql", k + 1), sql));
        before = Some(schema);
    }
    (Model::parse(&text).unwrap(), out)
}

async fn history(admin: &Client) -> Vec<i32> {
    admin
        .query(
            &format!(
                "SELECT version FROM {} ORDER BY version",
                migrate::HISTORY_TABLE
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

fn loan(id: &str, n: u64) -> EventRecord {
    let mut item = Item::example();
    item.pk = "LOAN#t1".into();
    item.sk = id.into();
    item.id = cqrs_keys::generate_id("LOAN#t1", id);
    (item.tenant_code, item.item_type, item.version) = ("t1".into(), "LOAN".into(), 1);
    item.attributes.clear();
    item.attributes.insert("loanId".into(), Value::from(id));
    item.attributes.insert("status".into(), Value::from("out"));
    item.attributes.insert("extra1".into(), Value::from("x"));
    let mut record = EventRecord::default();
    record.event_name = "INSERT".into();
    record.change.sequence_number = Some(format!("{n:021}"));
    record.change.new_image = item.to_attributes().unwrap().into();
    record
}

#[tokio::test]
async fn a_function_older_than_the_database_starts_and_writes() {
    let (_pg, url, admin) = database("rollback").await;
    let (newer, three) = revisions(3);
    let (older, two) = revisions(2);
    // The newer release deployed: V1..V3 applied.
    let sync = SqlSync::new(newer, &url);
    assert_eq!(sync.migrate(&borrowed(&three)).await.unwrap(), 3);
    drop(sync);

    // Rolled back to the release that knows V1..V2.
    let (logs, _guard) = Logs::capture();
    let sync = SqlSync::new(older.clone(), &url);
    assert_eq!(sync.migrate(&borrowed(&two)).await.unwrap(), 0);
    let text = logs.text();
    assert!(
        text.contains("WARN") && text.contains("V3__model"),
        "the migration the function does not know is logged at warn level:\n{text}"
    );
    println!(
        "{}",
        text.lines()
            .find(|l| l.contains("V3__model"))
            .unwrap_or_default()
    );
    let mut event = Event::default();
    event.records = vec![loan("L1", 1), loan("L2", 2)];
    let response = sync.handle(event).await;
    assert!(
        response.batch_item_failures.is_empty(),
        "{:?}",
        response.batch_item_failures
    );
    let rows: i64 = admin
        .query_one("SELECT count(*) FROM loan WHERE extra1 = 'x'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 2, "the batch is written");

    // The same when the start must take the lock (sql-sync's own table is missing: a stack
    // deployed before it existed): what the database has beyond the function stops nothing.
    admin.batch_execute("DROP TABLE cqrs_parked").await.unwrap();
    let sync = SqlSync::new(older, &url);
    assert_eq!(sync.migrate(&borrowed(&two)).await.unwrap(), 0);
    let parked: i64 = admin
        .query_one("SELECT count(*) FROM cqrs_parked", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(parked, 0, "made again");
    assert_eq!(history(&admin).await, [1, 2, 3]);
}

#[tokio::test]
async fn a_migration_edited_after_it_was_applied_is_refused() {
    let (_pg, url, admin) = database("edited").await;
    let (model, mut two) = revisions(2);
    let sync = SqlSync::new(model.clone(), &url);
    assert_eq!(sync.migrate(&borrowed(&two[..1])).await.unwrap(), 1);
    two[0].2.push_str("\n-- edited\n");
    // Nothing else to apply (a start that takes no lock)...
    let error = SqlSync::new(model.clone(), &url)
        .migrate(&borrowed(&two[..1]))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("V1__model"), "{error}");
    assert!(error.to_string().contains("checksum"), "{error}");
    println!("{error}");
    // ...or V2 to apply with it: refused, V2 not applied.
    let error = SqlSync::new(model, &url)
        .migrate(&borrowed(&two))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("V1__model"), "{error}");
    assert!(error.to_string().contains("checksum"), "{error}");
    assert_eq!(history(&admin).await, [1]);
}

#[tokio::test]
async fn a_migration_behind_a_long_transaction_fails_fast_and_applies_nothing() {
    let (_pg, url, mut admin) = database("locked").await;
    let (model, two) = revisions(2);
    let sync = SqlSync::new(model.clone(), &url);
    assert_eq!(sync.migrate(&borrowed(&two[..1])).await.unwrap(), 1);

    // A long report query: its transaction holds the table V2 alters.
    let report = admin.transaction().await.unwrap();
    report
        .query("SELECT count(*) FROM loan", &[])
        .await
        .unwrap();

    let (mut client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    let error = migrate::apply(&mut client, &two).await.unwrap_err();
    assert!(
        matches!(&error, migrate::MigrateError::LockTimeout { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("55P03"), "{error}");
    println!("{error}");
    // The session is as it was: its settings reset, the lock released.
    let timeout: String = client
        .query_one("SHOW lock_timeout", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(timeout, "0");
    let held: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(held, 0);

    // sql-sync's cold start: the same, with PostgreSQL's reason.
    let error = SqlSync::new(model.clone(), &url)
        .migrate(&borrowed(&two))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("55P03"), "{error}");
    report.commit().await.unwrap();
    assert_eq!(history(&admin).await, [1], "nothing of V2 applied");

    // The report done, the next try (Lambda's retry) applies V2.
    assert_eq!(sync.migrate(&borrowed(&two)).await.unwrap(), 1);
    assert_eq!(history(&admin).await, [1, 2]);
}
