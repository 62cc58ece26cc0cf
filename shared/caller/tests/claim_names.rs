//! The claim names come from the environment (`JWT_TENANT_CLAIM`, `JWT_ROLES_CLAIM`), as the
//! template's `TenantClaim` and `RolesClaim` parameters set them for every HTTP function.
//!
//! A process reads its environment once, so each case runs in a child process: the test runs this
//! same test binary again, filtered to one `child_*` test, with the variables set. Without
//! `CQRS_CALLER_CHILD` the `child_*` tests do nothing (they are what the parents run).

use std::process::Command;

use cqrs_caller::{Caller, CallerMode, Role};

const CHILD: &str = "CQRS_CALLER_CHILD";

/// An API Gateway (HTTP API, payload 2.0) event with these JWT claims, and local headers that
/// name someone else.
fn jwt_request(claims: serde_json::Value) -> lambda_http::Request {
    let event = serde_json::json!({
        "version": "2.0",
        "routeKey": "POST /commands",
        "rawPath": "/commands",
        "rawQueryString": "",
        "headers": {"x-tenant-code": "evil", "x-user-id": "evil"},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api",
            "authorizer": {"jwt": {"claims": claims, "scopes": null}},
            "domainName": "example.test",
            "domainPrefix": "api",
            "http": {"method": "POST", "path": "/commands", "protocol": "HTTP/1.1",
                     "sourceIp": "192.0.2.1", "userAgent": "test"},
            "requestId": "r1",
            "routeKey": "POST /commands",
            "stage": "$default",
            "time": "01/Jan/2026:00:00:00 +0000",
            "timeEpoch": 0
        },
        "isBase64Encoded": false
    });
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

/// An identity provider that names the tenant `tenant_id` and the roles `groups` (as Cognito's
/// `cognito:groups` arrives: API Gateway renders an array claim as `[a b]`), beside `custom:*`
/// claims that say something else.
fn other_idp() -> lambda_http::Request {
    jwt_request(serde_json::json!({
        "sub": "u1",
        "tenant_id": "t7",
        "groups": "[editor system_admin]",
        "custom:tenant": "t1",
        "custom:roles": "viewer"
    }))
}

/// Runs the test `name` of this binary in a child process with `vars` set; its output.
fn child(name: &str, vars: &[(&str, &str)]) -> (bool, String) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env_remove("JWT_TENANT_CLAIM")
        .env_remove("JWT_ROLES_CLAIM")
        .env_remove("CALLER_MODE");
    for (key, value) in vars {
        command.env(key, value);
    }
    let out = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The child ran exactly the one test (a filter that matched nothing would pass vacuously).
    assert!(text.contains("running 1 test"), "{name}: {text}");
    (out.status.success(), text)
}

fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

#[test]
fn child_reads_the_claims_named_by_the_environment() {
    if !is_child() {
        return;
    }
    let mode = CallerMode::from_env().unwrap();
    assert_eq!(mode, CallerMode::Jwt);
    let caller = Caller::from_request(&other_idp(), mode).unwrap();
    assert_eq!(
        caller,
        Caller::with_roles(
            "u1",
            "t7",
            vec![Role::global("editor"), Role::global("system_admin")]
        )
    );
    // The default names are not read any more: a token with only them has no tenant.
    let defaults_only = jwt_request(serde_json::json!({
        "sub": "u1", "custom:tenant": "t1", "custom:roles": "system_admin"
    }));
    assert_eq!(
        Caller::from_request(&defaults_only, mode)
            .unwrap_err()
            .status(),
        403
    );
    // Claims still win over the local headers in local mode.
    let caller = Caller::from_request(&other_idp(), CallerMode::Local).unwrap();
    assert_eq!(caller.tenant_code, "t7");
}

#[test]
fn child_reads_the_default_claims_without_the_variables() {
    if !is_child() {
        return;
    }
    let mode = CallerMode::from_env().unwrap();
    let caller = Caller::from_request(&other_idp(), mode).unwrap();
    // tenant_id and groups are ignored: custom:tenant and custom:roles are the caller.
    assert_eq!(caller, Caller::new("u1", "t1", vec!["viewer".into()]));
}

#[test]
fn child_local_headers_are_unchanged_by_the_claim_names() {
    if !is_child() {
        return;
    }
    let mode = CallerMode::from_env().unwrap();
    assert_eq!(mode, CallerMode::Local);
    let request = lambda_http::http::Request::builder()
        .header("x-tenant-code", "t1")
        .header("x-user-id", "u1")
        .header("x-roles", "viewer")
        .body(lambda_http::Body::Empty)
        .unwrap();
    let caller = Caller::from_request(&request, mode).unwrap();
    assert_eq!(caller, Caller::new("u1", "t1", vec!["viewer".into()]));
}

#[test]
fn child_a_bad_claim_name_stops_the_start() {
    if !is_child() {
        return;
    }
    let var = std::env::var("EXPECTED_VARIABLE").unwrap();
    let err = CallerMode::from_env().unwrap_err();
    assert!(err.contains(&var), "{err}");
    println!("start refused: {err}");
}

#[test]
fn the_claim_names_come_from_the_environment() {
    let (ok, out) = child(
        "child_reads_the_claims_named_by_the_environment",
        &[
            ("JWT_TENANT_CLAIM", "tenant_id"),
            ("JWT_ROLES_CLAIM", "groups"),
        ],
    );
    assert!(ok, "{out}");
}

#[test]
fn without_the_variables_the_claims_are_custom_tenant_and_custom_roles() {
    let (ok, out) = child("child_reads_the_default_claims_without_the_variables", &[]);
    assert!(ok, "{out}");
}

#[test]
fn the_local_header_mode_is_unchanged() {
    let (ok, out) = child(
        "child_local_headers_are_unchanged_by_the_claim_names",
        &[
            ("CALLER_MODE", "local"),
            ("JWT_TENANT_CLAIM", "tenant_id"),
            ("JWT_ROLES_CLAIM", "groups"),
        ],
    );
    assert!(ok, "{out}");
}

#[test]
fn an_empty_or_invalid_claim_name_stops_the_function_at_start() {
    for (var, value) in [
        ("JWT_TENANT_CLAIM", ""),
        ("JWT_ROLES_CLAIM", ""),
        ("JWT_TENANT_CLAIM", " tenant"),
        ("JWT_ROLES_CLAIM", "my roles"),
        ("JWT_TENANT_CLAIM", "sub"),
        ("JWT_ROLES_CLAIM", "custom:tenant"),
    ] {
        let (ok, out) = child(
            "child_a_bad_claim_name_stops_the_start",
            &[(var, value), ("EXPECTED_VARIABLE", var)],
        );
        assert!(ok, "{var}={value:?}: {out}");
        assert!(out.contains("start refused"), "{var}={value:?}: {out}");
    }
}
