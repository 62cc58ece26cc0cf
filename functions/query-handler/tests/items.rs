//! `GET /items/{pk}/{sk}` against DynamoDB Local: the latest state, ETag and 304, soft deletes,
//! `minVersion` (read-your-writes before data-sync ran), and keys in the path.

mod common;

use common::{Harness, USER_T1, enc, version_item};
use serde_json::json;

#[tokio::test]
async fn the_latest_state_comes_from_the_data_table_with_its_version_as_etag() {
    let h = Harness::new().await;
    let last = h.seed("PRODUCT#t1", "P001", 3, false).await;
    let a = h.get(&USER_T1, "/items/PRODUCT%23t1/P001").await;
    assert_eq!(a.status, 200, "{}", a.body);
    // Exactly the data item, as `Item` serialises it.
    assert_eq!(
        a.body,
        serde_json::to_value(last.clone().into_data_item()).unwrap()
    );
    assert_eq!(a.body["sk"], "P001");
    assert_eq!(a.body["csk"], "P001@3");
    assert_eq!(a.body["tenantCode"], "t1");
    assert_eq!(a.header("etag"), Some("\"3\""));
    assert_eq!(a.header("read-source"), Some("data"));
    assert_eq!(a.header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn if_none_match_answers_304_only_for_the_current_version() {
    let h = Harness::new().await;
    h.seed("PRODUCT#t1", "P001", 3, false).await;
    let path = "/items/PRODUCT%23t1/P001";
    for matching in ["\"3\"", "W/\"3\"", "\"1\", \"3\"", "*"] {
        let a = h
            .get_with(&USER_T1, path, &[("if-none-match", matching)])
            .await;
        assert_eq!(a.status, 304, "{matching}");
        assert_eq!(a.body, serde_json::Value::Null, "a 304 has no body");
        assert_eq!(a.header("etag"), Some("\"3\""));
    }
    for stale in ["\"2\"", "\"33\"", "3"] {
        let a = h
            .get_with(&USER_T1, path, &[("if-none-match", stale)])
            .await;
        assert_eq!(a.status, 200, "{stale}");
        assert_eq!(a.body["version"], 3);
    }
    // A new version changes the tag.
    h.put_data(&version_item("PRODUCT#t1", "P001", 4, false))
        .await;
    let a = h
        .get_with(&USER_T1, path, &[("if-none-match", "\"3\"")])
        .await;
    assert_eq!((a.status, a.header("etag")), (200, Some("\"4\"")));
}

#[tokio::test]
async fn absent_and_soft_deleted_items_are_404_unless_deleted_ones_are_asked_for() {
    let h = Harness::new().await;
    h.seed("PRODUCT#t1", "GONE", 2, true).await;
    h.get(&USER_T1, "/items/PRODUCT%23t1/NOPE")
        .await
        .assert_problem(404, None);
    let a = h.get(&USER_T1, "/items/PRODUCT%23t1/GONE").await;
    a.assert_problem(404, None);
    assert!(a.body["detail"].as_str().unwrap().contains("deleted"));
    let a = h
        .get(&USER_T1, "/items/PRODUCT%23t1/GONE?includeDeleted=true")
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        (a.body["isDeleted"].clone(), a.body["version"].clone()),
        (json!(true), json!(2))
    );
    let a = h
        .get(&USER_T1, "/items/PRODUCT%23t1/GONE?includeDeleted=false")
        .await;
    a.assert_problem(404, None);
    h.get(&USER_T1, "/items/PRODUCT%23t1/GONE?includeDeleted=yes")
        .await
        .assert_problem(400, Some("includeDeleted"));
}

#[tokio::test]
async fn min_version_answers_from_the_command_table_when_the_data_table_is_behind() {
    let h = Harness::new().await;
    // Data-sync has projected version 2; the command table already holds 3 and 4.
    h.seed("PRODUCT#t1", "P1", 2, false).await;
    for v in 3..=4 {
        h.put_command(&version_item("PRODUCT#t1", "P1", v, false))
            .await;
    }
    let path = "/items/PRODUCT%23t1/P1";

    let a = h.get(&USER_T1, path).await;
    assert_eq!(
        (a.body["version"].clone(), a.header("read-source")),
        (json!(2), Some("data"))
    );

    // Not behind: the data table answers.
    for min in [1, 2] {
        let a = h.get(&USER_T1, &format!("{path}?minVersion={min}")).await;
        assert_eq!(a.status, 200);
        assert_eq!(a.body["version"], 2, "minVersion={min}");
        assert_eq!(a.header("read-source"), Some("data"));
    }
    // Behind: the newest command version, in the data-item shape.
    for min in [3, 4] {
        let a = h.get(&USER_T1, &format!("{path}?minVersion={min}")).await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(a.header("read-source"), Some("command"));
        assert_eq!(a.header("etag"), Some("\"4\""));
        let expected = version_item("PRODUCT#t1", "P1", 4, false).into_data_item();
        assert_eq!(a.body, serde_json::to_value(&expected).unwrap());
        assert_eq!(a.body["sk"], "P1");
        assert_eq!(a.body["csk"], "P1@4");
    }
    // A version that does not exist anywhere.
    let a = h.get(&USER_T1, &format!("{path}?minVersion=5")).await;
    a.assert_problem(404, None);
    assert!(a.body["detail"].as_str().unwrap().contains("version 4"));
    // 304 works on the command answer too.
    let a = h
        .get_with(
            &USER_T1,
            &format!("{path}?minVersion=3"),
            &[("if-none-match", "\"4\"")],
        )
        .await;
    assert_eq!((a.status, a.header("read-source")), (304, Some("command")));
    for bad in ["0", "-1", "x", "1.5", ""] {
        h.get(&USER_T1, &format!("{path}?minVersion={bad}"))
            .await
            .assert_problem(400, Some("minVersion"));
    }
}

#[tokio::test]
async fn min_version_before_any_projection_and_on_a_deleted_command_version() {
    let h = Harness::new().await;
    h.put_command(&version_item("PRODUCT#t1", "NEW", 1, false))
        .await;
    h.get(&USER_T1, "/items/PRODUCT%23t1/NEW")
        .await
        .assert_problem(404, None);
    let a = h
        .get(&USER_T1, "/items/PRODUCT%23t1/NEW?minVersion=1")
        .await;
    assert_eq!((a.status, a.header("read-source")), (200, Some("command")));
    h.get(&USER_T1, "/items/PRODUCT%23t1/NEVER?minVersion=1")
        .await
        .assert_problem(404, None);

    // The newest command version is a soft delete.
    h.put_command(&version_item("PRODUCT#t1", "NEW", 2, true))
        .await;
    h.get(&USER_T1, "/items/PRODUCT%23t1/NEW?minVersion=2")
        .await
        .assert_problem(404, None);
    let a = h
        .get(
            &USER_T1,
            "/items/PRODUCT%23t1/NEW?minVersion=2&includeDeleted=true",
        )
        .await;
    assert_eq!((a.status, a.body["isDeleted"].clone()), (200, json!(true)));
}

#[tokio::test]
async fn a_client_reads_its_own_write_before_data_sync_ran() {
    let h = Harness::new().await;
    let (status, written) = h
        .command(
            "POST",
            &USER_T1,
            json!({"pk": "PRODUCT#t1", "sk": "RYW", "version": 0, "name": "Tea",
                   "attributes": {"price": 500}}),
        )
        .await;
    assert_eq!(status, 202, "{written}");
    assert_eq!(h.data_count().await, 0, "data-sync has not run");

    let path = "/items/PRODUCT%23t1/RYW";
    h.get(&USER_T1, path).await.assert_problem(404, None);
    let a = h.get(&USER_T1, &format!("{path}?minVersion=1")).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["name"], "Tea");
    assert_eq!(a.body["sk"], "RYW");
    assert_eq!(a.body["createdBy"], "u1");

    // data-sync projects version 1; the client then patches to version 2.
    let v1 = h.get(&USER_T1, &format!("{path}?minVersion=1")).await.body;
    let mut projected: cqrs_item::Item = serde_json::from_value(v1).unwrap();
    projected.sk = "RYW@1".into();
    h.put_data(&projected).await;
    let (status, written) = h
        .command(
            "PATCH",
            &USER_T1,
            json!({"pk": "PRODUCT#t1", "sk": "RYW", "version": 1, "attributes": {"size": "L"}}),
        )
        .await;
    assert_eq!((status, written["version"].clone()), (202, json!(2)));

    let a = h.get(&USER_T1, path).await;
    assert_eq!(
        (a.body["version"].clone(), a.header("read-source")),
        (json!(1), Some("data"))
    );
    let a = h
        .get(
            &USER_T1,
            &format!("{path}?minVersion={}", written["version"]),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.header("read-source"), Some("command"));
    assert_eq!(a.body["version"], 2);
    assert_eq!(a.body["attributes"], json!({"price": 500, "size": "L"}));
}

#[tokio::test]
async fn keys_in_the_path_are_decoded_exactly_once() {
    let h = Harness::new().await;
    // `%23` literally in a sort key, next to an item whose sort key has a real `#` there.
    h.seed("PRODUCT#t1", "a%23b", 1, false).await;
    h.seed("PRODUCT#t1", "a#b", 2, false).await;
    h.seed("PRODUCT#t1", "x/y z é+", 3, false).await;

    let a = h.get(&USER_T1, "/items/PRODUCT%23t1/a%2523b").await;
    assert_eq!((a.status, a.body["sk"].clone()), (200, json!("a%23b")));
    let a = h.get(&USER_T1, "/items/PRODUCT%23t1/a%23b").await;
    assert_eq!((a.status, a.body["sk"].clone()), (200, json!("a#b")));
    let a = h
        .get(
            &USER_T1,
            &format!("/items/PRODUCT%23t1/{}", enc("x/y z é+")),
        )
        .await;
    assert_eq!((a.status, a.body["version"].clone()), (200, json!(3)));
    // `+` in a path is a plus, not a space.
    let a = h
        .get(&USER_T1, "/items/PRODUCT%23t1/x%2Fy%20z%20%C3%A9+")
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
}

#[tokio::test]
async fn invalid_keys_are_400_naming_the_parameter() {
    let h = Harness::new().await;
    for (path, field) in [
        ("/items/PRODUCT/P1", "pk"),
        ("/items/PRODUCT%23/P1", "pk"),
        ("/items/%FF%23t1/P1", "pk"),
        ("/items/%23t1/P1", "pk"),
        ("/items/PRODUCT%23t1/P1%401", "sk"),
        ("/items/PRODUCT%23t1/a%23%23b", "sk"),
        ("/items/PRODUCT%23t1/%FE", "sk"),
        ("/items/PRODUCT%23t1/a%01", "sk"),
    ] {
        h.get(&USER_T1, path).await.assert_problem(400, Some(field));
    }
}

#[tokio::test]
async fn unknown_and_repeated_query_parameters_are_400() {
    let h = Harness::new().await;
    h.seed("PRODUCT#t1", "P1", 1, false).await;
    for (query, field) in [
        ("limit=5", "limit"),
        ("includedeleted=true", "includedeleted"),
        ("minVersion=1&minVersion=2", "minVersion"),
        ("includeDeleted=", "includeDeleted"),
    ] {
        h.get(&USER_T1, &format!("/items/PRODUCT%23t1/P1?{query}"))
            .await
            .assert_problem(400, Some(field));
    }
}

#[tokio::test]
async fn min_version_reads_the_newest_version_from_the_head_record() {
    let h = Harness::new().await;
    for version in [0, 1] {
        let (status, body) = h
            .command(
                "POST",
                &USER_T1,
                json!({"pk": "PRODUCT#t1", "sk": "HEADED", "version": version}),
            )
            .await;
        assert_eq!(status, 202, "{body}");
    }
    // A stray row above the head (not written by the command handler) is not the item's newest
    // version: the head, written in one transaction with every version, says which one is.
    h.put_command(&version_item("PRODUCT#t1", "HEADED", 9, false))
        .await;
    let a = h
        .get(&USER_T1, "/items/PRODUCT%23t1/HEADED?minVersion=2")
        .await;
    assert_eq!((a.status, a.header("read-source")), (200, Some("command")));
    assert_eq!(a.body["version"], 2, "{}", a.body);
    h.get(&USER_T1, "/items/PRODUCT%23t1/HEADED?minVersion=3")
        .await
        .assert_problem(404, None);
}
