//! The relational read model against a real PostgreSQL (Debian's server, a throwaway cluster on
//! 127.0.0.1 per test, started and stopped by the test): the migrations apply once and in order,
//! writes are idempotent and newest-wins under duplicates, replays and reordering, an item moves
//! between its entity's table and the generic table without leaving an older copy, removals delete,
//! a batch is all or nothing, and row-level security refuses a cross-tenant read.

use cqrs_item::{Item, Value};
use cqrs_local_stack::postgres::Throwaway;
use cqrs_model::Model;
use cqrs_sql::{
    migrate,
    rows::row,
    schema::Schema,
    write::{Change, Writer, Written, apply},
};
use std::collections::HashMap;

use tokio_postgres::{Client, NoTls};

const MODEL: &str = r#"
[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
attributes.loanId = { type = "string", required = true, max = 26 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }
attributes.fee = { type = "number", width = 4 }
attributes.due = { type = "timestamp" }

[entities.branch]
pk = "BRANCH#common"
sk = "{branchId}"
common = true
attributes.branchId = { type = "string", required = true }
"#;

/// A cluster of the test's own ([`Throwaway`]: stopped, its folder removed, on drop, also when a
/// test fails).
struct Pg(Throwaway);

impl Pg {
    async fn start(name: &str) -> (Pg, Client) {
        let pg = Pg(Throwaway::start(&format!("cqrs-sql-{name}")).expect("a cluster starts"));
        let client = pg.connect().await;
        (pg, client)
    }

    async fn connect(&self) -> Client {
        let (client, connection) = tokio_postgres::connect(&self.0.url(), NoTls)
            .await
            .expect("connects");
        tokio::spawn(connection);
        client
    }
}

fn model() -> Model {
    Model::parse(MODEL).unwrap()
}

async fn migrated(name: &str) -> (Pg, Client) {
    let (pg, mut client) = Pg::start(name).await;
    let sql = migrate::plan(None, &Schema::of(&model())).unwrap().unwrap();
    let applied = migrate::apply(&mut client, &[(1, "V1__model.sql".into(), sql)])
        .await
        .unwrap();
    assert_eq!(applied, 1);
    (pg, client)
}

fn loan(id: &str, version: i64, status: &str) -> Item {
    let mut item = Item::example();
    item.pk = "LOAN#t1".into();
    item.sk = id.into();
    item.id = cqrs_keys::generate_id("LOAN#t1", id);
    item.tenant_code = "t1".into();
    item.item_type = "LOAN".into();
    item.version = version;
    item.attributes.clear();
    item.attributes.insert("loanId".into(), Value::from(id));
    item.attributes.insert("status".into(), Value::from(status));
    item
}

fn upsert(item: &Item) -> Change {
    let model = model();
    Change::Upsert(row(&model, &Schema::of(&model), item))
}

/// (version, status) of loan `id` in the loan table, and its version in the generic table.
async fn state(client: &Client, id: &str) -> (Option<(i64, String)>, Option<i64>) {
    let typed = client
        .query_opt(
            r#"SELECT "version", "status" FROM "loan" WHERE "pk" = 'LOAN#t1' AND "sk" = $1"#,
            &[&id],
        )
        .await
        .unwrap()
        .map(|r| (r.get(0), r.get(1)));
    let generic = client
        .query_opt(
            r#"SELECT "version" FROM "cqrs_items" WHERE "pk" = 'LOAN#t1' AND "sk" = $1"#,
            &[&id],
        )
        .await
        .unwrap()
        .map(|r| r.get(0));
    (typed, generic)
}

#[tokio::test]
async fn migrations_apply_once_in_order_and_a_changed_one_is_refused() {
    let (_pg, mut client) = Pg::start("migrations").await;
    let v1 = Schema::of(&model());
    let next = MODEL.replace(
        r#"attributes.due = { type = "timestamp" }"#,
        "attributes.due = { type = \"timestamp\" }\nattributes.notes = { type = \"map\" }",
    );
    let v2 = Schema::of(&Model::parse(&next).unwrap());
    let first = migrate::plan(None, &v1).unwrap().unwrap();
    let second = migrate::plan(Some(&v1), &v2).unwrap().unwrap();
    let both = vec![
        (1, "V1__model.sql".to_string(), first.clone()),
        (2, "V2__model.sql".to_string(), second),
    ];
    assert_eq!(migrate::apply(&mut client, &both[..1]).await.unwrap(), 1);
    assert_eq!(
        migrate::apply(&mut client, &both).await.unwrap(),
        1,
        "only V2 is new"
    );
    assert_eq!(
        migrate::apply(&mut client, &both).await.unwrap(),
        0,
        "nothing twice"
    );
    let notes: i64 = client
        .query_one(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'loan' AND column_name = 'notes'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(notes, 1, "V2 added the column");

    // An applied migration that was edited afterwards stops the run.
    let edited = vec![
        (
            1,
            "V1__model.sql".to_string(),
            format!("{first}\n-- edited"),
        ),
        both[1].clone(),
    ];
    let error = migrate::apply(&mut client, &edited).await.unwrap_err();
    assert!(
        error.to_string().contains("applying the migrations"),
        "{error}"
    );
    assert!(error.to_string().contains("V1__model"), "{error}");
}

#[tokio::test]
async fn writes_are_newest_wins_under_duplicates_replays_and_reordering() {
    let (_pg, mut client) = migrated("newest").await;
    let v1 = upsert(&loan("L1", 1, "out"));
    let v2 = upsert(&loan("L1", 2, "returned"));
    let v3 = upsert(&loan("L1", 3, "out"));

    // Reordered within a batch, with a duplicate: the newest counts.
    let written = apply(
        &mut client,
        &[v2.clone(), v3.clone(), v1.clone(), v3.clone()],
    )
    .await
    .unwrap();
    assert_eq!(
        written,
        Written {
            rows: 1,
            deleted: 0,
            stale: 3
        }
    );
    assert_eq!(state(&client, "L1").await, (Some((3, "out".into())), None));

    // Replays of older versions, in later batches: nothing changes.
    for batch in [
        vec![v1.clone()],
        vec![v2.clone(), v1.clone()],
        vec![v3.clone()],
    ] {
        let written = apply(&mut client, &batch).await.unwrap();
        assert_eq!(written.rows, 0, "{batch:?}");
    }
    assert_eq!(state(&client, "L1").await, (Some((3, "out".into())), None));

    // A newer version updates the row.
    let written = apply(&mut client, &[upsert(&loan("L1", 4, "returned"))])
        .await
        .unwrap();
    assert_eq!(written.rows, 1);
    assert_eq!(
        state(&client, "L1").await,
        (Some((4, "returned".into())), None)
    );
}

/// The upserts this session has prepared (`pg_prepared_statements`), by the table they write.
async fn prepared_upserts(client: &Client) -> Vec<String> {
    let mut tables = Vec::new();
    for message in client
        .simple_query(
            "SELECT substring(statement FROM 'INSERT INTO \"([a-z_]+)\"') FROM pg_prepared_statements \
             WHERE statement LIKE 'WITH moved AS%' ORDER BY 1",
        )
        .await
        .unwrap()
    {
        if let tokio_postgres::SimpleQueryMessage::Row(row) = message {
            tables.push(row.get(0).unwrap().to_string());
        }
    }
    tables
}

#[tokio::test]
async fn a_writer_prepares_each_tables_statement_once_whatever_the_batch_size() {
    let (pg, _client) = migrated("prepared").await;
    let mut writer = Writer::new(pg.connect().await);
    // 1 row, then 40, then 3,000 (its 25 values a row are 75,000, more than PostgreSQL's 65,535
    // parameters of a statement: the values travel as one array a column), then a version that
    // does not fit its entity (the generic table's statement).
    let mut next = 0;
    for size in [1, 40, 3_000] {
        let batch: Vec<Change> = (next..next + size)
            .map(|n| upsert(&loan(&format!("L{n:05}"), 1, "out")))
            .collect();
        next += size;
        let written = writer.apply(&batch).await.unwrap();
        assert_eq!(written.rows, size as u64);
        assert_eq!(prepared_upserts(writer.client()).await, ["loan"]);
    }
    writer
        .apply(&[upsert(&loan("L00000", 2, "lost"))])
        .await
        .unwrap();
    assert_eq!(
        prepared_upserts(writer.client()).await,
        ["cqrs_items", "loan"]
    );
    let client = writer.client();
    let count: i64 = client
        .query_one("SELECT count(*) FROM loan", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 3_040, "every row of every batch, less the moved one");
    assert_eq!(state(client, "L00000").await, (None, Some(2)));
    assert_eq!(
        state(client, "L02999").await,
        (Some((1, "out".into())), None)
    );
}

#[tokio::test]
async fn a_pipelined_batch_is_newest_wins_across_chunks_stops_at_a_bad_record_and_is_one_transaction()
 {
    let (pg, client) = migrated("pipelined").await;
    let mut writer = Writer::new(pg.connect().await);
    // Chunks of 2: [L1 v3, L2 v1], [L1 v2 (a replay), L2 v2], [L3 v1], then a record that does not
    // convert; L4 after it is never taken.
    let pulled = std::cell::Cell::new(0);
    let changes = [
        Ok(upsert(&loan("L1", 3, "out"))),
        Ok(upsert(&loan("L2", 1, "out"))),
        Ok(upsert(&loan("L1", 2, "returned"))),
        Ok(upsert(&loan("L2", 2, "returned"))),
        Ok(upsert(&loan("L3", 1, "out"))),
        Err("record 5 is not an item"),
        Ok(upsert(&loan("L4", 1, "out"))),
    ]
    .into_iter()
    .inspect(|_| pulled.set(pulled.get() + 1));
    let (written, stopped) = writer.apply_pipelined(changes, 2, 2).await.unwrap();
    assert_eq!(stopped, Some("record 5 is not an item"));
    assert_eq!(pulled.get(), 6, "nothing is taken after the bad record");
    assert_eq!((written.rows, written.stale), (4, 1));
    assert_eq!(state(&client, "L1").await, (Some((3, "out".into())), None));
    assert_eq!(
        state(&client, "L2").await,
        (Some((2, "returned".into())), None)
    );
    assert_eq!(state(&client, "L3").await, (Some((1, "out".into())), None));
    assert_eq!(state(&client, "L4").await, (None, None));

    // A chunk PostgreSQL refuses (a version that is not a number) rolls back the chunks before it.
    let mut refused = upsert(&loan("L6", 1, "out"));
    if let Change::Upsert(row) = &mut refused {
        let at = row.columns.iter().position(|c| c == "version").unwrap();
        row.values[at] = Some("one".into());
    }
    let changes = [
        Ok::<_, String>(upsert(&loan("L5", 1, "out"))),
        Ok(upsert(&loan("L1", 9, "out"))),
        Ok(refused),
    ];
    let error = writer
        .apply_pipelined(changes.into_iter(), 1, 2)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("db error"), "{error}");
    assert_eq!(state(&client, "L5").await, (None, None));
    assert_eq!(state(&client, "L1").await, (Some((3, "out".into())), None));
}

#[tokio::test]
async fn an_item_lives_in_one_place_when_a_version_does_not_fit_its_entity() {
    let (_pg, mut client) = migrated("move").await;
    apply(&mut client, &[upsert(&loan("L2", 1, "out"))])
        .await
        .unwrap();
    // Version 2 has a status the model does not know: the generic table, and no older copy left.
    let written = apply(&mut client, &[upsert(&loan("L2", 2, "lost"))])
        .await
        .unwrap();
    assert_eq!((written.rows, written.deleted), (1, 1));
    assert_eq!(state(&client, "L2").await, (None, Some(2)));
    let reason: String = client
        .query_one(
            r#"SELECT "reason" FROM "cqrs_items" WHERE "sk" = 'L2'"#,
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(reason.contains("\"lost\" is not one of"), "{reason}");

    // A replay of version 1 does not bring the older copy back.
    let written = apply(&mut client, &[upsert(&loan("L2", 1, "out"))])
        .await
        .unwrap();
    assert_eq!(written.rows, 0);
    assert_eq!(state(&client, "L2").await, (None, Some(2)));

    // Version 3 fits again: back to its entity's table.
    let written = apply(&mut client, &[upsert(&loan("L2", 3, "returned"))])
        .await
        .unwrap();
    assert_eq!((written.rows, written.deleted), (1, 1));
    assert_eq!(
        state(&client, "L2").await,
        (Some((3, "returned".into())), None)
    );

    // The item expires from the data table at version 3: gone; an older removal changes nothing.
    let remove = |version| Change::Remove {
        table: Some("loan".into()),
        pk: "LOAN#t1".into(),
        sk: "L2".into(),
        version,
    };
    assert_eq!(apply(&mut client, &[remove(2)]).await.unwrap().deleted, 0);
    assert_eq!(apply(&mut client, &[remove(3)]).await.unwrap().deleted, 1);
    assert_eq!(state(&client, "L2").await, (None, None));
    // A replayed state of that version or older does not bring it back (the chaos run of sql-sync
    // found that it did); a newer one, the item written again, does.
    for version in [3, 1] {
        let written = apply(&mut client, &[upsert(&loan("L2", version, "out"))])
            .await
            .unwrap();
        assert_eq!(written.rows, 0);
    }
    assert_eq!(state(&client, "L2").await, (None, None));
    apply(&mut client, &[upsert(&loan("L2", 4, "out"))])
        .await
        .unwrap();
    assert_eq!(state(&client, "L2").await, (Some((4, "out".into())), None));
}

#[tokio::test]
async fn a_batch_is_all_or_nothing() {
    let (_pg, mut client) = migrated("atomic").await;
    // A removal naming a table that does not exist fails the batch: the upsert before it is
    // rolled back with it.
    let batch = [
        upsert(&loan("L3", 1, "out")),
        Change::Remove {
            table: Some("no_such_table".into()),
            pk: "X#t1".into(),
            sk: "x".into(),
            version: 1,
        },
    ];
    assert!(apply(&mut client, &batch).await.is_err());
    assert_eq!(state(&client, "L3").await, (None, None));
}

#[tokio::test]
async fn row_level_security_refuses_another_tenants_rows() {
    let (_pg, mut client) = migrated("tenants").await;
    let mut other = loan("L9", 1, "out");
    other.pk = "LOAN#t2".into();
    other.id = cqrs_keys::generate_id("LOAN#t2", "L9");
    other.tenant_code = "t2".into();
    let mut branch = Item::example();
    (branch.pk, branch.sk, branch.id) = (
        "BRANCH#common".into(),
        "B1".into(),
        cqrs_keys::generate_id("BRANCH#common", "B1"),
    );
    (branch.tenant_code, branch.version) = ("common".into(), 1);
    branch.attributes.clear();
    branch
        .attributes
        .insert("branchId".into(), Value::from("B1"));
    apply(
        &mut client,
        &[
            upsert(&loan("L8", 1, "out")),
            upsert(&other),
            upsert(&branch),
        ],
    )
    .await
    .unwrap();

    // Through the reader's session of the crate: t2 sees its own loan only, even when it asks
    // for t1's.
    let session = cqrs_sql::read::as_tenant(&mut client, "t2").await.unwrap();
    let seen: Vec<String> = session
        .query(
            r#"SELECT "sk" FROM "loan" WHERE "tenant_code" IN ('t1', 't2')"#,
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(seen, ["L9"]);
    session.commit().await.unwrap();

    // The service's reader, as tenant t1: its own loans and the common branches, never t2's.
    client
        .batch_execute("SET ROLE cqrs_reader; SET cqrs.tenant = 't1'")
        .await
        .unwrap();
    let loans: Vec<String> = client
        .query(r#"SELECT "sk" FROM "loan" ORDER BY "sk""#, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(loans, ["L8"]);
    let t2: i64 = client
        .query_one(
            r#"SELECT count(*) FROM "loan" WHERE "tenant_code" = 't2'"#,
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(t2, 0, "a cross-tenant read sees nothing");
    let branches: i64 = client
        .query_one(r#"SELECT count(*) FROM "branch""#, &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(branches, 1, "common rows every tenant may read");
    // Without a tenant, nothing.
    client.batch_execute("RESET cqrs.tenant").await.unwrap();
    let none: i64 = client
        .query_one(r#"SELECT count(*) FROM "loan""#, &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(none, 0);
    // And the reader writes nothing.
    let write = client
        .execute(r#"DELETE FROM "loan""#, &[])
        .await
        .unwrap_err();
    let message = write
        .as_db_error()
        .map(|e| e.message().to_string())
        .unwrap_or_default();
    assert!(message.contains("permission denied"), "{write:?}");
}

/// A consistent read's answer: the data table's items by key.
type Answer = std::future::Ready<Result<HashMap<(String, String), Item>, String>>;

/// The data table's items of `keys` as `items` says they are now (a consistent read's answer).
fn now_of(items: &[Item]) -> impl FnMut(Vec<(String, String)>) -> Answer + '_ {
    move |keys| {
        std::future::ready(Ok(items
            .iter()
            .filter(|i| keys.contains(&(i.pk.clone(), i.sk.clone())))
            .map(|i| ((i.pk.clone(), i.sk.clone()), i.clone()))
            .collect()))
    }
}

async fn removed_version(client: &Client, id: &str) -> Option<i64> {
    client
        .query_opt(
            r#"SELECT "version" FROM "cqrs_removed" WHERE "pk" = 'LOAN#t1' AND "sk" = $1"#,
            &[&id],
        )
        .await
        .unwrap()
        .map(|r| r.get(0))
}

#[tokio::test]
async fn verify_names_every_kind_of_difference_and_repair_is_newest_wins() {
    let (_pg, mut client) = migrated("verify").await;
    let model = model();
    let rows = cqrs_sql::rows::Rows::new(model.clone());
    let schema = Schema::of(&model);
    // The data table as a scan read it; then as it is when the repair reads each key again.
    let scanned = [
        loan("V1", 2, "out"),      // behind: PostgreSQL has version 1
        loan("V2", 1, "out"),      // ahead: PostgreSQL has version 3, written after the scan
        loan("V3", 1, "out"),      // content: another status at the same version
        loan("V4", 1, "out"),      // missing
        loan("V5", 1, "out"),      // fine
        loan("V7", 1, "returned"), // misplaced: in the generic table
        loan("V8", 1, "out"),      // ahead: PostgreSQL has version 3, the data table never had
        loan("V10", 1, "out"),     // missing: expired after the scan, sql-sync removed it
    ];
    let now = [
        loan("V1", 2, "out"),
        loan("V2", 3, "out"),
        loan("V3", 1, "out"),
        loan("V4", 1, "out"),
        loan("V5", 1, "out"),
        loan("V6", 1, "out"), // orphan of the scan: created after it
        loan("V7", 1, "returned"),
        loan("V8", 1, "out"),
        // V9 (an orphan, version 2) expired before the repair read it again; V10 expired.
    ];
    let expected: Vec<_> = scanned.iter().map(|i| row(&model, &schema, i)).collect();
    apply(
        &mut client,
        &[
            upsert(&loan("V1", 1, "out")),
            upsert(&loan("V2", 3, "out")),
            upsert(&loan("V3", 1, "returned")),
            upsert(&loan("V5", 1, "out")),
            upsert(&loan("V6", 1, "out")),
            upsert(&loan("V8", 3, "out")),
            upsert(&loan("V9", 2, "out")),
            upsert(&loan("V10", 1, "out")),
            Change::Remove {
                table: Some("loan".into()),
                pk: "LOAN#t1".into(),
                sk: "V10".into(),
                version: 1,
            },
        ],
    )
    .await
    .unwrap();
    client
        .batch_execute(
            r#"INSERT INTO "cqrs_items" ("pk", "sk", "id", "tenant_code", "item_type", "version", "reason")
               VALUES ('LOAN#t1', 'V7', 'LOAN#t1#V7', 't1', 'LOAN', 1, 'planted')"#,
        )
        .await
        .unwrap();
    let differences = cqrs_sql::verify::compare(&client, &schema, &expected)
        .await
        .unwrap();
    let kinds: Vec<(&str, &str)> = differences
        .iter()
        .map(|d| (d.sk.as_str(), d.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("V1", "behind"),
            ("V10", "missing"),
            ("V2", "ahead"),
            ("V3", "content"),
            ("V4", "missing"),
            ("V6", "orphan"),
            ("V7", "misplaced"),
            ("V8", "ahead"),
            ("V9", "orphan"),
        ]
    );
    let repaired = cqrs_sql::verify::repair(&mut client, &rows, &differences, now_of(&now))
        .await
        .unwrap();
    // V1, V3, V4 and V7 written, V2 and V6 written again as they are (at their version), V9
    // removed; V8 is newer than the data table's state, V10 stays removed.
    assert_eq!(repaired, 7);
    let keys: Vec<(String, String)> = differences
        .iter()
        .map(|d| (d.pk.clone(), d.sk.clone()))
        .collect();
    let remaining = cqrs_sql::verify::check(&client, &rows, &keys, now_of(&now))
        .await
        .unwrap();
    let kinds: Vec<(&str, &str)> = remaining.iter().map(|d| (d.sk.as_str(), d.kind)).collect();
    assert_eq!(kinds, [("V8", "ahead")], "never lowered");
    assert_eq!(
        state(&client, "V2").await,
        (Some((3, "out".into())), None),
        "a row newer than the scan keeps its version"
    );
    assert_eq!(state(&client, "V8").await, (Some((3, "out".into())), None));
    assert_eq!(
        state(&client, "V6").await,
        (Some((1, "out".into())), None),
        "an item created after the scan stays"
    );
    assert_eq!(state(&client, "V9").await, (None, None));
    assert_eq!(removed_version(&client, "V9").await, Some(2));
    assert_eq!(
        (
            state(&client, "V10").await,
            removed_version(&client, "V10").await
        ),
        ((None, None), Some(1)),
        "an item removed after the scan does not come back, and its removal stays"
    );
    assert_eq!(
        state(&client, "V7").await,
        (Some((1, "returned".into())), None)
    );
    assert_eq!(state(&client, "V3").await, (Some((1, "out".into())), None));
}

/// Runs `second` on its own connection while `first` (a transaction on `client`, open) holds its
/// writes, until `second` is done or waits for a lock; then commits `first` and lets `second`
/// finish. Returns whether `second` had to wait.
async fn beside_an_open_batch(
    pg: &Pg,
    client: &mut Client,
    first: &[Change],
    second: Vec<Change>,
) -> bool {
    let transaction = client.transaction().await.unwrap();
    cqrs_sql::write::apply_in(&transaction, first)
        .await
        .unwrap();
    let mut other = pg.connect().await;
    let task = tokio::spawn(async move { apply(&mut other, &second).await.unwrap() });
    let watcher = pg.connect().await;
    let waited = loop {
        if task.is_finished() {
            break false;
        }
        let waiting: i64 = watcher
            .query_one("SELECT count(*) FROM pg_locks WHERE NOT granted", &[])
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            break true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    transaction.commit().await.unwrap();
    task.await.unwrap();
    waited
}

#[tokio::test]
async fn concurrent_batches_of_one_key_are_serialised_newest_wins_across_tables_and_removals() {
    let (pg, mut client) = migrated("concurrent").await;

    // Version 3 does not fit its entity (the generic table) and is written, not committed yet,
    // when another transaction writes version 4 (the entity's table). Both statements checked
    // the other table in their own snapshot: the item must still end in one place, version 4.
    let mut waited = vec![
        beside_an_open_batch(
            &pg,
            &mut client,
            &[upsert(&loan("C1", 3, "lost"))],
            vec![upsert(&loan("C1", 4, "out"))],
        )
        .await,
    ];

    // The other way round: version 4 (the entity's table) open, version 3 (generic) beside it.
    waited.push(
        beside_an_open_batch(
            &pg,
            &mut client,
            &[upsert(&loan("C2", 4, "out"))],
            vec![upsert(&loan("C2", 3, "lost"))],
        )
        .await,
    );

    // A removal at version 3, open, and a state of version 3 beside it (a repair that read the
    // data table just before the item expired): the removal is newer than nothing it allows back.
    apply(&mut client, &[upsert(&loan("C3", 3, "out"))])
        .await
        .unwrap();
    let removal = Change::Remove {
        table: Some("loan".into()),
        pk: "LOAN#t1".into(),
        sk: "C3".into(),
        version: 3,
    };
    waited.push(
        beside_an_open_batch(
            &pg,
            &mut client,
            &[removal],
            vec![upsert(&loan("C3", 3, "out"))],
        )
        .await,
    );
    // One place each, the newest version; the removal is not undone by a state as old as it.
    let mut states = Vec::new();
    for id in ["C1", "C2", "C3"] {
        states.push(state(&client, id).await);
    }
    assert_eq!(
        states,
        [
            (Some((4, "out".into())), None),
            (Some((4, "out".into())), None),
            (None, None)
        ],
        "the second batch of each waited for the first: {waited:?}"
    );
    assert_eq!(waited, [true, true, true], "each key is locked per batch");
}

/// Applies `models` one after the other as a service's migrations (each plan from the one before).
async fn migrated_through(name: &str, models: &[&str]) -> (Pg, Client) {
    migrated_through_as(name, models, |sql| sql).await
}

/// [`migrated_through`], the first migration's SQL changed by `first` (a deployed stack's, written
/// by an earlier release).
async fn migrated_through_as(
    name: &str,
    models: &[&str],
    first: impl Fn(String) -> String,
) -> (Pg, Client) {
    let (pg, mut client) = Pg::start(name).await;
    let mut before: Option<Schema> = None;
    let mut migrations = Vec::new();
    for (n, text) in models.iter().enumerate() {
        let schema = Schema::of(&Model::parse(text).unwrap());
        let mut sql = migrate::plan(before.as_ref(), &schema).unwrap().unwrap();
        if n == 0 {
            sql = first(sql);
        }
        migrations.push((n as u32 + 1, format!("V{}__model.sql", n + 1), sql));
        before = Some(schema);
    }
    migrate::apply(&mut client, &migrations).await.unwrap();
    (pg, client)
}

/// `sql` with its constraints unnamed, as 9e3a3e6 and earlier wrote them (PostgreSQL names them).
fn unnamed(sql: String) -> String {
    let mut out = String::new();
    let mut rest = sql.as_str();
    while let Some(at) = rest.find("CONSTRAINT \"") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "CONSTRAINT \"".len()..];
        let end = after.find("\" ").expect("a quoted name");
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    assert!(!out.contains("CONSTRAINT"), "{out}");
    out
}

#[tokio::test]
async fn a_long_columns_check_is_found_in_the_catalog_when_it_changes() {
    // A stack whose V1 named its constraints, and one whose V1 did not (an earlier release's).
    long_check("long-check", |sql| sql).await;
    long_check("long-check-unnamed", unnamed).await;
}

async fn long_check(name: &str, first: impl Fn(String) -> String) {
    // The table's and the columns' names fit (48 and 55 bytes), their CHECK constraints' names
    // (`<table>_<column>_check`) do not: PostgreSQL would shorten them, and both columns' names
    // share their first 63 bytes.
    let table = "loans_of_the_branch_as_the_ledger_recorded_them1";
    let one = "status_of_the_loan_as_the_branch_recorded_it_for_one";
    let two = "status_of_the_loan_as_the_branch_recorded_it_for_two";
    let v1 = format!(
        "[entities.{table}]\npk = \"LOAN#{{tenant}}\"\nsk = \"{{loanId}}\"\n\
         attributes.loanId = {{ type = \"string\", required = true }}\n\
         attributes.{one} = {{ type = \"enum\", values = [\"out\", \"returned\"] }}\n\
         attributes.{two} = {{ type = \"enum\", values = [\"out\", \"returned\"] }}\n"
    );
    let v2 = v1.replacen(
        "values = [\"out\", \"returned\"]",
        "values = [\"out\", \"returned\", \"lost\"]",
        1,
    );
    let (_pg, mut client) = migrated_through_as(name, &[&v1, &v2], first).await;
    let model = Model::parse(&v2).unwrap();
    let mut item = loan("K1", 1, "out");
    item.attributes.remove("status");
    item.attributes.insert(one.into(), Value::from("lost"));
    item.attributes.insert(two.into(), Value::from("out"));
    let lost = row(&model, &Schema::of(&model), &item);
    assert_eq!(lost.table, table, "\"lost\" fits column one from V2 on");
    let written = apply(&mut client, &[Change::Upsert(lost)]).await;
    assert!(
        written.is_ok(),
        "V2's CHECK of column one replaced V1's: {:?}",
        written.map_err(|e| e.as_db_error().map(|d| d.message().to_string()))
    );
    // Column two's CHECK is V1's still: "lost" is refused there.
    let refused = client
        .batch_execute(&format!(
            r#"INSERT INTO "{table}" ("pk", "sk", "id", "tenant_code", "item_type", "version", "{two}")
               VALUES ('LOAN#t1', 'K2', 'x', 't1', 'LOAN', 1, 'lost')"#
        ))
        .await;
    assert!(refused.is_err(), "column two keeps its CHECK");
    // One CHECK a column.
    let checks: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = $1::text::regclass AND contype = 'c'",
            &[&format!("\"{table}\"")],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(checks, 2);
}

#[tokio::test]
async fn verify_reads_every_column_and_every_table_the_migrations_created() {
    // V2 no longer declares loan.fee (its column stays) nor the branch entity (its table stays).
    let v2 = MODEL
        .replace("attributes.fee = { type = \"number\", width = 4 }\n", "")
        .replace(
            "[entities.branch]\npk = \"BRANCH#common\"\nsk = \"{branchId}\"\ncommon = true\nattributes.branchId = { type = \"string\", required = true }\n",
            "",
        );
    assert!(!v2.contains("fee") && !v2.contains("branch"), "{v2}");
    let (_pg, mut client) = migrated_through("retired", &[MODEL, &v2]).await;
    // Under V1: a loan with a fee, and a branch.
    let mut with_fee = loan("F1", 1, "out");
    with_fee.attributes.insert("fee".into(), Value::from(5));
    let mut branch = Item::example();
    (branch.pk, branch.sk, branch.id) = (
        "BRANCH#common".into(),
        "B1".into(),
        cqrs_keys::generate_id("BRANCH#common", "B1"),
    );
    (branch.tenant_code, branch.version) = ("common".into(), 1);
    branch.attributes.clear();
    branch
        .attributes
        .insert("branchId".into(), Value::from("B1"));
    apply(&mut client, &[upsert(&with_fee), upsert(&branch)])
        .await
        .unwrap();

    // Under V2: the loan's next version (its fee now one of the other attributes) and the
    // branch's next version (no entity: the generic table).
    let model = Model::parse(&v2).unwrap();
    let schema = Schema::of(&model);
    let mut next = with_fee.clone();
    next.version = 2;
    next.attributes.insert("fee".into(), Value::from(7));
    let mut branch2 = branch.clone();
    branch2.version = 2;
    let rows = [row(&model, &schema, &next), row(&model, &schema, &branch2)];
    assert_eq!(rows[1].table, "cqrs_items");
    apply(
        &mut client,
        &rows.iter().cloned().map(Change::Upsert).collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    let stale: Option<String> = client
        .query_one(r#"SELECT "fee"::text FROM "loan" WHERE "sk" = 'F1'"#, &[])
        .await
        .unwrap()
        .get(0);
    let differences = cqrs_sql::verify::compare(&client, &schema, &rows)
        .await
        .unwrap();
    let kinds: Vec<(&str, &str)> = differences
        .iter()
        .map(|d| (d.sk.as_str(), d.kind))
        .collect();
    assert_eq!(
        (stale, kinds),
        (None, vec![("B1", "misplaced")]),
        "the retired column holds no stale value; the retired table's older row is seen"
    );

    // A value in the retired column (written by hand) is a difference; the repair clears it and
    // takes the branch's older row out of the retired table.
    client
        .batch_execute(r#"UPDATE "loan" SET "fee" = 9 WHERE "sk" = 'F1'"#)
        .await
        .unwrap();
    let differences = cqrs_sql::verify::compare(&client, &schema, &rows)
        .await
        .unwrap();
    let kinds: Vec<(&str, &str)> = differences
        .iter()
        .map(|d| (d.sk.as_str(), d.kind))
        .collect();
    assert_eq!(kinds, [("B1", "misplaced"), ("F1", "content")]);
    let items = [next, branch2];
    let rows_of = cqrs_sql::rows::Rows::new(model.clone());
    cqrs_sql::verify::repair(&mut client, &rows_of, &differences, now_of(&items))
        .await
        .unwrap();
    assert!(
        cqrs_sql::verify::compare(&client, &schema, &rows)
            .await
            .unwrap()
            .is_empty()
    );
    let left: i64 = client
        .query_one(r#"SELECT count(*) FROM "branch""#, &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
}
