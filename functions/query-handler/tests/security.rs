//! Tenant rules, callers, forged cursors and unknown routes against DynamoDB Local.

mod common;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use common::{As, Harness, SYSTEM_ADMIN, USER_T1, USER_T2, event};
use cqrs_caller::CallerMode;

/// One path per route.
const T1_ROUTES: [&str; 4] = [
    "/items/PRODUCT%23t1",
    "/items/PRODUCT%23t1/P1",
    "/items/PRODUCT%23t1/P1/versions",
    "/items/PRODUCT%23t1/P1/versions/1",
];

#[tokio::test]
async fn another_tenants_partition_is_403_on_every_route_before_anything_else() {
    let h = Harness::new().await;
    h.seed("PRODUCT#t1", "P1", 2, false).await;
    for path in T1_ROUTES {
        let a = h.get(&USER_T1, path).await;
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        h.get(&USER_T2, path).await.assert_problem(403, None);
        // Bad parameters, a bad sort key or version: still 403, nothing about the request leaks.
        h.get(&USER_T2, &format!("{path}?limit=abc&cursor=x"))
            .await
            .assert_problem(403, None);
    }
    h.get(&USER_T2, "/items/PRODUCT%23t1/a%40b/versions/x")
        .await
        .assert_problem(403, None);
    // A tenant whose code starts with the caller's is another tenant.
    h.seed("PRODUCT#t10", "P1", 1, false).await;
    h.get(&USER_T1, "/items/PRODUCT%23t10/P1")
        .await
        .assert_problem(403, None);
    // A time-series partition carries its tenant in the second segment.
    h.get(&USER_T2, "/items/LOG%23t1%232024-01")
        .await
        .assert_problem(403, None);
}

#[tokio::test]
async fn common_is_readable_by_all_and_system_admin_reads_any_tenant() {
    let h = Harness::new().await;
    h.seed("MASTER#common", "SETTING#app#theme", 2, false).await;
    h.seed("PRODUCT#t2", "P9", 1, false).await;
    for caller in [USER_T1, USER_T2, SYSTEM_ADMIN] {
        for path in [
            "/items/MASTER%23common",
            "/items/MASTER%23common/SETTING%23app%23theme",
            "/items/MASTER%23common/SETTING%23app%23theme/versions",
            "/items/MASTER%23common/SETTING%23app%23theme/versions/2",
        ] {
            let a = h.get(&caller, path).await;
            assert_eq!(a.status, 200, "{} {path}: {}", caller.tenant, a.body);
        }
    }
    let a = h.get(&SYSTEM_ADMIN, "/items/PRODUCT%23t2/P9").await;
    assert_eq!(a.status, 200);
    h.get(&USER_T1, "/items/PRODUCT%23t2/P9")
        .await
        .assert_problem(403, None);
}

#[tokio::test]
async fn no_caller_is_401_and_local_headers_count_only_in_local_mode() {
    let mut h = Harness::new().await;
    h.seed("PRODUCT#t1", "P1", 1, false).await;
    let local = || {
        lambda_http::http::Request::builder()
            .method("GET")
            .uri("/items/PRODUCT%23t1/P1")
            .header("x-tenant-code", "t1")
            .header("x-user-id", "u1")
            .body(lambda_http::Body::Empty)
            .unwrap()
    };
    h.send(local()).await.assert_problem(401, None);
    h.app.caller_mode = CallerMode::Local;
    let a = h.send(local()).await;
    assert_eq!(
        (a.status, a.body["sk"].clone()),
        (200, serde_json::json!("P1"))
    );
    let other = lambda_http::http::Request::builder()
        .uri("/items/PRODUCT%23t2/P1")
        .header("x-tenant-code", "t1")
        .header("x-user-id", "u1")
        .body(lambda_http::Body::Empty)
        .unwrap();
    h.send(other).await.assert_problem(403, None);
}

#[tokio::test]
async fn unknown_paths_are_404_and_other_methods_405() {
    let h = Harness::new().await;
    for path in [
        "/",
        "/items",
        "/items/PRODUCT%23t1/P1/history",
        "/items/PRODUCT%23t1/P1/versions/1/x",
        "/commands",
    ] {
        h.get(&USER_T1, path).await.assert_problem(404, None);
    }
    for method in ["POST", "PUT", "PATCH", "DELETE"] {
        let a = h
            .send(event(method, &USER_T1, "/items/PRODUCT%23t1/P1", &[]))
            .await;
        a.assert_problem(405, None);
        assert_eq!(a.header("allow"), Some("GET"));
    }
}

/// The cursor of the first page of `target` (which must have more pages).
async fn first_cursor(h: &Harness, caller: &As, target: &str) -> String {
    let a = h.get(caller, target).await;
    assert_eq!(a.status, 200, "{target}: {}", a.body);
    a.cursor().expect("a second page")
}

fn edit(cursor: &str, change: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut json: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(cursor).unwrap()).unwrap();
    change(&mut json);
    URL_SAFE_NO_PAD.encode(json.to_string())
}

#[tokio::test]
async fn forged_and_misused_cursors_are_400_and_read_nothing_elsewhere() {
    let h = Harness::new().await;
    for i in 0..4 {
        h.seed("PRODUCT#t1", &format!("P{i}"), 3, false).await;
        h.seed("ORDER#t1", &format!("ORDER#o{i}"), 1, false).await;
        h.seed("PRODUCT#t2", &format!("P{i}"), 1, false).await;
    }
    let t1 = first_cursor(&h, &USER_T1, "/items/PRODUCT%23t1?limit=2").await;
    let t1_prefix = first_cursor(&h, &USER_T1, "/items/PRODUCT%23t1?limit=1&skPrefix=P").await;
    let order = first_cursor(&h, &USER_T1, "/items/ORDER%23t1?limit=2").await;
    let t2 = first_cursor(&h, &SYSTEM_ADMIN, "/items/PRODUCT%23t2?limit=2").await;
    let versions = first_cursor(&h, &USER_T1, "/items/PRODUCT%23t1/P0/versions?limit=1").await;
    // The genuine cursor works.
    let a = h
        .get(
            &USER_T1,
            &format!("/items/PRODUCT%23t1?limit=2&cursor={t1}"),
        )
        .await;
    assert_eq!(a.sks(), ["P2", "P3"]);

    let cases: Vec<(String, String)> = vec![
        // Garbage, not base64url, base64url of something else.
        ("/items/PRODUCT%23t1".into(), "garbage%21".into()),
        ("/items/PRODUCT%23t1".into(), "e30".into()),
        (
            "/items/PRODUCT%23t1".into(),
            URL_SAFE_NO_PAD.encode("[1,2]"),
        ),
        // Another partition of the same tenant, and another tenant's partition.
        ("/items/PRODUCT%23t1".into(), order.clone()),
        ("/items/PRODUCT%23t1".into(), t2.clone()),
        // Another query shape: a prefix, another order, a range.
        ("/items/PRODUCT%23t1".into(), t1_prefix.clone()),
        ("/items/PRODUCT%23t1?order=desc".into(), t1.clone()),
        ("/items/PRODUCT%23t1?skFrom=P".into(), t1.clone()),
        ("/items/PRODUCT%23t1?skPrefix=P1".into(), t1_prefix.clone()),
        // A listing's cursor on versions and the other way round, and another item's versions.
        ("/items/PRODUCT%23t1/P0/versions".into(), t1.clone()),
        ("/items/PRODUCT%23t1".into(), versions.clone()),
        ("/items/PRODUCT%23t1/P1/versions".into(), versions.clone()),
        (
            "/items/PRODUCT%23t1/P0/versions?order=asc".into(),
            versions.clone(),
        ),
        // Edited cursors: the key moved to another partition or outside the prefix.
        (
            "/items/PRODUCT%23t1".into(),
            edit(&t1, |j| j["pk"] = "PRODUCT#t2".into()),
        ),
        (
            "/items/PRODUCT%23t1?skPrefix=P".into(),
            edit(&t1_prefix, |j| j["sk"] = "Q".into()),
        ),
        (
            "/items/PRODUCT%23t1/P0/versions".into(),
            edit(&versions, |j| j["v"] = 7.into()),
        ),
        (
            "/items/PRODUCT%23t1/P0/versions".into(),
            edit(&versions, |j| {
                j["pk"] = "PRODUCT#t2".into();
                j["id"] = "PRODUCT#t2#P0".into();
            }),
        ),
    ];
    for (target, cursor) in cases {
        let separator = if target.contains('?') { '&' } else { '?' };
        let url = format!("{target}{separator}cursor={cursor}");
        h.get(&USER_T1, &url)
            .await
            .assert_problem(400, Some("cursor"));
    }
    // Another tenant's cursor on that tenant's partition is still the tenant's partition: 403.
    h.get(&USER_T1, &format!("/items/PRODUCT%23t2?cursor={t2}"))
        .await
        .assert_problem(403, None);
}
