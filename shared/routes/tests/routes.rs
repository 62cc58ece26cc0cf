//! A route function's router as Lambda runs it: API Gateway HTTP API events (payload 2.0, as
//! `cqrs_testkit::http_event` writes them) through `lambda_http`'s adapter into the router built
//! from a `[routes.<function>]` declaration. Dispatch by the declared method and path, path
//! parameters decoded exactly once, the framework's problem documents for everything refused
//! (404, 405, 401, a bad query value, a handler's own refusal, axum's own rejections), and the
//! declaration held against the handlers before anything is served.

use cqrs_caller::CallerMode;
use cqrs_problem::ApiError;
use cqrs_routes::{Caller, Json, Path, Problem, Query, Routes, Tenant};
use cqrs_testkit::http_event::HttpApiRequest;
use serde_json::{Value, json};

const MODEL: &str = r#"
[routes.things]
description = "things of the caller's tenant"

[routes.things.operations.getThing]
method = "GET"
path = "/things/{thingId}"
problems = [401, 404]

[routes.things.operations.listThings]
method = "GET"
path = "/things"
query = { status = { enum = ["open", "done"] }, limit = { type = "integer", minimum = 1 } }
problems = [400, 401]

[routes.things.operations.renameThing]
method = "PUT"
path = "/things/{thingId}/name/{name}"
problems = [400, 401, 409]

[routes.things.operations.whoAmI]
method = "GET"
path = "/me"

[routes.other]
[routes.other.operations.other]
method = "GET"
path = "/other"
"#;

async fn get_thing(caller: Caller, Path(thing): Path<String>) -> Result<Json<Value>, Problem> {
    if thing == "missing" {
        return Err(ApiError::NotFound(format!("no thing {thing}")).into());
    }
    Ok(Json(
        json!({"thingId": thing, "tenant": caller.tenant_code}),
    ))
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Open,
    Done,
}

#[derive(serde::Deserialize)]
struct ListQuery {
    status: Option<Status>,
    limit: Option<u32>,
}

async fn list_things(
    Tenant(tenant): Tenant,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, Problem> {
    let limit = query.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        Err(ApiError::bad_field("limit", "must be from 1 to 500"))?;
    }
    let status = query.status.map(|s| match s {
        Status::Open => "open",
        Status::Done => "done",
    });
    Ok(Json(
        json!({"tenant": tenant, "status": status, "limit": limit}),
    ))
}

#[derive(serde::Deserialize)]
struct Rename {
    version: i64,
}

async fn rename_thing(
    _caller: Caller,
    Path((thing, name)): Path<(String, String)>,
    Json(body): Json<Rename>,
) -> Result<Json<Value>, Problem> {
    if body.version != 3 {
        return Err(Problem(ApiError::VersionConflict {
            detail: format!("the latest version of {thing} is 3"),
            current_version: Some(3),
        }));
    }
    Ok(Json(json!({"thingId": thing, "name": name})))
}

async fn who_am_i(caller: Caller) -> Json<Value> {
    Json(json!({"user": caller.user_id, "tenant": caller.tenant_code}))
}

fn router(mode: CallerMode) -> cqrs_routes::axum::Router {
    Routes::new(MODEL, "things")
        .unwrap()
        .on("getThing", get_thing)
        .unwrap()
        .on("listThings", list_things)
        .unwrap()
        .on("renameThing", rename_thing)
        .unwrap()
        .on("whoAmI", who_am_i)
        .unwrap()
        .caller_mode(mode)
        .into_router()
        .unwrap()
}

const REQUEST_ID: &str = "lambda-request-1";

/// The status, the headers and the body (JSON) Lambda hands back to API Gateway.
async fn call(router: &cqrs_routes::axum::Router, request: HttpApiRequest) -> (u16, Value, Value) {
    let answer = cqrs_routes::invoke(router, request.event(), REQUEST_ID)
        .await
        .unwrap();
    assert_eq!(answer["isBase64Encoded"], false, "{answer}");
    let body = answer["body"].as_str().unwrap_or_default();
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|e| panic!("a JSON body ({e}): {body:?}"))
    };
    (
        answer["statusCode"].as_u64().unwrap() as u16,
        answer["headers"].clone(),
        body,
    )
}

fn get(path: &str) -> HttpApiRequest {
    HttpApiRequest::new("GET", path).claims("u1", "t1", "")
}

/// The problem document the framework's functions answer for `error` (the same JSON).
fn framework(error: ApiError) -> Value {
    let response = error.into_response(REQUEST_ID);
    serde_json::from_slice(response.body().as_ref()).unwrap()
}

fn assert_problem(headers: &Value, body: &Value, status: u16) {
    assert_eq!(
        headers["content-type"], "application/problem+json",
        "{body}"
    );
    assert_eq!(body["status"], status, "{body}");
    assert_eq!(body["requestId"], REQUEST_ID, "{body}");
}

#[tokio::test]
async fn each_declared_operation_answers_at_its_method_and_path() {
    let router = router(CallerMode::Jwt);
    let (status, headers, body) = call(&router, get("/things/a1")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(body, json!({"thingId": "a1", "tenant": "t1"}));

    let (status, _, body) = call(&router, get("/things?status=done&limit=5")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"tenant": "t1", "status": "done", "limit": 5}));

    let put = HttpApiRequest::new("PUT", "/things/a1/name/new%20name")
        .claims("u1", "t1", "")
        .header("content-type", "application/json")
        .body(br#"{"version": 3}"#);
    let (status, _, body) = call(&router, put).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"thingId": "a1", "name": "new name"}));

    let (status, _, body) = call(&router, get("/me")).await;
    assert_eq!((status, body), (200, json!({"user": "u1", "tenant": "t1"})));
}

#[tokio::test]
async fn path_parameters_are_percent_decoded_exactly_once() {
    let router = router(CallerMode::Jwt);
    for (raw, decoded) in [
        ("/things/a%2523b", "a%23b"),
        ("/things/PRODUCT%23t1", "PRODUCT#t1"),
        ("/things/a%2Fb", "a/b"),
        ("/things/caf%C3%A9", "café"),
        ("/things/a+b", "a+b"),
    ] {
        let (status, _, body) = call(&router, get(raw)).await;
        assert_eq!(status, 200, "{raw}: {body}");
        assert_eq!(body["thingId"], decoded, "{raw}");
    }
}

#[tokio::test]
async fn a_path_the_function_does_not_serve_is_the_frameworks_404() {
    let router = router(CallerMode::Jwt);
    for path in ["/nothing", "/things/a/b", "/", "/other"] {
        let (status, headers, body) = call(&router, get(path)).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_problem(&headers, &body, 404);
        assert_eq!(body["type"], "urn:cqrs:problem:not-found", "{body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.contains(path) && detail.contains("GET /things/{thingId}"),
            "{detail}"
        );
    }
    // A handler's own 404 is the same document.
    let (status, _, body) = call(&router, get("/things/missing")).await;
    assert_eq!(status, 404);
    assert_eq!(
        body,
        framework(ApiError::NotFound("no thing missing".into()))
    );
}

#[tokio::test]
async fn another_method_on_a_declared_path_is_the_frameworks_405() {
    let router = router(CallerMode::Jwt);
    let (status, headers, body) = call(
        &router,
        HttpApiRequest::new("DELETE", "/things/a1").claims("u1", "t1", ""),
    )
    .await;
    assert_eq!(status, 405, "{body}");
    assert_problem(&headers, &body, 405);
    assert_eq!(
        body["type"], "urn:cqrs:problem:method-not-allowed",
        "{body}"
    );
    assert_eq!(headers["allow"], "GET,HEAD", "{headers}");

    let (status, headers, body) = call(
        &router,
        HttpApiRequest::new("POST", "/things").claims("u1", "t1", ""),
    )
    .await;
    assert_eq!(status, 405, "{body}");
    assert_problem(&headers, &body, 405);
}

#[tokio::test]
async fn a_request_without_a_caller_is_a_401_and_no_handler_runs_without_one() {
    let router = router(CallerMode::Jwt);
    for path in ["/things/a1", "/things?limit=0", "/me"] {
        let (status, headers, body) = call(&router, HttpApiRequest::new("GET", path)).await;
        assert_eq!(status, 401, "{path}: {body}");
        assert_problem(&headers, &body, 401);
        assert_eq!(
            body,
            framework(ApiError::Unauthenticated(
                "no JWT authorizer claims on the request".into()
            ))
        );
    }
    // Local headers are a caller only in local mode.
    let local = HttpApiRequest::new("GET", "/me")
        .header("x-tenant-code", "t9")
        .header("x-user-id", "u9");
    let (status, _, _) = call(&router, local.clone()).await;
    assert_eq!(status, 401);
    let (status, _, body) = call(&self::router(CallerMode::Local), local).await;
    assert_eq!((status, body), (200, json!({"user": "u9", "tenant": "t9"})));
}

#[tokio::test]
async fn a_bad_query_value_is_a_400_naming_the_parameter() {
    let router = router(CallerMode::Jwt);
    for (query, field) in [
        ("limit=ten", "limit"),
        ("limit=-1", "limit"),
        ("status=lost", "status"),
        ("limit=0", "limit"),
    ] {
        let (status, headers, body) = call(&router, get(&format!("/things?{query}"))).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_problem(&headers, &body, 400);
        assert_eq!(body["field"], field, "{query}: {body}");
        assert_eq!(body["type"], "urn:cqrs:problem:invalid-field", "{body}");
    }
    let (_, _, body) = call(&router, get("/things?status=lost")).await;
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("open") && detail.contains("done"),
        "{detail}"
    );
}

#[tokio::test]
async fn refusals_of_handlers_and_of_axum_are_problem_documents() {
    let router = router(CallerMode::Jwt);
    let put = |body: &[u8], content_type: &str| {
        HttpApiRequest::new("PUT", "/things/a1/name/b")
            .claims("u1", "t1", "")
            .header("content-type", content_type)
            .body(body)
    };
    let (status, headers, body) =
        call(&router, put(br#"{"version": 2}"#, "application/json")).await;
    assert_eq!(status, 409);
    assert_problem(&headers, &body, 409);
    assert_eq!(
        body,
        framework(ApiError::VersionConflict {
            detail: "the latest version of a1 is 3".into(),
            current_version: Some(3),
        })
    );
    // axum's own rejections: a body that is not JSON, JSON of the wrong shape, no JSON type.
    for (bytes, content_type, expected) in [
        (&b"{not json"[..], "application/json", 400),
        (&br#"{"version": "three"}"#[..], "application/json", 400),
        (&br#"{"version": 3}"#[..], "text/plain", 415),
    ] {
        let (status, headers, body) = call(&router, put(bytes, content_type)).await;
        assert_eq!(status, expected, "{body}");
        assert_problem(&headers, &body, expected);
        assert!(!body["detail"].as_str().unwrap().is_empty(), "{body}");
    }
    // A path parameter that does not fit its type names the parameter.
    async fn number(Path(n): Path<u32>) -> Json<u32> {
        Json(n)
    }
    let model = "[routes.n]\n[routes.n.operations.n]\nmethod = \"GET\"\npath = \"/n/{n}\"\n";
    let numbers = Routes::new(model, "n")
        .unwrap()
        .on("n", number)
        .unwrap()
        .caller_mode(CallerMode::Jwt)
        .into_router()
        .unwrap();
    let (status, headers, body) = call(&numbers, get("/n/x")).await;
    assert_eq!(status, 400, "{body}");
    assert_problem(&headers, &body, 400);
    assert_eq!(body["field"], "n", "{body}");
}

#[tokio::test]
async fn the_declaration_and_the_handlers_must_agree_before_anything_is_served() {
    let error = Routes::new(MODEL, "thing").err().unwrap().to_string();
    assert_eq!(
        error,
        "model.toml declares no route function `thing` (no [routes.thing]); it declares: `other`, `things`"
    );

    let error = Routes::new(MODEL, "things")
        .unwrap()
        .on("getThings", get_thing)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        error,
        "route function `things` declares no operation `getThings` in model.toml \
         ([routes.things.operations.getThings]); it declares: `getThing`, `listThings`, \
         `renameThing`, `whoAmI`"
    );

    let error = Routes::new(MODEL, "things")
        .unwrap()
        .on("getThing", get_thing)
        .unwrap()
        .on("getThing", get_thing)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        error,
        "route function `things`: operation `getThing` already has a handler"
    );

    let error = Routes::new(MODEL, "things")
        .unwrap()
        .on("getThing", get_thing)
        .unwrap()
        .on("whoAmI", who_am_i)
        .unwrap()
        .caller_mode(CallerMode::Jwt)
        .into_router()
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        error,
        "route function `things`: no handler for the declared operation(s) `listThings`, \
         `renameThing`: give each one with .on(\"<operationId>\", handler)"
    );

    // `run` refuses the same way, before it serves anything (no Lambda runtime API here).
    let error = Routes::new(MODEL, "other")
        .unwrap()
        .run()
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("no handler for the declared operation(s) `other`")
    );

    let error = Routes::new("[routes.Bad]\n", "Bad")
        .err()
        .unwrap()
        .to_string();
    assert!(error.starts_with("model.toml does not check"), "{error}");
}

#[tokio::test]
async fn a_handler_that_takes_what_its_declaration_does_not_read_is_a_500() {
    async fn reads_sql(mut sql: cqrs_routes::Sql) -> Result<Json<bool>, Problem> {
        Ok(Json(sql.client().is_closed()))
    }
    async fn reads_store(store: cqrs_routes::Store) -> Json<String> {
        Json(store.tables().data.clone())
    }
    let model = "[routes.n]\n[routes.n.operations.s]\nmethod = \"GET\"\npath = \"/s\"\n\
                 [routes.n.operations.d]\nmethod = \"GET\"\npath = \"/d\"\n";
    let router = Routes::new(model, "n")
        .unwrap()
        .on("s", reads_sql)
        .unwrap()
        .on("d", reads_store)
        .unwrap()
        .caller_mode(CallerMode::Jwt)
        .into_router()
        .expect("a function that reads nothing needs no store and no database to start");
    for path in ["/s", "/d"] {
        let (status, headers, body) = call(&router, get(path)).await;
        assert_eq!(status, 500, "{body}");
        assert_problem(&headers, &body, 500);
        assert!(
            !body["detail"].as_str().unwrap().contains("reads"),
            "the detail stays in the logs: {body}"
        );
    }
}

#[tokio::test]
async fn a_stack_without_the_read_model_answers_503() {
    async fn reads_sql(
        Tenant(tenant): Tenant,
        mut sql: cqrs_routes::Sql,
    ) -> Result<Json<i64>, Problem> {
        let session = sql.as_tenant(&tenant).await?;
        let one: i64 = session
            .query_one("SELECT 1::bigint", &[])
            .await
            .map_err(cqrs_routes::sql::failed)?
            .get(0);
        Ok(Json(one))
    }
    let model =
        "[routes.n]\nreads = [\"sql\"]\n[routes.n.operations.s]\nmethod = \"GET\"\npath = \"/s\"\n";
    let reader =
        cqrs_routes::sql::Reader::from_lookup(|name| (name == "SQL_HOST").then(String::new))
            .unwrap();
    let router = Routes::new(model, "n")
        .unwrap()
        .on("s", reads_sql)
        .unwrap()
        .caller_mode(CallerMode::Jwt)
        .with_sql(reader.clone())
        .into_router()
        .unwrap();
    let (status, headers, body) = call(&router, get("/s")).await;
    assert_eq!(status, 503, "{body}");
    assert_problem(&headers, &body, 503);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(reader.connections(), 0);
    // Without a caller, the 401 comes first.
    let (status, _, _) = call(&router, HttpApiRequest::new("GET", "/s")).await;
    assert_eq!(status, 401);
}
