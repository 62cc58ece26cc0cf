//! The library's rules against DynamoDB Local, through the framework's command handler in-process.
//! Each declaration of its model.toml holds: a copy number is unique among live copies (409, freed
//! by a soft delete), a member holds at most 3 loans out under 20 concurrent loans (409), a
//! soft-deleted loan gives its slot back and a loan moved to another member moves it, a loan names a
//! live copy that is not a reference copy and a live member (422), only a librarian writes copies
//! and loans (403). The hook's own rule: a member with loans out is not deleted (409). A refused
//! command writes nothing.

use cqrs_dynamo::Service;
use cqrs_dynamo::lambda_http::Body;
use cqrs_dynamo::model::Model;
use cqrs_dynamo::testkit::command_handler::{self, App};
use cqrs_dynamo::testkit::{
    CallerMode, HttpApiRequest, Store, Tables, TestTables, query_handler, stream_event,
};
use cqrs_dynamo::tokio;
use serde_json::{Value, json};

async fn library() -> (App, TestTables) {
    let tables = cqrs_dynamo::testkit::fresh_tables().await;
    let store = Store::new(
        tables.client.clone(),
        Tables::new(
            &tables.command,
            &tables.data,
            &tables.history,
            &tables.idempotency,
        ),
    );
    let model = Model::parse(library::MODEL).expect("model.toml checks");
    let app = App::new(store, CallerMode::Jwt, model)
        .with_hooks(library::Library::hooks())
        .expect("the hooks are on the model's entities");
    (app, tables)
}

/// Sends a command as `roles` of tenant t1.
async fn send_as(app: &App, roles: &str, method: &str, body: Value) -> (u16, Value) {
    let request = HttpApiRequest::command(method, &body.to_string())
        .claims("u1", "t1", roles)
        .request();
    let response = command_handler::handle(app, request).await;
    let status = response.status().as_u16();
    let body = match response.body() {
        Body::Text(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        _ => Value::Null,
    };
    (status, body)
}

/// Sends a command as a librarian of t1.
async fn send(app: &App, method: &str, body: Value) -> (u16, Value) {
    send_as(app, "librarian", method, body).await
}

fn loan(member: &str, copy: &str) -> Value {
    json!({"entity": "loan", "version": 0, "attributes":
        {"memberId": member, "copyId": copy, "status": "out", "dueDay": "2026-12-24"}})
}

fn copy(copy: &str, isbn: &str, number: u32) -> Value {
    json!({"entity": "copy", "version": 0, "attributes": {"copyId": copy, "isbn": isbn,
        "copyNo": number, "branch": "main", "shelf": "A1"}})
}

fn member(member: &str) -> Value {
    json!({"entity": "member", "version": 0,
        "attributes": {"memberId": member, "name": "Ada", "tier": "basic"}})
}

/// The sort key an accepted command answers (`<id>@<version>`), without the version.
fn id_of(answer: &Value) -> String {
    answer["sk"]
        .as_str()
        .and_then(|sk| sk.split('@').next())
        .unwrap_or_else(|| panic!("an accepted command names its key: {answer}"))
        .to_string()
}

/// Sends until the answer is not a transaction conflict (which writes nothing and asks for the same
/// request again).
async fn settle(app: &App, method: &str, body: Value) -> (u16, Value) {
    loop {
        let (status, answer) = send(app, method, body.clone()).await;
        if answer["type"] != "urn:cqrs:problem:write-conflict" {
            return (status, answer);
        }
    }
}

/// Creates what must exist: its answer is 202.
async fn accept(app: &App, body: Value) -> String {
    let (status, answer) = settle(app, "POST", body.clone()).await;
    assert_eq!(status, 202, "{body}: {answer}");
    id_of(&answer)
}

/// Members `members` and copies `c0`..`c{copies-1}` of one book, copy numbers 1.. in order.
async fn shelves(app: &App, members: &[&str], copies: u32) {
    for m in members {
        accept(app, member(m)).await;
    }
    for i in 0..copies {
        accept(app, copy(&format!("c{i}"), "9780140449136", i + 1)).await;
    }
}

/// How many loans `member` holds out: the declared limit's member set, as the route reads it.
async fn loans_out(app: &App, member: &str) -> usize {
    let model = Model::parse(library::MODEL).unwrap();
    let key = cqrs_dynamo::hooks::limit_key(&model, "t1", library::LOANS_OUT, &[member]).unwrap();
    app.store.limit_members(&key).await.unwrap()
}

/// How many versions the command table holds (a refused command writes none).
async fn versions(tables: &TestTables) -> usize {
    let scan = tables
        .client
        .scan()
        .table_name(&tables.command)
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    scan.items().len()
}

#[tokio::test]
async fn a_copy_number_is_unique_among_the_live_copies_of_a_book() {
    let (app, tables) = library().await;
    accept(&app, copy("c1", "9780140449136", 1)).await;
    let written = versions(&tables).await;
    let (status, problem) = send(&app, "POST", copy("c2", "9780140449136", 1)).await;
    assert_eq!(status, 409, "{problem}");
    assert_eq!(problem["type"], "urn:cqrs:problem:unique-taken");
    assert_eq!(problem["constraint"], "copy.copy_number", "{problem}");
    assert_eq!(
        versions(&tables).await,
        written,
        "a refused command writes nothing"
    );
    // Another book's copy 1, and this book's copy 2, are other values.
    accept(&app, copy("c3", "9780140449143", 1)).await;
    accept(&app, copy("c4", "9780140449136", 2)).await;
    // A copy that moves onto a taken number is refused; a soft-deleted copy frees its number.
    let onto = json!({"entity": "copy", "version": 1, "attributes": {"copyId": "c4", "copyNo": 1}});
    assert_eq!(send(&app, "PATCH", onto).await.0, 409);
    let gone = json!({"entity": "copy", "version": 1, "isDeleted": true,
        "attributes": {"copyId": "c1"}});
    let (status, answer) = send(&app, "PATCH", gone).await;
    assert_eq!(status, 202, "{answer}");
    accept(&app, copy("c2", "9780140449136", 1)).await;
}

#[tokio::test]
async fn a_loan_names_a_live_copy_that_is_not_a_reference_copy_and_a_live_member() {
    let (app, tables) = library().await;
    shelves(&app, &["m1"], 1).await;
    let mut reference = copy("r1", "9780140449136", 9);
    reference["attributes"]["reference"] = json!(true);
    accept(&app, reference).await;
    let written = versions(&tables).await;
    for (body, constraint) in [
        (loan("m1", "r1"), "loan.copy"),
        (loan("m1", "missing"), "loan.copy"),
        (loan("nobody", "c0"), "loan.member"),
    ] {
        let (status, problem) = send(&app, "POST", body.clone()).await;
        assert_eq!(status, 422, "{body}: {problem}");
        assert_eq!(problem["type"], "urn:cqrs:problem:reference-refused");
        assert_eq!(problem["constraint"], constraint, "{problem}");
    }
    assert_eq!(
        versions(&tables).await,
        written,
        "a refused command writes nothing"
    );
    assert_eq!(loans_out(&app, "m1").await, 0);
    // A copy created a moment ago is lent at once: the check reads its head, not the projection.
    accept(&app, loan("m1", "c0")).await;
    // A deleted copy is not lent.
    let gone = json!({"entity": "copy", "version": 1, "isDeleted": true,
        "attributes": {"copyId": "c0"}});
    assert_eq!(send(&app, "PATCH", gone).await.0, 202);
    let (status, problem) = send(&app, "POST", loan("m1", "c0")).await;
    assert_eq!((status, &problem["constraint"]), (422, &json!("loan.copy")));
}

#[tokio::test]
async fn a_member_holds_three_loans_at_most_under_twenty_concurrent_loans() {
    let (app, _tables) = library().await;
    shelves(&app, &["m1"], 20).await;
    let answers = futures::future::join_all(
        (0..20).map(|i| settle(&app, "POST", loan("m1", &format!("c{i}")))),
    )
    .await;
    let accepted: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == 202)
        .map(|(_, a)| a)
        .collect();
    let refused = answers
        .iter()
        .filter(|(s, a)| {
            *s == 409
                && a["type"] == "urn:cqrs:problem:limit-reached"
                && a["constraint"] == "loan.loans_out"
        })
        .count();
    assert_eq!((accepted.len(), refused), (3, 17), "{answers:?}");
    assert_eq!(loans_out(&app, "m1").await, 3);

    // A member with loans out is not deleted (the hook); once they are back, it is.
    let delete = json!({"entity": "member", "version": 1, "isDeleted": true,
        "attributes": {"memberId": "m1"}});
    let (status, problem) = send(&app, "PATCH", delete.clone()).await;
    assert_eq!(
        (status, &problem["type"]),
        (409, &json!("urn:library:loans-out")),
        "{problem}"
    );
    for answer in accepted {
        let back = json!({"entity": "loan", "version": 1,
            "attributes": {"loanId": id_of(answer), "status": "returned"}});
        let (status, answer) = send(&app, "PATCH", back).await;
        assert_eq!(status, 202, "{answer}");
    }
    assert_eq!(loans_out(&app, "m1").await, 0);
    let (status, answer) = send(&app, "PATCH", delete).await;
    assert_eq!(status, 202, "{answer}");
    // A deleted member borrows nothing.
    let (status, problem) = send(&app, "POST", loan("m1", "c0")).await;
    assert_eq!(
        (status, &problem["constraint"]),
        (422, &json!("loan.member"))
    );
}

#[tokio::test]
async fn a_soft_deleted_loan_frees_its_slot_and_a_loan_moved_to_another_member_moves_it() {
    let (app, _tables) = library().await;
    shelves(&app, &["m1", "m2"], 5).await;
    let mut loans = Vec::new();
    for i in 0..3 {
        loans.push(accept(&app, loan("m1", &format!("c{i}"))).await);
    }
    let (status, problem) = send(&app, "POST", loan("m1", "c3")).await;
    assert_eq!(
        (status, &problem["type"]),
        (409, &json!("urn:cqrs:problem:limit-reached"))
    );
    // A loan deleted while out gives its slot back.
    let gone = json!({"entity": "loan", "version": 1, "isDeleted": true,
        "attributes": {"loanId": loans[0]}});
    let (status, answer) = send(&app, "PATCH", gone).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(loans_out(&app, "m1").await, 2);
    accept(&app, loan("m1", "c3")).await;
    // Restoring it would make 4: refused.
    let restore = json!({"entity": "loan", "version": 2, "isDeleted": false,
        "attributes": {"loanId": loans[0]}});
    let (status, problem) = send(&app, "PATCH", restore).await;
    assert_eq!(
        (status, &problem["type"]),
        (409, &json!("urn:cqrs:problem:limit-reached")),
        "{problem}"
    );
    // A loan moved to another member leaves m1's group and joins m2's.
    let moved = json!({"entity": "loan", "version": 1,
        "attributes": {"loanId": loans[1], "memberId": "m2"}});
    let (status, answer) = send(&app, "PATCH", moved).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(
        (loans_out(&app, "m1").await, loans_out(&app, "m2").await),
        (2, 1)
    );
    accept(&app, loan("m1", "c4")).await;
    assert_eq!(loans_out(&app, "m1").await, 3);
}

#[tokio::test]
async fn only_a_librarian_writes_copies_and_loans() {
    let (app, tables) = library().await;
    shelves(&app, &["m1"], 1).await;
    let written = versions(&tables).await;
    for body in [copy("c9", "9780140449136", 9), loan("m1", "c0")] {
        let (status, problem) = send_as(&app, "", "POST", body.clone()).await;
        assert_eq!(status, 403, "{body}: {problem}");
        assert_eq!(problem["type"], "urn:cqrs:problem:forbidden");
        let (status, _) = send_as(&app, "reader", "POST", body).await;
        assert_eq!(status, 403);
    }
    assert_eq!(
        versions(&tables).await,
        written,
        "a refused command writes nothing"
    );
    // Members declare no roles: any caller of the tenant writes them.
    let (status, answer) = send_as(&app, "", "POST", member("m2")).await;
    assert_eq!(status, 202, "{answer}");
}

#[tokio::test]
async fn the_librarys_own_route_answers_with_the_frameworks_caller_and_problems() {
    let (app, _tables) = library().await;
    shelves(&app, &["m7"], 2).await;
    for copy in ["c0", "c1"] {
        accept(&app, loan("m7", copy)).await;
    }
    // The route function as Lambda runs it: its declaration in model.toml, its handler by operation
    // id, API Gateway events through lambda_http.
    let router = cqrs_dynamo::routes::Routes::new(library::MODEL, "member-loans")
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
            let answer = cqrs_dynamo::testkit::invoke(&router, request.event(), "r-1")
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
    shelves(&app, &["m3"], 2).await;
    let (status, first) = send(&app, "POST", loan("m3", "c0")).await;
    assert_eq!(status, 202, "{first}");
    let (status, second) = send(&app, "POST", loan("m3", "c1")).await;
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
    // A member, two copies, three loan versions.
    let records = tables.command_stream_records(6).await;
    let arn = tables.command_stream_arn().await;
    let event = stream_event::lambda_event(&records, &arn).unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    #[allow(deprecated)] // a service's own sync target, as its data-sync binary registers it
    let sync = cqrs_dynamo::data_sync::DataSync::new(app.store.clone()).with_target(
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
    let model = Model::parse(library::MODEL).unwrap();
    let query = query_handler::App::with_model(app.store.clone(), CallerMode::Jwt, model);
    let request = HttpApiRequest::new("GET", "/query/loans_of_member?memberId=m3")
        .claims("librarian", "t1", "")
        .request();
    let response = query_handler::handle(&query, request).await;
    assert_eq!(response.status().as_u16(), 200);
    let page: Value = match response.body() {
        Body::Text(text) => serde_json::from_str(text).unwrap(),
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
