//! The command handler against DynamoDB Local: version rules, races, idempotency, merge, soft
//! delete, validation and tenant refusals. Each test runs on its own fresh tables.

mod common;

use common::{As, Harness, SYSTEM_ADMIN, USER_T1, USER_T2, command, event};
use cqrs_caller::CallerMode;
use futures::future::join_all;
use serde_json::json;

#[tokio::test]
async fn version_zero_creates_once() {
    let h = Harness::new().await;
    let (status, body) = h.post(&USER_T1, command("PRODUCT#t1", "P001", 0)).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        body,
        json!({"id": "PRODUCT#t1#P001", "pk": "PRODUCT#t1", "sk": "P001@1", "version": 1})
    );

    let (status, body) = h.post(&USER_T1, command("PRODUCT#t1", "P001", 0)).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["type"], "urn:cqrs:problem:version-conflict");
    assert_eq!(body["currentVersion"], 1);
    assert_eq!(h.versions("PRODUCT#t1", "P001").await.len(), 1);
}

#[tokio::test]
async fn version_n_writes_n_plus_one_and_conflicts_when_taken() {
    let h = Harness::new().await;
    assert_eq!(
        h.post(&USER_T1, command("PRODUCT#t1", "P1", 0)).await.0,
        202
    );
    let (status, body) = h.post(&USER_T1, command("PRODUCT#t1", "P1", 1)).await;
    assert_eq!((status, body["version"].clone()), (202, json!(2)));

    // A second writer that also saw version 1 loses.
    let (status, body) = h.post(&USER_T1, command("PRODUCT#t1", "P1", 1)).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["currentVersion"], 2);

    // A version that never existed is a 404, and nothing is written.
    let (status, body) = h.post(&USER_T1, command("PRODUCT#t1", "P1", 7)).await;
    assert_eq!(status, 404, "{body}");
    let versions: Vec<i64> = h
        .versions("PRODUCT#t1", "P1")
        .await
        .iter()
        .map(|i| i.version)
        .collect();
    assert_eq!(versions, [1, 2]);
}

#[tokio::test]
async fn version_latest_appends_and_creates() {
    let h = Harness::new().await;
    for expected in 1..=12 {
        let (status, body) = h.post(&USER_T1, command("PRODUCT#t1", "P2", -1)).await;
        assert_eq!(
            (status, body["version"].clone()),
            (202, json!(expected)),
            "{body}"
        );
    }
    // Past version 9 the string order of sort keys (`@10` < `@9`) differs from the numeric one.
    let (_, body) = h.post(&USER_T1, command("PRODUCT#t1", "P2", 12)).await;
    assert_eq!(body["sk"], "P2@13");
    // A base that is a prefix of another item's base is another item.
    let (_, body) = h.post(&USER_T1, command("PRODUCT#t1", "P", -1)).await;
    assert_eq!(body["version"], 1);
}

#[tokio::test]
async fn concurrent_writers_of_one_version_exactly_one_wins() {
    let h = Harness::new().await;
    assert_eq!(
        h.post(&USER_T1, command("PRODUCT#t1", "RACE", 0)).await.0,
        202
    );
    let writers = 25;
    let results = join_all((0..writers).map(|i| {
        let h = &h;
        async move {
            let mut body = command("PRODUCT#t1", "RACE", 1);
            body["name"] = json!(format!("writer {i}"));
            h.post(&USER_T1, body).await
        }
    }))
    .await;
    let won: Vec<_> = results.iter().filter(|(s, _)| *s == 202).collect();
    let lost = results.iter().filter(|(s, _)| *s == 409).count();
    println!(
        "race on one version: {writers} writers, {} won, {lost} got 409",
        won.len()
    );
    assert_eq!(won.len(), 1);
    assert_eq!(lost, writers - 1);
    let versions = h.versions("PRODUCT#t1", "RACE").await;
    assert_eq!(
        versions.iter().map(|i| i.version).collect::<Vec<_>>(),
        [1, 2]
    );
    // The stored version 2 is the winner's, untouched by the losers.
    assert_eq!(won[0].1["sk"], "RACE@2");
}

#[tokio::test]
async fn concurrent_latest_writers_leave_no_gap_and_no_duplicate() {
    let h = Harness::new().await;
    let writers = 8;
    let results =
        join_all((0..writers).map(|_| h.post(&USER_T1, command("PRODUCT#t1", "SEQ", -1)))).await;
    let mut won: Vec<i64> = results
        .iter()
        .filter(|(s, _)| *s == 202)
        .map(|(_, b)| b["version"].as_i64().unwrap())
        .collect();
    won.sort();
    assert!(results.iter().all(|(s, _)| *s == 202 || *s == 409));
    assert!(!won.is_empty());
    let stored: Vec<i64> = h
        .versions("PRODUCT#t1", "SEQ")
        .await
        .iter()
        .map(|i| i.version)
        .collect();
    assert_eq!(stored, (1..=won.len() as i64).collect::<Vec<_>>(), "no gap");
    assert_eq!(won, stored, "every success is its own version");
}

#[tokio::test]
async fn idempotent_retry_returns_the_first_result() {
    let h = Harness::new().await;
    let body = command("PRODUCT#t1", "IDEM", -1).to_string();
    let key = [("idempotency-key", "key-1")];
    let (s1, b1, _) = h.send(event("POST", &USER_T1, &body, &key)).await;
    let (s2, b2, r2) = h.send(event("POST", &USER_T1, &body, &key)).await;
    assert_eq!((s1, s2), (202, 202));
    assert_eq!(b1, b2);
    assert_eq!(r2.headers()["idempotent-replayed"], "true");
    let versions = h.versions("PRODUCT#t1", "IDEM").await;
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0].request_id, "key-1");

    // Same key, another body: 422, nothing written.
    let other = command("PRODUCT#t1", "IDEM", 1).to_string();
    let (status, problem, _) = h.send(event("POST", &USER_T1, &other, &key)).await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(h.versions("PRODUCT#t1", "IDEM").await.len(), 1);

    // The same key of another caller is another key.
    let t2_body = command("PRODUCT#t2", "IDEM", -1).to_string();
    let (status, _, _) = h.send(event("POST", &USER_T2, &t2_body, &key)).await;
    assert_eq!(status, 202);
}

#[tokio::test]
async fn concurrent_retries_with_one_key_write_one_version() {
    let h = Harness::new().await;
    let body = command("PRODUCT#t1", "IDEM2", -1).to_string();
    let key = [("idempotency-key", "same-key")];
    let results = join_all((0..10).map(|_| h.send(event("POST", &USER_T1, &body, &key)))).await;
    for (status, body, _) in &results {
        assert_eq!(*status, 202, "{body}");
        assert_eq!(body["version"], 1);
    }
    assert_eq!(h.versions("PRODUCT#t1", "IDEM2").await.len(), 1);
}

#[tokio::test]
async fn patch_deep_merges_into_the_named_version() {
    let h = Harness::new().await;
    let create = json!({"pk": "PRODUCT#t1", "sk": "M", "version": 0, "code": "C", "name": "first",
        "attributes": {"price": 100, "size": {"w": 1, "h": 2}, "gone": true}});
    assert_eq!(h.post(&USER_T1, create).await.0, 202);
    let patch = json!({"pk": "PRODUCT#t1", "sk": "M", "version": 1, "name": "second",
        "attributes": {"size": {"h": 3}, "gone": null, "new": [1, 2]}});
    let (status, body) = h.patch(&USER_T1, patch).await;
    assert_eq!(status, 202, "{body}");
    let latest = h.versions("PRODUCT#t1", "M").await.pop().unwrap();
    assert_eq!(latest.version, 2);
    assert_eq!(latest.code, "C");
    assert_eq!(latest.name, "second");
    assert_eq!(
        cqrs_item::Value::Map(latest.attributes),
        json!({"price": 100, "size": {"w": 1, "h": 3}, "new": [1, 2]})
    );
    assert_eq!(latest.source, "PATCH /commands");

    // PATCH of a missing item or version: 404, version 0: 400.
    let missing = json!({"pk": "PRODUCT#t1", "sk": "NOPE", "version": -1, "name": "x"});
    assert_eq!(h.patch(&USER_T1, missing).await.0, 404);
    let zero = json!({"pk": "PRODUCT#t1", "sk": "M", "version": 0});
    assert_eq!(h.patch(&USER_T1, zero).await.0, 400);
    // A stale patch conflicts like a stale post.
    let stale = json!({"pk": "PRODUCT#t1", "sk": "M", "version": 1, "name": "late"});
    assert_eq!(h.patch(&USER_T1, stale).await.0, 409);
}

#[tokio::test]
async fn soft_delete_is_a_new_version() {
    let h = Harness::new().await;
    assert_eq!(h.post(&USER_T1, command("PRODUCT#t1", "D", 0)).await.0, 202);
    let delete = json!({"pk": "PRODUCT#t1", "sk": "D", "version": 1, "isDeleted": true});
    assert_eq!(h.patch(&USER_T1, delete).await.0, 202);
    let versions = h.versions("PRODUCT#t1", "D").await;
    assert_eq!(versions.len(), 2);
    assert!(!versions[0].is_deleted);
    assert!(versions[1].is_deleted);
    // The patch kept the data of version 1.
    assert_eq!(versions[1].attributes, versions[0].attributes);
}

#[tokio::test]
async fn audit_fields_are_filled_by_the_server() {
    let h = Harness::new().await;
    assert_eq!(h.post(&USER_T1, command("PRODUCT#t1", "A", 0)).await.0, 202);
    let other_user = As {
        user: "u9",
        tenant: "t1",
        roles: "",
    };
    let (s, _, _) = h
        .send(event(
            "POST",
            &other_user,
            &command("PRODUCT#t1", "A", 1).to_string(),
            &[("idempotency-key", "k-a")],
        ))
        .await;
    assert_eq!(s, 202);
    let versions = h.versions("PRODUCT#t1", "A").await;
    let (v1, v2) = (&versions[0], &versions[1]);
    assert_eq!(v1.id, "PRODUCT#t1#A");
    assert_eq!(v1.tenant_code, "t1");
    assert_eq!(v1.item_type, "PRODUCT");
    assert_eq!(
        (v1.created_by.as_str(), v1.created_ip.as_str()),
        ("u1", "192.0.2.10")
    );
    assert_eq!(v1.request_id, "apigw-request");
    assert_eq!(v1.source, "POST /commands");
    assert!(chrono::DateTime::parse_from_rfc3339(&v1.created_at).is_ok());
    // Version 2 carries the creation forward and records its own update.
    assert_eq!(
        (v2.created_at.as_str(), v2.created_by.as_str()),
        (v1.created_at.as_str(), "u1")
    );
    assert_eq!(v2.updated_by, "u9");
    assert_eq!(v2.request_id, "k-a");
    assert!(v2.updated_at >= v1.updated_at);
}

#[tokio::test]
async fn bad_input_is_a_named_400_and_writes_nothing() {
    let h = Harness::new().await;
    let cases: Vec<(&str, String, Option<&str>)> = vec![
        (
            "unknown field",
            json!({"pk": "PRODUCT#t1", "sk": "s", "version": 0, "colour": 1}).to_string(),
            Some("colour"),
        ),
        (
            "wrong type",
            json!({"pk": "PRODUCT#t1", "sk": "s", "version": "0"}).to_string(),
            Some("version"),
        ),
        (
            "missing version",
            json!({"pk": "PRODUCT#t1", "sk": "s"}).to_string(),
            Some("version"),
        ),
        (
            "attributes not a map",
            json!({"pk": "PRODUCT#t1", "sk": "s", "version": 0, "attributes": 1}).to_string(),
            Some("attributes"),
        ),
        (
            "nested wrong type",
            json!({"pk": "PRODUCT#t1", "sk": "s", "version": 0, "isDeleted": "yes"}).to_string(),
            Some("isDeleted"),
        ),
        (
            "version in sk",
            json!({"pk": "PRODUCT#t1", "sk": "s@3", "version": 0}).to_string(),
            Some("sk"),
        ),
        (
            "empty sk",
            json!({"pk": "PRODUCT#t1", "sk": "", "version": 0}).to_string(),
            Some("sk"),
        ),
        (
            "empty sk segment",
            json!({"pk": "PRODUCT#t1", "sk": "a##b", "version": 0}).to_string(),
            Some("sk"),
        ),
        (
            "pk without tenant",
            json!({"pk": "PRODUCT", "sk": "s", "version": 0}).to_string(),
            Some("pk"),
        ),
        (
            "pk with empty tenant",
            json!({"pk": "PRODUCT#", "sk": "s", "version": 0}).to_string(),
            Some("pk"),
        ),
        (
            "oversized pk",
            json!({"pk": format!("PRODUCT#t1#{}", "x".repeat(2100)), "sk": "s", "version": 0})
                .to_string(),
            Some("pk"),
        ),
        (
            "oversized sk",
            json!({"pk": "PRODUCT#t1", "sk": "x".repeat(1100), "version": 0}).to_string(),
            Some("sk"),
        ),
        (
            "version below -1",
            json!({"pk": "PRODUCT#t1", "sk": "s", "version": -5}).to_string(),
            Some("version"),
        ),
        ("not an object", "[1,2]".to_string(), None),
        ("not JSON", "{\"pk\":".to_string(), None),
        ("empty body", String::new(), None),
    ];
    for (name, body, field) in &cases {
        let (status, problem, response) = h.send(event("POST", &USER_T1, body, &[])).await;
        assert_eq!(status, 400, "{name}: {problem}");
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json",
            "{name}"
        );
        assert_eq!(problem["field"].as_str(), *field, "{name}: {problem}");
    }
    // Too large: 413.
    let huge = json!({"pk": "PRODUCT#t1", "sk": "big", "version": 0, "attributes": {"blob": "x".repeat(400 * 1024)}});
    let (status, problem) = h.post(&USER_T1, huge).await;
    assert_eq!(status, 413, "{problem}");
    // Not JSON: 415.
    let mut request = event("POST", &USER_T1, "pk=1", &[]);
    request
        .headers_mut()
        .insert("content-type", "text/plain".parse().unwrap());
    assert_eq!(h.send(request).await.0, 415);
    // Bad idempotency key: 400.
    let long_key = "k".repeat(300);
    let (status, _, _) = h
        .send(event(
            "POST",
            &USER_T1,
            &command("PRODUCT#t1", "s", 0).to_string(),
            &[("idempotency-key", &long_key)],
        ))
        .await;
    assert_eq!(status, 400);
    println!("bad input: {} bodies refused with 4xx", cases.len() + 3);
    assert_eq!(h.command_count().await, 0, "nothing written");
}

#[tokio::test]
async fn tenant_rules_are_enforced_before_any_write() {
    let h = Harness::new().await;
    // Another tenant's pk.
    let (status, problem) = h.post(&USER_T1, command("PRODUCT#t2", "s", 0)).await;
    assert_eq!(status, 403, "{problem}");
    // A tenant that merely starts with ours.
    assert_eq!(
        h.post(&USER_T1, command("PRODUCT#t10", "s", 0)).await.0,
        403
    );
    // common needs system_admin.
    assert_eq!(
        h.post(&USER_T1, command("MASTER#common", "s", 0)).await.0,
        403
    );
    assert_eq!(
        h.post(&SYSTEM_ADMIN, command("MASTER#common", "s", 0))
            .await
            .0,
        202
    );
    // system_admin acts for another tenant.
    assert_eq!(
        h.post(&SYSTEM_ADMIN, command("PRODUCT#t2", "s", 0)).await.0,
        202
    );
    assert_eq!(h.command_count().await, 2);

    // Without claims: 401, and local headers are ignored unless CALLER_MODE=local.
    let mut request = event(
        "POST",
        &USER_T1,
        &command("PRODUCT#evil", "s", 0).to_string(),
        &[("x-tenant-code", "evil"), ("x-user-id", "mallory")],
    );
    strip_claims(&mut request);
    assert_eq!(h.send(request).await.0, 401);
    assert_eq!(h.command_count().await, 2);
}

#[tokio::test]
async fn local_caller_mode_reads_the_headers() {
    let h = Harness::with_mode(CallerMode::Local).await;
    let body = command("PRODUCT#t3", "L", 0).to_string();
    let mut request = event(
        "POST",
        &USER_T1,
        &body,
        &[("x-tenant-code", "t3"), ("x-user-id", "dev")],
    );
    strip_claims(&mut request);
    let (status, response, _) = h.send(request).await;
    assert_eq!(status, 202, "{response}");
    assert_eq!(h.versions("PRODUCT#t3", "L").await[0].created_by, "dev");
    // Local headers still obey the tenant rules.
    let mut request = event(
        "POST",
        &USER_T1,
        &command("PRODUCT#t1", "L", 0).to_string(),
        &[("x-tenant-code", "t3"), ("x-user-id", "dev")],
    );
    strip_claims(&mut request);
    assert_eq!(h.send(request).await.0, 403);
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems() {
    let h = Harness::new().await;
    let mut request = event("GET", &USER_T1, "", &[]);
    *request.method_mut() = lambda_http::http::Method::GET;
    let (status, problem, response) = h.send(request).await;
    assert_eq!(status, 405, "{problem}");
    assert_eq!(response.headers()["allow"], "POST, PATCH");
    let request = lambda_http::http::Request::builder()
        .method("POST")
        .uri("/elsewhere")
        .body(lambda_http::Body::Empty)
        .unwrap();
    assert_eq!(h.send(request).await.0, 404);
}

/// Removes the JWT authorizer from an event, as a request that bypassed it would look.
fn strip_claims(request: &mut lambda_http::Request) {
    use lambda_http::request::RequestContext;
    if let Some(RequestContext::ApiGatewayV2(context)) =
        request.extensions_mut().get_mut::<RequestContext>()
    {
        context.authorizer = None;
    }
}

#[tokio::test]
async fn the_change_logs_partitions_are_refused_to_commands() {
    let h = Harness::new().await;
    let (status, problem) = h
        .post(
            &USER_T1,
            json!({"pk": "CQRS_CHANGE_LOG#t1#2026-01", "sk": "2026-01-02T00:00:00.000Z#x-1", "version": 0}),
        )
        .await;
    assert_eq!(status, 400, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("reserved"),
        "{problem}"
    );
    assert_eq!(h.command_count().await, 0, "nothing written");
}

#[tokio::test]
async fn the_frameworks_own_partitions_are_refused_to_commands() {
    let h = Harness::new().await;
    for (caller, pk) in [
        (&USER_T1, "HEAD#t1"),
        (&USER_T1, "HEADS#t1"),
        (&SYSTEM_ADMIN, "HEADS#STATE"),
    ] {
        let (status, problem) = h.post(caller, command(pk, "P1", 0)).await;
        assert_eq!(status, 400, "{pk}: {problem}");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("reserved"),
            "{pk}: {problem}"
        );
    }
    assert_eq!(h.command_count().await, 0, "nothing written");
}

/// Issue 36 (4): a keyed retry of a written `PATCH` (`version: -1`) gets its replay, although by
/// now the merge into the newest version would be refused before the transaction (a `413`: another
/// writer made the item nearly 400 KB).
#[tokio::test]
async fn a_keyed_retry_gets_its_replay_not_a_refusal_decided_before_the_write() {
    let h = Harness::new().await;
    let (status, answer) = h.post(&USER_T1, command("PRODUCT#t1", "BIG", 0)).await;
    assert_eq!(status, 202, "{answer}");
    let patch = json!({"pk": "PRODUCT#t1", "sk": "BIG", "version": -1,
                       "attributes": {"note": "n".repeat(20_000)}})
    .to_string();
    let key = [("idempotency-key", "k-patch")];
    let (status, first, _) = h.send(event("PATCH", &USER_T1, &patch, &key)).await;
    assert_eq!(status, 202, "{first}");
    // Another writer replaces the item with one of 395 KB (without the note): the same merge
    // would now be over DynamoDB's 400 KB.
    let big = json!({"pk": "PRODUCT#t1", "sk": "BIG", "version": -1,
                     "attributes": {"blob": "b".repeat(395_000)}});
    let (status, answer) = h.post(&USER_T1, big).await;
    assert_eq!(status, 202, "{answer}");
    let (status, fresh, _) = h
        .send(event(
            "PATCH",
            &USER_T1,
            &patch,
            &[("idempotency-key", "k-new")],
        ))
        .await;
    assert_eq!(status, 413, "a new request is refused: {fresh}");
    let (status, retry, response) = h.send(event("PATCH", &USER_T1, &patch, &key)).await;
    assert_eq!(
        (status, &retry),
        (202, &first),
        "the retry is the first answer"
    );
    assert_eq!(response.headers()["idempotent-replayed"], "true");
    assert_eq!(h.versions("PRODUCT#t1", "BIG").await.len(), 3);
}
