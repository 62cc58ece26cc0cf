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

#[tokio::test]
async fn verify_names_every_kind_of_difference_and_repair_leaves_none() {
    let (_pg, mut client) = migrated("verify").await;
    let model = model();
    let schema = Schema::of(&model);
    let expected_items = [
        loan("V1", 2, "out"),      // behind: PostgreSQL has version 1
        loan("V2", 1, "out"),      // ahead: PostgreSQL has version 3
        loan("V3", 1, "out"),      // content: another status at the same version
        loan("V4", 1, "out"),      // missing
        loan("V5", 1, "out"),      // fine
        loan("V7", 1, "returned"), // misplaced: in the generic table
    ];
    let expected: Vec<_> = expected_items
        .iter()
        .map(|i| row(&model, &schema, i))
        .collect();
    apply(
        &mut client,
        &[
            upsert(&loan("V1", 1, "out")),
            upsert(&loan("V2", 3, "out")),
            upsert(&loan("V3", 1, "returned")),
            upsert(&loan("V5", 1, "out")),
            upsert(&loan("V6", 1, "out")), // orphan
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
            ("V2", "ahead"),
            ("V3", "content"),
            ("V4", "missing"),
            ("V6", "orphan"),
            ("V7", "misplaced"),
        ]
    );
    let repaired = cqrs_sql::verify::repair(&mut client, &schema, &expected, &differences)
        .await
        .unwrap();
    assert_eq!(repaired, 6);
    assert!(
        cqrs_sql::verify::compare(&client, &schema, &expected)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(state(&client, "V2").await, (Some((1, "out".into())), None));
    assert_eq!(state(&client, "V6").await, (None, None));
    assert_eq!(
        state(&client, "V7").await,
        (Some((1, "returned".into())), None)
    );
}
