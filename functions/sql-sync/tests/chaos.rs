//! sql-sync under what streams and databases do, against a real PostgreSQL (a throwaway cluster of
//! the test's own): the data table's records of many items, in per-item order across interleaved
//! shards, delivered in batches of random sizes, some batches delivered twice, earlier batches
//! replayed, the database connection killed before some deliveries (sql-sync connects again; a
//! batch that fails is retried as Lambda's mapping retries it), one record that is not an item and
//! one version PostgreSQL refuses (both parked in `cqrs_parked`, never reported). Every delivery goes through the local stream mapping's
//! own code (`cqrs_local_stack::mapper::deliver`, Lambda's rule), not a helper of this test. At
//! the end PostgreSQL holds exactly the data table's last state, item for item: the newest version
//! of each, in its entity's table or in the generic table when that version does not fit, and
//! nothing of the items that expired; nothing went to the on-failure destination.
//!
//! Seeded: it prints `seed N`; `SQL_CHAOS_SEED=N` replays the same run.

use std::collections::BTreeMap;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use cqrs_item::{Item, Value};
use cqrs_local_stack::mapper::{DeliveryReport, Invoke, InvokeError, MapperConfig, deliver};
use cqrs_local_stack::postgres::Throwaway;
use cqrs_model::Model;
use cqrs_sql::{migrate, schema::Schema};
use cqrs_sql_sync::SqlSync;
use tokio_postgres::NoTls;

const MODEL: &str = r#"
[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
attributes.loanId = { type = "string", required = true, max = 26 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }
attributes.fee = { type = "number", width = 4 }
"#;

/// xorshift64*: a seeded generator, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn loan(id: &str, version: i64, status: &str) -> Item {
    let mut item = Item::example();
    item.pk = "LOAN#t1".into();
    item.sk = id.into();
    item.id = cqrs_keys::generate_id("LOAN#t1", id);
    (item.tenant_code, item.item_type, item.version) = ("t1".into(), "LOAN".into(), version);
    item.cpk = Some("LOAN#t1".into());
    item.csk = Some(cqrs_keys::add_sort_key_version(id, version));
    item.attributes.clear();
    item.attributes.insert("loanId".into(), Value::from(id));
    item.attributes.insert("status".into(), Value::from(status));
    item.attributes.insert(
        "fee".into(),
        Value::Number(version.to_string().parse().unwrap()),
    );
    item
}

fn record(name: &str, item: &Item, sequence: u64) -> EventRecord {
    let image: serde_dynamo::Item = item.to_attributes().unwrap().into();
    let mut record = EventRecord::default();
    record.event_name = name.into();
    record.change.sequence_number = Some(format!("{sequence:021}"));
    if name == "REMOVE" {
        record.change.old_image = image;
    } else {
        record.change.new_image = image;
    }
    record
}

fn event(records: &[EventRecord]) -> Event {
    let mut event = Event::default();
    event.records = records.to_vec();
    event
}

/// sql-sync, invoked in process by the local stream mapping.
struct InProcess<'s>(&'s SqlSync);

impl Invoke<EventRecord> for InProcess<'_> {
    async fn invoke(&self, records: &[EventRecord]) -> Result<Vec<String>, InvokeError> {
        let response = self.0.handle(event(records)).await;
        Ok(response
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier.unwrap_or_default())
            .collect())
    }
}

#[tokio::test]
async fn postgres_ends_equal_to_the_data_table_under_duplicates_replays_reordering_and_faults() {
    let seed = std::env::var("SQL_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("seed {seed}");
    let mut rng = Rng(seed);

    let pg = Throwaway::start("cqrs-sql-sync-chaos").unwrap();
    let instance = pg.instance();
    let model = Model::parse(MODEL).unwrap();
    let v1 = migrate::plan(None, &Schema::of(&model)).unwrap().unwrap();
    let sync = SqlSync::new(model, &instance.url());
    assert_eq!(sync.migrate(&[(1, "V1__model.sql", &v1)]).await.unwrap(), 1);
    assert_eq!(sync.migrate(&[(1, "V1__model.sql", &v1)]).await.unwrap(), 0);
    let (admin, connection) = tokio_postgres::connect(&instance.url(), NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);

    // The data table's history: 160 loans, 1 to 6 versions each; some versions do not fit the model
    // (status "lost"); some loans expire (REMOVE of their last state).
    let mut streams: Vec<Vec<EventRecord>> = Vec::new();
    let mut expected: BTreeMap<String, Option<(i64, bool)>> = BTreeMap::new();
    let mut sequence = 0u64;
    for n in 0..160 {
        let id = format!("L{n:03}");
        let versions = 1 + rng.below(6) as i64;
        let mut records = Vec::new();
        let mut last = None;
        for version in 1..=versions {
            let fits = !rng.chance(20);
            let item = loan(&id, version, if fits { "out" } else { "lost" });
            sequence += 1;
            records.push(record(
                if version == 1 { "INSERT" } else { "MODIFY" },
                &item,
                sequence,
            ));
            last = Some((item, fits));
        }
        let (item, fits) = last.unwrap();
        if rng.chance(15) {
            sequence += 1;
            records.push(record("REMOVE", &item, sequence));
            expected.insert(id, None);
        } else {
            expected.insert(id, Some((item.version, fits)));
        }
        streams.push(records);
    }

    // 4 shards: each item's records stay in order within its shard; shards interleave.
    let mut shards: Vec<Vec<EventRecord>> = vec![Vec::new(); 4];
    for records in streams {
        let shard = rng.below(4) as usize;
        shards[shard].extend(records);
    }
    // One record that is not an item, in the middle of shard 0.
    let mut bad = EventRecord::default();
    bad.event_name = "MODIFY".into();
    bad.change.sequence_number = Some("999999999999999999999".into());
    let middle = shards[0].len() / 2;
    shards[0].insert(middle, bad);
    // One version PostgreSQL refuses (a constraint of the database's own, SQLSTATE 23514), in the
    // middle of shard 1: isolated row by row and parked, the records beside it written.
    admin
        .batch_execute("ALTER TABLE loan ADD CONSTRAINT chaos_refused CHECK (fee <> 9999)")
        .await
        .unwrap();
    let mut refused = loan("LX", 1, "out");
    refused
        .attributes
        .insert("fee".into(), Value::Number("9999".parse().unwrap()));
    let middle = shards[1].len() / 2;
    shards[1].insert(middle, record("INSERT", &refused, 999_999_999_999_999_998));
    expected.insert("LX".into(), None);

    let failures = std::env::temp_dir().join(format!("sql-chaos-{}.jsonl", std::process::id()));
    let config = MapperConfig {
        retry_backoff: std::time::Duration::from_millis(1),
        failure_file: failures.clone(),
        ..MapperConfig::default()
    };
    let invoker = InProcess(&sync);
    let mut total = DeliveryReport::default();
    let mut deliver = async |batch: &[EventRecord]| {
        let report = deliver(&invoker, "shard", batch, &config).await;
        total.invocations += report.invocations;
        total.failed_invocations += report.failed_invocations;
        total.dead_letters.extend(report.dead_letters);
    };
    let (mut drops, mut batches, mut replays) = (0u32, 0u32, 0u32);
    for shard in &shards {
        let mut delivered: Vec<Vec<EventRecord>> = Vec::new();
        let mut at = 0;
        while at < shard.len() {
            // Mostly small batches; some large enough to go in several pipelined statements
            // (cqrs_sql_sync::chunks: 50, then up to a quarter of the batch).
            let size = if rng.chance(20) {
                51 + rng.below(150) as usize
            } else {
                1 + rng.below(12) as usize
            };
            let batch = shard[at..(at + size).min(shard.len())].to_vec();
            at += batch.len();
            if rng.chance(15) {
                // The database drops every connection (a restart, a failover).
                admin
                    .execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                         WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
                        &[],
                    )
                    .await
                    .unwrap();
                drops += 1;
            }
            deliver(&batch).await;
            batches += 1;
            if rng.chance(20) {
                deliver(&batch).await;
                replays += 1;
            }
            if !delivered.is_empty() && rng.chance(15) {
                let earlier = delivered[rng.below(delivered.len() as u64) as usize].clone();
                deliver(&earlier).await;
                replays += 1;
            }
            delivered.push(batch);
        }
    }
    let _ = std::fs::remove_file(&failures);
    let parked: Vec<String> = admin
        .query("SELECT sequence_number FROM cqrs_parked", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    println!(
        "{batches} batches, {replays} redelivered, every connection dropped {drops} times; \
         {} invocations, {} failed; {} dead-lettered, {} parked",
        total.invocations,
        total.failed_invocations,
        total.dead_letters.len(),
        parked.len()
    );
    assert!(drops > 0, "the run injected faults");
    assert_eq!(
        total.dead_letters,
        Vec::<String>::new(),
        "nothing goes to the on-failure destination"
    );
    let mut parked = parked;
    parked.sort();
    assert_eq!(
        parked,
        ["000999999999999999998", "999999999999999999999"],
        "only the refused version and the record that is not an item are parked (once each, \
         however often they were delivered)"
    );

    // PostgreSQL holds the data table's last state, item for item.
    let mut found: BTreeMap<String, Option<(i64, bool)>> =
        expected.keys().map(|k| (k.clone(), None)).collect();
    for (table, fits) in [("loan", true), ("cqrs_items", false)] {
        for row in admin
            .query(&format!(r#"SELECT "sk", "version" FROM "{table}""#), &[])
            .await
            .unwrap()
        {
            let sk: String = row.get(0);
            let previous = found.insert(sk.clone(), Some((row.get(1), fits)));
            assert_eq!(previous, Some(None), "{sk} is in one place only");
        }
    }
    assert_eq!(found, expected);
}
