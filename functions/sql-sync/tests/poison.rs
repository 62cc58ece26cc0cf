//! What PostgreSQL refuses, and what a database outage does, never stops a batch nor loses a
//! record, against a real PostgreSQL (a throwaway cluster of the test's own):
//!
//! - a U+0000 in a string value (PostgreSQL stores no NUL in `text` or `jsonb`) is written as
//!   U+FFFD, and the batch's other records are written with it;
//! - a key that holds U+0000 (never rewritten into another key), a record that is not an item, and
//!   a row PostgreSQL refuses (a data error, SQLSTATE class 22 or 23) are parked in `cqrs_parked`
//!   with their reason (PostgreSQL's own message for a refused row), in the batch's transaction,
//!   and never reported to Lambda: a data error never reaches Lambda's retries;
//! - a write error is logged as one, with PostgreSQL's message, never as a connection error;
//! - a connection closed under sql-sync (RDS Proxy's idle close, a restart) is opened again and the
//!   batch written again once, in the same invocation;
//! - a database that accepts the connection and never answers is given up on after
//!   [`cqrs_sql_sync::database::CONNECT_TIMEOUT`] (well inside the function's 60 s), and the batch
//!   is reported by its first record (nothing of it was written).

mod common;

use common::Logs;
use std::sync::Arc;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use cqrs_item::{Item, Map, Value};
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
attributes.title = { type = "string" }
attributes.fee = { type = "number", width = 4 }
attributes.notes = { type = "map" }
"#;

fn loan(id: &str, version: i64) -> Item {
    let mut item = Item::example();
    item.pk = "LOAN#t1".into();
    item.sk = id.into();
    item.id = cqrs_keys::generate_id("LOAN#t1", id);
    (item.tenant_code, item.item_type, item.version) = ("t1".into(), "LOAN".into(), version);
    item.attributes.clear();
    item.attributes.insert("loanId".into(), Value::from(id));
    item.attributes.insert("status".into(), Value::from("out"));
    item.attributes.insert("fee".into(), Value::from(version));
    item
}

fn sequence(n: u64) -> String {
    format!("{n:021}")
}

fn record(item: &Item, n: u64) -> EventRecord {
    let mut record = EventRecord::default();
    record.event_name = "MODIFY".into();
    record.change.sequence_number = Some(sequence(n));
    record.change.new_image = item.to_attributes().unwrap().into();
    record
}

fn event(records: Vec<EventRecord>) -> Event {
    let mut event = Event::default();
    event.records = records;
    event
}

fn reported(response: &aws_lambda_events::event::streams::DynamoDbEventResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone().unwrap_or_default())
        .collect()
}

/// A migrated cluster, sql-sync on it, and an admin connection.
async fn start(name: &str) -> (Throwaway, SqlSync, Client) {
    let pg = Throwaway::start(&format!("cqrs-sql-sync-{name}")).unwrap();
    let model = Model::parse(MODEL).unwrap();
    let v1 = migrate::plan(None, &Schema::of(&model)).unwrap().unwrap();
    let sync = SqlSync::new(model, &pg.url());
    sync.migrate(&[(1, "V1__model.sql", &v1)]).await.unwrap();
    let (admin, connection) = tokio_postgres::connect(&pg.url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    (pg, sync, admin)
}

async fn count(admin: &Client, table: &str) -> i64 {
    admin
        .query_one(&format!(r#"SELECT count(*) FROM "{table}""#), &[])
        .await
        .unwrap()
        .get(0)
}

/// The parked records: (sequence number, reason).
async fn parked(admin: &Client) -> Vec<(String, String)> {
    admin
        .query(
            "SELECT sequence_number, reason FROM cqrs_parked ORDER BY sequence_number",
            &[],
        )
        .await
        .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        .unwrap_or_else(|e| panic!("reading cqrs_parked: {e}"))
}

#[tokio::test]
async fn a_nul_in_a_value_never_stops_the_batch_and_is_stored_as_u_fffd() {
    let (_pg, sync, admin) = start("nul-value").await;
    let mut records: Vec<EventRecord> = (1..=7)
        .map(|n| record(&loan(&format!("L{n}"), 1), n))
        .collect();
    // Record 4: a NUL in the envelope's name, in a typed column, in a nested map and in an
    // attribute without a column (jsonb).
    let mut bad = loan("L4", 1);
    bad.name = "bad\u{0}name".into();
    bad.attributes
        .insert("title".into(), Value::from("ti\u{0}tle"));
    let mut notes = Map::new();
    notes.insert("deep".into(), Value::List(vec![Value::from("a\u{0}b")]));
    bad.attributes.insert("notes".into(), Value::Map(notes));
    bad.attributes.insert("remark".into(), Value::from("\u{0}"));
    records[3] = record(&bad, 4);

    let response = sync.handle(event(records)).await;
    assert_eq!(
        reported(&response),
        Vec::<String>::new(),
        "nothing is reported"
    );
    assert_eq!(count(&admin, "loan").await, 7, "every record is written");
    let row = admin
        .query_one(
            r#"SELECT "name", "title", "notes"::text, "attributes"->>'remark' FROM loan WHERE sk = 'L4'"#,
            &[],
        )
        .await
        .unwrap();
    let (name, title, notes, remark): (String, String, String, String) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(name, "bad\u{FFFD}name");
    assert_eq!(title, "ti\u{FFFD}tle");
    assert_eq!(notes, "{\"deep\": [\"a\u{FFFD}b\"]}");
    assert_eq!(remark, "\u{FFFD}");
}

#[tokio::test]
async fn a_nul_in_a_key_is_parked_with_its_reason_never_rewritten_and_the_rest_is_written() {
    let (_pg, sync, admin) = start("nul-key").await;
    let mut records: Vec<EventRecord> = (1..=7)
        .map(|n| record(&loan(&format!("L{n}"), 1), n))
        .collect();
    records[2] = record(&loan("L\u{0}3", 1), 3);

    let response = sync.handle(event(records)).await;
    assert_eq!(
        reported(&response),
        Vec::<String>::new(),
        "nothing is reported"
    );
    assert_eq!(
        count(&admin, "loan").await,
        6,
        "every other record is written"
    );
    assert_eq!(
        count(&admin, "cqrs_items").await,
        0,
        "not rewritten elsewhere"
    );
    let parked = parked(&admin).await;
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert_eq!(parked[0].0, sequence(3));
    assert!(parked[0].1.contains("U+0000"), "{}", parked[0].1);
    // The key is kept exactly, NUL included (bytea).
    let sk: Vec<u8> = admin
        .query_one("SELECT sk FROM cqrs_parked", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sk, b"L\x003");
    // Delivered again (Lambda's retry of a batch, a replay): parked once.
    let records: Vec<EventRecord> = vec![record(&loan("L\u{0}3", 1), 3)];
    assert!(reported(&sync.handle(event(records)).await).is_empty());
    assert_eq!(self::parked(&admin).await.len(), 1);
}

#[tokio::test]
async fn a_row_postgres_refuses_is_isolated_parked_with_its_message_and_not_called_a_connection_error()
 {
    let (_pg, sync, admin) = start("data-error").await;
    // A constraint of the database's own (added by hand, or a migration the model does not know):
    // PostgreSQL refuses the row, SQLSTATE 23514.
    admin
        .batch_execute("ALTER TABLE loan ADD CONSTRAINT fee_not_13 CHECK (fee <> 13)")
        .await
        .unwrap();
    // 120 records: the refused one is in the middle of a chunk of several.
    let mut records: Vec<EventRecord> = (1..=120)
        .map(|n| record(&loan(&format!("L{n:03}"), 1), n))
        .collect();
    let mut refused = loan("L077", 13);
    refused.attributes.insert("fee".into(), Value::from(13));
    records[76] = record(&refused, 77);
    // A second refused row in the same chunk, and a removal of a row written before.
    let mut also = loan("L081", 13);
    also.attributes.insert("fee".into(), Value::from(13));
    records[80] = record(&also, 81);
    let mut removal = record(&loan("L010", 1), 90);
    removal.event_name = "REMOVE".into();
    removal.change.old_image = std::mem::take(&mut removal.change.new_image);
    records[89] = removal;

    let (logs, guard) = Logs::capture();
    let response = sync.handle(event(records)).await;
    drop(guard);
    let logs = logs.text();
    assert!(
        !logs.contains("connecting to the database"),
        "a write error is not a connection error:\n{logs}"
    );
    assert!(
        logs.contains("violates check constraint") && logs.contains(&sequence(77)),
        "the log names PostgreSQL's message and the record:\n{logs}"
    );
    assert_eq!(
        reported(&response),
        Vec::<String>::new(),
        "a data error is not reported (Lambda would retry it until the record's age)"
    );
    assert_eq!(
        count(&admin, "loan").await,
        116,
        "every other record is written: 120, less the 2 refused, L090 (its record is L010's removal) and L010"
    );
    let parked = parked(&admin).await;
    assert_eq!(parked.len(), 2, "{parked:?}");
    assert_eq!(parked[0].0, sequence(77));
    assert_eq!(parked[1].0, sequence(81));
    assert!(
        parked[0]
            .1
            .contains("violates check constraint \"fee_not_13\""),
        "PostgreSQL's message: {}",
        parked[0].1
    );
}

#[tokio::test]
async fn a_record_that_is_not_an_item_is_parked_not_reported() {
    let (_pg, sync, admin) = start("not-an-item").await;
    let mut records: Vec<EventRecord> = (1..=5)
        .map(|n| record(&loan(&format!("L{n}"), 1), n))
        .collect();
    let mut bad = EventRecord::default();
    bad.event_name = "MODIFY".into();
    bad.change.sequence_number = Some(sequence(3));
    records[2] = bad;
    let response = sync.handle(event(records)).await;
    assert_eq!(reported(&response), Vec::<String>::new());
    assert_eq!(count(&admin, "loan").await, 4);
    let parked = parked(&admin).await;
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert!(parked[0].1.contains("without its image"), "{}", parked[0].1);
}

/// A TCP proxy to PostgreSQL at `target` that [`Cut::cut`] closes the way RDS Proxy closes an idle
/// client connection while the function is frozen: the client's socket stays open, and the first
/// bytes the client sends after the cut get the connection closed (the client only learns it then).
struct Cut {
    port: u16,
    generation: Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Cut {
    async fn start(target: u16) -> Cut {
        use std::sync::atomic::Ordering;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let generation = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let current = generation.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let born = current.load(Ordering::SeqCst);
                let current = current.clone();
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    else {
                        return;
                    };
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = server.into_split();
                    let up = async {
                        let mut buffer = vec![0u8; 64 * 1024];
                        loop {
                            let n = client_read.read(&mut buffer).await.unwrap_or(0);
                            if n == 0 || current.load(Ordering::SeqCst) != born {
                                return;
                            }
                            if server_write.write_all(&buffer[..n]).await.is_err() {
                                return;
                            }
                        }
                    };
                    let down = tokio::io::copy(&mut server_read, &mut client_write);
                    tokio::select! {
                        _ = up => {}
                        _ = down => {}
                    }
                    // Both sockets close here.
                });
            }
        });
        Cut {
            port,
            generation,
            task,
        }
    }

    /// Every connection opened so far is closed at its next request.
    fn cut(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
async fn a_closed_connection_is_opened_again_and_the_batch_written_once_more_in_process() {
    let (pg, _, admin) = start("closed").await;
    let proxy = Cut::start(pg.instance().port).await;
    let sync = SqlSync::new(
        Model::parse(MODEL).unwrap(),
        &format!("postgres://postgres@127.0.0.1:{}/postgres", proxy.port),
    );
    let first: Vec<EventRecord> = (1..=3)
        .map(|n| record(&loan(&format!("L{n}"), 1), n))
        .collect();
    assert!(reported(&sync.handle(event(first)).await).is_empty());
    // RDS Proxy closes an idle client connection (IdleClientTimeout) while the function is frozen.
    proxy.cut();
    // Large enough that the first chunk (50) was taken from the batch when BEGIN met the closed
    // connection: written all the same.
    let second: Vec<EventRecord> = (4..=123)
        .map(|n| record(&loan(&format!("L{n}"), 1), n))
        .collect();
    let (logs, guard) = Logs::capture();
    let response = sync.handle(event(second)).await;
    drop(guard);
    assert_eq!(
        reported(&response),
        Vec::<String>::new(),
        "written in the same invocation:\n{}",
        logs.text()
    );
    assert_eq!(count(&admin, "loan").await, 123);
}

/// A server that accepts connections and never says a word (RDS Proxy waiting for a database
/// connection to lend, up to its 120 s borrow timeout). Under a paused clock: the timeout is
/// virtual time, no test waits for it.
#[tokio::test(start_paused = true)]
async fn a_database_that_never_answers_is_given_up_on_after_the_connect_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let sync = SqlSync::new(
        Model::parse(MODEL).unwrap(),
        &format!("postgres://postgres@127.0.0.1:{port}/postgres"),
    );
    let records: Vec<EventRecord> = (1..=3)
        .map(|n| record(&loan(&format!("L{n}"), 1), n))
        .collect();
    let (logs, guard) = Logs::capture();
    let started = tokio::time::Instant::now();
    let response = tokio::time::timeout(
        std::time::Duration::from_secs(3600),
        sync.handle(event(records)),
    )
    .await
    .expect("sql-sync gives up on the connection (here it waited a whole virtual hour)");
    let waited = started.elapsed();
    drop(guard);
    silent.abort();
    assert_eq!(
        reported(&response),
        [sequence(1)],
        "nothing was written: reported from the first record"
    );
    assert!(
        waited < std::time::Duration::from_secs(60),
        "within the function's 60 s (virtual time): {waited:?}"
    );
    assert!(
        logs.text().contains("connecting to the database"),
        "{}",
        logs.text()
    );
}
