//! Callers and reads (issue 13, items 1, 2, 3, 10 and the read half of 12), through both HTTP
//! functions on fresh DynamoDB Local tables, as a client calls them:
//!
//! - tenant-scoped roles: mbc's `{"tenant": t, "role": r}` holds only within `t`, and only a role
//!   without a tenant is global; a `system_admin` of another tenant (or of its own) never writes
//!   `common` or another tenant;
//! - claims over local headers: with `CALLER_MODE=local`, a request that carries JWT claims is
//!   read from its claims; forged `x-tenant-code` / `x-user-id` / `x-roles` headers change nothing;
//! - audit fields: who wrote an item, from where, with which request (Idempotency-Key) is shown
//!   only to the item's own tenant and a global `system_admin`, on every query route;
//! - sort-key filters over DynamoDB's 1024 bytes (and item ids over 2048) are 400s naming the
//!   parameter, never 500s; `minVersion` at and past `i64::MAX` never overflows.

mod common;

use common::{Answer, Caller, ROOT, Req, Stack, T1, T2, Who, get};
use cqrs_caller::CallerMode;
use serde_json::{Value, json};

/// The audit members of an item.
const AUDIT: [&str; 5] = [
    "createdBy",
    "createdIp",
    "updatedBy",
    "updatedIp",
    "requestId",
];

/// The Idempotency-Key of the writes of `common`: it ends up in `requestId`.
const ROOT_KEY: &str = "root-idempotency-key-5d1c";

/// A POST of `body` by `who` (claims or local headers), with an Idempotency-Key.
fn post(mode: CallerMode, who: Who, body: Value, key: &str) -> Req {
    Req::command("POST", &body.to_string())
        .from(mode, who)
        .header("idempotency-key", key)
}

/// JWT claims with a raw `custom:roles` claim.
fn claims(request: Req, user: &str, tenant: &str, roles: &str) -> Req {
    request.claims(user, tenant, roles)
}

/// Projects every command row into the history and data tables, as data-sync would.
async fn project(stack: &Stack) {
    let store = common::store(&stack.tables);
    for item in common::scan_items(&stack.tables, &stack.tables.command).await {
        store.put_history(&item).await.expect("history");
        store.put_data_if_newer(&item).await.expect("data");
    }
}

/// Seeds `common` (by the global admin ROOT), t1 and t2 items, projected.
async fn seed(stack: &Stack) {
    let mode = stack.mode;
    for (who, body, key) in [
        (
            ROOT,
            json!({"pk": "MASTER#common", "sk": "SETTING#app#theme", "version": 0, "name": "dark"}),
            ROOT_KEY.to_string(),
        ),
        (
            T1,
            json!({"pk": "PRODUCT#t1", "sk": "P0", "version": 0, "name": "mine"}),
            "t1-key".into(),
        ),
        (
            T2,
            json!({"pk": "PRODUCT#t2", "sk": "P0", "version": 0, "name": "theirs"}),
            "t2-key".into(),
        ),
    ] {
        let answer = stack.send(post(mode, who, body, &key)).await;
        assert_eq!(answer.status, 202, "seeding: {}", answer.text);
    }
    project(stack).await;
}

// ---------------------------------------------------------------------------------------------
// 1. Tenant-scoped roles.

#[tokio::test]
async fn tenant_scoped_roles_hold_only_in_their_own_tenant() {
    let stack = Stack::new(CallerMode::Jwt).await;
    seed(&stack).await;

    // Roles claims a caller of t1 may carry that must not reach beyond t1.
    let scoped: [(&str, &str); 6] = [
        (
            "another tenant's system_admin",
            r#"[{"tenant":"t2","role":"system_admin"}]"#,
        ),
        (
            "its own tenant's system_admin",
            r#"[{"tenant":"t1","role":"system_admin"}]"#,
        ),
        (
            "system_admin of t2 and t3 beside a plain role",
            r#"[{"tenant":"t2","role":"system_admin"},{"tenant":"t3","role":"system_admin"},{"tenant":"","role":"viewer"}]"#,
        ),
        (
            "a tenant that is null",
            r#"[{"tenant":null,"role":"system_admin"}]"#,
        ),
        (
            "a look-alike tenant",
            r#"[{"tenant":"T1","role":"system_admin"}]"#,
        ),
        (
            "JSON that does not parse",
            r#"[{"tenant":"t2","role":"viewer"}, system_admin]"#,
        ),
    ];
    // What each must not do: write common or another tenant, read another tenant.
    let body = |pk: &str, version: i64| {
        json!({"pk": pk, "sk": "P0", "version": version, "name": "pwned"}).to_string()
    };
    let forbidden = |roles: &str| -> Vec<(String, Req)> {
        let as_t1 = |request: Req| claims(request, "u1", "t1", roles);
        vec![
            (
                "POST MASTER#common".into(),
                as_t1(Req::command("POST", &body("MASTER#common", 0))),
            ),
            (
                "PATCH MASTER#common".into(),
                as_t1(Req::command(
                    "PATCH",
                    &json!({"pk": "MASTER#common", "sk": "SETTING#app#theme", "version": 1,
                            "name": "pwned"})
                    .to_string(),
                )),
            ),
            (
                "POST PRODUCT#t2".into(),
                as_t1(Req::command("POST", &body("PRODUCT#t2", 0))),
            ),
            (
                "POST PRODUCT#t2 over version 1".into(),
                as_t1(Req::command("POST", &body("PRODUCT#t2", 1))),
            ),
            (
                "POST PRODUCT#t3".into(),
                as_t1(Req::command("POST", &body("PRODUCT#t3", 0))),
            ),
            (
                "GET PRODUCT#t2/P0".into(),
                as_t1(get("/items/PRODUCT%23t2/P0")),
            ),
            ("GET PRODUCT#t2".into(), as_t1(get("/items/PRODUCT%23t2"))),
            (
                "GET PRODUCT#t2/P0/versions".into(),
                as_t1(get("/items/PRODUCT%23t2/P0/versions")),
            ),
        ]
    };

    // Controls: the same requests succeed for a global system_admin (mbc's tenant "" and a role
    // without tenant), so a refusal below is the role rule, not a broken request.
    for (i, roles) in [
        r#"[{"tenant":"","role":"system_admin"}]"#,
        r#"[{"role":"system_admin"}]"#,
    ]
    .into_iter()
    .enumerate()
    {
        let control = claims(
            Req::command(
                "POST",
                &json!({"pk": "PRODUCT#t3", "sk": format!("C{i}"), "version": 0}).to_string(),
            ),
            "root",
            "t1",
            roles,
        );
        let answer = stack.send(control).await;
        assert_eq!(answer.status, 202, "control {roles}: {}", answer.text);
        let read = claims(get("/items/PRODUCT%23t2/P0"), "root", "t1", roles);
        assert_eq!(stack.send(read).await.status, 200, "control read {roles}");
    }
    // ...and a system_admin of t1 still acts in t1.
    let own = claims(
        Req::command("POST", &body("PRODUCT#t1", 0).replace("\"P0\"", "\"P9\"")),
        "u1",
        "t1",
        r#"[{"tenant":"t1","role":"system_admin"}]"#,
    );
    assert_eq!(stack.send(own).await.status, 202, "t1's admin writes t1");

    let before = stack.snapshot().await;
    let (mut attempts, mut allowed) = (0, Vec::new());
    for (what_roles, roles) in scoped {
        for (what, request) in forbidden(roles) {
            attempts += 1;
            let answer: Answer = stack.send(request).await;
            if answer.status != 403 || answer.problem_fault().is_some() {
                allowed.push(format!(
                    "{what_roles} {roles}: {what}: {} {}",
                    answer.status, answer.text
                ));
            }
        }
    }
    // The same through local headers (x-roles), on a local stack.
    let local = Stack::on(stack.tables.clone(), CallerMode::Local);
    for (what_roles, roles) in scoped {
        attempts += 1;
        let request = Req::command("POST", &body("MASTER#common", 0))
            .header("x-tenant-code", "t1")
            .header("x-user-id", "u1")
            .header("x-roles", roles);
        let answer = local.send(request).await;
        if answer.status != 403 {
            allowed.push(format!(
                "local x-roles {what_roles}: {} {}",
                answer.status, answer.text
            ));
        }
    }
    println!(
        "tenant-scoped roles: {attempts} attempts, {} allowed ({} role claims of a t1 caller \
         against common, t2 and t3, by claims and by local headers)",
        allowed.len(),
        scoped.len()
    );
    assert!(allowed.is_empty(), "allowed:\n{}", allowed.join("\n"));
    assert!(before == stack.snapshot().await, "a refused attempt wrote");
}

// ---------------------------------------------------------------------------------------------
// 2. Claims over local headers.

#[tokio::test]
async fn local_headers_never_override_claims() {
    let stack = Stack::new(CallerMode::Local).await;
    seed(&stack).await;
    // A caller with claims of t1 (plain admin) forging the headers of t2's system_admin.
    let forged = |request: Req| {
        request
            .claims_of(T1)
            .header("x-tenant-code", "t2")
            .header("x-user-id", "forger")
            .header("x-roles", "system_admin")
    };
    let before = stack.snapshot().await;
    let attempts = [
        (
            "POST PRODUCT#t2",
            forged(Req::command(
                "POST",
                &json!({"pk": "PRODUCT#t2", "sk": "P5", "version": 0}).to_string(),
            )),
        ),
        (
            "POST MASTER#common",
            forged(Req::command(
                "POST",
                &json!({"pk": "MASTER#common", "sk": "X", "version": 0}).to_string(),
            )),
        ),
        ("GET PRODUCT#t2/P0", forged(get("/items/PRODUCT%23t2/P0"))),
        ("GET PRODUCT#t2", forged(get("/items/PRODUCT%23t2"))),
        (
            "claims without a tenant",
            Req::command(
                "POST",
                &json!({"pk": "PRODUCT#t2", "sk": "P6", "version": 0}).to_string(),
            )
            .claims("u1", "", "")
            .header("x-tenant-code", "t2")
            .header("x-user-id", "forger")
            .header("x-roles", "system_admin"),
        ),
    ];
    let count = attempts.len();
    let mut obeyed = Vec::new();
    for (what, request) in attempts {
        let answer = stack.send(request).await;
        if !(400..500).contains(&answer.status) || answer.problem_fault().is_some() {
            obeyed.push(format!("{what}: {} {}", answer.status, answer.text));
        }
    }
    let wrote = before != stack.snapshot().await;

    // The write the claims allow is recorded as the claims' user, not the headers'.
    let own = forged(Req::command(
        "POST",
        &json!({"pk": "PRODUCT#t1", "sk": "P7", "version": 0}).to_string(),
    ));
    let answer = stack.send(own).await;
    assert_eq!(answer.status, 202, "{}", answer.text);
    let written = common::scan_items(&stack.tables, &stack.tables.command)
        .await
        .into_iter()
        .find(|i| i.sk == "P7@1")
        .expect("P7 written");
    if written.created_by != T1.user || written.tenant_code != "t1" {
        obeyed.push(format!(
            "P7 written as {} of {}",
            written.created_by, written.tenant_code
        ));
    }
    // Without claims, local mode still reads the headers (the local stack keeps working).
    let plain = stack.send(get("/items/PRODUCT%23t2/P0").local(T2)).await;
    assert_eq!(
        plain.status, 200,
        "local headers without claims: {}",
        plain.text
    );

    println!(
        "claims over local headers: {} forged requests with claims in CALLER_MODE=local, {} obeyed the headers{}",
        count + 1,
        obeyed.len(),
        if wrote {
            " (and forged requests wrote to the tables)"
        } else {
            ""
        }
    );
    assert!(obeyed.is_empty(), "{}", obeyed.join("\n"));
    assert!(!wrote, "a forged request wrote to the tables");
}

// ---------------------------------------------------------------------------------------------
// 3. Audit fields.

/// The audit members present in an item's JSON, and whether the writer's secrets appear.
fn leaks(item: &Value) -> Vec<String> {
    let mut found: Vec<String> = AUDIT
        .iter()
        .filter(|f| item.get(**f).is_some())
        .map(|f| (*f).to_string())
        .collect();
    let text = item.to_string();
    for secret in [ROOT_KEY, ROOT.user, "192.0.2.10"] {
        if text.contains(secret) {
            found.push(format!("the text {secret:?}"));
        }
    }
    found
}

/// The items of an answer: the item itself, or a listing's items.
fn items_of(answer: &Answer) -> Vec<Value> {
    match answer.body.get("items").and_then(Value::as_array) {
        Some(items) => items.clone(),
        None => vec![answer.body.clone()],
    }
}

#[tokio::test]
async fn audit_fields_only_for_the_owning_tenant_and_system_admin() {
    let stack = Stack::new(CallerMode::Jwt).await;
    seed(&stack).await;
    // Version 2 of the common item, not projected: ?minVersion=2 answers from the command table.
    let answer = stack
        .send(
            Req::command(
                "PATCH",
                &json!({"pk": "MASTER#common", "sk": "SETTING#app#theme", "version": 1,
                        "name": "light"})
                .to_string(),
            )
            .claims_of(ROOT)
            .header("idempotency-key", &format!("{ROOT_KEY}-2")),
        )
        .await;
    assert_eq!(answer.status, 202, "{}", answer.text);

    let routes = [
        "/items/MASTER%23common/SETTING%23app%23theme",
        "/items/MASTER%23common",
        "/items/MASTER%23common/SETTING%23app%23theme/versions",
        "/items/MASTER%23common/SETTING%23app%23theme/versions/1",
        "/items/MASTER%23common/SETTING%23app%23theme?minVersion=2",
    ];
    // Readers of common that are not its tenant and no global system_admin.
    let readers: [(&str, Req); 3] = [
        ("t2 (admin)", get("").claims_of(T2)),
        (
            "t2 (t2's system_admin)",
            get("").claims("u2", "t2", r#"[{"tenant":"t2","role":"system_admin"}]"#),
        ),
        (
            "t1 (common's system_admin, scoped)",
            get("").claims("u1", "t1", r#"[{"tenant":"common","role":"system_admin"}]"#),
        ),
    ];
    let (mut reads, mut leaked, mut items) = (0, Vec::new(), 0);
    for (who, template) in &readers {
        for route in routes {
            let mut request = template.clone();
            let (path, query) = route.split_once('?').unwrap_or((route, ""));
            request.path = path.into();
            request.query = query.into();
            let answer = stack.send(request).await;
            assert_eq!(answer.status, 200, "{who} {route}: {}", answer.text);
            reads += 1;
            for item in items_of(&answer) {
                items += 1;
                assert!(item.get("pk").is_some(), "{who} {route}: no item: {item}");
                let found = leaks(&item);
                if !found.is_empty() {
                    leaked.push(format!("{who} {route}: {found:?}"));
                }
            }
        }
    }
    // Controls: the global system_admin sees every audit field of common; each tenant sees its
    // own items' audit fields.
    let mut shown = 0;
    for route in routes {
        let (path, query) = route.split_once('?').unwrap_or((route, ""));
        let mut request = get("").claims_of(ROOT);
        request.path = path.into();
        request.query = query.into();
        let answer = stack.send(request).await;
        for item in items_of(&answer) {
            for field in AUDIT {
                assert!(
                    item.get(field).is_some(),
                    "system_admin {route}: no {field}"
                );
            }
            assert!(
                item["requestId"]
                    .as_str()
                    .is_some_and(|id| id.starts_with(ROOT_KEY)),
                "{route}: {item}"
            );
            shown += 1;
        }
    }
    for (who, route) in [
        (T1, "/items/PRODUCT%23t1/P0"),
        (T2, "/items/PRODUCT%23t2/P0/versions/1"),
    ] {
        let answer = stack.send(get(route).claims_of(who)).await;
        assert_eq!(
            answer.body["createdBy"], who.user,
            "{route}: {}",
            answer.text
        );
        shown += 1;
    }
    println!(
        "audit fields: {reads} reads of common by other tenants on 5 routes ({items} items), \
         {} leaked; {shown} items shown whole to their own tenant or system_admin",
        leaked.len()
    );
    assert!(leaked.is_empty(), "{}", leaked.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// 10: over-long sort-key filters; 12 (read side): minVersion at the edge of i64.

#[tokio::test]
async fn over_long_sort_key_filters_are_400_naming_the_parameter() {
    let stack = Stack::new(CallerMode::Jwt).await;
    seed(&stack).await;
    let long = "a".repeat(1025);
    let at_limit = "a".repeat(1024);
    let q = |name: &str, value: &str| format!("/items/PRODUCT%23t1?{name}={value}");

    // Controls: at 1024 bytes every filter is a valid (empty) listing.
    for name in ["skPrefix", "skFrom", "skTo"] {
        let answer = stack.send(get(&q(name, &at_limit)).claims_of(T1)).await;
        assert_eq!(answer.status, 200, "{name} at 1024 bytes: {}", answer.text);
    }
    let between_ok = format!("/items/PRODUCT%23t1?skFrom=a&skTo={at_limit}");
    assert_eq!(stack.send(get(&between_ok).claims_of(T1)).await.status, 200);

    let long_id_sk = "s".repeat(1000);
    let long_pk = format!("PRODUCT%23t1%23{}", "p".repeat(1100));
    let cases: Vec<(String, &str)> = vec![
        (q("skPrefix", &long), "skPrefix"),
        (q("skFrom", &long), "skFrom"),
        (q("skTo", &long), "skTo"),
        (format!("/items/PRODUCT%23t1?skFrom=a&skTo={long}"), "skTo"),
        (
            format!("/items/PRODUCT%23t1?skFrom={long}&skTo={long}b"),
            "skFrom",
        ),
        (q("skPrefix", &"\u{e9}".repeat(513)), "skPrefix"),
        // pk#sk over the 2048 bytes of the history index's key: no item has that id.
        (format!("/items/{long_pk}/{long_id_sk}/versions"), "sk"),
    ];
    let (mut refused, mut faults) = (0, Vec::new());
    for (target, field) in &cases {
        let answer = stack.send(get(target).claims_of(T1)).await;
        match answer.problem_fault() {
            None if answer.status == 400 && answer.body["field"] == *field => refused += 1,
            _ => faults.push(format!(
                "{}...: expected 400 naming {field}, got {} {}",
                target.chars().take(60).collect::<String>(),
                answer.status,
                answer.text
            )),
        }
    }
    println!(
        "sort-key filters: {} over-long filters and keys, {refused} answered 400 naming the parameter, {} otherwise",
        cases.len(),
        faults.len()
    );
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

#[tokio::test]
async fn min_version_at_the_edge_of_i64_never_overflows() {
    let stack = Stack::new(CallerMode::Jwt).await;
    seed(&stack).await;
    // minVersion: at and just below i64::MAX the version does not exist (404); one past it is
    // no version at all (400). Never a 5xx, never a panic.
    let max = i64::MAX;
    let min_versions: [(String, u16); 5] = [
        (max.to_string(), 404),
        ((max - 1).to_string(), 404),
        ("9223372036854775808".into(), 400),
        ("18446744073709551616".into(), 400),
        ("1".into(), 200),
    ];
    let mut wrong = Vec::new();
    for (value, status) in &min_versions {
        for target in [
            format!("/items/PRODUCT%23t1/P0?minVersion={value}"),
            format!("/items/PRODUCT%23t1/NEVER?minVersion={value}"),
        ] {
            let expected = if target.contains("NEVER") && *status == 200 {
                404
            } else {
                *status
            };
            let answer = stack.send(get(&target).claims_of(T1)).await;
            if answer.status != expected {
                wrong.push(format!(
                    "{target}: expected {expected}, got {} {}",
                    answer.status, answer.text
                ));
            }
        }
    }
    println!(
        "minVersion near i64::MAX: {} reads, {} with a wrong status (0 5xx expected)",
        min_versions.len() * 2,
        wrong.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
