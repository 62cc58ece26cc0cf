//! The library's rules against DynamoDB Local, through the framework's command handler in-process:
//! a reference copy is refused with the library's own problem, a member holds at most 3 loans under
//! 20 concurrent loans, a member with loans out is not deleted, and a refused command writes
//! nothing.

use cqrs_caller::CallerMode;
use cqrs_command_handler::App;
use cqrs_store::{Store, Tables};
use cqrs_testkit::http_event::HttpApiRequest;
use serde_json::{Value, json};

async fn library() -> (App, cqrs_testkit::TestTables) {
    let tables = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        tables.client.clone(),
        Tables::new(&tables.command, &tables.data, &tables.history, &tables.idempotency),
    );
    let model = cqrs_model::Model::parse(library::MODEL).expect("model.toml checks");
    let app = App::new(store, CallerMode::Jwt, model)
        .with_hooks(library::hooks())
        .expect("the hooks are on the model's entities");
    (app, tables)
}

async fn send(app: &App, method: &str, body: Value) -> (u16, Value) {
    let request = HttpApiRequest::command(method, &body.to_string())
        .claims("librarian", "t1", "")
        .request();
    let response = cqrs_command_handler::handle(app, request).await;
    let status = response.status().as_u16();
    let body = match response.body() {
        lambda_http::Body::Text(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        _ => Value::Null,
    };
    (status, body)
}

fn loan(member: &str, copy: &str) -> Value {
    json!({"entity": "loan", "version": 0, "attributes":
        {"memberId": member, "copyId": copy, "status": "out", "dueDay": "2026-12-24"}})
}

/// Sends until the answer is not a transaction conflict (which writes nothing and asks for the same
/// request again).
async fn settle(app: &App, body: Value) -> (u16, Value) {
    loop {
        let (status, answer) = send(app, "POST", body.clone()).await;
        if answer["type"] != "urn:cqrs:problem:write-conflict" {
            return (status, answer);
        }
    }
}

#[tokio::test]
async fn a_reference_copy_is_never_lent() {
    let (app, _tables) = library().await;
    let (status, problem) = send(&app, "POST", loan("m1", "REF-1")).await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["type"], "urn:library:reference-copy");
    assert_eq!(app.store.counter("t1", "loans#m1").await.unwrap(), 0);
}

#[tokio::test]
async fn a_member_holds_three_loans_at_most_under_twenty_concurrent_loans() {
    let (app, _tables) = library().await;
    let answers =
        futures::future::join_all((0..20).map(|i| settle(&app, loan("m1", &format!("c{i}"))))).await;
    let accepted: Vec<&Value> = answers.iter().filter(|(s, _)| *s == 202).map(|(_, a)| a).collect();
    let refused = answers
        .iter()
        .filter(|(s, a)| *s == 409 && a["type"] == "urn:library:loan-limit")
        .count();
    assert_eq!((accepted.len(), refused), (3, 17), "{answers:?}");
    assert_eq!(app.store.counter("t1", "loans#m1").await.unwrap(), 3);

    // A member with loans out is not deleted; once they are back, it is.
    let member = json!({"entity": "member", "version": 0,
        "attributes": {"memberId": "m1", "name": "Ada", "tier": "basic"}});
    assert_eq!(send(&app, "POST", member).await.0, 202);
    let delete = json!({"entity": "member", "version": 1, "isDeleted": true,
        "attributes": {"memberId": "m1"}});
    let (status, problem) = send(&app, "PATCH", delete.clone()).await;
    assert_eq!((status, &problem["type"]), (409, &json!("urn:library:loans-out")));
    for answer in accepted {
        let loan_id = answer["sk"].as_str().unwrap().split('@').next().unwrap();
        let back = json!({"entity": "loan", "version": 1,
            "attributes": {"loanId": loan_id, "status": "returned"}});
        let (status, answer) = send(&app, "PATCH", back).await;
        assert_eq!(status, 202, "{answer}");
    }
    assert_eq!(app.store.counter("t1", "loans#m1").await.unwrap(), 0);
    let (status, answer) = send(&app, "PATCH", delete).await;
    assert_eq!(status, 202, "{answer}");
}

#[tokio::test]
async fn the_librarys_own_route_answers_with_the_frameworks_caller_and_problems() {
    let (app, _tables) = library().await;
    for copy in ["c1", "c2"] {
        assert_eq!(settle(&app, loan("m7", copy)).await.0, 202);
    }
    let get = |path: &str, claims: bool| {
        let request = HttpApiRequest::new("GET", path);
        let request = if claims { request.claims("librarian", "t1", "") } else { request };
        request.request()
    };
    let answer = |response: lambda_http::Response<lambda_http::Body>| {
        let status = response.status().as_u16();
        let body: Value = match response.body() {
            lambda_http::Body::Text(text) => serde_json::from_str(text).unwrap(),
            other => panic!("{other:?}"),
        };
        (status, body)
    };
    let (status, body) =
        answer(library::member_loans(&app.store, CallerMode::Jwt, get("/members/m7/loans", true)).await);
    assert_eq!((status, body), (200, json!({"memberId": "m7", "loansOut": 2})));
    let (status, body) =
        answer(library::member_loans(&app.store, CallerMode::Jwt, get("/members/m7/loans", false)).await);
    assert_eq!((status, &body["type"]), (401, &json!("urn:cqrs:problem:unauthenticated")));
    let (status, body) =
        answer(library::member_loans(&app.store, CallerMode::Jwt, get("/members/m7", true)).await);
    assert_eq!((status, &body["type"]), (404, &json!("urn:cqrs:problem:not-found")));
}
