//! Tenants: an adversarial suite against both HTTP functions, with `CALLER_MODE` unset (JWT
//! claims) and `=local` (caller headers). Tenant t1 attacks tenant t2 and the `common` tenant:
//! another tenant's pk in the body or the path, cursors of another tenant's listing, `#` and `@`
//! smuggled into key parts, percent-encoding tricks, forged caller headers and roles, writes to
//! `common` without `system_admin`, and reads of the `common` entities the model keeps for a global
//! `system_admin` (`read = "system_admin"`: every tenant's user links and users) on every read
//! route, pattern and cursor.
//!
//! Every attack must be refused with a 4xx problem document, no table may change, and no answer may
//! carry anything of t2's items (they hold a marker string that is looked for in every answer).
//!
//! The change log shares the data table (`CHANGE_LOG_TABLE` set to it, which the README allows):
//! its partitions are read like any other (a tenant's own, `common`'s), so reading them is a probe,
//! answered `200`, whose answer may hold only what the reader may see: no entry of an entity kept
//! for a global `system_admin` (issue 36: tenant t3 read alice's link to t2 in `common`'s log), no
//! idempotency key. The framework's own partitions (`HEAD#`, `HEADS#`) are refused on every route.

mod common;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use common::{Answer, Caller, ROOT, Req, Stack, T1, T2, Who, get};
use cqrs_caller::CallerMode;
use cqrs_data_sync::{Change, SyncTarget, change_log::ChangeLog};
use serde_json::{Value, json};

/// Written into every item of t2: no answer to t1 may contain it.
const T2_SECRET: &str = "t2-secret-7f3a";

/// The idempotency key of the system_admin's link of alice to t2 (issue 36's reproduction).
const ALICE_KEY: &str = "k-secret";

/// Tenant t3, without roles: the caller of issue 36's reproduction.
const T3: Who = Who {
    user: "u3",
    tenant: "t3",
    roles: "",
};

/// One attack: the request, and the statuses that count as refusing it; a probe (a read the
/// caller may make, of a partition where only some of the items are its to see) also names texts
/// its answer may not hold.
struct Attack {
    what: String,
    request: Req,
    refused_with: &'static [u16],
    hidden: &'static [&'static str],
}

fn attack(what: impl Into<String>, request: Req, refused_with: &'static [u16]) -> Attack {
    Attack {
        what: what.into(),
        request,
        refused_with,
        hidden: &[],
    }
}

/// A read answered `200` whose answer holds none of `hidden` (nor t2's marker).
fn probe(what: impl Into<String>, request: Req, hidden: &'static [&'static str]) -> Attack {
    Attack {
        what: what.into(),
        request,
        refused_with: OK_WITHOUT,
        hidden,
    }
}

/// A probe's status: answered, with what the caller may see only.
const OK_WITHOUT: &[u16] = &[200];
/// What no change log answer to a tenant may hold: the links of users to tenants (kept for a
/// global system_admin) and any idempotency key (the seed's start with `seed-`).
const NOT_IN_A_LOG: &[&str] = &[
    "Alice",
    "t2#alice",
    "t1#alice",
    ALICE_KEY,
    "seed-",
    "requestId",
];

const FORBIDDEN: &[u16] = &[403];
const BAD: &[u16] = &[400];
/// Malformed or not this tenant's: either refusal is right.
const BAD_OR_FORBIDDEN: &[u16] = &[400, 403];
/// Inside the caller's own partition, naming nothing that exists.
const NOT_FOUND: &[u16] = &[404];
const NO_ROUTE: &[u16] = &[404];
const UNAUTHENTICATED: &[u16] = &[401];

/// Seeds t1 and t2 (and `common`) through the real command handler as their own callers, and
/// projects the data and history tables directly (as data-sync would).
async fn seed(stack: &Stack) -> Seeded {
    let mode = stack.mode;
    let write = |who: Who, body: Value| async move {
        let request = Req::command("POST", &body.to_string())
            .from(mode, who)
            .header(
                "idempotency-key",
                &format!(
                    "seed-{}-{}-{}",
                    who.tenant,
                    body["sk"].as_str().unwrap_or_default(),
                    body["version"]
                ),
            );
        let answer = stack.send(request).await;
        assert_eq!(answer.status, 202, "seeding: {}", answer.text);
    };
    for i in 0..5 {
        write(
            T1,
            json!({"pk": "PRODUCT#t1", "sk": format!("P{i}"), "version": 0, "name": "mine"}),
        )
        .await;
        write(
            T2,
            json!({"pk": "PRODUCT#t2", "sk": format!("P{i}"), "version": 0,
                   "name": T2_SECRET, "attributes": {"secret": T2_SECRET}}),
        )
        .await;
        write(
            T2,
            json!({"pk": "PRODUCT#t2", "sk": format!("P{i}"), "version": 1,
                   "name": T2_SECRET, "attributes": {"secret": T2_SECRET}}),
        )
        .await;
    }
    write(
        ROOT,
        json!({"pk": "MASTER#common", "sk": "SETTING#app#theme", "version": 0, "name": "dark"}),
    )
    .await;
    // Every tenant's user links and users in `common` (read = "system_admin" in model.toml): t2's
    // carry the marker, so a read of them by t1 would show in the answer.
    for (tenant, user, name) in [("t1", "alice", "mine"), ("t2", "bob", T2_SECRET)] {
        write(
            ROOT,
            json!({"pk": "USER_TENANT#common", "sk": format!("{tenant}#{user}"), "version": 0,
                   "name": name, "attributes": {"tenantCode": tenant, "userId": user}}),
        )
        .await;
        write(
            ROOT,
            json!({"pk": "USER#common", "sk": format!("sso#{user}"), "version": 0,
                   "name": name, "attributes": {"provider": "sso", "userId": user}}),
        )
        .await;
    }
    write(
        ROOT,
        json!({"pk": "USER_TENANT#common", "sk": "t2#bob", "version": 1, "name": T2_SECRET,
               "attributes": {"tenantCode": "t2", "userId": "bob"}}),
    )
    .await;
    // Issue 36's reproduction: a system_admin links alice to t2, with its own Idempotency-Key.
    let alice = Req::command(
        "POST",
        &json!({"entity": "user_tenant", "version": 0, "name": "Alice",
                "attributes": {"tenantCode": "t2", "userId": "alice"}})
        .to_string(),
    )
    .from(mode, ROOT)
    .header("idempotency-key", ALICE_KEY);
    let answer = stack.send(alice).await;
    assert_eq!(answer.status, 202, "seeding: {}", answer.text);
    // The projection, as data-sync would write it, with the change log in the data table.
    let store = common::store(&stack.tables);
    let log = ChangeLog::new(store.clone(), stack.tables.data.clone());
    for (i, item) in common::scan_items(&stack.tables, &stack.tables.command)
        .await
        .into_iter()
        .enumerate()
    {
        store.put_history(&item).await.unwrap();
        let data = store.put_data_if_newer(&item).await.unwrap();
        // The example's creation time is used only for an item whose updatedAt is no time.
        let mut change = Change::example();
        change.item = item;
        change.data = data;
        change.sequence_number = format!("{}", 1000 + i);
        change.event_id = format!("event-{i}");
        log.apply(&change).await.unwrap();
    }
    let entries: Vec<cqrs_item::Item> = common::scan_items(&stack.tables, &stack.tables.data)
        .await
        .into_iter()
        .filter(|i| i.pk.starts_with("CQRS_CHANGE_LOG#"))
        .collect();
    let entry_of = |pk: &str, sk: &str| {
        entries
            .iter()
            .find(|e| {
                e.attributes.get("pk").and_then(|v| v.as_str()) == Some(pk)
                    && e.attributes.get("sk").and_then(|v| v.as_str()) == Some(sk)
            })
            .unwrap_or_else(|| panic!("the change log entry of {pk} / {sk}"))
    };
    let alice_entry = entry_of("USER_TENANT#common", "t2#alice@1");
    let bob_entry = entry_of("USER_TENANT#common", "t2#bob@2");
    let t2_entry = entry_of("PRODUCT#t2", "P0@2");

    // Cursors of t2's listings, as t2 gets them.
    let listing = stack
        .send(get("/items/PRODUCT%23t2?limit=2").from(mode, T2))
        .await;
    assert_eq!(listing.status, 200, "{}", listing.text);
    let versions = stack
        .send(get("/items/PRODUCT%23t2/P0/versions?limit=1").from(mode, T2))
        .await;
    assert_eq!(versions.status, 200, "{}", versions.text);
    // And t1's own, to tamper with.
    let own = stack
        .send(get("/items/PRODUCT%23t1?limit=2").from(mode, T1))
        .await;
    assert_eq!(own.status, 200, "{}", own.text);
    // Cursors of the restricted `common` listings, as a system_admin gets them.
    let cursor_of = |target: &'static str| async move {
        let answer = stack.send(get(target).from(mode, ROOT)).await;
        assert_eq!(answer.status, 200, "{target}: {}", answer.text);
        answer.body["cursor"]
            .as_str()
            .unwrap_or_else(|| panic!("{target}: a cursor"))
            .to_string()
    };
    let links_cursor = cursor_of("/items/USER_TENANT%23common?limit=1").await;
    let link_versions_cursor =
        cursor_of("/items/USER_TENANT%23common/t2%23bob/versions?limit=1&order=asc").await;
    let users_cursor = cursor_of("/query/auth_of_provider?provider=sso&limit=1").await;
    Seeded {
        common_log: alice_entry.pk.clone(),
        alice_entry: alice_entry.sk.clone(),
        bob_entry: bob_entry.sk.clone(),
        t2_log: t2_entry.pk.clone(),
        links_cursor,
        link_versions_cursor,
        users_cursor,
        t2_listing_cursor: listing.body["cursor"].as_str().expect("a cursor").into(),
        t2_versions_cursor: versions.body["cursor"].as_str().expect("a cursor").into(),
        t1_listing_cursor: own.body["cursor"].as_str().expect("a cursor").into(),
    }
}

struct Seeded {
    /// `common`'s change log partition of this month, and the entries of alice's and bob's links.
    common_log: String,
    alice_entry: String,
    bob_entry: String,
    /// t2's change log partition of this month.
    t2_log: String,
    links_cursor: String,
    link_versions_cursor: String,
    users_cursor: String,
    t2_listing_cursor: String,
    t2_versions_cursor: String,
    t1_listing_cursor: String,
}

fn edit_cursor(cursor: &str, change: impl FnOnce(&mut Value)) -> String {
    let mut json: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(cursor).expect("base64url")).unwrap();
    change(&mut json);
    URL_SAFE_NO_PAD.encode(json.to_string())
}

/// Every attack of tenant t1 in `mode`.
fn attacks(mode: CallerMode, seeded: &Seeded) -> Vec<Attack> {
    let mut attacks = Vec::new();
    let as_t1 = |request: Req| request.from(mode, T1);

    // --- Commands: another tenant's or `common`'s pk in the body. ---
    for method in ["POST", "PATCH"] {
        let body = |pk: &str, sk: &str, version: i64| {
            json!({"pk": pk, "sk": sk, "version": version, "name": "pwned",
                   "attributes": {"secret": "overwritten"}})
            .to_string()
        };
        let version = if method == "POST" { 0 } else { -1 };
        for (pk, refused) in [
            ("PRODUCT#t2", FORBIDDEN),
            ("PRODUCT#t2#x", FORBIDDEN),
            ("ORDER#t2", FORBIDDEN),
            ("LOG#t2#2026-01", FORBIDDEN),
            ("MASTER#common", FORBIDDEN),
            ("PRODUCT#common", FORBIDDEN),
            ("USER_TENANT#common", FORBIDDEN),
            // Look-alikes of t1 that are other tenants.
            ("PRODUCT#T1", FORBIDDEN),
            ("PRODUCT#t10", FORBIDDEN),
            ("PRODUCT#t1 ", FORBIDDEN),
            (" PRODUCT#t2", FORBIDDEN),
            ("PRODUCT#\u{ff54}1", FORBIDDEN),
            ("PRODUCT#\u{200b}t1", FORBIDDEN),
            // Percent-encoding in a body is text, never decoded.
            ("PRODUCT#%74%31", FORBIDDEN),
            ("PRODUCT%23t1", BAD_OR_FORBIDDEN),
            ("PRODUCT%2523t1", BAD_OR_FORBIDDEN),
            // `#` and `@` smuggled into the tenant segment.
            ("PRODUCT#t1@t2", BAD),
            ("PRODUCT#@t2", BAD),
            ("PRODUCT##t2", BAD),
            ("#t1", BAD),
            ("PRODUCT#", BAD),
            ("PRODUCT#t1#", BAD),
            ("PRODUCT#t1\u{0}#t2", BAD),
            ("PRODUCT#t1\n", BAD),
            ("PRODUCT\u{ff03}t1", BAD_OR_FORBIDDEN),
            // The framework's own key spaces, even of t1's (the change log, the heads).
            ("CQRS_CHANGE_LOG#t1#2026-01", BAD),
            ("HEAD#t1", BAD),
            ("HEADS#t1", BAD),
        ] {
            attacks.push(attack(
                format!("{method} body pk {pk:?}"),
                as_t1(Req::command(method, &body(pk, "P0", version))),
                refused,
            ));
        }
        // `#` / `@` smuggled into the sort key of t1's own partition.
        for sk in [
            "P0@2", "P0@", "@1", "P0#", "#P0", "P0##x", "P0@1#x", "P0\u{0}",
        ] {
            attacks.push(attack(
                format!("{method} body sk {sk:?}"),
                as_t1(Req::command(method, &body("PRODUCT#t1", sk, version))),
                BAD,
            ));
        }
        // JSON tricks: a duplicate pk member (the last wins: t2), an escaped `#`, a second-case
        // member name.
        for (what, text) in [
            (
                "duplicate pk members",
                r#"{"pk":"PRODUCT#t1","pk":"PRODUCT#t2","sk":"P0","version":-1}"#.to_string(),
            ),
            (
                "escaped # in pk",
                r#"{"pk":"PRODUCT\u0023t2","sk":"P0","version":-1}"#.to_string(),
            ),
            (
                "PK member",
                r#"{"pk":"PRODUCT#t1","PK":"PRODUCT#t2","sk":"P0","version":-1}"#.to_string(),
            ),
            (
                "tenantCode member",
                r#"{"pk":"PRODUCT#t1","sk":"P0","version":-1,"tenantCode":"t2"}"#.to_string(),
            ),
            (
                "id member",
                r#"{"pk":"PRODUCT#t1","sk":"P0","version":-1,"id":"PRODUCT#t2#P0"}"#.to_string(),
            ),
        ] {
            attacks.push(attack(
                format!("{method} {what}"),
                as_t1(Req::command(method, &text)),
                BAD_OR_FORBIDDEN,
            ));
        }
        // Forged roles: never system_admin from a header in JWT mode, nor a look-alike role.
        if mode == CallerMode::Jwt {
            attacks.push(attack(
                format!("{method} common with x-roles: system_admin header"),
                as_t1(Req::command(
                    method,
                    &body("MASTER#common", "SETTING#x", version),
                ))
                .header("x-roles", "system_admin"),
                FORBIDDEN,
            ));
            attacks.push(attack(
                format!("{method} t2 with x-tenant-code: t2 header"),
                as_t1(Req::command(method, &body("PRODUCT#t2", "P0", version)))
                    .header("x-tenant-code", "t2")
                    .header("x-user-id", "u2"),
                FORBIDDEN,
            ));
            attacks.push(attack(
                format!("{method} with x-tenant-code: t2 header and no claims"),
                Req::command(method, &body("PRODUCT#t2", "P0", version))
                    .local(T2)
                    .header("x-roles", "system_admin"),
                UNAUTHENTICATED,
            ));
        } else {
            // Local mode: claims, when present, are the caller (headers never override them),
            // and a repeated tenant header makes no tenant of its own.
            attacks.push(attack(
                format!("{method} t2 with t1 claims but system_admin headers"),
                Req::command(method, &body("PRODUCT#t2", "P0", version))
                    .claims_of(T1)
                    .local(ROOT),
                FORBIDDEN,
            ));
            attacks.push(attack(
                format!("{method} t2 with two x-tenant-code headers"),
                Req::command(method, &body("PRODUCT#t2", "P0", version))
                    .header("x-tenant-code", "t1")
                    .header("x-tenant-code", "t2")
                    .header("x-user-id", "u1"),
                FORBIDDEN,
            ));
            attacks.push(attack(
                format!("{method} t2 with t1 claims only"),
                Req::command(method, &body("PRODUCT#t2", "P0", version)).claims_of(T1),
                FORBIDDEN,
            ));
        }
        for roles in ["System_Admin", "system_admin_x", "admin system-admin", "[]"] {
            attacks.push(attack(
                format!("{method} common with roles {roles:?}"),
                Req::command(method, &body("MASTER#common", "SETTING#x", version)).from(
                    mode,
                    Who {
                        user: "u1",
                        tenant: "t1",
                        roles,
                    },
                ),
                FORBIDDEN,
            ));
        }
        // A caller whose tenant claim is itself a trick.
        for tenant in ["t2#x", "t1#t2", ""] {
            attacks.push(attack(
                format!("{method} t2 as tenant {tenant:?}"),
                Req::command(method, &body("PRODUCT#t2", "P0", version)).from(
                    mode,
                    Who {
                        user: "u1",
                        tenant,
                        roles: "admin",
                    },
                ),
                &[401, 403],
            ));
        }
    }
    // t2's idempotency key and request, replayed by t1: never t2's answer.
    attacks.push(attack(
        "POST t2's request with t2's Idempotency-Key",
        as_t1(Req::command(
            "POST",
            &json!({"pk": "PRODUCT#t2", "sk": "P0", "version": 0,
                    "name": T2_SECRET, "attributes": {"secret": T2_SECRET}})
            .to_string(),
        ))
        .header("idempotency-key", "seed-t2-P0-0"),
        FORBIDDEN,
    ));

    // --- Queries: another tenant's pk in the path, on every route. ---
    for pk in [
        "PRODUCT%23t2",
        "PRODUCT#t2",
        "PRODUCT%23T2",
        "PRODUCT%23%74%32",
        "%50RODUCT%23t2",
        "PRODUCT%23t2%23x",
        "PRODUCT%23t10",
        "PRODUCT%23t2%2F..%2F..%2FPRODUCT%23t1",
        "PRODUCT%23t1%2F..%2F..%2FPRODUCT%23t2",
        "PRODUCT%23%E2%80%8Bt1",
    ] {
        for suffix in ["", "/P0", "/P0/versions", "/P0/versions/1"] {
            attacks.push(attack(
                format!("GET /items/{pk}{suffix}"),
                as_t1(get(&format!("/items/{pk}{suffix}"))),
                FORBIDDEN,
            ));
        }
    }
    // Encodings that must not decode to a second `#`: refused as malformed.
    for pk in [
        "PRODUCT%2523t2",
        "PRODUCT%252523t2",
        "PRODUCT%2At2",
        "PRODUCT%2at2",
        "PRODUCT%C0%A3t2",
        "PRODUCT%E0%80%A3t2",
        "PRODUCT%23t2%40x",
        "PRODUCT%23t2%00",
        "PRODUCT%23%23t2",
        "PRODUCT%23",
        "PRODUCT%FF%23t2",
        "%23t2",
    ] {
        for suffix in ["", "/P0", "/P0/versions", "/P0/versions/1"] {
            attacks.push(attack(
                format!("GET /items/{pk}{suffix}"),
                as_t1(get(&format!("/items/{pk}{suffix}"))),
                BAD_OR_FORBIDDEN,
            ));
        }
    }
    // Tricks in the sort key of t1's own partition: malformed, or an item of t1 that is not there.
    for (sk, refused) in [
        ("P0%401", BAD),
        ("P0%40", BAD),
        ("P0%23", BAD),
        ("%23P0", BAD),
        ("P0%00", BAD),
        ("P0%FF", BAD),
        ("..%2F..%2FPRODUCT%23t2%2FP0", NOT_FOUND),
        ("P0%2523t2", NOT_FOUND),
    ] {
        attacks.push(attack(
            format!("GET /items/PRODUCT%23t1/{sk}"),
            as_t1(get(&format!("/items/PRODUCT%23t1/{sk}"))),
            refused,
        ));
    }
    // Unencoded traversal: no route.
    for path in [
        "/items/PRODUCT%23t1/../PRODUCT%23t2",
        "/items/PRODUCT%23t1/P0/../../PRODUCT%23t2/P0",
        "/items/PRODUCT%23t1/P0/versions/../../../PRODUCT%23t2",
    ] {
        attacks.push(attack(format!("GET {path}"), as_t1(get(path)), NO_ROUTE));
    }
    // Cursors of t2's listings, by t1.
    let t2_cursor = &seeded.t2_listing_cursor;
    let t2_versions = &seeded.t2_versions_cursor;
    for (target, refused) in [
        (format!("/items/PRODUCT%23t2?cursor={t2_cursor}"), FORBIDDEN),
        (format!("/items/PRODUCT%23t1?cursor={t2_cursor}"), BAD),
        (
            format!("/items/PRODUCT%23t2/P0/versions?cursor={t2_versions}"),
            FORBIDDEN,
        ),
        (
            format!("/items/PRODUCT%23t1/P0/versions?cursor={t2_versions}"),
            BAD,
        ),
        (
            format!("/items/PRODUCT%23t1/P0/versions?cursor={t2_cursor}"),
            BAD,
        ),
        (
            format!(
                "/items/PRODUCT%23t1?cursor={}",
                edit_cursor(&seeded.t1_listing_cursor, |j| j["pk"] = "PRODUCT#t2".into())
            ),
            BAD,
        ),
        (
            format!(
                "/items/PRODUCT%23t1/P0/versions?cursor={}",
                edit_cursor(t2_versions, |j| {
                    j["pk"] = "PRODUCT#t1".into();
                })
            ),
            BAD,
        ),
    ] {
        attacks.push(attack(
            format!("GET {target}"),
            as_t1(get(&target)),
            refused,
        ));
    }
    // `common` entities only a global system_admin reads: every route, pattern and cursor, as t1
    // and as t1's own (tenant-scoped) system_admin.
    let t1_admin = Who {
        user: "a1",
        tenant: "t1",
        roles: r#"[{"tenant":"t1","role":"system_admin"}]"#,
    };
    for target in [
        "/items/USER_TENANT%23common".to_string(),
        "/items/USER_TENANT%23common?skPrefix=t2%23".to_string(),
        format!(
            "/items/USER_TENANT%23common?limit=1&cursor={}",
            seeded.links_cursor
        ),
        "/items/USER_TENANT%23common/t2%23bob".to_string(),
        "/items/USER_TENANT%23common/t2%23bob?minVersion=1".to_string(),
        "/items/USER_TENANT%23common/t2%23bob/versions".to_string(),
        format!(
            "/items/USER_TENANT%23common/t2%23bob/versions?limit=1&order=asc&cursor={}",
            seeded.link_versions_cursor
        ),
        "/items/USER_TENANT%23common/t2%23bob/versions/1".to_string(),
        "/items/USER%23common".to_string(),
        "/items/USER%23common/sso%23bob".to_string(),
        "/query/auth_of_provider?provider=sso".to_string(),
        "/query/auth_of_provider?provider=sso&userId=bob".to_string(),
        format!(
            "/query/auth_of_provider?provider=sso&limit=1&cursor={}",
            seeded.users_cursor
        ),
    ] {
        attacks.push(attack(
            format!("GET {target} (system_admin only)"),
            as_t1(get(&target)),
            FORBIDDEN,
        ));
        attacks.push(attack(
            format!("GET {target} as t1's own system_admin"),
            get(&target).from(mode, t1_admin),
            FORBIDDEN,
        ));
    }
    // The change log in the data table (issue 36): `common`'s log as t1 and as t3 (issue 36's
    // reproduction), the entries of links kept for a global system_admin, t2's log, and t1's own.
    let enc = |key: &str| key.replace('#', "%23");
    let common_log = enc(&seeded.common_log);
    let t1_log = common_log.replacen("%23common%23", "%23t1%23", 1);
    for (who, name) in [(T1, "t1"), (T3, "t3")] {
        let as_who = |request: Req| request.from(mode, who);
        attacks.push(attack(
            format!("GET /items/USER_TENANT%23common as {name} (the entity itself)"),
            as_who(get("/items/USER_TENANT%23common")),
            FORBIDDEN,
        ));
        attacks.push(probe(
            format!("GET {common_log} as {name}: common's change log, no link nor key in it"),
            as_who(get(&format!("/items/{common_log}"))),
            NOT_IN_A_LOG,
        ));
        attacks.push(probe(
            format!("GET {common_log}?skFrom=2&limit=1 as {name}: a page of one"),
            as_who(get(&format!("/items/{common_log}?skFrom=2&limit=1"))),
            NOT_IN_A_LOG,
        ));
        for sk in [&seeded.alice_entry, &seeded.bob_entry] {
            let target = format!("/items/{common_log}/{}", enc(sk));
            attacks.push(attack(
                format!("GET {target} as {name}: a link's log entry"),
                as_who(get(&target)),
                NOT_FOUND,
            ));
        }
        attacks.push(attack(
            format!("GET t2's change log as {name}"),
            as_who(get(&format!("/items/{}", enc(&seeded.t2_log)))),
            FORBIDDEN,
        ));
    }
    attacks.push(probe(
        "GET t1's own change log: no idempotency key in it",
        as_t1(get(&format!("/items/{t1_log}"))),
        &["seed-", "requestId", ALICE_KEY],
    ));
    // The framework's own partitions (heads, the heads state), by t1 and by a global system_admin.
    for (who, pk) in [
        (T1, "HEAD%23t1"),
        (T1, "HEADS%23t1"),
        (ROOT, "HEADS%23STATE"),
        (ROOT, "HEAD%23PRODUCT"),
    ] {
        for suffix in [
            "",
            "/P0",
            "/P0?minVersion=1",
            "/P0/versions",
            "/P0/versions/1",
        ] {
            let target = format!("/items/{pk}{suffix}");
            attacks.push(attack(
                format!("GET {target} as {}", who.user),
                get(&target).from(mode, who),
                FORBIDDEN,
            ));
        }
    }
    // Forged caller headers and roles on reads.
    if mode == CallerMode::Jwt {
        attacks.push(attack(
            "GET t2 with x-tenant-code: t2 header",
            as_t1(get("/items/PRODUCT%23t2/P0"))
                .header("x-tenant-code", "t2")
                .header("x-user-id", "u2"),
            FORBIDDEN,
        ));
        attacks.push(attack(
            "GET t2 with x-roles: system_admin header",
            as_t1(get("/items/PRODUCT%23t2/P0")).header("x-roles", "system_admin"),
            FORBIDDEN,
        ));
        attacks.push(attack(
            "GET t2 with caller headers and no claims",
            get("/items/PRODUCT%23t2/P0").local(T2),
            UNAUTHENTICATED,
        ));
    } else {
        attacks.push(attack(
            "GET t2 with t1 claims but system_admin headers",
            get("/items/PRODUCT%23t2/P0").claims_of(T1).local(ROOT),
            FORBIDDEN,
        ));
        attacks.push(attack(
            "GET t2 with t1 claims only",
            get("/items/PRODUCT%23t2/P0").claims_of(T1),
            FORBIDDEN,
        ));
    }
    attacks
}

async fn run_attacks(mode: CallerMode) -> (usize, usize, usize, usize) {
    let stack = Stack::new(mode).await;
    let seeded = seed(&stack).await;

    // Controls: the same routes work for their own tenant (so a refusal is a refusal).
    for target in [
        "/items/PRODUCT%23t1",
        "/items/PRODUCT%23t1/P0",
        "/items/PRODUCT%23t1/P0/versions",
        "/items/PRODUCT%23t1/P0/versions/1",
        "/items/MASTER%23common/SETTING%23app%23theme",
        "/settings/app/theme",
    ] {
        let answer = stack.send(get(target).from(mode, T1)).await;
        assert_eq!(answer.status, 200, "control {target}: {}", answer.text);
    }
    // A global system_admin reads the restricted `common` entities (so their refusal is one).
    for target in [
        "/items/USER_TENANT%23common/t2%23bob",
        "/items/USER_TENANT%23common/t2%23bob/versions/1",
        "/query/auth_of_provider?provider=sso&userId=bob",
    ] {
        let answer = stack.send(get(target).from(mode, ROOT)).await;
        assert_eq!(answer.status, 200, "control {target}: {}", answer.text);
        assert!(
            answer.text.contains(T2_SECRET),
            "control {target}: t2's link"
        );
    }
    let answer = stack
        .send(get("/items/PRODUCT%23t2/P0").from(mode, T2))
        .await;
    assert!(answer.text.contains(T2_SECRET), "control: t2 reads its own");
    // The change log: a global system_admin reads alice's entry in common's log (so leaving it out
    // for t1 and t3 is a refusal), and t1 reads its own log's entries.
    let common_log = seeded.common_log.replace('#', "%23");
    let answer = stack
        .send(get(&format!("/items/{common_log}")).from(mode, ROOT))
        .await;
    assert_eq!(answer.status, 200, "control: {}", answer.text);
    assert!(answer.text.contains("Alice"), "control: {}", answer.text);
    let answer = stack
        .send(get(&format!("/items/{common_log}")).from(mode, T1))
        .await;
    assert_eq!(answer.status, 200, "control: {}", answer.text);
    assert!(
        answer.text.contains("SETTING#app#theme"),
        "control: t1 reads the setting's entry in common's log: {}",
        answer.text
    );
    let t1_log = common_log.replacen("%23common%23", "%23t1%23", 1);
    let answer = stack
        .send(get(&format!("/items/{t1_log}")).from(mode, T1))
        .await;
    assert_eq!(answer.status, 200, "control: {}", answer.text);
    assert!(
        answer.text.contains("PRODUCT#t1#P0"),
        "control: {}",
        answer.text
    );

    let before = stack.snapshot().await;
    let attacks = attacks(mode, &seeded);
    let (mut on_commands, mut on_queries, mut probes) = (0, 0, 0);
    let mut failures = Vec::new();
    for attack in attacks {
        if attack.request.path.starts_with("/commands") {
            on_commands += 1;
        } else {
            on_queries += 1;
        }
        let is_probe = attack.refused_with == OK_WITHOUT;
        probes += usize::from(is_probe);
        let answer: Answer = stack.send(attack.request).await;
        if !attack.refused_with.contains(&answer.status) {
            failures.push(format!(
                "{mode:?} {}: expected {:?}, got {} {}",
                attack.what, attack.refused_with, answer.status, answer.text
            ));
        } else if !is_probe && let Some(fault) = answer.problem_fault() {
            failures.push(format!("{mode:?} {}: {fault}", attack.what));
        }
        if answer.text.contains(T2_SECRET) {
            failures.push(format!("{mode:?} {}: t2's data leaked", attack.what));
        }
        for hidden in attack.hidden {
            if answer.text.contains(hidden) {
                failures.push(format!(
                    "{mode:?} {}: {hidden:?} leaked: {}",
                    attack.what, answer.text
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let after = stack.snapshot().await;
    assert_eq!(before, after, "{mode:?}: an attack wrote something");
    (on_commands, on_queries, probes, after.items())
}

#[tokio::test]
async fn tenant_attacks_are_refused_in_both_caller_modes_and_write_nothing() {
    let (mut total, mut total_probes) = (0, 0);
    for mode in [CallerMode::Jwt, CallerMode::Local] {
        let (on_commands, on_queries, probes, items) = run_attacks(mode).await;
        let label = match mode {
            CallerMode::Jwt => "CALLER_MODE unset (JWT claims)",
            CallerMode::Local => "CALLER_MODE=local (caller headers)",
        };
        println!(
            "tenants: {label}: {} attacks ({on_commands} on command-handler, {on_queries} on \
             query-handler): all refused with a 4xx problem document but {probes} reads of the \
             change log answered with only what the caller may see, 0 of t2's data in any \
             answer, the {items} items of the four tables unchanged",
            on_commands + on_queries
        );
        total += on_commands + on_queries;
        total_probes += probes;
    }
    println!(
        "tenants: {total} attacks tried in all, every one refused but {total_probes} reads of \
         the change log answered with only what the caller may see, nothing written"
    );
}
