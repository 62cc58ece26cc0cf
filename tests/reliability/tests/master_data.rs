//! Master data, settings and TTL policies through the real command handler, data-sync and query
//! handler against DynamoDB Local: a setting read falls back to `common` and says so; the copy of
//! `common`'s master data to a tenant pages, is idempotent, keeps what the tenant edited and
//! reports it; TTL policies apply to commands without a `ttl` (a command's own `ttl` wins, `null`
//! clears it), are cached per warm container, and never make heads expire; no tenant reads,
//! copies into or is governed by another tenant's settings, data or policies.

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::{Answer, Caller as _, ROOT, Req, Stack, T1, T2, Who, scan_items, store};
use cqrs_caller::CallerMode;
use cqrs_data_sync::DataSync;
use serde_json::{Value, json};

/// Projects everything in the command table's stream (at least `min` records) with data-sync.
async fn project(stack: &Stack, min: usize) {
    let records = stack.tables.command_stream_records(min).await;
    let arn = stack.tables.command_stream_arn().await;
    let event = cqrs_testkit::stream_event::lambda_event(&records, &arn).expect("a Lambda event");
    let response = DataSync::new(store(&stack.tables)).handle(event).await;
    assert!(response.batch_item_failures.is_empty());
}

async fn command(stack: &Stack, method: &str, who: Who, body: Value) -> Answer {
    stack
        .send(Req::command(method, &body.to_string()).claims_of(who))
        .await
}

async fn setting(stack: &Stack, who: Who, target: &str) -> Answer {
    stack.send(Req::new("GET", target).claims_of(who)).await
}

async fn copy(stack: &Stack, who: Who, body: Value) -> Answer {
    let request = Req::new("POST", "/master-data/copy")
        .header("content-type", "application/json")
        .body(body.to_string().as_bytes())
        .claims_of(who);
    Answer::of(cqrs_command_handler::handle(&stack.command, request.request()).await)
}

async fn command_rows(stack: &Stack) -> usize {
    scan_items(&stack.tables, &stack.tables.command).await.len()
}

#[tokio::test]
async fn a_setting_falls_back_to_common_and_says_where_it_came_from() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let put = |pk: &str, value: &str| json!({"pk": pk, "sk": "SETTING#ui#theme", "version": 0, "attributes": {"value": value}});
    assert_eq!(
        command(&stack, "POST", ROOT, put("MASTER#common", "light"))
            .await
            .status,
        202
    );
    let own = command(&stack, "POST", T1, put("MASTER#t1", "dark")).await;
    assert_eq!(own.status, 202, "{}", own.text);
    project(&stack, 2).await;

    let t1 = setting(&stack, T1, "/settings/ui/theme").await;
    assert_eq!(t1.status, 200, "{}", t1.text);
    assert_eq!(
        (t1.body["source"].as_str(), t1.body["tenantCode"].as_str()),
        (Some("tenant"), Some("t1"))
    );
    assert_eq!(t1.body["item"]["attributes"]["value"], "dark");
    let t2 = setting(&stack, T2, "/settings/ui/theme").await;
    assert_eq!(t2.status, 200, "{}", t2.text);
    assert_eq!(t2.body["source"], "common");
    assert_eq!(t2.body["item"]["attributes"]["value"], "light");
    assert!(
        t2.body["item"].get("createdBy").is_none(),
        "no audit fields of common for t2"
    );

    // Another tenant's settings: refused before anything is read; common and system_admin may.
    let mut refused = 0;
    for (who, target) in [
        (T1, "/settings/ui/theme?tenantCode=t2"),
        (T2, "/settings/ui/theme?tenantCode=t1"),
    ] {
        let answer = setting(&stack, who, target).await;
        assert_eq!(answer.status, 403, "{target}: {}", answer.text);
        assert!(answer.problem_fault().is_none());
        refused += 1;
    }
    let common = setting(&stack, T2, "/settings/ui/theme?tenantCode=common").await;
    assert_eq!(
        (common.status, common.body["source"].as_str()),
        (200, Some("common"))
    );
    let root = setting(&stack, ROOT, "/settings/ui/theme?tenantCode=t1").await;
    assert_eq!(root.body["item"]["attributes"]["value"], "dark");
    // A tenant cannot write another tenant's setting either.
    let attack = command(&stack, "POST", T2, put("MASTER#t1", "pink")).await;
    assert_eq!(attack.status, 403);
    refused += 1;
    // Bad input and absent settings.
    for (target, status, field) in [
        ("/settings/ui/colour", 404, None),
        ("/settings/u%23i/theme", 400, Some("category")),
        ("/settings/ui/theme?tenant=t1", 400, Some("tenant")),
        (
            "/settings/ui/theme?tenantCode=t%231",
            400,
            Some("tenantCode"),
        ),
    ] {
        let answer = setting(&stack, T1, target).await;
        assert_eq!(answer.status, status, "{target}: {}", answer.text);
        assert!(answer.problem_fault().is_none(), "{target}");
        assert_eq!(answer.body["field"].as_str(), field, "{target}");
    }

    // The tenant deletes its own value: common applies again.
    let delete =
        json!({"pk": "MASTER#t1", "sk": "SETTING#ui#theme", "version": 1, "isDeleted": true});
    assert_eq!(command(&stack, "PATCH", T1, delete).await.status, 202);
    project(&stack, 3).await;
    let t1 = setting(&stack, T1, "/settings/ui/theme").await;
    assert_eq!(
        (
            t1.body["source"].as_str(),
            &t1.body["item"]["attributes"]["value"]
        ),
        (Some("common"), &json!("light"))
    );
    println!(
        "settings: tenant value, common fallback, deleted tenant value falls back; {refused} cross-tenant reads and writes refused"
    );
}

#[tokio::test]
async fn copying_master_data_pages_is_idempotent_and_keeps_what_the_tenant_edited() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let country = |code: &str, name: &str, version: i64| {
        json!({"pk": "MASTER#common", "sk": format!("DATA#country#{code}"), "version": version,
               "name": name, "attributes": {"category": "country", "code": code}})
    };
    for code in ["DE", "FR", "IT", "JP", "US"] {
        let answer = command(&stack, "POST", ROOT, country(code, code, 0)).await;
        assert_eq!(answer.status, 202, "{}", answer.text);
    }
    // Not master data of the category: never copied.
    let other = json!({"pk": "MASTER#common", "sk": "SETTING#ui#theme", "version": 0});
    assert_eq!(command(&stack, "POST", ROOT, other).await.status, 202);
    project(&stack, 6).await;

    // First copy, two items per request, following the cursor.
    let (mut created, mut pages, mut cursor) = (Vec::new(), 0, Value::Null);
    loop {
        let answer = copy(
            &stack,
            T1,
            json!({"category": "country", "limit": 2, "cursor": cursor}),
        )
        .await;
        assert_eq!(answer.status, 200, "{}", answer.text);
        pages += 1;
        for id in answer.body["created"].as_array().unwrap() {
            created.push(id.as_str().unwrap().to_string());
        }
        cursor = answer.body["cursor"].clone();
        if cursor.is_null() {
            break;
        }
        assert!(pages < 10, "the cursor ends");
    }
    assert_eq!(created.len(), 5, "{created:?}");
    assert!(created.contains(&"MASTER#t1#DATA#country#JP".to_string()));
    let s = store(&stack.tables);
    let jp = s
        .get_command("MASTER#t1", "DATA#country#JP", 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((jp.name.as_str(), jp.created_by.as_str()), ("JP", "u1"));
    let record = s
        .get_command("MASTER#t1", "COPY#country#JP", 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.attributes["sourceVersion"], 1);
    assert_eq!(
        record.attributes["sourceId"],
        "MASTER#common#DATA#country#JP"
    );

    // The tenant edits JP; common changes US and adds ES.
    let edit = json!({"pk": "MASTER#t1", "sk": "DATA#country#JP", "version": 1, "name": "Nippon"});
    assert_eq!(command(&stack, "PATCH", T1, edit).await.status, 202);
    assert_eq!(
        command(&stack, "POST", ROOT, country("US", "United States", 1))
            .await
            .status,
        202
    );
    assert_eq!(
        command(&stack, "POST", ROOT, country("ES", "ES", 0))
            .await
            .status,
        202
    );
    let rows = command_rows(&stack).await;
    project(&stack, rows).await;

    let second = copy(&stack, T1, json!({})).await;
    assert_eq!(second.status, 200, "{}", second.text);
    let b = &second.body;
    assert_eq!(b["created"], json!(["MASTER#t1#DATA#country#ES"]));
    assert_eq!(b["updated"], json!(["MASTER#t1#DATA#country#US"]));
    assert_eq!(b["unchanged"], 3);
    assert_eq!(b["kept"].as_array().unwrap().len(), 1, "{b}");
    assert_eq!(b["kept"][0]["id"], "MASTER#t1#DATA#country#JP");
    assert_eq!(
        (
            b["kept"][0]["version"].as_i64(),
            b["kept"][0]["updatedBy"].as_str()
        ),
        (Some(2), Some("u1"))
    );
    assert!(b["cursor"].is_null());
    let us = s
        .get_command("MASTER#t1", "DATA#country#US", 2)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(us.name, "United States");
    let jp = s
        .get_command("MASTER#t1", "DATA#country#JP", 2)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(jp.name, "Nippon", "the tenant's edit is kept");

    // A third copy writes nothing.
    let before = command_rows(&stack).await;
    let third = copy(&stack, T1, json!({})).await;
    assert_eq!(
        (
            third.body["unchanged"].as_i64(),
            third.body["kept"].as_array().map(Vec::len)
        ),
        (Some(5), Some(1))
    );
    assert_eq!(command_rows(&stack).await, before);

    // Refusals: nothing written.
    let mut refused = 0;
    for (who, body, status, field) in [
        (T2, json!({"tenantCode": "t1"}), 403, None),
        (T1, json!({"tenantCode": "common"}), 400, Some("tenantCode")),
        (
            T1,
            json!({"category": "country", "cursor": "DATA#other#X"}),
            400,
            Some("cursor"),
        ),
        (T1, json!({"limit": 0}), 400, Some("limit")),
        (T1, json!({"category": "a#b"}), 400, Some("category")),
        (T1, json!({"extra": true}), 400, Some("extra")),
    ] {
        let answer = copy(&stack, who, body.clone()).await;
        assert_eq!(answer.status, status, "{body}: {}", answer.text);
        assert!(answer.problem_fault().is_none(), "{body}");
        assert_eq!(answer.body["field"].as_str(), field, "{body}");
        refused += 1;
    }
    assert_eq!(command_rows(&stack).await, before);
    println!(
        "master data copy: 5 items in {pages} pages of 2; second copy 1 created, 1 updated, 3 unchanged, 1 kept (the tenant's edit); third copy wrote nothing; {refused} bad copies refused"
    );
}

#[tokio::test]
async fn ttl_policies_apply_to_commands_without_ttl_and_never_to_heads() {
    let stack = Stack::new(CallerMode::Jwt).await;
    let policy = |pk: &str, table: &str, days: i64, version: i64| json!({"pk": pk, "sk": format!("TTL#{table}"), "version": version, "attributes": {"days": days}});
    for (who, body) in [
        (T1, policy("MASTER#t1", "product", 30, 0)),
        (ROOT, policy("MASTER#common", "product", 7, 0)),
        (T1, policy("MASTER#t1", "NOTE", 2, 0)),
    ] {
        let answer = command(&stack, "POST", who, body).await;
        assert_eq!(answer.status, 202, "{}", answer.text);
    }
    project(&stack, 3).await;
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    };
    let s = store(&stack.tables);
    let ttl_of = |pk: &'static str, sk: &'static str, version: i64| {
        let s = s.clone();
        async move { s.get_command(pk, sk, version).await.unwrap().unwrap().ttl }
    };
    let near = |ttl: Option<i64>, days: i64| {
        ttl.is_some_and(|t| (t - (now() + days * 86_400)).abs() < 120)
    };
    let product = |pk: &str, sk: &str, extra: Value| {
        let mut body = json!({"pk": pk, "sk": sk, "version": 0});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    assert_eq!(
        command(&stack, "POST", T1, product("PRODUCT#t1", "P1", json!({})))
            .await
            .status,
        202
    );
    assert!(
        near(ttl_of("PRODUCT#t1", "P1", 1).await, 30),
        "the tenant's policy"
    );
    assert_eq!(
        command(&stack, "POST", T2, product("PRODUCT#t2", "P1", json!({})))
            .await
            .status,
        202
    );
    assert!(
        near(ttl_of("PRODUCT#t2", "P1", 1).await, 7),
        "common's policy for t2, never t1's"
    );
    assert_eq!(
        command(&stack, "POST", T1, product("NOTE#t1", "N1", json!({})))
            .await
            .status,
        202
    );
    assert!(
        near(ttl_of("NOTE#t1", "N1", 1).await, 2),
        "a type's policy for items of no entity"
    );
    assert_eq!(
        command(&stack, "POST", T2, product("NOTE#t2", "N1", json!({})))
            .await
            .status,
        202
    );
    assert_eq!(
        ttl_of("NOTE#t2", "N1", 1).await,
        None,
        "t1's policy never governs t2"
    );
    let own = product("PRODUCT#t1", "P2", json!({"ttl": 4_000_000_000_i64}));
    assert_eq!(command(&stack, "POST", T1, own).await.status, 202);
    assert_eq!(
        ttl_of("PRODUCT#t1", "P2", 1).await,
        Some(4_000_000_000),
        "the command's ttl wins"
    );
    let cleared = json!({"pk": "PRODUCT#t1", "sk": "P2", "version": 1, "ttl": null});
    assert_eq!(command(&stack, "PATCH", T1, cleared).await.status, 202);
    assert_eq!(ttl_of("PRODUCT#t1", "P2", 2).await, None, "null clears it");

    // The policy changes to 1 day: this warm container keeps the cached 30 days, a new one reads 1.
    assert_eq!(
        command(&stack, "POST", T1, policy("MASTER#t1", "product", 1, 1))
            .await
            .status,
        202
    );
    let rows = command_rows(&stack).await;
    project(&stack, rows).await;
    assert_eq!(
        command(&stack, "POST", T1, product("PRODUCT#t1", "P3", json!({})))
            .await
            .status,
        202
    );
    assert!(
        near(ttl_of("PRODUCT#t1", "P3", 1).await, 30),
        "cached in the warm container"
    );
    let cold = Stack::on(stack.tables.clone(), CallerMode::Jwt);
    assert_eq!(
        command(&cold, "POST", T1, product("PRODUCT#t1", "P4", json!({})))
            .await
            .status,
        202
    );
    assert!(
        near(ttl_of("PRODUCT#t1", "P4", 1).await, 1),
        "a new container reads the new policy"
    );

    // Heads never expire.
    let heads = stack
        .tables
        .client
        .scan()
        .table_name(&stack.tables.idempotency)
        .send()
        .await
        .unwrap();
    let heads: Vec<_> = heads
        .items()
        .iter()
        .filter(|i| matches!(i.get("pk"), Some(AttributeValue::S(pk)) if pk.starts_with("HEAD#")))
        .collect();
    assert!(heads.len() >= 8);
    assert!(
        heads.iter().all(|h| !h.contains_key("ttl")),
        "a head record never expires"
    );
    println!(
        "ttl policy: tenant 30 d, common fallback 7 d, type policy 2 d, own ttl wins, null clears, cached per container, {} heads without ttl",
        heads.len()
    );
}
