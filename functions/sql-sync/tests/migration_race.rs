//! Several sql-sync cold starts at once against one fresh cluster (containers of several shards
//! starting together after a deploy) all succeed, and each migration is applied once: one runner
//! at a time ([`cqrs_sql::migrate::MIGRATION_LOCK`], a session advisory lock), the others find the
//! history up to date under the lock. A start with nothing to apply takes no lock; one with a
//! migration to apply waits for it a bounded time, then fails with SQLSTATE 55P03 (Lambda retries).
//! One throwaway cluster of the file's own (its first start races on `CREATE ROLE` too).

mod common;

use common::borrowed;
use cqrs_local_stack::postgres::Throwaway;
use cqrs_model::Model;
use cqrs_sql::{migrate, schema::Schema};
use cqrs_sql_sync::{SqlSync, SyncError};
use tokio_postgres::NoTls;

const MODEL: &str = r#"
[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
attributes.loanId = { type = "string", required = true, max = 26 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }

[entities.branch]
pk = "BRANCH#common"
sk = "{branchId}"
common = true
attributes.branchId = { type = "string", required = true }
"#;

/// The model's revisions, each adding an attribute to `loan`; the migrations leading to the last.
fn migrations(revisions: usize) -> (Model, Vec<(u32, String, String)>) {
    let mut text = MODEL.to_string();
    let mut before: Option<Schema> = None;
    let mut out = Vec::new();
    for n in 0..revisions {
        if n > 0 {
            text = text.replace(
                "\n\n[entities.branch]",
                &format!("\nattributes.extra{n} = {{ type = \"string\" }}\n\n[entities.branch]"),
            );
        }
        let schema = Schema::of(&Model::parse(&text).unwrap());
        let sql = migrate::plan(before.as_ref(), &schema).unwrap().unwrap();
        out.push((n as u32 + 1, format!("V{}__model.sql", n + 1), sql));
        before = Some(schema);
    }
    (Model::parse(&text).unwrap(), out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cold_starts_at_once_each_succeed_and_each_migration_is_applied_once() {
    let pg = Throwaway::start("cqrs-sql-sync-migration-race").unwrap();
    let url = pg.url();
    let (model, two) = migrations(2);
    const STARTS: usize = 8;
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(STARTS));
    let mut starts = tokio::task::JoinSet::new();
    for _ in 0..STARTS {
        let (model, two, url, barrier) = (model.clone(), two.clone(), url.clone(), barrier.clone());
        starts.spawn(async move {
            // Each start its own function instance, its own connection.
            let sync = SqlSync::new(model, &url);
            barrier.wait().await;
            sync.migrate(&borrowed(&two)).await
        });
    }
    let mut applied = 0;
    let mut failures = Vec::new();
    while let Some(result) = starts.join_next().await {
        match result.unwrap() {
            Ok(n) => applied += n,
            Err(error) => failures.push(error.to_string()),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {STARTS} cold starts failed: {failures:#?}",
        failures.len()
    );
    assert_eq!(applied, 2, "V1 and V2 applied once in all");

    let (admin, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    let history: Vec<i32> = admin
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
        .collect();
    assert_eq!(history, [1, 2]);
    let extra: i64 = admin
        .query_one(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'loan' AND column_name = 'extra1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(extra, 1, "V2 added its column");
    let parked: i64 = admin
        .query_one("SELECT count(*) FROM cqrs_parked", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(parked, 0, "sql-sync's own table is there");
    let held: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(held, 0, "every start released the lock");

    // Another runner holds the lock (a deploy's start applying a migration): a start with nothing
    // to apply does not wait for it...
    admin
        .execute("SELECT pg_advisory_lock($1)", &[&migrate::MIGRATION_LOCK])
        .await
        .unwrap();
    let warm = SqlSync::new(model.clone(), &url);
    assert_eq!(warm.migrate(&borrowed(&two)).await.unwrap(), 0);
    // ...and one with a migration to apply gives up after a bounded wait, applying nothing.
    let (newer, three) = migrations(3);
    let waiting = SqlSync::new(newer.clone(), &url);
    let error = waiting.migrate(&borrowed(&three)).await.unwrap_err();
    assert!(
        matches!(
            &error,
            SyncError::Migrate(migrate::MigrateError::LockTimeout { .. })
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("55P03"), "{error}");
    println!("{error}");
    admin
        .execute("SELECT pg_advisory_unlock($1)", &[&migrate::MIGRATION_LOCK])
        .await
        .unwrap();
    // The next try (Lambda's retry) applies it.
    assert_eq!(waiting.migrate(&borrowed(&three)).await.unwrap(), 1);
}
