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

// ---- Issue 36 (4): an idempotent retry gets the replay, never a refusal decided before the write.

/// A rule on state outside the command: loans are refused while the library is closed.
struct OpeningHours(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl CommandHook for OpeningHours {
    fn before_write<'a>(&'a self, _command: &'a mut HookCommand<'_>) -> HookFuture<'a> {
        Box::pin(async move {
            if self.0.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(ApiError::refused(
                    409,
                    "urn:library:closed",
                    "Closed",
                    "the library is closed",
                ));
            }
            Ok(())
        })
    }
}

#[tokio::test]
async fn a_retry_with_the_same_key_gets_the_first_answer_not_the_hooks_later_refusal() {
    let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut h = Harness::new().await;
    let model = cqrs_model::Model::parse(LIBRARY).unwrap();
    h.app = App::new(h.app.store.clone(), CallerMode::Jwt, model)
        .with_hooks(Hooks::new().on("loan", OpeningHours(closed.clone())))
        .unwrap();
    let mut body = loan("m1", "b1");
    body["attributes"]["loanId"] = json!("L1");
    let send = |key: &'static str| {
        let body = body.to_string();
        let h = &h;
        async move {
            let (status, answer, _) = h
                .send(common::event(
                    "POST",
                    &USER_T1,
                    &body,
                    &[("idempotency-key", key)],
                ))
                .await;
            (status, answer)
        }
    };
    let (status, first) = send("k-loan-1").await;
    assert_eq!(status, 202, "{first}");
    // The library closes: the hook would now refuse the same command.
    closed.store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, retry) = send("k-loan-1").await;
    assert_eq!(
        (status, &retry),
        (202, &first),
        "a retry of a written command is answered as the first was"
    );
    // A new request (a new key) is refused, and nothing more was written.
    let (status, refused) = send("k-loan-2").await;
    assert_eq!(
        (status, &refused["type"]),
        (409, &json!("urn:library:closed"))
    );
    assert_eq!(h.command_count().await, 1);
}

// ---- Issue 36 (6): the guards a hook adds are checked before the transaction.

/// What [`GuardPlay`] adds to every command.
#[derive(Clone)]
enum Play {
    /// Counters `(name, delta, at_most, refusal type)`.
    Counters(Vec<(&'static str, i64, i64, &'static str)>),
    /// `n` counters of distinct names, `+1` up to 1.
    Many(usize),
    /// A condition check on the version row the command writes.
    OwnRow,
    /// A condition check on the item's head.
    OwnHead,
    /// Two condition checks on one item of the data table.
    SameItemTwice,
}

struct GuardPlay(Play);

fn refusal(problem_type: &str) -> ApiError {
    ApiError::refused(409, problem_type, "Refused", problem_type.to_string())
}

impl CommandHook for GuardPlay {
    fn before_write<'a>(&'a self, command: &'a mut HookCommand<'_>) -> HookFuture<'a> {
        use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem};
        Box::pin(async move {
            let check = |table: &str, key: Vec<(&str, String)>| {
                let mut check = ConditionCheck::builder()
                    .table_name(table)
                    .condition_expression("attribute_not_exists(pk) OR attribute_exists(pk)");
                for (name, value) in key {
                    check = check.key(name, AttributeValue::S(value));
                }
                TransactWriteItem::builder()
                    .condition_check(check.build().unwrap())
                    .build()
            };
            let tables = command.store().tables().clone();
            let (pk, sk) = (command.item().pk.clone(), command.item().sk.clone());
            match &self.0 {
                Play::Counters(counters) => {
                    for (name, delta, at_most, problem) in counters {
                        command.counter(name, *delta, *at_most, refusal(problem))?;
                    }
                }
                Play::Many(n) => {
                    for i in 0..*n {
                        command.counter(&format!("c{i}"), 1, 1, refusal("urn:t:many"))?;
                    }
                }
                Play::OwnRow => command.guard(
                    check(&tables.command, vec![("pk", pk), ("sk", sk)]),
                    refusal("urn:t:row"),
                ),
                Play::OwnHead => command.guard(
                    check(
                        &tables.idempotency,
                        vec![("pk", cqrs_keys::head_key(&pk, &sk))],
                    ),
                    refusal("urn:t:head"),
                ),
                Play::SameItemTwice => {
                    for _ in 0..2 {
                        command.guard(
                            check(
                                &tables.data,
                                vec![("pk", "MEMBER#t1".into()), ("sk", "m1".into())],
                            ),
                            refusal("urn:t:twice"),
                        );
                    }
                }
            }
            Ok(())
        })
    }
}

async fn playing(play: Play) -> Harness {
    let mut h = Harness::new().await;
    let model = cqrs_model::Model::parse(LIBRARY).unwrap();
    h.app = App::new(h.app.store.clone(), CallerMode::Jwt, model)
        .with_hooks(Hooks::new().on("loan", GuardPlay(play)))
        .unwrap();
    h
}

/// Publishes a create of loan `loan_id` as the command handler does, with an idempotency record
/// when `key` is given, and answers what `publish_command` answered.
async fn publish(
    h: &Harness,
    loan_id: &str,
    key: Option<&str>,
) -> Result<cqrs_command_handler::publish::Published, ApiError> {
    use cqrs_command_handler::publish::{Audit, HeadKnowledge, Mode, publish_command};
    let caller = cqrs_caller::Caller::new("u1", "t1", vec![]);
    let mut body = loan("m1", "b1");
    body["attributes"]["loanId"] = json!(loan_id);
    let mut input = cqrs_command_handler::input::parse_command(&body.to_string(), false)?;
    let now = "2026-11-27T10:00:00.000Z".to_string();
    let entity = cqrs_command_handler::entity::resolve(
        &h.app.model,
        &mut input,
        &caller,
        Mode::Replace,
        &now,
    )?;
    let audit = Audit {
        caller,
        ip: "192.0.2.1".into(),
        request_id: "r-1".into(),
        now,
    };
    let record = key.map(|key| cqrs_store::IdempotencyRecord {
        key: key.into(),
        fingerprint: "f".into(),
        item_pk: String::new(),
        item_sk: String::new(),
        item_id: String::new(),
        version: 0,
        ttl: 4_102_444_800,
    });
    publish_command(
        &h.app.store,
        &input,
        Mode::Replace,
        &audit,
        h.app.rules(entity),
        record.as_ref(),
        HeadKnowledge::Complete,
    )
    .await
}

/// The detail of a hook's fault, which the caller sees as a 500 (and the log with its request id).
fn fault(answer: Result<cqrs_command_handler::publish::Published, ApiError>) -> String {
    match answer {
        Err(ApiError::Internal(detail)) => detail,
        other => panic!("expected the hook's fault (a 500), got {other:?}"),
    }
}

#[tokio::test]
async fn two_counters_of_one_name_are_one_guard_their_deltas_summed_under_the_tightest_bound() {
    let h = playing(Play::Counters(vec![
        ("c", 1, 5, "urn:t:loose"),
        ("c", 1, 3, "urn:t:tight"),
        ("d", 0, 9, "urn:t:other"),
    ]))
    .await;
    let mut body = loan("m1", "b1");
    body["attributes"]["loanId"] = json!("L1");
    let (status, answer) = h.post(&USER_T1, body.clone()).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(h.app.store.counter("t1", "c").await.unwrap(), 2);
    // 2 + 2 > 3: the tighter bound's refusal, nothing written.
    body["attributes"]["loanId"] = json!("L2");
    let (status, answer) = h.post(&USER_T1, body).await;
    assert_eq!((status, &answer["type"]), (409, &json!("urn:t:tight")));
    assert_eq!(h.app.store.counter("t1", "c").await.unwrap(), 2);
    assert_eq!(h.command_count().await, 1);
}

#[tokio::test]
async fn at_most_97_guards_and_more_are_the_hooks_fault() {
    // 97 guards, the version row, the head and the idempotency record: DynamoDB's 100.
    let h = playing(Play::Many(97)).await;
    let written = publish(&h, "L1", Some("k-97")).await;
    assert!(
        matches!(
            written,
            Ok(cqrs_command_handler::publish::Published::Stored(_))
        ),
        "{written:?}"
    );
    assert_eq!(h.app.store.counter("t1", "c96").await.unwrap(), 1);

    let h = playing(Play::Many(98)).await;
    // Without an idempotency record too: the cap does not depend on the client's key.
    let detail = fault(publish(&h, "L1", None).await);
    for part in ["command hook", "loan", "98 guards", "97"] {
        assert!(detail.contains(part), "{part:?} not in {detail:?}");
    }
    let (status, problem) = h.post(&USER_T1, loan("m1", "b1")).await;
    assert_eq!(
        (status, &problem["type"]),
        (500, &json!("urn:cqrs:problem:internal"))
    );
    assert_eq!(h.command_count().await, 0);
    assert_eq!(h.app.store.counter("t1", "c0").await.unwrap(), 0);
}

#[tokio::test]
async fn a_guard_on_the_items_own_row_or_head_or_one_item_twice_is_the_hooks_fault() {
    for (play, names) in [
        (Play::OwnRow, "its own version row"),
        (Play::OwnHead, "its own head"),
        (Play::SameItemTwice, "twice"),
    ] {
        let h = playing(play).await;
        let detail = fault(publish(&h, "L1", Some("k-1")).await);
        for part in ["command hook", "loan", names] {
            assert!(detail.contains(part), "{part:?} not in {detail:?}");
        }
        assert_eq!(h.command_count().await, 0);
    }
}
