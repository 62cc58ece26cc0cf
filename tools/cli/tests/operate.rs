//! The operator CLI against DynamoDB Local, run as the binary an operator runs: a rebuild stopped
//! half way and resumed from its checkpoint (backfilling index keys with the current model), a
//! verify that finds differences planted by hand and is clean again after a rebuild, a
//! redrive of a parked record, the event publisher's parked records republished to an SNS FIFO
//! topic on moto (`redrive events`), the heads seed (the migration of id-keyed heads, stopped and
//! resumed, with a collided id), and the change log's move to its reserved prefix.

use std::path::PathBuf;
use std::process::{Command, Output};

use cqrs_item::{Item, Value};
use cqrs_keys::{add_sort_key_version, generate_id};
use cqrs_store::parked::ParkedRecord;
use cqrs_store::{Store, Tables};
use cqrs_testkit::TestTables;

fn store(t: &TestTables) -> Store {
    Store::new(
        t.client.clone(),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency).with_parked(&t.parked),
    )
}

/// Runs `cqrs <args>` on the tables of `t`; answers the exit code and the parsed JSON output
/// (`Null` when the output is not JSON).
///
/// It runs where a service keeps its `model.toml` (the example's): `rebuild` reads it from there.
fn cqrs(t: &TestTables, args: &[&str]) -> (i32, serde_json::Value, Output) {
    cqrs_with(t, args, &[])
}

/// [`cqrs`] with more environment variables.
fn cqrs_with(
    t: &TestTables,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, serde_json::Value, Output) {
    let service = std::env::temp_dir().join(format!("cqrs-operate-{}", t.data));
    std::fs::create_dir_all(&service).expect("a service folder");
    std::fs::write(service.join("model.toml"), cqrs_model::EXAMPLE_TOML).expect("model.toml");
    let output = Command::new(env!("CARGO_BIN_EXE_cqrs"))
        .current_dir(&service)
        .args(args)
        .args(["--endpoint-url", &cqrs_testkit::endpoint::endpoint()])
        .env("DATA_TABLE", &t.data)
        .env("HISTORY_TABLE", &t.history)
        .env("PARKED_TABLE", &t.parked)
        .env("COMMAND_TABLE", &t.command)
        .env("IDEMPOTENCY_TABLE", &t.idempotency)
        .envs(env.iter().copied())
        .output()
        .expect("the cqrs binary runs");
    let json = serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
    (output.status.code().unwrap_or(-1), json, output)
}

/// Version `v` of product `id` of tenant t1, as an older model wrote it: no entity, no index keys.
fn product(id: &str, v: i64) -> Item {
    let mut item = Item::example();
    item.pk = "PRODUCT#t1".into();
    item.sk = add_sort_key_version(id, v);
    item.id = generate_id(&item.pk, id);
    item.code = id.into();
    item.version = v;
    item.name = format!("{id} v{v}");
    item.attributes
        .insert("category".into(), Value::from(format!("cat{}", v % 3)));
    item.attributes
        .insert("priceCents".into(), Value::from(100 * v));
    item.entity = None;
    item.model_revision = None;
    item.index_keys.clear();
    item
}

async fn data_items(t: &TestTables) -> Vec<Item> {
    let mut items = Vec::new();
    let mut pages = t
        .client
        .scan()
        .table_name(&t.data)
        .consistent_read(true)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        for row in page.unwrap().items() {
            items.push(Item::from_attributes(row.clone()).unwrap());
        }
    }
    items
}

fn checkpoint_path(t: &TestTables) -> PathBuf {
    std::env::temp_dir().join(format!("{}-rebuild.json", t.history))
}

#[tokio::test]
async fn a_stopped_rebuild_resumes_from_its_checkpoint_and_backfills_index_keys() {
    let t = cqrs_testkit::fresh_tables().await;
    let store = store(&t);
    let items = 60;
    let versions: Vec<Item> = (0..items)
        .flat_map(|n| (1..=3).map(move |v| product(&format!("P{n:03}"), v)))
        .collect();
    assert!(
        store
            .put_history_batch(&versions)
            .await
            .iter()
            .all(Result::is_ok)
    );
    // The data table as the old model left it: version 3 without index keys.
    for item in versions.iter().filter(|i| i.version == 3) {
        store.put_data_if_newer(item).await.unwrap();
    }
    let checkpoint = checkpoint_path(&t);
    let checkpoint_arg = checkpoint.to_str().unwrap();
    let common = [
        "rebuild",
        "--segments",
        "3",
        "--page-size",
        "20",
        "--checkpoint",
        checkpoint_arg,
        "--json",
    ];

    // A dry run writes nothing.
    let (code, dry, _) = cqrs(&t, &[&common[..], &["--dry-run"]].concat());
    assert_eq!(code, 0, "{dry}");
    // An item whose versions span two pages counts in each.
    assert!(
        dry["totals"]["items"].as_u64().unwrap() >= items as u64,
        "{dry}"
    );
    assert_eq!(dry["totals"]["versionsRead"], items * 3);
    assert!(data_items(&t).await.iter().all(|i| i.index_keys.is_empty()));

    // Stopped after 2 pages, as a killed run: the checkpoint stays, part of the table is done.
    let (code, first, out) = cqrs(&t, &[&common[..], &["--stop-after-pages", "2"]].concat());
    assert_eq!(code, 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(checkpoint.exists(), "the checkpoint stays for the resume");
    let done_first = data_items(&t)
        .await
        .iter()
        .filter(|i| !i.index_keys.is_empty())
        .count();
    assert!(
        done_first > 0 && done_first < items,
        "a partial rebuild: {done_first} of {items}"
    );
    assert_eq!(first["complete"], false);

    // Resumed: it goes on from the checkpoint, not from the start, and finishes.
    let (code, second, out) = cqrs(&t, &common);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(second["resumed"], true);
    assert_eq!(second["complete"], true);
    let pages_first = first["thisRun"]["pages"].as_u64().unwrap();
    let pages_second = second["thisRun"]["pages"].as_u64().unwrap();
    // Stopped once 2 pages that read versions were done (a segment without items reads an empty
    // page, which does not count); pages other segments had in flight finished too.
    let read_first = first["thisRun"]["versionsRead"].as_u64().unwrap();
    assert!((40..=60).contains(&read_first), "{first}");
    assert_eq!(
        second["totals"]["pages"].as_u64().unwrap(),
        pages_first + pages_second
    );
    assert!(
        !checkpoint.exists(),
        "a completed run removes its checkpoint"
    );
    assert_eq!(second["totals"]["versionsRead"], items * 3);

    let revision = cqrs_model::Model::example().revision().to_string();
    let data = data_items(&t).await;
    assert_eq!(data.len(), items);
    for item in &data {
        assert_eq!(item.version, 3, "{}", item.sk);
        assert_eq!(item.model_revision.as_deref(), Some(revision.as_str()));
        assert_eq!(item.entity.as_deref(), Some("product"));
        assert_eq!(
            item.index_keys["gsi5pk"],
            Value::from("PRICE#t1#cat0"),
            "{}",
            item.sk
        );
    }
    // The rebuilt table agrees with history.
    let (code, verified, _) = cqrs(&t, &["verify", "--json"]);
    assert_eq!(code, 0, "{verified}");
    println!(
        "rebuild: {items} items (3 versions each) stopped after {pages_first} pages with \
         {done_first} rebuilt, resumed from the checkpoint for {pages_second} more pages; \
         {items} of {items} items at their newest version with backfilled gsi5 keys, verify clean"
    );
}

#[tokio::test]
async fn verify_finds_differences_planted_by_hand_and_a_rebuild_repairs_them() {
    let t = cqrs_testkit::fresh_tables().await;
    let store = store(&t);
    let versions: Vec<Item> = (0..12)
        .flat_map(|n| (1..=2).map(move |v| product(&format!("V{n:03}"), v)))
        .collect();
    store.put_history_batch(&versions).await;
    for item in versions.iter().filter(|i| i.version == 2) {
        store.put_data_if_newer(item).await.unwrap();
    }
    let (code, clean, _) = cqrs(&t, &["verify", "--json"]);
    assert_eq!(
        (code, clean["differences"].as_u64()),
        (0, Some(0)),
        "{clean}"
    );

    // Break the data table: one item gone, one edited, one moved back to version 1.
    let key = |sk: &str| {
        [
            (
                "pk".to_string(),
                aws_sdk_dynamodb::types::AttributeValue::S("PRODUCT#t1".into()),
            ),
            (
                "sk".to_string(),
                aws_sdk_dynamodb::types::AttributeValue::S(sk.into()),
            ),
        ]
        .into_iter()
        .collect::<std::collections::HashMap<_, _>>()
    };
    t.client
        .delete_item()
        .table_name(&t.data)
        .set_key(Some(key("V001")))
        .send()
        .await
        .unwrap();
    let mut edited = product("V002", 2).into_data_item();
    edited.name = "edited by hand".into();
    let mut older = product("V003", 1).into_data_item();
    older.name = "moved back".into();
    for item in [edited, older] {
        t.client
            .put_item()
            .table_name(&t.data)
            .set_item(Some(item.to_attributes().unwrap()))
            .send()
            .await
            .unwrap();
    }

    let (code, found, _) = cqrs(&t, &["verify", "--json", "--show", "2"]);
    assert_eq!(code, 1, "{found}");
    assert_eq!(found["differences"], 3);
    assert_eq!(
        found["byKind"],
        serde_json::json!({"missing": 1, "content": 1, "behind": 1})
    );
    let first: Vec<&str> = found["first"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["sk"].as_str().unwrap())
        .collect();
    assert_eq!(first, ["V001", "V002"]);
    let (code, _, text) = cqrs(&t, &["verify"]);
    assert_eq!(code, 1);
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(
        text.contains("3 differences") && text.contains("missing"),
        "{text}"
    );

    // The worked example of the README: rebuild, verify again.
    let checkpoint = checkpoint_path(&t);
    let (code, rebuilt, _) = cqrs(
        &t,
        &[
            "rebuild",
            "--json",
            "--checkpoint",
            checkpoint.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{rebuilt}");
    let (code, after, _) = cqrs(&t, &["verify", "--json"]);
    assert_eq!(
        (code, after["differences"].as_u64()),
        (0, Some(0)),
        "{after}"
    );
    println!(
        "verify: 3 differences planted by hand (1 missing, 1 content, 1 behind) found with exit \
         code 1; after a rebuild ({} written) verify is clean",
        rebuilt["totals"]["written"]
    );
}

#[tokio::test]
async fn a_parked_record_is_listed_shown_and_redriven_from_history() {
    let t = cqrs_testkit::fresh_tables().await;
    let store = store(&t);
    // R has two versions in history; the data table missed version 2 (its record was parked).
    let versions = [product("R001", 1), product("R001", 2)];
    store.put_history_batch(&versions).await;
    store.put_data_if_newer(&versions[0]).await.unwrap();
    let mut parked = ParkedRecord::example();
    parked.item_id = Some(versions[1].id.clone());
    parked.item_pk = Some("PRODUCT#t1".into());
    parked.item_sk = Some("R001@2".into());
    parked.version = Some(2);
    parked.reason_kind = "history-conflict".into();
    parked.record = Some(r#"{"eventID":"e2","dynamodb":{"SequenceNumber":"100"}}"#.into());
    store.park(&parked).await.unwrap();

    let (code, list, out) = cqrs(&t, &["redrive", "list", "--json"]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list[0]["itemSk"], "R001@2");
    let (code, shown, _) = cqrs(
        &t,
        &["redrive", "show", "--pk", "PRODUCT#t1", "--sk", "R001"],
    );
    assert_eq!(code, 0);
    assert_eq!(shown[0]["record"]["eventID"], "e2", "{shown}");

    let (code, dry, _) = cqrs(&t, &["redrive", "run", "--dry-run", "--json"]);
    assert_eq!(code, 0, "{dry}");
    assert_eq!(dry["items"][0]["outcome"], "would-write");
    assert_eq!(store.list_parked(Some("t1"), None).await.unwrap().len(), 1);

    let (code, ran, _) = cqrs(&t, &["redrive", "run", "--json"]);
    assert_eq!(code, 0, "{ran}");
    assert_eq!(ran["items"][0]["outcome"], "written");
    assert_eq!(ran["items"][0]["version"], 2);
    assert_eq!(ran["items"][0]["removed"], 1);
    let data = store
        .get_data_item("PRODUCT#t1", "R001")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(data.version, 2);
    assert!(
        store
            .list_parked(Some("t1"), None)
            .await
            .unwrap()
            .is_empty()
    );
    println!(
        "redrive: 1 parked record listed and shown, its item re-projected from history (data \
         table v1 -> v2), 1 parked record removed, 0 left"
    );
}

#[tokio::test]
async fn redrive_leaves_change_event_records_parked_and_says_so() {
    let t = cqrs_testkit::fresh_tables().await;
    let store = store(&t);
    // R missed version 2 in the data table (data-sync parked its record); the publisher parked a
    // record of R and one of S (events that could not be made or published). Both items have
    // history: a re-projection would find something to write for each.
    let versions = [product("R002", 1), product("R002", 2), product("S002", 1)];
    store.put_history_batch(&versions).await;
    store.put_data_if_newer(&versions[0]).await.unwrap();
    let parked_of = |item: &Item, seq: &str, kind: &str| {
        let mut parked = ParkedRecord::example();
        parked.item_id = Some(item.id.clone());
        parked.item_pk = Some(item.pk.clone());
        parked.item_sk = Some(item.sk.clone());
        parked.version = Some(item.version);
        parked.sequence_number = seq.into();
        parked.reason_kind = kind.into();
        parked
    };
    let data_sync = parked_of(&versions[1], "100", "history-conflict");
    // The publisher keeps the item's data-table key (no version).
    let mut event_r = parked_of(&versions[1], "200", "event-feed");
    event_r.item_sk = Some("R002".into());
    let mut event_s = parked_of(&versions[2], "300", "event-feed");
    event_s.item_sk = Some("S002".into());
    for parked in [&data_sync, &event_r, &event_s] {
        store.park(parked).await.unwrap();
    }

    let (code, _, out) = cqrs(&t, &["redrive", "run", "--dry-run"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "2 change-event records left parked (change events, not republished by a \
             re-projection: `cqrs redrive events` republishes them to the events topic)"
        ),
        "{text}"
    );

    let (code, ran, out) = cqrs(&t, &["redrive", "run", "--json"]);
    let mut left: Vec<(String, String)> = store
        .list_parked(Some("t1"), None)
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.reason_kind, p.sequence_number))
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            ("event-feed".to_string(), "200".to_string()),
            ("event-feed".to_string(), "300".to_string())
        ],
        "redrive removed change-event records without publishing anything: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Data-sync's record was redriven: R re-projected, its record removed; S (change-event
    // records only) not re-projected.
    assert_eq!(code, 1, "{ran}");
    assert_eq!(ran["items"].as_array().map(Vec::len), Some(1), "{ran}");
    assert_eq!(ran["items"][0]["sk"], "R002");
    assert_eq!(ran["items"][0]["outcome"], "written");
    assert_eq!(ran["items"][0]["removed"], 1);
    assert_eq!(ran["eventFeed"]["left"], 2, "{ran}");
    assert_eq!(
        ran["eventFeed"]["why"],
        "change events, not republished by a re-projection: `cqrs redrive events` republishes \
         them to the events topic"
    );
    assert!(
        store
            .get_data_item("PRODUCT#t1", "S002")
            .await
            .unwrap()
            .is_none()
    );
    println!(
        "redrive: 1 data-sync record redriven and removed, 2 change-event records (event-feed) left parked"
    );
}

async fn put_row(t: &TestTables, table: &str, item: &Item) {
    t.client
        .put_item()
        .table_name(table)
        .set_item(Some(item.to_attributes().unwrap()))
        .send()
        .await
        .unwrap();
}

async fn put_legacy_head(t: &TestTables, id: &str, latest: i64) {
    use aws_sdk_dynamodb::types::AttributeValue;
    t.client
        .put_item()
        .table_name(&t.idempotency)
        .item("pk", AttributeValue::S(cqrs_keys::legacy_head_key(id)))
        .item("latest", AttributeValue::N(latest.to_string()))
        .send()
        .await
        .unwrap();
}

fn version_of(pk: &str, base: &str, v: i64) -> Item {
    let mut item = product(base, v);
    item.pk = pk.into();
    item.id = generate_id(pk, base);
    item
}

/// A deployment from before heads had their `(pk, sk)` key: legacy heads (one collided, one
/// orphaned), items with rows only, history only, data only. The seed, stopped after two pages
/// and resumed, gives each item its own head and marks the heads complete; the collision and the
/// orphan are reported (exit 1).
#[tokio::test]
async fn the_heads_seed_moves_legacy_heads_reports_collisions_and_completes() {
    let t = cqrs_testkit::fresh_tables().await;
    let store = store(&t);
    // Collided: the order (ORDER#t1 / ORDER#o1) at 5 and ORDER#t1#ORDER / o1 at 2 shared one head.
    for v in 1..=5 {
        put_row(&t, &t.history, &version_of("ORDER#t1", "ORDER#o1", v)).await;
    }
    for v in 1..=2 {
        put_row(&t, &t.history, &version_of("ORDER#t1#ORDER", "o1", v)).await;
    }
    put_legacy_head(&t, &generate_id("ORDER#t1", "ORDER#o1"), 5).await;
    // A legacy head that knows more than the stored rows (older rows expired).
    put_row(&t, &t.command, &version_of("PRODUCT#t1", "P1", 3)).await;
    put_row(&t, &t.history, &version_of("PRODUCT#t1", "P1", 3)).await;
    put_legacy_head(&t, &generate_id("PRODUCT#t1", "P1"), 7).await;
    // An orphan: nothing stored any more.
    put_legacy_head(&t, &generate_id("PRODUCT#t1", "GONE"), 4).await;
    // No legacy head: rows only, history only, data only.
    for v in 1..=12 {
        put_row(&t, &t.command, &version_of("PRODUCT#t1", "ROWS", v)).await;
    }
    put_row(&t, &t.history, &version_of("PRODUCT#t1", "HIST", 6)).await;
    put_row(
        &t,
        &t.data,
        &version_of("PRODUCT#t1", "DATA", 9).into_data_item(),
    )
    .await;
    // A head a command already moved past what is stored: never lowered.
    store
        .write_version(&version_of("PRODUCT#t1", "AHEAD", 1), None, None)
        .await
        .unwrap();
    store.raise_head("PRODUCT#t1", "AHEAD", 20).await.unwrap();
    assert_eq!(
        store.heads_state().await.unwrap(),
        cqrs_store::HeadsState::Incomplete
    );

    let checkpoint = std::env::temp_dir().join(format!("heads-{}.json", t.command));
    let checkpoint = checkpoint.to_str().unwrap();
    let args = [
        "heads",
        "seed",
        "--page-size",
        "3",
        "--checkpoint",
        checkpoint,
        "--json",
    ];
    let (code, _, out) = cqrs(&t, &[&args[..], &["--stop-after-pages", "2"]].concat());
    assert_eq!(code, 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::path::Path::new(checkpoint).exists(), "a checkpoint");
    assert_eq!(
        store.heads_state().await.unwrap(),
        cqrs_store::HeadsState::Incomplete,
        "not complete before it ends"
    );
    let (code, summary, out) = cqrs(&t, &args);
    assert_eq!(code, 1, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(summary["state"], "complete", "{summary}");
    assert_eq!(summary["collisionsFound"], 1, "{summary}");
    assert_eq!(summary["orphansFound"], 1, "{summary}");
    assert_eq!(summary["collisions"][0]["id"], "ORDER#t1#ORDER#o1");
    assert!(
        !std::path::Path::new(checkpoint).exists(),
        "removed at the end"
    );

    for (pk, sk, latest) in [
        ("ORDER#t1", "ORDER#o1", 5),
        ("ORDER#t1#ORDER", "o1", 2),
        ("PRODUCT#t1", "P1", 7),
        ("PRODUCT#t1", "GONE", 4),
        ("PRODUCT#t1", "ROWS", 12),
        ("PRODUCT#t1", "HIST", 6),
        ("PRODUCT#t1", "DATA", 9),
        ("PRODUCT#t1", "AHEAD", 20),
    ] {
        assert_eq!(
            store.get_head(pk, sk).await.unwrap(),
            Some(latest),
            "{pk} / {sk}"
        );
    }
    let (code, status, _) = cqrs(&t, &["heads", "status", "--json"]);
    assert_eq!((code, status["state"].clone()), (0, "complete".into()));
    // Shared tables are never complete, whatever a later seed does.
    let (code, _, _) = cqrs(&t, &["heads", "mark", "shared"]);
    assert_eq!(code, 0);
    let (_, summary, _) = cqrs(&t, &args);
    assert_eq!(summary["state"], "shared", "{summary}");
}

/// Issue 36, item 5: items whose id is 2044 to 2048 bytes (written before heads, or by
/// mbc-cqrs-serverless) have a head key over DynamoDB's 2048-byte limit. The seed skips and lists
/// them (exit 1) and completes; before, every run failed on their page and never completed.
#[tokio::test]
async fn the_heads_seed_skips_and_lists_items_whose_head_key_cannot_exist() {
    let t = cqrs_testkit::fresh_tables().await;
    let store = store(&t);
    let long_pk = format!("PRODUCT#t1#{}", "x".repeat(1034));
    let mut long = Vec::new();
    for (n, sk_len) in [(1, 998), (2, 1002)] {
        let sk = format!("{n}{}", "s".repeat(sk_len - 1));
        let id_len = generate_id(&long_pk, &sk).len();
        assert!((2044..=2048).contains(&id_len), "{id_len}");
        for v in 1..=2 {
            put_row(&t, &t.command, &version_of(&long_pk, &sk, v)).await;
        }
        put_row(&t, &t.history, &version_of(&long_pk, &sk, 2)).await;
        put_row(&t, &t.data, &version_of(&long_pk, &sk, 2).into_data_item()).await;
        long.push(sk);
    }
    for v in 1..=3 {
        put_row(&t, &t.command, &version_of("PRODUCT#t1", "SHORT", v)).await;
    }
    let checkpoint = std::env::temp_dir().join(format!("heads-long-{}.json", t.command));
    let checkpoint = checkpoint.to_str().unwrap();
    let args = [
        "heads",
        "seed",
        "--page-size",
        "2",
        "--checkpoint",
        checkpoint,
        "--json",
    ];
    let (code, summary, out) = cqrs(&t, &args);
    assert_eq!(
        code,
        1,
        "{summary} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(summary["state"], "complete", "{summary}");
    assert_eq!(summary["keysTooLongFound"], 2, "{summary}");
    let mut listed: Vec<(String, String)> = summary["keysTooLong"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["pk"].as_str().unwrap().to_string(),
                i["sk"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        long.iter()
            .map(|sk| (long_pk.clone(), sk.clone()))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        store.get_head("PRODUCT#t1", "SHORT").await.unwrap(),
        Some(3)
    );
    assert!(
        !std::path::Path::new(checkpoint).exists(),
        "the run completed"
    );
}

/// A change log entry of tenant t1 as data-sync writes it now, and the same entry under the old
/// `LOG#` prefix.
fn change_log_entries(event: &str) -> (Item, Item) {
    let mut change = cqrs_data_sync::Change::example();
    change.item.id = format!("{}-{event}", change.item.id);
    let current = cqrs_data_sync::change_log::entry(&change).unwrap();
    let mut legacy = current.clone();
    legacy.pk = current.pk.replacen(
        cqrs_keys::CHANGE_LOG_PK_PREFIX,
        cqrs_data_sync::change_log::LEGACY_PK_PREFIX,
        1,
    );
    legacy.id = generate_id(&legacy.pk, &legacy.sk);
    legacy.item_type = cqrs_data_sync::change_log::LEGACY_PK_PREFIX.into();
    (current, legacy)
}

/// `cqrs change-log migrate` moves the old prefix's entries (a second run moves nothing), leaves an
/// entry whose new key holds another one in place and says so with exit 1, and without a table
/// name fails naming the flag and the variable.
#[tokio::test]
async fn the_change_log_migration_moves_old_entries_once_and_reports_conflicts() {
    let t = cqrs_testkit::fresh_tables().await;
    let (current, legacy) = change_log_entries("a");
    put_row(&t, &t.data, &legacy).await;
    let (code, json, output) = cqrs(&t, &["change-log", "migrate", "--table", &t.data, "--json"]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(
        (&json["moved"], &json["alreadyMoved"], &json["conflicts"]),
        (&1.into(), &0.into(), &0.into()),
        "{json}"
    );
    let keys: Vec<(String, String)> = data_items(&t)
        .await
        .into_iter()
        .map(|i| (i.pk, i.sk))
        .collect();
    assert_eq!(keys, [(current.pk.clone(), current.sk.clone())]);
    let (code, json, _) = cqrs(&t, &["change-log", "migrate", "--table", &t.data, "--json"]);
    assert_eq!((code, &json["moved"]), (0, &0.into()), "{json}");

    // An old entry whose new key already holds a different entry (another version: an idempotency
    // key alone, which entries no longer hold, does not make two entries differ) stays where it is.
    let (mut taken, legacy) = change_log_entries("b");
    taken.attributes.insert("version".into(), Value::from(99));
    put_row(&t, &t.data, &taken).await;
    put_row(&t, &t.data, &legacy).await;
    let (code, output_json, output) = cqrs(&t, &["change-log", "migrate", "--table", &t.data]);
    assert_eq!(code, 1, "{}", String::from_utf8_lossy(&output.stdout));
    assert_eq!(output_json, serde_json::Value::Null);
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 left in place"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(
        data_items(&t)
            .await
            .iter()
            .any(|i| i.pk == legacy.pk && i.sk == legacy.sk)
    );

    let (code, _, output) = cqrs(&t, &["change-log", "migrate"]);
    assert_eq!(code, 2);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--table") && stderr.contains("CHANGE_LOG_TABLE"),
        "{stderr}"
    );
}

#[tokio::test]
async fn verify_sql_finds_differences_planted_in_postgres_and_rebuild_sql_repairs_them() {
    let t = cqrs_testkit::fresh_tables().await;
    let store = store(&t);
    for n in 0..10 {
        store
            .put_data_if_newer(&product(&format!("S{n:03}"), 2))
            .await
            .unwrap();
    }
    // A throwaway PostgreSQL of the test's own, stopped on drop (also when the test fails).
    let pg =
        cqrs_local_stack::postgres::Throwaway::start("cqrs-operate-pg-verify").expect("starts");
    let url = pg.url();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let model = cqrs_model::Model::example();
    let ddl = cqrs_sql::migrate::plan(None, &cqrs_sql::schema::Schema::of(&model))
        .unwrap()
        .unwrap();
    client.batch_execute(&ddl).await.unwrap();

    // An empty read model: every item missing; the rebuild writes them all.
    let (code, found, _) = cqrs(&t, &["verify", "--sql", "--sql-url", &url, "--json"]);
    assert_eq!(
        (code, &found["byKind"]),
        (1, &serde_json::json!({"missing": 10})),
        "{found}"
    );
    let (code, rebuilt, _) = cqrs(&t, &["rebuild", "--sql", "--sql-url", &url, "--json"]);
    assert_eq!(
        (
            code,
            rebuilt["repaired"].as_u64(),
            rebuilt["remaining"].as_u64()
        ),
        (0, Some(10), Some(0)),
        "{rebuilt}"
    );
    let (code, clean, _) = cqrs(&t, &["verify", "--sql", "--sql-url", &url, "--json"]);
    assert_eq!(
        (code, clean["differences"].as_u64()),
        (0, Some(0)),
        "{clean}"
    );

    // Break it by hand: one row edited, one gone, one moved back a version, one that the data
    // table never had.
    client
        .batch_execute(
            r#"UPDATE "product" SET "name" = 'edited by hand' WHERE "sk" = 'S002';
               DELETE FROM "product" WHERE "sk" = 'S003';
               UPDATE "product" SET "version" = 1 WHERE "sk" = 'S004';
               INSERT INTO "product" ("pk", "sk", "id", "tenant_code", "item_type", "version")
                 VALUES ('PRODUCT#t1', 'S999', 'PRODUCT#t1#S999', 't1', 'PRODUCT', 1);"#,
        )
        .await
        .unwrap();
    let (code, found, _) = cqrs(&t, &["verify", "--sql", "--sql-url", &url, "--json"]);
    assert_eq!(code, 1);
    assert_eq!(
        found["byKind"],
        serde_json::json!({"behind": 1, "content": 1, "missing": 1, "orphan": 1}),
        "{found}"
    );
    let (code, rebuilt, _) = cqrs(&t, &["rebuild", "--sql", "--sql-url", &url, "--json"]);
    assert_eq!(
        (
            code,
            rebuilt["repaired"].as_u64(),
            rebuilt["remaining"].as_u64()
        ),
        (0, Some(4), Some(0)),
        "{rebuilt}"
    );
    let name: String = client
        .query_one(r#"SELECT "name" FROM "product" WHERE "sk" = 'S002'"#, &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(name, "S002 v2");
    let orphans: i64 = client
        .query_one(r#"SELECT count(*) FROM "product" WHERE "sk" = 'S999'"#, &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(orphans, 0);
}

/// A moto server of its own (SQS, on a free port of 127.0.0.1), stopped and its state folder
/// removed on drop, also when an assertion fails; its endpoint and an SQS client on it.
struct MotoSqs {
    /// Held for its drop, which stops the server.
    _server: cqrs_local_stack::moto::Throwaway,
    endpoint: String,
    sqs: aws_sdk_sqs::Client,
}

impl MotoSqs {
    fn start(name: &str) -> Self {
        let server =
            cqrs_local_stack::moto::Throwaway::start(&format!("cli-{name}")).expect("moto starts");
        MotoSqs {
            endpoint: server.endpoint(),
            sqs: server.sqs(),
            _server: server,
        }
    }

    /// A FIFO queue `name`, as the template makes a consumer's.
    async fn fifo(&self, name: &str) -> String {
        use aws_sdk_sqs::types::QueueAttributeName;
        self.sqs
            .create_queue()
            .queue_name(name)
            .attributes(QueueAttributeName::FifoQueue, "true")
            .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
            .send()
            .await
            .unwrap()
            .queue_url()
            .unwrap()
            .to_string()
    }

    /// The queue's messages, visible and in flight.
    async fn depth(&self, url: &str) -> usize {
        use aws_sdk_sqs::types::QueueAttributeName;
        let answer = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .unwrap();
        answer
            .attributes()
            .unwrap()
            .values()
            .map(|v| v.parse::<usize>().unwrap())
            .sum()
    }

    /// Runs `cqrs <args>` with this server as SQS (and `env`); answers the exit code, the JSON
    /// output (`Null` when it is none) and standard error.
    fn cqrs(
        &self,
        args: &[&str],
        dir: Option<&std::path::Path>,
        env: &[(&str, &str)],
    ) -> (Option<i32>, serde_json::Value, String) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cqrs"));
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        let output = command
            .args(args)
            .args(["--sqs-endpoint-url", &self.endpoint, "--json"])
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env_remove("AWS_PROFILE")
            .envs(env.iter().copied())
            .output()
            .expect("the cqrs binary runs");
        let json = serde_json::from_slice(&output.stdout).unwrap_or_default();
        (
            output.status.code(),
            json,
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    }
}

/// `cqrs redrive consumer` against moto's SQS: the dry run counts the dead-letter queue by
/// parking reason, lists it and moves nothing; the run moves it all.
#[tokio::test]
async fn redrive_consumer_dry_run_counts_by_reason_and_moves_nothing_then_the_run_moves_all() {
    use aws_sdk_sqs::types::MessageAttributeValue;
    let moto = MotoSqs::start("redrive");
    let queue = moto.fifo("shop-search.fifo").await;
    let dlq = moto.fifo("shop-search-dlq.fifo").await;
    for (n, group, kind) in [
        (1, "g1", Some("poison")),
        (2, "g1", Some("held")),
        (3, "g2", None),
    ] {
        let mut send = moto
            .sqs
            .send_message()
            .queue_url(&dlq)
            .message_body(format!(r#"{{"id":"e{n}"}}"#))
            .message_group_id(group)
            .message_deduplication_id(format!("e{n}:park:m{n}"));
        if let Some(kind) = kind {
            let value = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(kind)
                .build()
                .unwrap();
            send = send.message_attributes("cqrs-reason-kind", value);
        }
        send.send().await.unwrap();
    }
    let redrive = [
        "redrive",
        "consumer",
        "--queue-url",
        &queue,
        "--dead-letter-url",
        &dlq,
    ];

    let (code, json, stderr) = moto.cqrs(&[&redrive[..], &["--dry-run"]].concat(), None, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        (
            &json["moved"],
            &json["byReason"],
            &json["left"],
            &json["dryRun"],
            &json["error"]
        ),
        (
            &serde_json::json!(0),
            &serde_json::json!({"held": 1, "poison": 1, "unknown": 1}),
            &serde_json::json!(3),
            &serde_json::json!(true),
            &serde_json::Value::Null
        ),
        "{json} {stderr}"
    );
    let mut listed: Vec<(String, String)> = json["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["eventId"].as_str().unwrap().to_string(),
                m["reasonKind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [("e1", "poison"), ("e2", "held"), ("e3", "unknown")]
            .map(|(e, k)| (e.to_string(), k.to_string()))
    );
    assert_eq!(
        (moto.depth(&dlq).await, moto.depth(&queue).await),
        (3, 0),
        "nothing moved"
    );

    let (code, json, stderr) = moto.cqrs(&redrive, None, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        (json["moved"].as_u64(), json["left"].as_u64()),
        (Some(3), Some(0)),
        "{json}"
    );
    assert_eq!((moto.depth(&dlq).await, moto.depth(&queue).await), (0, 3));
}

/// `cqrs replay` against DynamoDB Local's history table and moto's SQS: the versions written
/// since `--since`, of the model's entities, into the queue; a queue that does not exist is a
/// failed send (exit 1), a bad time refused by the parser.
#[tokio::test]
async fn replay_sends_the_versions_since_a_time_into_the_consumers_queue() {
    let t = cqrs_testkit::fresh_tables().await;
    let store = store(&t);
    let versions: Vec<Item> = (1..=3)
        .map(|v| {
            let mut item = product("P010", v);
            item.entity = Some("product".into());
            item.updated_at = format!("2026-01-01T00:00:0{v}.000Z");
            item
        })
        .collect();
    store.put_history_batch(&versions).await;
    let moto = MotoSqs::start("replay");
    let queue = moto.fifo("shop-search.fifo").await;
    let service = std::env::temp_dir().join(format!("cqrs-operate-{}", t.data));
    std::fs::create_dir_all(&service).expect("a service folder");
    std::fs::write(service.join("model.toml"), cqrs_model::EXAMPLE_TOML).expect("model.toml");
    let endpoint = cqrs_testkit::endpoint::endpoint();
    let replay = |queue: &str, since: &str| {
        moto.cqrs(
            &[
                "replay",
                "--queue-url",
                queue,
                "--since",
                since,
                "--endpoint-url",
                &endpoint,
            ],
            Some(&service),
            &[("HISTORY_TABLE", t.history.as_str())],
        )
    };

    let (code, json, stderr) = replay(&queue, "2026-01-01T00:00:02Z");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        (
            &json["versions"],
            &json["sent"],
            &json["failed"],
            &json["byEntity"]
        ),
        (
            &serde_json::json!(2),
            &serde_json::json!(2),
            &serde_json::json!(0),
            &serde_json::json!({"product": 2})
        ),
        "{json}"
    );
    assert_eq!(moto.depth(&queue).await, 2);

    let missing = format!("{}/000000000000/no-such-queue.fifo", moto.endpoint);
    let (code, json, stderr) = replay(&missing, "2026-01-01T00:00:02Z");
    assert_eq!(code, Some(1), "{json} {stderr}");
    assert_eq!(
        (&json["sent"], &json["failed"]),
        (&serde_json::json!(0), &serde_json::json!(2))
    );

    let (code, _, stderr) = replay(&queue, "yesterday");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("not an RFC 3339 time"), "{stderr}");
}

/// Version `v` of product `id` of tenant t1 as the command handler writes it now (entity
/// `product`: its change events leave the service).
fn product_event(id: &str, v: i64) -> Item {
    let mut item = product(id, v);
    item.entity = Some("product".into());
    item.updated_at = format!("2026-01-01T00:00:0{v}.000Z");
    item
}

/// A record of the data table's stream as Lambda delivers it: `name` (`MODIFY`, `REMOVE`) of
/// `id`, its old image version `old` and new image version `new` (data table form), at sequence
/// number `seq`; a `REMOVE` is DynamoDB's TTL.
fn data_stream_record(
    id: &str,
    name: &str,
    old: Option<i64>,
    new: Option<i64>,
    seq: &str,
) -> aws_lambda_events::event::dynamodb::EventRecord {
    let image = |v: Option<i64>| match v {
        Some(v) => serde_json::to_value(serde_dynamo::Item::from(
            product_event(id, v)
                .into_data_item()
                .to_attributes()
                .unwrap(),
        ))
        .unwrap(),
        None => serde_json::json!({}),
    };
    let mut record = serde_json::json!({
        "eventID": format!("e-{id}-{seq}"),
        "eventName": name,
        "awsRegion": "us-east-1",
        "dynamodb": {
            "Keys": {"pk": {"S": "PRODUCT#t1"}, "sk": {"S": id}},
            "OldImage": image(old),
            "NewImage": image(new),
            "SequenceNumber": seq,
            "SizeBytes": 1,
            "ApproximateCreationDateTime": 1767225600.0
        }
    });
    if name == "REMOVE" {
        record["userIdentity"] =
            serde_json::json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"});
    }
    serde_json::from_value(record).unwrap()
}

/// `cqrs redrive events` against DynamoDB Local and moto's SNS FIFO topic, a FIFO queue
/// subscribed with raw delivery standing for a subscriber outside the framework: the
/// publisher's parked records (an event SNS refused, the TTL removal SNS refused, a record whose
/// missing version history holds again, a refused event whose stream record was too large to
/// keep, a record whose missing version history still lacks)
/// are republished as the publisher makes them, once each, and removed; the last stays with
/// its reason; a second run sends nothing.
#[tokio::test]
async fn redrive_events_republishes_parked_change_events_to_the_topic_and_removes_them() {
    use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
    use cqrs_event_publisher::PublishError;
    use cqrs_event_publisher::park::{parked, refused};
    use cqrs_events::{FeedError, event_id, ttl_removal_id};

    let t = cqrs_testkit::fresh_tables().await;
    let store = store(&t);
    // History: E001 v1..3, E002 v1 and v3 (v2 gone), E003 v1, E004 v1..3.
    let history: Vec<Item> = [
        ("E001", 1),
        ("E001", 2),
        ("E001", 3),
        ("E002", 1),
        ("E002", 3),
        ("E003", 1),
        ("E004", 1),
        ("E004", 2),
        ("E004", 3),
        ("E005", 1),
        ("E005", 2),
    ]
    .into_iter()
    .map(|(id, v)| product_event(id, v))
    .collect();
    for written in store.put_history_batch(&history).await {
        written.unwrap();
    }
    let now = chrono::Utc::now();
    let refusal = PublishError::sender("ParameterValueInvalid", "refused by the test");
    // E001: MODIFY 1 -> 3; SNS refused the filled version 2 (3 went out).
    let e001 = data_stream_record("E001", "MODIFY", Some(1), Some(3), "100");
    let e001 = refused(&e001, &event_id("PRODUCT#t1", "E001", 2), 2, &refusal, now);
    // E002: MODIFY 1 -> 3; version 2 is not in history (still).
    let e002 = data_stream_record("E002", "MODIFY", Some(1), Some(3), "200");
    let missing = |id: &str| FeedError::MissingVersion {
        pk: "PRODUCT#t1".into(),
        sk: id.into(),
        version: 2,
    };
    let e002 = parked(&e002, &missing("E002"), now);
    // E003: DynamoDB's TTL removed v1; SNS refused the removal event.
    let e003 = data_stream_record("E003", "REMOVE", Some(1), None, "300");
    let e003 = refused(
        &e003,
        &ttl_removal_id("PRODUCT#t1", "E003", 1),
        1,
        &refusal,
        now,
    );
    // E004: MODIFY 1 -> 3 parked when version 2 was missing; history holds it again.
    let e004 = data_stream_record("E004", "MODIFY", Some(1), Some(3), "400");
    let e004 = parked(&e004, &missing("E004"), now);
    // E005: MODIFY 1 -> 2 refused; its stream record was too large to keep in the parked table.
    let e005 = data_stream_record("E005", "MODIFY", Some(1), Some(2), "500");
    let mut e005 = refused(&e005, &event_id("PRODUCT#t1", "E005", 2), 2, &refusal, now);
    e005.record = None;
    for record in [&e001, &e002, &e003, &e004, &e005] {
        store.park(record).await.unwrap();
    }

    // The events topic and an outside subscriber's FIFO queue (raw delivery).
    let moto = cqrs_local_stack::moto::Throwaway::start("cli-redrive-events").expect("moto starts");
    let (sqs, sns) = (moto.sqs(), moto.sns());
    let topic = sns
        .create_topic()
        .name("shop-events.fifo")
        .attributes("FifoTopic", "true")
        .attributes("ContentBasedDeduplication", "false")
        .send()
        .await
        .unwrap()
        .topic_arn
        .unwrap();
    let queue = sqs
        .create_queue()
        .queue_name("outside.fifo")
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let queue_arn = sqs
        .get_queue_attributes()
        .queue_url(&queue)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&QueueAttributeName::QueueArn]
        .clone();
    sns.subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(&queue_arn)
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .unwrap();
    let receive_all = || async {
        let mut got = Vec::new();
        loop {
            let answer = sqs
                .receive_message()
                .queue_url(&queue)
                .max_number_of_messages(10)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .message_attribute_names("All")
                .visibility_timeout(30)
                .send()
                .await
                .unwrap();
            let messages = answer.messages.unwrap_or_default();
            if messages.is_empty() {
                return got;
            }
            for message in messages {
                sqs.delete_message()
                    .queue_url(&queue)
                    .receipt_handle(message.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
                got.push(message);
            }
        }
    };
    let endpoint = moto.endpoint();
    let events = |extra: &[&str]| {
        cqrs_with(
            &t,
            &[
                &["redrive", "events", "--json", "--topic-arn", &topic],
                extra,
                &["--sns-endpoint-url", &endpoint],
            ]
            .concat(),
            &[
                ("AWS_REGION", "us-east-1"),
                ("CQRS_EVENT_SOURCE", "urn:cqrs:shop"),
            ],
        )
    };
    let parked_left = || async {
        let mut left: Vec<(String, String)> = store
            .list_parked(Some("t1"), None)
            .await
            .unwrap()
            .into_iter()
            .map(|p| (p.item_sk.unwrap_or_default(), p.reason))
            .collect();
        left.sort();
        left
    };

    // Dry run: what would go, nothing sent, nothing removed.
    let (code, dry, out) = events(&["--dry-run"]);
    assert_eq!(code, 1, "{dry} {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        (
            &dry["dryRun"],
            &dry["published"],
            &dry["wouldPublish"],
            &dry["left"]
        ),
        (
            &serde_json::json!(true),
            &serde_json::json!(0),
            &serde_json::json!(5),
            &serde_json::json!(1)
        ),
        "{dry}"
    );
    assert!(receive_all().await.is_empty(), "the dry run sent nothing");
    assert_eq!(parked_left().await.len(), 5, "the dry run removed nothing");
    // One item's records only.
    let (code, one, _) = events(&["--dry-run", "--pk", "PRODUCT#t1", "--sk", "E004"]);
    assert_eq!(code, 0, "{one}");
    assert_eq!(
        (
            &one["wouldPublish"],
            &one["left"],
            &one["records"][0]["events"]
        ),
        (
            &serde_json::json!(2),
            &serde_json::json!(0),
            &serde_json::json!([
                event_id("PRODUCT#t1", "E004", 2),
                event_id("PRODUCT#t1", "E004", 3)
            ])
        ),
        "{one}"
    );

    // The run: each version's event once, as the publisher makes it; the records removed but
    // E002's.
    let (code, ran, out) = events(&[]);
    assert_eq!(code, 1, "{ran} {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        (&ran["published"], &ran["removed"], &ran["left"]),
        (
            &serde_json::json!(5),
            &serde_json::json!(4),
            &serde_json::json!(1)
        ),
        "{ran}"
    );
    let mut got: Vec<(String, String, String, String, i64, String)> = receive_all()
        .await
        .iter()
        .map(|m| {
            let body: serde_json::Value = serde_json::from_str(m.body().unwrap()).unwrap();
            let dedup = m
                .attributes()
                .unwrap()
                .get(&MessageSystemAttributeName::MessageDeduplicationId)
                .cloned()
                .unwrap_or_default();
            let attribute = |name: &str| {
                m.message_attributes()
                    .and_then(|a| a.get(name))
                    .and_then(|v| v.string_value())
                    .unwrap_or_default()
                    .to_string()
            };
            assert_eq!(body["id"].as_str(), Some(dedup.as_str()), "{body}");
            assert_eq!(body["source"], "urn:cqrs:shop");
            assert_eq!(body["tenant"], "t1");
            assert_eq!(attribute("entity"), "product");
            assert_eq!(attribute("type"), body["type"].as_str().unwrap());
            // As the publisher makes them: an update names the version it replaces and what
            // changed; the TTL removal nothing changed.
            if body["type"] == "product.updated" {
                let v = body["data"]["version"].as_i64().unwrap();
                assert_eq!(body["data"]["previousVersion"], v - 1, "{body}");
                assert_eq!(
                    body["data"]["changed"],
                    serde_json::json!(["category", "priceCents"]),
                    "{body}"
                );
            } else {
                assert_eq!(body["removal"], "ttl", "{body}");
                assert_eq!(body["data"]["changed"], serde_json::json!([]), "{body}");
            }
            (
                body["subject"].as_str().unwrap().to_string(),
                dedup,
                attribute("type"),
                attribute("tenant"),
                body["data"]["version"].as_i64().unwrap(),
                body["data"]["state"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    got.sort();
    let expected = |id: &str, dedup: String, kind: &str, v: i64| {
        (
            format!("PRODUCT#t1/{id}"),
            dedup,
            format!("product.{kind}"),
            "t1".to_string(),
            v,
            format!("{id} v{v}"),
        )
    };
    assert_eq!(
        got,
        [
            expected("E001", event_id("PRODUCT#t1", "E001", 2), "updated", 2),
            expected(
                "E003",
                ttl_removal_id("PRODUCT#t1", "E003", 1),
                "deleted",
                1
            ),
            expected("E004", event_id("PRODUCT#t1", "E004", 2), "updated", 2),
            expected("E004", event_id("PRODUCT#t1", "E004", 3), "updated", 3),
            expected("E005", event_id("PRODUCT#t1", "E005", 2), "updated", 2),
        ]
    );
    let left = parked_left().await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].0, "E002");
    let record = &ran["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["sk"] == "E002")
        .cloned()
        .unwrap();
    assert_eq!(record["outcome"], "left", "{ran}");
    assert_eq!(
        record["why"], "version 2 of PRODUCT#t1 / E002 is not in the history table",
        "{ran}"
    );

    // A second run: nothing to send, the unhappy record still left.
    let (code, again, _) = events(&[]);
    assert_eq!(code, 1, "{again}");
    assert_eq!(
        (&again["published"], &again["left"]),
        (&serde_json::json!(0), &serde_json::json!(1)),
        "{again}"
    );
    assert!(
        receive_all().await.is_empty(),
        "the second run sent nothing"
    );
    println!(
        "redrive events: 5 parked change-event records, 5 events republished to the topic and \
         received once each by a FIFO queue subscribed with raw delivery, 4 records removed, 1 \
         left (its version not in history)"
    );
}
