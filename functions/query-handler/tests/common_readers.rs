//! Who reads `common`: a common entity of the model may say `read = "system_admin"` (the example's
//! `user_auth` and `user_tenant`, the per-tenant facts every tenant's users and links are kept in),
//! and then only a global `system_admin` reads its partition, on every read route and every
//! pattern that returns it, cursors included. Master data and settings stay readable by every
//! tenant. Against DynamoDB Local.

mod common;

use common::{As, Harness, SYSTEM_ADMIN, USER_T1, USER_T2, entity_item, model_keys};
use serde_json::json;

/// An administrator of t1 only (mbc's tenant-scoped role object): not a global `system_admin`.
const T1_ADMIN: As = As {
    user: "a1",
    tenant: "t1",
    roles: r#"[{"tenant":"t1","role":"system_admin"}]"#,
};

/// A caller whose own tenant claim is `common`: the rule is about the partition, not the caller.
const COMMON_CALLER: As = As {
    user: "c1",
    tenant: "common",
    roles: "admin",
};

/// Seeds two user-tenant links and two user-auth rows (three versions each in command, history
/// and data tables), one setting and one master data item of `common`. Returns the links' `sk`s.
async fn seed(h: &Harness) -> Vec<String> {
    let mut links = Vec::new();
    for (tenant, user) in [("t1", "alice"), ("t2", "bob")] {
        let (pk, sk) = model_keys(
            "user_tenant",
            "common",
            &[("tenantCode", tenant), ("userId", user)],
        );
        assert_eq!(pk, "USER_TENANT#common");
        h.seed(&pk, &sk, 3, false).await;
        links.push(sk);
    }
    for (provider, user) in [("sso", "alice"), ("local", "bob")] {
        let (pk, sk) = model_keys(
            "user_auth",
            "common",
            &[("provider", provider), ("userId", user)],
        );
        h.seed(&pk, &sk, 1, false).await;
    }
    h.put_all(&[
        entity_item(
            "user_auth",
            "common",
            json!({"provider": "sso", "userId": "carol"}),
            "2024-01-15T10:30:00.000Z",
            1,
        ),
        entity_item(
            "user_auth",
            "common",
            json!({"provider": "sso", "userId": "dave"}),
            "2024-01-15T10:30:00.000Z",
            1,
        ),
    ])
    .await;
    h.seed("MASTER#common", "SETTING#ui#theme", 2, false).await;
    h.seed("MASTER#common", "DATA#country#JP", 1, false).await;
    links
}

/// Every read route on `USER_TENANT#common` and `USER#common` data, cursors included (taken from
/// a `system_admin`'s first pages).
async fn restricted_targets(h: &Harness) -> Vec<String> {
    let partition_cursor = h
        .get(&SYSTEM_ADMIN, "/items/USER_TENANT%23common?limit=1")
        .await
        .cursor()
        .expect("a cursor after the first of two links");
    let versions_cursor = h
        .get(
            &SYSTEM_ADMIN,
            "/items/USER_TENANT%23common/t1%23alice/versions?limit=1",
        )
        .await
        .cursor()
        .expect("a cursor after the first of three versions");
    let pattern_cursor = h
        .get(
            &SYSTEM_ADMIN,
            "/query/auth_of_provider?provider=sso&limit=1",
        )
        .await
        .cursor()
        .expect("a cursor after the first of three sso users");
    vec![
        "/items/USER_TENANT%23common".into(),
        "/items/USER_TENANT%23common?skPrefix=t2%23".into(),
        format!("/items/USER_TENANT%23common?limit=1&cursor={partition_cursor}"),
        "/items/USER_TENANT%23common/t2%23bob".into(),
        "/items/USER_TENANT%23common/t2%23bob?minVersion=3".into(),
        "/items/USER_TENANT%23common/t2%23bob?minVersion=4".into(),
        "/items/USER_TENANT%23common/t1%23alice/versions".into(),
        format!("/items/USER_TENANT%23common/t1%23alice/versions?limit=1&cursor={versions_cursor}"),
        "/items/USER_TENANT%23common/t1%23alice/versions/2".into(),
        // A key of no entity in that partition, and a bad parameter: still refused, first.
        "/items/USER_TENANT%23common/nothing".into(),
        "/items/USER_TENANT%23common?limit=abc".into(),
        "/items/USER%23common".into(),
        "/items/USER%23common/sso%23alice".into(),
        "/items/USER%23common/sso%23alice/versions".into(),
        "/items/USER%23common/sso%23alice/versions/1".into(),
        "/query/auth_of_provider?provider=sso".into(),
        "/query/auth_of_provider?provider=sso&userId=alice".into(),
        format!("/query/auth_of_provider?provider=sso&limit=1&cursor={pattern_cursor}"),
    ]
}

#[tokio::test]
async fn a_tenant_caller_gets_403_on_every_read_route_of_restricted_common_entities() {
    let h = Harness::new().await;
    seed(&h).await;
    let targets = restricted_targets(&h).await;
    for caller in [USER_T1, USER_T2, T1_ADMIN, COMMON_CALLER] {
        for target in &targets {
            let answer = h.get(&caller, target).await;
            answer.assert_problem(403, None);
            let text = answer.body.to_string();
            assert!(
                !text.contains("alice") && !text.contains("bob"),
                "{} {target}: the refusal leaks data: {text}",
                caller.user
            );
        }
    }
    println!(
        "common readers: {} read targets on USER_TENANT#common and USER#common, each refused (403 \
         problem document) to 4 callers who are not a global system_admin",
        targets.len()
    );
}

#[tokio::test]
async fn a_system_admin_reads_restricted_common_entities_on_every_route() {
    let h = Harness::new().await;
    let links = seed(&h).await;
    for target in restricted_targets(&h).await {
        let answer = h.get(&SYSTEM_ADMIN, &target).await;
        let want = match target.as_str() {
            t if t.ends_with("/nothing") || t.ends_with("minVersion=4") => 404,
            t if t.ends_with("limit=abc") => 400,
            _ => 200,
        };
        assert_eq!(answer.status, want, "{target}: {}", answer.body);
    }
    let answer = h.get(&SYSTEM_ADMIN, "/items/USER_TENANT%23common").await;
    assert_eq!(answer.sks(), links);
}

#[tokio::test]
async fn master_data_and_settings_of_common_stay_readable_by_every_tenant() {
    let h = Harness::new().await;
    seed(&h).await;
    for caller in [USER_T1, USER_T2, T1_ADMIN, SYSTEM_ADMIN] {
        for target in [
            "/items/MASTER%23common",
            "/items/MASTER%23common?skPrefix=DATA%23",
            "/items/MASTER%23common/SETTING%23ui%23theme",
            "/items/MASTER%23common/SETTING%23ui%23theme?minVersion=2",
            "/items/MASTER%23common/SETTING%23ui%23theme/versions",
            "/items/MASTER%23common/SETTING%23ui%23theme/versions/1",
            "/items/MASTER%23common/DATA%23country%23JP",
            "/settings/ui/theme",
            "/settings/ui/theme?tenantCode=common",
            "/query/settings?category=ui",
            "/query/master_data?category=country",
        ] {
            let answer = h.get(&caller, target).await;
            assert_eq!(
                answer.status, 200,
                "{} {target}: {}",
                caller.user, answer.body
            );
        }
    }
    let answer = h.get(&USER_T2, "/settings/ui/theme").await;
    assert_eq!(answer.body["source"], "common", "{}", answer.body);
}

#[tokio::test]
async fn reads_of_the_callers_own_tenant_do_not_load_the_model_and_common_ones_do() {
    let h = Harness::new().await;
    h.seed("PRODUCT#t1", "P1", 2, false).await;
    h.seed("MASTER#common", "SETTING#ui#theme", 1, false).await;
    for target in [
        "/items/PRODUCT%23t1",
        "/items/PRODUCT%23t1/P1",
        "/items/PRODUCT%23t1/P1?minVersion=2",
        "/items/PRODUCT%23t1/P1/versions",
        "/items/PRODUCT%23t1/P1/versions/1",
    ] {
        let answer = h.get(&USER_T1, target).await;
        assert_eq!(answer.status, 200, "{target}: {}", answer.body);
    }
    assert!(
        !h.app.model_is_loaded(),
        "a read of the caller's own tenant loaded the model"
    );
    let answer = h
        .get(&USER_T1, "/items/MASTER%23common/SETTING%23ui%23theme")
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        h.app.model_is_loaded(),
        "a read of common decides its readers from the model"
    );
}
