//! Command hooks ([`cqrs_command_handler::hooks`]) against DynamoDB Local, on a lending library's model
//! (not the example's): a hook refuses with its own problem document and nothing is written, adjusts
//! attributes whose index keys are computed again, may not move the item's keys, and keeps "a
//! member holds at most 3 loans out" with a counter guard in the command's own transaction, under
//! 20 concurrent requests. A guarded create stays one round trip.

mod common;

use common::{Harness, USER_T1, USER_T2};
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

[patterns.loans_of_member]
entity = "loan"
index = "gsi1"
params = ["memberId"]
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
    /// A condition check on the version row the command writes (the command table).
    OwnRow,
    /// A condition check on the item's head (the idempotency table).
    OwnHead,
    /// A condition check on an item of the data table.
    DataItem,
    /// Two condition checks on one item of a table of the service's own.
    SameItemTwice,
}

struct GuardPlay(Play, cqrs_store::Tables);

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
            let tables = &self.1;
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
                Play::OwnRow => command.own_table_guard(
                    check(&tables.command, vec![("pk", pk), ("sk", sk)]),
                    refusal("urn:t:row"),
                )?,
                Play::OwnHead => command.own_table_guard(
                    check(
                        &tables.idempotency,
                        vec![("pk", cqrs_keys::head_key(&pk, &sk))],
                    ),
                    refusal("urn:t:head"),
                )?,
                Play::DataItem => command.own_table_guard(
                    check(
                        &tables.data,
                        vec![("pk", "MEMBER#t1".into()), ("sk", "m1".into())],
                    ),
                    refusal("urn:t:data"),
                )?,
                Play::SameItemTwice => {
                    for _ in 0..2 {
                        command.own_table_guard(
                            check(
                                "library-own-table",
                                vec![("pk", "SHELF#t1".into()), ("sk", "s1".into())],
                            ),
                            refusal("urn:t:twice"),
                        )?;
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
        .with_hooks(Hooks::new().on("loan", GuardPlay(play, h.app.store.tables().clone())))
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
async fn a_guard_on_a_table_of_the_deployment_or_one_item_twice_is_the_hooks_fault() {
    for (play, names) in [
        (Play::OwnRow, "the deployment's command table"),
        (Play::OwnHead, "the deployment's idempotency table"),
        (Play::DataItem, "the deployment's data table"),
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

// ---- Issue 38 (2): closures and async fns, one hook per entity, key-safe reads, typed entities.

/// The library with `hooks`.
async fn hooked(hooks: Hooks) -> Harness {
    let mut h = Harness::new().await;
    let model = cqrs_model::Model::parse(LIBRARY).unwrap();
    h.app = App::new(h.app.store.clone(), CallerMode::Jwt, model)
        .with_hooks(hooks)
        .expect("the hooks check");
    h
}

fn member(id: &str, tier: &str) -> Value {
    json!({"entity": "member", "version": 0, "attributes": {"memberId": id, "tier": tier}})
}

/// Every stored version of `pk` / `sk` into the data table, as data-sync would project them.
async fn project(h: &Harness, pk: &str, sk: &str) {
    for version in h.versions(pk, sk).await {
        h.app.store.put_data_if_newer(&version).await.unwrap();
    }
}

fn key(attributes: Value) -> cqrs_item::Map {
    cqrs_item::map_from_json(attributes).unwrap()
}

#[tokio::test]
async fn two_hooks_on_one_entity_are_refused_at_start_naming_the_entity() {
    let h = Harness::new().await;
    let model = cqrs_model::Model::parse(LIBRARY).unwrap();
    let twice = Hooks::new()
        .on("loan", LoanRules)
        .on_fn("member", |_| Ok(()))
        .on_fn("loan", |_| Ok(()));
    let error = App::new(h.app.store.clone(), CallerMode::Jwt, model.clone())
        .with_hooks(twice)
        .unwrap_err();
    assert!(error.contains("entity loan has 2 hooks"), "{error}");
    assert!(!error.contains("member"), "{error}");
    // An entity the model lacks and two hooks: both said.
    let error = Hooks::new()
        .on_fn("laon", |_| Ok(()))
        .on_fn("member", |_| Ok(()))
        .on_fn("member", |_| Ok(()))
        .check(&model)
        .unwrap_err();
    assert!(
        error.contains("laon") && error.contains("entity member has 2 hooks"),
        "{error}"
    );
}

#[tokio::test]
async fn a_closure_hook_refuses_and_adjusts() {
    let h = hooked(Hooks::new().on_fn("loan", |cmd| {
        let book = cmd
            .attribute("bookId")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        if book.starts_with("REF-") {
            return Err(ApiError::refused(
                422,
                "urn:library:reference-only",
                "Reference only",
                format!("book {book} is for reading in the library"),
            ));
        }
        cmd.set_attribute("dueDay", "2026-12-24");
        Ok(())
    }))
    .await;
    let (status, problem) = h.post(&USER_T1, loan("m1", "REF-atlas")).await;
    assert_eq!(
        (status, &problem["type"]),
        (422, &json!("urn:library:reference-only"))
    );
    assert_eq!(h.command_count().await, 0);
    let (status, answer) = h.post(&USER_T1, loan("m1", "b1")).await;
    assert_eq!(status, 202, "{answer}");
    let sk = answer["sk"].as_str().unwrap().split('@').next().unwrap();
    let stored = h.versions("LOAN#t1", sk).await;
    assert_eq!(stored[0].attributes["dueDay"].as_str(), Some("2026-12-24"));
    assert_eq!(
        stored[0].index_keys.get("gsi1sk").and_then(|v| v.as_str()),
        Some(format!("2026-12-24#{sk}").as_str())
    );
}

/// A loan names a member of the library (its newest version, not deleted): an async fn that
/// reads. It leaves what each read saw on the loan, for the test to look at.
async fn member_must_exist(cmd: &mut HookCommand<'_>) -> Result<(), ApiError> {
    let Some(member) = cmd.attribute("memberId").cloned() else {
        return Ok(());
    };
    let key = cqrs_item::Map::from([("memberId".to_string(), member.clone())]);
    let reader = cmd.reader();
    let latest = reader.latest("member", &key).await?;
    let projected = reader.get("member", &key).await?;
    match latest {
        Some(found) if !found.is_deleted => {
            cmd.set_attribute("memberVersion", found.version);
            cmd.set_attribute("memberProjected", projected.is_some());
            Ok(())
        }
        _ => Err(ApiError::refused(
            422,
            "urn:library:no-member",
            "No such member",
            format!("member {member} is not one of the library's"),
        )),
    }
}

#[tokio::test]
async fn an_async_fn_hook_reads_the_newest_version_of_its_own_tenant_only() {
    let h = hooked(Hooks::new().on_async("loan", member_must_exist)).await;
    // m2 is a member of tenant t2 only: a loan of t1 cannot see it.
    for (user, id) in [(&USER_T1, "m1"), (&USER_T2, "m1"), (&USER_T2, "m2")] {
        let (status, answer) = h.post(user, member(id, "basic")).await;
        assert_eq!(status, 202, "{answer}");
    }
    let (status, answer) = h.post(&USER_T1, loan("m1", "b1")).await;
    assert_eq!(status, 202, "{answer}");
    let sk = answer["sk"].as_str().unwrap().split('@').next().unwrap();
    let stored = &h.versions("LOAN#t1", sk).await[0];
    // The newest version, from the command table: the data table has not been projected.
    assert_eq!(stored.attributes["memberVersion"], 1);
    assert_eq!(stored.attributes["memberProjected"], false);
    let (status, problem) = h.post(&USER_T1, loan("m2", "b2")).await;
    assert_eq!(
        (status, &problem["type"]),
        (422, &json!("urn:library:no-member")),
        "{problem}"
    );
    // Once projected, the data table's item is seen too.
    project(&h, "MEMBER#t1", "m1").await;
    let (status, answer) = h.post(&USER_T1, loan("m1", "b3")).await;
    assert_eq!(status, 202, "{answer}");
    let sk = answer["sk"].as_str().unwrap().split('@').next().unwrap();
    let stored = &h.versions("LOAN#t1", sk).await[0];
    assert_eq!(stored.attributes["memberProjected"], true);
}

#[tokio::test]
async fn a_hooks_reader_builds_keys_from_the_model_in_the_commands_tenant() {
    let h = hooked(Hooks::new()).await;
    let model = cqrs_model::Model::parse(LIBRARY).unwrap();
    let (status, answer) = h.post(&USER_T1, member("m1", "basic")).await;
    assert_eq!(status, 202, "{answer}");
    let (status, answer) = h.post(&USER_T2, member("m1", "plus")).await;
    assert_eq!(status, 202, "{answer}");
    let (status, answer) = h.post(&USER_T2, member("m2", "plus")).await;
    assert_eq!(status, 202, "{answer}");
    let mut loans = Vec::new();
    for (user, book) in [(&USER_T1, "b1"), (&USER_T1, "b2"), (&USER_T2, "b3")] {
        let mut body = loan("m1", book);
        // The index of a member's loans sorts by due day: a loan without one is not in it.
        body["attributes"]["dueDay"] = json!("2026-12-01");
        let (status, answer) = h.post(user, body).await;
        assert_eq!(status, 202, "{answer}");
        loans.push(answer);
    }
    for (pk, sk) in [
        ("MEMBER#t1", "m1"),
        ("MEMBER#t2", "m1"),
        ("MEMBER#t2", "m2"),
    ] {
        project(&h, pk, sk).await;
    }
    for answer in &loans {
        let sk = answer["sk"].as_str().unwrap().split('@').next().unwrap();
        project(&h, answer["pk"].as_str().unwrap(), sk).await;
    }
    h.app
        .store
        .put_data_if_newer(&cqrs_item::Item::example())
        .await
        .unwrap();

    // A command of tenant t1 (a loan) and its reader.
    let caller = cqrs_caller::Caller::new("u1", "t1", vec![]);
    let mut item = h
        .versions(
            "LOAN#t1",
            loans[0]["sk"].as_str().unwrap().split('@').next().unwrap(),
        )
        .await
        .remove(0);
    let command = HookCommand::new(&caller, &h.app.store, &mut item, None).with_model(&model);
    let reader = command.reader();
    assert_eq!(reader.tenant(), "t1");

    let m1 = key(json!({"memberId": "m1"}));
    let m2 = key(json!({"memberId": "m2"}));
    let found = reader.get("member", &m1).await.unwrap().unwrap();
    assert_eq!(
        (found.pk.as_str(), found.attributes["tier"].as_str()),
        ("MEMBER#t1", Some("basic"))
    );
    let latest = reader.latest("member", &m1).await.unwrap().unwrap();
    assert_eq!((latest.pk.as_str(), latest.version), ("MEMBER#t1", 1));
    // Tenant t2's member m2 exists, in t2: unreachable from t1, by get and by latest.
    assert_eq!(reader.get("member", &m2).await.unwrap(), None);
    assert_eq!(reader.latest("member", &m2).await.unwrap(), None);

    // The pattern: t1's two loans of m1, never t2's.
    let of_m1 = reader.pattern("loans_of_member", &m1, 10).await.unwrap();
    assert_eq!(of_m1.len(), 2, "{of_m1:?}");
    assert!(of_m1.iter().all(|l| l.tenant_code == "t1"), "{of_m1:?}");
    assert_eq!(
        reader
            .pattern("loans_of_member", &m1, 1)
            .await
            .unwrap()
            .len(),
        1
    );

    // No raw keys: an entity the model lacks, a missing key attribute, a value that would reach
    // another partition, a pattern the model lacks: each the hook's fault, nothing read.
    let faults = [
        reader
            .get("product", &key(json!({"productId": "P001"})))
            .await,
        reader.get("member", &key(json!({"tier": "basic"}))).await,
        reader
            .get("member", &key(json!({"memberId": "m1#x"})))
            .await,
        reader
            .latest("member", &key(json!({"memberId": "m2#t2"})))
            .await,
    ];
    for answer in faults {
        assert!(matches!(answer, Err(ApiError::Internal(_))), "{answer:?}");
    }
    let answer = reader.pattern("no_such", &m1, 10).await;
    assert!(matches!(answer, Err(ApiError::Internal(_))), "{answer:?}");
    assert_eq!(reader.counter("loans#m1").await.unwrap(), 0);
}

#[tokio::test]
async fn a_guard_on_a_table_of_the_services_own_is_taken() {
    // The hook names a table of its own that DynamoDB Local lacks: the guard went into the
    // transaction (which fails), unlike the deployment's tables refused before any call.
    let h = hooked(Hooks::new().on_fn("loan", |cmd| {
        use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem};
        let check = ConditionCheck::builder()
            .table_name("library-own-shelves")
            .key("pk", AttributeValue::S("SHELF#t1".into()))
            .condition_expression("attribute_exists(pk)")
            .build()
            .unwrap();
        cmd.own_table_guard(
            TransactWriteItem::builder().condition_check(check).build(),
            refusal("urn:t:shelf"),
        )
    }))
    .await;
    let (status, answer) = h.post(&USER_T1, loan("m1", "b1")).await;
    assert_ne!(status, 202, "{answer}");
    assert_ne!(
        answer["detail"]
            .as_str()
            .map(|d| d.contains("deployment's")),
        Some(true)
    );
    assert_eq!(h.command_count().await, 0);
}

/// The loan as the library's model declares it, written by hand (the generated types come from
/// `cqrs model rust`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Loan {
    loan_id: String,
    member_id: String,
    book_id: String,
    status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    due_day: Option<String>,
}

impl cqrs_item::TypedEntity for Loan {
    const ENTITY: &'static str = "loan";
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Member {
    #[allow(dead_code)]
    member_id: String,
}

impl cqrs_item::TypedEntity for Member {
    const ENTITY: &'static str = "member";
}

/// Reads and writes loans typed: a returned loan has no due day, member ids are upper case; it
/// notes what the command does (`op`) and the stored status (`was`) as undeclared attributes.
fn typed_rules(cmd: &mut HookCommand<'_>) -> Result<(), ApiError> {
    let mut loan: Loan = cmd.typed()?;
    let was = cmd.stored_typed::<Loan>()?.map(|l| l.status);
    if loan.status == "returned" {
        loan.due_day = None;
    }
    loan.member_id = loan.member_id.to_uppercase();
    cmd.set_typed(&loan)?;
    let op = match (cmd.is_delete(), cmd.is_restore(), cmd.is_create()) {
        (true, _, _) => "delete",
        (_, true, _) => "restore",
        (_, _, true) => "create",
        _ => "update",
    };
    cmd.set_attribute("op", op);
    cmd.set_attribute("was", was.unwrap_or_else(|| "none".into()));
    Ok(())
}

#[tokio::test]
async fn typed_reads_and_writes_and_the_kind_of_change() {
    let h = hooked(Hooks::new().on_fn("loan", typed_rules)).await;
    let mut body = loan("m1", "b1");
    body["attributes"]["loanId"] = json!("L1");
    body["attributes"]["dueDay"] = json!("2026-12-01");
    body["attributes"]["note"] = json!("kept");
    let (status, answer) = h.post(&USER_T1, body).await;
    assert_eq!(status, 202, "{answer}");
    let steps = [
        (json!({"status": "returned"}), None, "update", "out"),
        (json!({}), Some(true), "delete", "returned"),
        (json!({}), Some(false), "restore", "returned"),
    ];
    for (version, (attributes, deleted, _, _)) in (1..).zip(&steps) {
        let mut patch =
            json!({"entity": "loan", "version": version, "attributes": attributes.clone()});
        patch["attributes"]["loanId"] = json!("L1");
        if let Some(deleted) = deleted {
            patch["isDeleted"] = json!(deleted);
        }
        let (status, answer) = h.patch(&USER_T1, patch).await;
        assert_eq!(status, 202, "{answer}");
    }
    let versions = h.versions("LOAN#t1", "L1").await;
    let seen: Vec<(String, String, Option<String>, String)> = versions
        .iter()
        .map(|v| {
            let text = |name: &str| {
                v.attributes
                    .get(name)
                    .and_then(|x| x.as_str())
                    .map(str::to_string)
            };
            (
                text("op").unwrap(),
                text("was").unwrap(),
                text("dueDay"),
                text("memberId").unwrap(),
            )
        })
        .collect();
    let due = Some("2026-12-01".to_string());
    assert_eq!(
        seen,
        [
            ("create".into(), "none".into(), due.clone(), "M1".into()),
            ("update".into(), "out".into(), None, "M1".into()),
            ("delete".into(), "returned".into(), None, "M1".into()),
            ("restore".into(), "returned".into(), None, "M1".into()),
        ]
    );
    // Undeclared attributes are kept by set_typed.
    assert!(
        versions
            .iter()
            .all(|v| v.attributes["note"].as_str() == Some("kept"))
    );
    assert!(!versions[3].is_deleted);
    assert!(versions[2].is_deleted);
}

#[tokio::test]
async fn a_typed_read_of_another_entity_or_of_attributes_it_does_not_fit_is_the_hooks_fault() {
    let h = hooked(Hooks::new().on_fn("loan", |cmd| cmd.typed::<Member>().map(|_| ()))).await;
    let detail = fault(publish(&h, "L1", None).await);
    for part in [
        "command hook of entity loan",
        "entity member",
        "is not a loan",
    ] {
        assert!(detail.contains(part), "{part:?} not in {detail:?}");
    }
    assert_eq!(h.command_count().await, 0);

    #[derive(Debug, serde::Deserialize)]
    struct Strict {
        #[allow(dead_code)]
        shelf: String,
    }
    impl cqrs_item::TypedEntity for Strict {
        const ENTITY: &'static str = "loan";
    }
    let h = hooked(Hooks::new().on_fn("loan", |cmd| cmd.typed::<Strict>().map(|_| ()))).await;
    let detail = fault(publish(&h, "L1", None).await);
    for part in ["command hook of entity loan", "does not read as", "shelf"] {
        assert!(detail.contains(part), "{part:?} not in {detail:?}");
    }
    let (status, _) = h.post(&USER_T1, loan("m1", "b1")).await;
    assert_eq!(status, 500);
    assert_eq!(h.command_count().await, 0);
}

/// The library with its loan limit declared.
fn limited_library() -> cqrs_model::Model {
    let limited = LIBRARY.replace(
        "attributes.dueDay = { type = \"string\", max = 10 }",
        "attributes.dueDay = { type = \"string\", max = 10 }\nlimits.loans_out = { per = \"memberId\", when = { status = [\"out\"] }, at_most = 3 }",
    );
    cqrs_model::Model::parse(&limited).unwrap()
}

/// The guard item of `tenant`'s loans out of `member` with these member tokens, as the
/// declaration keeps it.
async fn seed_members(h: &Harness, tenant: &str, member: &str, tokens: &[&str]) {
    use aws_sdk_dynamodb::types::AttributeValue;
    let store = &h.app.store;
    let key = cqrs_keys::guard_key(tenant, "loan", "loans_out", &[member.to_string()]);
    store
        .client()
        .put_item()
        .table_name(&store.tables().idempotency)
        .item("pk", AttributeValue::S(key))
        .item(
            cqrs_store::guard::GUARD_MEMBERS,
            AttributeValue::Ss(tokens.iter().map(|t| t.to_string()).collect()),
        )
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_hooks_reader_counts_a_limits_members_in_the_commands_tenant() {
    let h = Harness::new().await;
    let model = limited_library();
    seed_members(&h, "t1", "m1", &["a", "b"]).await;
    seed_members(&h, "t2", "m1", &["c", "d", "e"]).await;
    let caller = cqrs_caller::Caller::new("u1", "t1", vec![]);
    let mut item = cqrs_item::Item::example();
    let command = HookCommand::new(&caller, &h.app.store, &mut item, None).with_model(&model);
    let reader = command.reader();
    assert_eq!(
        reader.limit_count("loan.loans_out", &["m1"]).await.unwrap(),
        2
    );
    assert_eq!(
        reader.limit_count("loan.loans_out", &["m9"]).await.unwrap(),
        0
    );
    for wrong in [
        reader.limit_count("loan.loans_in", &["m1"]).await,
        reader.limit_count("loans_out", &["m1"]).await,
        reader.limit_count("loan.loans_out", &[]).await,
    ] {
        assert!(matches!(wrong, Err(ApiError::Internal(_))), "{wrong:?}");
    }
}

#[tokio::test]
async fn check_limit_guards_a_members_delete_in_its_own_transaction() {
    let mut h = Harness::new().await;
    h.app = App::new(h.app.store.clone(), CallerMode::Jwt, limited_library())
        .with_hooks(Hooks::new().on_fn("member", |cmd| {
            if cmd.is_delete() {
                let member = cmd
                    .attribute("memberId")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string();
                let holds = ApiError::refused(
                    409,
                    "urn:library:loans-out",
                    "Loans out",
                    format!("member {member} still holds loans"),
                );
                cmd.check_limit("loan.loans_out", &[&member], 0, holds)?;
            }
            Ok(())
        }))
        .unwrap();
    for id in ["m1", "m2"] {
        let (status, answer) = h.post(&USER_T1, member(id, "basic")).await;
        assert_eq!(status, 202, "{answer}");
    }
    // m1 holds a loan in t1; m2 holds one in t2 only.
    seed_members(&h, "t1", "m1", &["a"]).await;
    seed_members(&h, "t2", "m2", &["b"]).await;
    let delete = |id: &str| json!({"entity": "member", "version": 1, "isDeleted": true, "attributes": {"memberId": id}});
    let (status, problem) = h.patch(&USER_T1, delete("m1")).await;
    assert_eq!(
        (status, &problem["type"]),
        (409, &json!("urn:library:loans-out")),
        "{problem}"
    );
    assert_eq!(h.versions("MEMBER#t1", "m1").await.len(), 1);
    let (status, answer) = h.patch(&USER_T1, delete("m2")).await;
    assert_eq!(status, 202, "{answer}");
    assert!(h.versions("MEMBER#t1", "m2").await[1].is_deleted);
}

/// A loan requires its member, live, in the loan's own transaction (the head's mirror says
/// whether the member is deleted: written here by hand as the declared reference keeps it).
fn requires_member(cmd: &mut HookCommand<'_>) -> Result<(), ApiError> {
    let member = cmd
        .attribute("memberId")
        .cloned()
        .unwrap_or(cqrs_item::Value::Null);
    let key = cqrs_item::Map::from([("memberId".to_string(), member.clone())]);
    let missing = ApiError::refused(
        422,
        "urn:library:no-member",
        "No such member",
        format!("member {member} is not one of the library's"),
    );
    cmd.require("member", &key, missing)
}

#[tokio::test]
async fn require_guards_a_write_with_a_live_item_of_the_tenant() {
    use aws_sdk_dynamodb::types::AttributeValue;
    // A card names its member, so members' heads carry the mirror `require` checks; the loan's
    // hook requires the member itself (a declared reference on loan would put a second guard on
    // the same head: one item, one guard).
    let referenced = format!(
        "{LIBRARY}\n[entities.card]\npk = \"CARD#{{tenant}}\"\nsk = \"{{cardId}}\"\n\
         attributes.cardId = {{ type = \"string\", required = true, max = 40 }}\n\
         attributes.memberId = {{ type = \"string\", required = true, max = 40 }}\n\
         references.member = {{ entity = \"member\" }}\n"
    );
    let mut h = Harness::new().await;
    h.app = App::new(
        h.app.store.clone(),
        CallerMode::Jwt,
        cqrs_model::Model::parse(&referenced).unwrap(),
    )
    .with_hooks(Hooks::new().on_fn("loan", requires_member))
    .unwrap();
    let (status, problem) = h.post(&USER_T1, loan("m1", "b1")).await;
    assert_eq!(
        (status, &problem["type"]),
        (422, &json!("urn:library:no-member")),
        "{problem}"
    );
    // m1 of tenant t2 does not count for t1.
    let (status, answer) = h.post(&USER_T2, member("m1", "basic")).await;
    assert_eq!(status, 202, "{answer}");
    let (status, answer) = h.post(&USER_T1, member("m1", "basic")).await;
    assert_eq!(status, 202, "{answer}");
    // The mirror of the member's head, as the declared reference keeps it.
    let mirror = |deleted: bool| {
        let store = h.app.store.clone();
        async move {
            store
                .client()
                .update_item()
                .table_name(&store.tables().idempotency)
                .key(
                    "pk",
                    AttributeValue::S(cqrs_keys::head_key("MEMBER#t1", "m1")),
                )
                .update_expression("SET #mv = latest, #del = :d")
                .expression_attribute_names("#mv", cqrs_store::guard::MIRROR_VERSION)
                .expression_attribute_names("#del", cqrs_store::guard::MIRROR_DELETED)
                .expression_attribute_values(":d", AttributeValue::Bool(deleted))
                .send()
                .await
                .unwrap();
        }
    };
    mirror(false).await;
    let (status, answer) = h.post(&USER_T1, loan("m1", "b1")).await;
    assert_eq!(status, 202, "{answer}");
    mirror(true).await;
    let (status, problem) = h.post(&USER_T1, loan("m1", "b2")).await;
    assert_eq!(
        (status, &problem["type"]),
        (422, &json!("urn:library:no-member"))
    );
    assert_eq!(h.command_count().await, 3);

    // On an entity no reference names, require is the hook's fault.
    let h = hooked(Hooks::new().on_fn("loan", |cmd| {
        let key = cqrs_item::Map::from([("loanId".to_string(), "L0".into())]);
        cmd.require("loan", &key, refusal("urn:t:loan"))
    }))
    .await;
    let detail = fault(publish(&h, "L1", None).await);
    assert!(
        detail.contains("no reference of the model names entity loan"),
        "{detail}"
    );
}
