//! Command hooks ([`cqrs_command_handler::hooks`]) against DynamoDB Local, on a lending library's model
//! (not the example's): a hook refuses with its own problem document and nothing is written, adjusts
//! attributes whose index keys are computed again, may not move the item's keys, and keeps "a
//! member holds at most 3 loans out" with a counter guard in the command's own transaction, under
//! 20 concurrent requests. A guarded create stays one round trip.

mod common;

use common::{Harness, USER_T1};
use cqrs_caller::CallerMode;
use cqrs_command_handler::App;
use cqrs_command_handler::hooks::{CommandHook, HookCommand, HookFuture, Hooks};
use cqrs_problem::ApiError;
use cqrs_testkit::round_trips::CallLog;
use serde_json::{Value, json};

const LIBRARY: &str = r#"
[indexes.gsi1]
pk = "gsi1pk"
sk = "gsi1sk"

[entities.member]
pk = "MEMBER#{tenant}"
sk = "{memberId}"
attributes.memberId = { type = "string", required = true, max = 40 }
attributes.tier = { type = "enum", values = ["basic", "plus"], required = true }

[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
id = "loanId"
attributes.loanId = { type = "string", max = 40 }
attributes.memberId = { type = "string", required = true, max = 40 }
attributes.bookId = { type = "string", required = true, max = 40 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }
attributes.dueDay = { type = "string", max = 10 }
indexes.gsi1 = { pk = "DUE#{tenant}#{memberId}", sk = "{dueDay}#{loanId}" }
"#;

/// The library's rules on loans: reference books stay in the library (422); a member holds at
/// most 3 loans out (409, by a counter guard); a loan's due day is set by the library; a hook that
/// tries to rename the loan (`renameTo`) shows that keys cannot move.
struct LoanRules;

fn text(command: &HookCommand<'_>, name: &str) -> String {
    command
        .attribute(name)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string()
}

impl CommandHook for LoanRules {
    fn before_write<'a>(&'a self, command: &'a mut HookCommand<'_>) -> HookFuture<'a> {
        Box::pin(async move {
            let book = text(command, "bookId");
            if book.starts_with("REF-") {
                return Err(ApiError::refused(
                    422,
                    "urn:library:reference-only",
                    "Reference only",
                    format!("book {book} is for reading in the library"),
                ));
            }
            let member = text(command, "memberId");
            let was_out = command
                .stored()
                .and_then(|s| s.attributes.get("status"))
                .and_then(|v| v.as_str())
                == Some("out");
            let is_out = text(command, "status") == "out";
            let counter = format!("loans#{member}");
            if is_out && !was_out {
                let full = ApiError::refused(
                    409,
                    "urn:library:loan-limit",
                    "Loan limit",
                    format!("member {member} already holds 3 loans"),
                );
                command.counter(&counter, 1, 3, full)?;
            } else if was_out && !is_out {
                let never = ApiError::Internal(format!("{counter} went below 0"));
                command.counter(&counter, -1, 3, never)?;
            }
            if command.is_create() && command.attribute("dueDay").is_none() {
                command.set_attribute("dueDay", "2026-12-09");
            }
            if let Some(name) = command.attribute("renameTo").cloned() {
                command.remove_attribute("renameTo");
                command.set_attribute("loanId", name);
            }
            Ok(())
        })
    }
}

async fn library(log: Option<&CallLog>) -> Harness {
    let mut h = match log {
        Some(log) => Harness::counted(log).await,
        None => Harness::new().await,
    };
    let model = cqrs_model::Model::parse(LIBRARY).expect("the library model checks");
    h.app = App::new(h.app.store.clone(), CallerMode::Jwt, model)
        .with_hooks(Hooks::new().on("loan", LoanRules))
        .expect("the hooked entity is in the model");
    h
}

fn loan(member: &str, book: &str) -> Value {
    json!({"entity": "loan", "version": 0,
        "attributes": {"memberId": member, "bookId": book, "status": "out"}})
}

#[tokio::test]
async fn a_hook_refuses_with_its_own_problem_and_nothing_is_written() {
    let h = library(None).await;
    let (status, problem) = h.post(&USER_T1, loan("m1", "REF-atlas")).await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["type"], "urn:library:reference-only");
    assert_eq!(problem["title"], "Reference only");
    assert_eq!(
        problem["detail"],
        "book REF-atlas is for reading in the library"
    );
    assert_eq!(h.command_count().await, 0);
    assert_eq!(h.app.store.counter("t1", "loans#m1").await.unwrap(), 0);
}

#[tokio::test]
async fn attributes_a_hook_sets_get_their_index_keys() {
    let h = library(None).await;
    let (status, answer) = h.post(&USER_T1, loan("m1", "b1")).await;
    assert_eq!(status, 202, "{answer}");
    let sk = answer["sk"].as_str().unwrap().split('@').next().unwrap();
    let stored = h.versions("LOAN#t1", sk).await;
    assert_eq!(stored.len(), 1);
    let item = &stored[0];
    assert_eq!(item.attributes["dueDay"].as_str(), Some("2026-12-09"));
    assert_eq!(
        item.index_keys.get("gsi1sk").and_then(|v| v.as_str()),
        Some(format!("2026-12-09#{sk}").as_str()),
        "{:?}",
        item.index_keys
    );
    assert_eq!(
        item.index_keys.get("gsi1pk").and_then(|v| v.as_str()),
        Some("DUE#t1#m1")
    );
}

#[tokio::test]
async fn a_hook_cannot_move_the_items_keys() {
    let h = library(None).await;
    let mut body = loan("m1", "b1");
    body["attributes"]["loanId"] = json!("L1");
    body["attributes"]["renameTo"] = json!("L2");
    let (status, problem) = h.post(&USER_T1, body).await;
    assert_eq!(status, 500, "{problem}");
    assert_eq!(h.command_count().await, 0);
    assert_eq!(h.app.store.counter("t1", "loans#m1").await.unwrap(), 0);
}

/// Sends `body` until it is answered by something other than a transaction conflict (a 409
/// `write-conflict` writes nothing and asks for the same request again); answers the last status
/// and body.
async fn settle(h: &Harness, body: Value) -> (u16, Value) {
    loop {
        let (status, answer) = h.post(&USER_T1, body.clone()).await;
        if answer["type"] != "urn:cqrs:problem:write-conflict" {
            return (status, answer);
        }
    }
}

#[tokio::test]
async fn three_loans_at_most_under_twenty_concurrent_requests() {
    let h = library(None).await;
    let answers =
        futures::future::join_all((0..20).map(|i| settle(&h, loan("m1", &format!("b{i}"))))).await;
    let accepted: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == 202)
        .map(|(_, a)| a)
        .collect();
    let refused = answers
        .iter()
        .filter(|(s, a)| *s == 409 && a["type"] == "urn:library:loan-limit")
        .count();
    assert_eq!(
        (accepted.len(), refused),
        (3, 17),
        "every answer: {answers:?}"
    );
    assert_eq!(h.command_count().await, 3);
    assert_eq!(h.app.store.counter("t1", "loans#m1").await.unwrap(), 3);

    // A return frees a place: the counter moves back in the return's own transaction.
    let first = accepted[0]["sk"]
        .as_str()
        .unwrap()
        .split('@')
        .next()
        .unwrap();
    let back = json!({"entity": "loan", "version": 1,
        "attributes": {"loanId": first, "status": "returned"}});
    let (status, answer) = h.patch(&USER_T1, back).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(h.app.store.counter("t1", "loans#m1").await.unwrap(), 2);
    let (status, answer) = h.post(&USER_T1, loan("m1", "b99")).await;
    assert_eq!(status, 202, "{answer}");
    let (status, answer) = h.post(&USER_T1, loan("m1", "b100")).await;
    assert_eq!(
        (status, &answer["type"]),
        (409, &json!("urn:library:loan-limit"))
    );
    // Another member's counter is another counter.
    let (status, answer) = h.post(&USER_T1, loan("m2", "b1")).await;
    assert_eq!(status, 202, "{answer}");
}

#[tokio::test]
async fn a_guarded_create_is_still_one_round_trip() {
    let log = CallLog::default();
    let h = library(Some(&log)).await;
    // Warm the container's caches (heads state, TTL policy).
    let (status, answer) = h.post(&USER_T1, loan("m0", "b0")).await;
    assert_eq!(status, 202, "{answer}");
    log.clear();
    let (status, answer) = h.post(&USER_T1, loan("m1", "b1")).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(
        (log.round_trips(), log.operations()),
        (1, vec!["TransactWriteItems".to_string()])
    );
}

#[test]
fn a_hook_on_an_entity_the_model_lacks_is_refused_at_start() {
    let model = cqrs_model::Model::parse(LIBRARY).unwrap();
    let error = Hooks::new()
        .on("laon", LoanRules)
        .check(&model)
        .unwrap_err();
    assert!(error.contains("laon"), "{error}");
}
