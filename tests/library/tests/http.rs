//! The library as `make dev-up` serves it: its functions under `cargo lambda watch`, DynamoDB Local,
//! the command table's stream feeding its own data-sync binary. Over HTTP, each declaration of its
//! model: a copy without the librarian role (403), a taken copy number (409), a loan of a reference
//! copy or of a missing copy (422), the 3-loan limit under concurrent requests (409), a soft-deleted
//! loan giving its slot back and a loan moved to another member moving it; the hook's rule (a member
//! with loans out is not deleted, 409); the accepted loans listed by their access pattern once
//! projected, and counted by the library's own route; the library's sync target fed once per
//! version (read from the functions' log, where it prints).
//!
//! Ignored by plain `cargo test`: the framework's `make test` generates the service, starts its stack
//! and runs it with `LIBRARY_URL` (the API) and `LIBRARY_LOG` (the functions' log).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cqrs_dynamo::testkit::Api;
use cqrs_dynamo::tokio;
use serde_json::{Value, json};

fn loan(member: &str, copy: &str) -> Value {
    json!({"entity": "loan", "version": 0, "attributes":
        {"memberId": member, "copyId": copy, "status": "out", "dueDay": "2026-12-24"}})
}

fn copy(copy: &str, number: u32) -> Value {
    json!({"entity": "copy", "version": 0, "attributes": {"copyId": copy, "isbn": "9780140449136",
        "copyNo": number, "branch": "main", "shelf": "A1"}})
}

/// Sends until the answer is not a transaction conflict (which writes nothing and asks for the same
/// request again).
async fn settle(api: &Api, tenant: &str, method: &str, body: Value) -> (u16, Value) {
    loop {
        let (status, answer) = api
            .call(method, "/commands", tenant, Some(body.clone()))
            .await;
        if answer["type"] != "urn:cqrs:problem:write-conflict" {
            return (status, answer);
        }
    }
}

fn loan_id(answer: &Value) -> String {
    answer["sk"]
        .as_str()
        .and_then(|sk| sk.split('@').next())
        .unwrap_or_else(|| panic!("an accepted loan names its key: {answer}"))
        .to_string()
}

/// The library's sync target's lines in the functions' log (`{"loanFeed": ..}`, one per loan
/// version it was fed), by (loan, version): how many, and whether each was current.
fn feed(log: &str, tenant_loans: &[String]) -> HashMap<(String, i64), Vec<bool>> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut seen: HashMap<(String, i64), Vec<bool>> = HashMap::new();
    for line in text.lines() {
        let Some(start) = line.find("{\"") else {
            continue;
        };
        let Ok(event) = serde_json::from_str::<Value>(&line[start..]) else {
            continue;
        };
        let Some(id) = event["loanFeed"].as_str() else {
            continue;
        };
        if tenant_loans.iter().any(|l| l == id) {
            seen.entry((id.to_string(), event["version"].as_i64().unwrap_or(-1)))
                .or_default()
                .push(event["current"] == true);
        }
    }
    seen
}

#[tokio::test]
#[ignore = "needs the library's running stack: the framework's make test runs it"]
async fn the_library_over_http() {
    let log = std::env::var("LIBRARY_LOG").expect("LIBRARY_LOG: the functions' log");
    // A tenant of its own per run: the limits' groups and listings start empty.
    let tenant = format!("lib{}", std::process::id());

    let anyone = Api::from_env("LIBRARY_URL");
    let api = anyone.clone().with_roles("librarian");

    // Members (any caller of the tenant), copies (librarians only: 403 for anyone else).
    for m in ["m1", "m2", "m3"] {
        let body = json!({"entity": "member", "version": 0,
            "attributes": {"memberId": m, "name": "Ada", "tier": "basic"}});
        let (status, answer) = settle(&anyone, &tenant, "POST", body).await;
        assert_eq!(status, 202, "{answer}");
    }
    let (status, problem) = settle(&anyone, &tenant, "POST", copy("c0", 1)).await;
    assert_eq!(
        (status, &problem["type"]),
        (403, &json!("urn:cqrs:problem:forbidden")),
        "{problem}"
    );
    for i in 0..16 {
        let (status, answer) = settle(&api, &tenant, "POST", copy(&format!("c{i}"), i + 1)).await;
        assert_eq!(status, 202, "{answer}");
    }
    let mut reference = copy("r1", 100);
    reference["attributes"]["reference"] = json!(true);
    assert_eq!(settle(&api, &tenant, "POST", reference).await.0, 202);

    // A copy number is unique among the book's live copies.
    let (status, problem) = settle(&api, &tenant, "POST", copy("c99", 1)).await;
    assert_eq!(
        (status, &problem["type"], &problem["constraint"]),
        (
            409,
            &json!("urn:cqrs:problem:unique-taken"),
            &json!("copy.copy_number")
        ),
        "{problem}"
    );

    // A reference copy, or a copy that does not exist, is never lent; nothing is written.
    for copy in ["r1", "missing"] {
        let (status, problem) = settle(&api, &tenant, "POST", loan("m1", copy)).await;
        assert_eq!(
            (status, &problem["type"], &problem["constraint"]),
            (
                422,
                &json!("urn:cqrs:problem:reference-refused"),
                &json!("loan.copy")
            ),
            "{problem}"
        );
    }

    // 12 loans for one member at once: exactly 3 go out, the others meet the library's limit.
    let answers = futures::future::join_all(
        (0..12).map(|i| settle(&api, &tenant, "POST", loan("m1", &format!("c{i}")))),
    )
    .await;
    let accepted: Vec<String> = answers
        .iter()
        .filter(|(s, _)| *s == 202)
        .map(|(_, a)| loan_id(a))
        .collect();
    let refused = answers
        .iter()
        .filter(|(s, a)| *s == 409 && a["type"] == "urn:cqrs:problem:limit-reached")
        .count();
    assert_eq!((accepted.len(), refused), (3, 9), "{answers:?}");

    // Projected, the accepted loans are listed by the model's access pattern, and the library's
    // own route counts them.
    let (listing, delay) = api
        .wait_for("/query/loans_of_member?memberId=m1", &tenant, |s, b| {
            s == 200 && b["items"].as_array().is_some_and(|i| i.len() == 3)
        })
        .await;
    println!("library: 3 loans listed by loans_of_member {delay:?} after the commands");
    let mut listed: Vec<String> = listing["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["sk"].as_str().unwrap_or_default().to_string())
        .collect();
    listed.sort();
    let mut expected = accepted.clone();
    expected.sort();
    assert_eq!(listed, expected, "{listing}");
    let (status, count) = api.call("GET", "/members/m1/loans", &tenant, None).await;
    assert_eq!(
        (status, count),
        (200, json!({"memberId": "m1", "loansOut": 3}))
    );

    // One comes back (version 2); then a fourth loan goes out.
    let back = json!({"entity": "loan", "version": 1,
        "attributes": {"loanId": accepted[0], "status": "returned"}});
    let (status, answer) = settle(&api, &tenant, "PATCH", back).await;
    assert_eq!(status, 202, "{answer}");
    let (status, fourth) = settle(&api, &tenant, "POST", loan("m1", "c12")).await;
    assert_eq!(status, 202, "{fourth}");
    let mut loans = accepted.clone();
    loans.push(loan_id(&fourth));

    // A member with loans out is not deleted (the library's hook).
    let delete = json!({"entity": "member", "version": 1, "isDeleted": true,
        "attributes": {"memberId": "m1"}});
    let (status, problem) = settle(&api, &tenant, "PATCH", delete).await;
    assert_eq!(
        (status, &problem["type"]),
        (409, &json!("urn:library:loans-out")),
        "{problem}"
    );

    // m2 holds 3; a loan deleted while out gives its slot back; one moved to m3 moves it.
    let mut held = Vec::new();
    for copy in ["c13", "c14", "c15"] {
        let (status, answer) = settle(&api, &tenant, "POST", loan("m2", copy)).await;
        assert_eq!(status, 202, "{answer}");
        held.push(loan_id(&answer));
    }
    let gone = json!({"entity": "loan", "version": 1, "isDeleted": true,
        "attributes": {"loanId": held[0]}});
    assert_eq!(settle(&api, &tenant, "PATCH", gone).await.0, 202);
    let moved = json!({"entity": "loan", "version": 1,
        "attributes": {"loanId": held[1], "memberId": "m3"}});
    assert_eq!(settle(&api, &tenant, "PATCH", moved).await.0, 202);
    for (member, out) in [("m2", 1), ("m3", 1)] {
        let (status, count) = api
            .call("GET", &format!("/members/{member}/loans"), &tenant, None)
            .await;
        assert_eq!(
            (status, count),
            (200, json!({"memberId": member, "loansOut": out}))
        );
    }

    // The sync target, fed from the stream through the library's data-sync binary: each version
    // of each loan exactly once, as current.
    let mut want: Vec<(String, i64)> = loans.iter().map(|l| (l.clone(), 1)).collect();
    want.push((accepted[0].clone(), 2));
    want.sort();
    let start = Instant::now();
    loop {
        let seen = feed(&log, &loans);
        if want.iter().all(|k| seen.contains_key(k)) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the sync target was not fed every version: {seen:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A redelivery would come after the first delivery: give it time to show.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = feed(&log, &loans);
    let mut got: Vec<(String, i64)> = seen.keys().cloned().collect();
    got.sort();
    assert_eq!(got, want, "no other loan version was fed");
    for (key, deliveries) in &seen {
        assert_eq!(deliveries, &vec![true], "{key:?} fed once, as current");
    }
}
