//! Races: concurrent writers of one item through the real command handler, the command table's
//! stream projected by the real data-sync. Exactly one writer of a version wins, every other one
//! gets a `409` problem document, the version chain has no gap, and the data table converges to the
//! winner.

mod common;

use common::{Caller, Req, Stack, T1, scan_items, store};
use cqrs_caller::CallerMode;
use cqrs_data_sync::DataSync;
use futures::future::join_all;
use serde_json::json;

const WRITERS: usize = 50;

/// Projects everything in the command table's stream (at least `min` records) with data-sync.
async fn project(stack: &Stack, min: usize) {
    let records = stack.tables.command_stream_records(min).await;
    let arn = stack.tables.command_stream_arn().await;
    let event = cqrs_testkit::stream_event::lambda_event(&records, &arn).expect("a Lambda event");
    let response = DataSync::new(store(&stack.tables)).handle(event).await;
    assert!(
        response.batch_item_failures.is_empty(),
        "data-sync failed records: {:?}",
        response.batch_item_failures
    );
}

/// The versions stored in the command table for `pk` / `base`, ascending.
async fn chain(stack: &Stack, pk: &str, base: &str) -> Vec<i64> {
    let mut versions: Vec<i64> = scan_items(&stack.tables, &stack.tables.command)
        .await
        .into_iter()
        .filter(|i| i.pk == pk && i.base_sk() == base)
        .map(|i| i.version)
        .collect();
    versions.sort_unstable();
    versions
}

#[tokio::test]
async fn fifty_writers_of_one_version_one_wins_and_the_data_table_holds_the_winner() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let post = |body: serde_json::Value| Req::command("POST", &body.to_string()).claims_of(T1);
    let created = stack
        .send(post(
            json!({"pk": "PRODUCT#t1", "sk": "RACE", "version": 0, "name": "v1"}),
        ))
        .await;
    assert_eq!(created.status, 202, "{}", created.text);

    // 50 writers, all building on version 1, each with its own content.
    let answers = join_all((0..WRITERS).map(|i| {
        let stack = &stack;
        async move {
            let body = json!({"pk": "PRODUCT#t1", "sk": "RACE", "version": 1,
                              "name": format!("writer {i}"), "attributes": {"writer": i}});
            (i, stack.send(post(body)).await)
        }
    }))
    .await;

    let winners: Vec<usize> = answers
        .iter()
        .filter(|(_, a)| a.status == 202)
        .map(|(i, _)| *i)
        .collect();
    let conflicts: Vec<_> = answers.iter().filter(|(_, a)| a.status == 409).collect();
    for (i, answer) in &answers {
        assert!(
            answer.status == 202 || answer.status == 409,
            "writer {i}: {} {}",
            answer.status,
            answer.text
        );
    }
    for (i, answer) in &conflicts {
        assert_eq!(answer.problem_fault(), None, "writer {i}");
        assert_eq!(answer.body["type"], "urn:cqrs:problem:version-conflict");
        assert_eq!(
            answer.body["currentVersion"], 2,
            "writer {i}: {}",
            answer.text
        );
    }
    assert_eq!(winners.len(), 1, "exactly one winner: {winners:?}");
    assert_eq!(conflicts.len(), WRITERS - 1);
    let winner = winners[0];
    let (_, won) = &answers[winner];
    assert_eq!(won.body["sk"], "RACE@2");

    // No gap, no extra version.
    let versions = chain(&stack, "PRODUCT#t1", "RACE").await;
    assert_eq!(versions, [1, 2]);

    // The stream, projected: the data table holds the winner's content at version 2.
    project(&stack, 2).await;
    let data = scan_items(&stack.tables, &stack.tables.data).await;
    assert_eq!(data.len(), 1);
    assert_eq!(data[0].version, 2);
    assert_eq!(data[0].name, format!("writer {winner}"));
    assert_eq!(data[0].attributes["writer"], json!(winner));
    let history = scan_items(&stack.tables, &stack.tables.history).await;
    assert_eq!(
        history.iter().map(|i| i.version).collect::<Vec<_>>(),
        [1, 2]
    );
    println!(
        "races: {WRITERS} concurrent writers of PRODUCT#t1/RACE on version 1: {} succeeded \
         (writer {winner}), {} got 409; version chain {versions:?} without gap; \
         data table holds version 2 of writer {winner}",
        winners.len(),
        conflicts.len()
    );
}

#[tokio::test]
async fn fifty_writers_of_the_latest_version_leave_a_chain_without_gap() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let answers = join_all((0..WRITERS).map(|i| {
        let stack = &stack;
        async move {
            let body = json!({"pk": "PRODUCT#t1", "sk": "SEQ", "version": -1,
                              "name": format!("writer {i}")});
            stack
                .send(Req::command("POST", &body.to_string()).claims_of(T1))
                .await
        }
    }))
    .await;
    let mut won: Vec<i64> = Vec::new();
    let mut conflicts = 0;
    for answer in &answers {
        match answer.status {
            202 => won.push(answer.body["version"].as_i64().expect("a version")),
            409 => {
                assert_eq!(answer.problem_fault(), None);
                conflicts += 1;
            }
            other => panic!("{other}: {}", answer.text),
        }
    }
    won.sort_unstable();
    let expected: Vec<i64> = (1..=won.len() as i64).collect();
    // Every success got its own version, and together they are 1..=n: no gap, no duplicate.
    assert_eq!(won, expected);
    assert_eq!(chain(&stack, "PRODUCT#t1", "SEQ").await, expected);

    project(&stack, won.len()).await;
    let data = scan_items(&stack.tables, &stack.tables.data).await;
    assert_eq!(data.len(), 1);
    assert_eq!(data[0].version, won.len() as i64);
    let history = scan_items(&stack.tables, &stack.tables.history).await;
    assert_eq!(history.len(), won.len());
    println!(
        "races: {WRITERS} concurrent writers of PRODUCT#t1/SEQ on the latest version (-1): \
         {} succeeded with versions 1..={} without gap or duplicate, {conflicts} got 409 after \
         5 lost races; data table at version {}",
        won.len(),
        won.len(),
        data[0].version
    );
}
