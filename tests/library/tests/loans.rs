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
        Tables::new(
            &tables.command,
            &tables.data,
            &tables.history,
            &tables.idempotency,
        ),
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
        futures::future::join_all((0..20).map(|i| settle(&app, loan("m1", &format!("c{i}")))))
            .await;
    let accepted: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == 202)
        .map(|(_, a)| a)
        .collect();
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
    assert_eq!(
        (status, &problem["type"]),
        (409, &json!("urn:library:loans-out"))
    );
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
    // The route function as Lambda runs it: its declaration in model.toml, its handler by operation
    // id, API Gateway events through lambda_http.
    let router = cqrs_routes::Routes::new(library::MODEL, "member-loans")
        .unwrap()
        .on("memberLoans", library::member_loans)
        .unwrap()
        .caller_mode(CallerMode::Jwt)
        .with_store(app.store.clone())
        .into_router()
        .unwrap();
    let get = |path: &str, claims: bool| {
        let request = HttpApiRequest::new("GET", path);
        let request = if claims {
            request.claims("librarian", "t1", "")
        } else {
            request
        };
        let router = router.clone();
        async move {
            let answer = cqrs_routes::invoke(&router, request.event(), "r-1")
                .await
                .unwrap();
            let body: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
            (answer["statusCode"].as_u64().unwrap(), body)
        }
    };
    let (status, body) = get("/members/m7/loans", true).await;
    assert_eq!(
        (status, body),
        (200, json!({"memberId": "m7", "loansOut": 2}))
    );
    let (status, body) = get("/members/m7/loans", false).await;
    assert_eq!(
        (status, &body["type"]),
        (401, &json!("urn:cqrs:problem:unauthenticated"))
    );
    let (status, body) = get("/members/m7", true).await;
    assert_eq!(
        (status, &body["type"]),
        (404, &json!("urn:cqrs:problem:not-found"))
    );
    // The member id is one path segment, percent-decoded once.
    let (status, body) = get("/members/m%2523x/loans", true).await;
    assert_eq!(
        (status, body),
        (200, json!({"memberId": "m%23x", "loansOut": 0}))
    );
}

#[tokio::test]
async fn loans_are_projected_fed_to_the_librarys_target_once_per_version_and_listed_by_their_pattern()
 {
    let (app, tables) = library().await;
    let (status, first) = send(&app, "POST", loan("m3", "c1")).await;
    assert_eq!(status, 202, "{first}");
    let (status, second) = send(&app, "POST", loan("m3", "c2")).await;
    assert_eq!(status, 202, "{second}");
    let first_id = first["sk"]
        .as_str()
        .unwrap()
        .split('@')
        .next()
        .unwrap()
        .to_string();
    let back = json!({"entity": "loan", "version": 1,
        "attributes": {"loanId": first_id, "status": "returned"}});
    assert_eq!(send(&app, "PATCH", back).await.0, 202);

    // data-sync as the library's binary wires it, on the command table's real stream.
    let records = tables.command_stream_records(3).await;
    let arn = tables.command_stream_arn().await;
    let event = cqrs_testkit::stream_event::lambda_event(&records, &arn).unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let sync = cqrs_data_sync::DataSync::new(app.store.clone()).with_target(
        library::LoanFeed::new(move |e| sink.lock().unwrap().push(e.clone())),
    );
    let response = sync.handle(event.clone()).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let versions = |events: &[library::LoanEvent]| {
        let mut v: Vec<(String, i64)> = events
            .iter()
            .map(|e| (e.loan_id.clone(), e.version))
            .collect();
        v.sort();
        v
    };
    let second_id = second["sk"]
        .as_str()
        .unwrap()
        .split('@')
        .next()
        .unwrap()
        .to_string();
    let mut want = vec![
        (first_id.clone(), 1),
        (first_id.clone(), 2),
        (second_id.clone(), 1),
    ];
    want.sort();
    assert_eq!(versions(&seen.lock().unwrap()), want, "once per version");

    // A replay of the batch reaches the target again (at least once), never as current.
    seen.lock().unwrap().clear();
    let response = sync.handle(event).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let replayed = seen.lock().unwrap().clone();
    assert_eq!(versions(&replayed), want);
    assert!(replayed.iter().all(|e| !e.current), "{replayed:?}");

    // The member's loans through the library's access pattern, newest state of each.
    let model = cqrs_model::Model::parse(library::MODEL).unwrap();
    let query = cqrs_query_handler::App::with_model(app.store.clone(), CallerMode::Jwt, model);
    let request = HttpApiRequest::new("GET", "/query/loans_of_member?memberId=m3")
        .claims("librarian", "t1", "")
        .request();
    let response = cqrs_query_handler::handle(&query, request).await;
    assert_eq!(response.status().as_u16(), 200);
    let page: Value = match response.body() {
        lambda_http::Body::Text(text) => serde_json::from_str(text).unwrap(),
        other => panic!("{other:?}"),
    };
    let mut listed: Vec<(String, String)> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["attributes"]["loanId"].as_str().unwrap().to_string(),
                i["attributes"]["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    listed.sort();
    let mut expected = vec![
        (first_id, "returned".to_string()),
        (second_id, "out".to_string()),
    ];
    expected.sort();
    assert_eq!(listed, expected, "{page}");
}
