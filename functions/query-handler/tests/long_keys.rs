//! Items whose head key cannot exist: an id of 2044 to 2048 bytes (written before heads, or by
//! mbc-cqrs-serverless) makes `HEAD#pk@sk` longer than DynamoDB's 2048-byte key limit. Such an
//! item has no head, and reading it never sends that key to DynamoDB.

mod common;

use common::{Harness, USER_T1, enc, version_item};

/// Issue 36, item 5: `GET /items/{pk}/{sk}?minVersion=1` on such an item answered 500 (the head
/// read was refused by DynamoDB); it reads the command rows, as for any item without a head.
#[tokio::test]
async fn min_version_reads_an_item_whose_head_key_cannot_exist() {
    let h = Harness::new().await;
    let pk = format!("PRODUCT#t1#{}", "x".repeat(1034));
    let sk = "s".repeat(1000);
    assert_eq!(cqrs_keys::generate_id(&pk, &sk).len(), 2046);
    assert!(cqrs_keys::head_key(&pk, &sk).len() > 2048);
    h.seed(&pk, &sk, 1, false).await;
    h.put_command(&version_item(&pk, &sk, 2, false)).await;
    let path = format!("/items/{}/{}", enc(&pk), enc(&sk));
    for min in [1, 2] {
        let a = h.get(&USER_T1, &format!("{path}?minVersion={min}")).await;
        assert_eq!(a.status, 200, "minVersion={min}: {}", a.body);
        assert_eq!(a.body["version"], min, "{}", a.body);
    }
    let a = h.get(&USER_T1, &format!("{path}?minVersion=3")).await;
    a.assert_problem(404, None);
}

/// Issue 36, item 7: new keys refuse U+10FFFF (a prefix range ends there), but an item stored
/// before that rule stays readable: its item, its history and its partition answer, while a key
/// that breaks another rule is still a 400.
#[tokio::test]
async fn an_item_stored_with_the_highest_code_point_in_its_keys_stays_readable() {
    let h = Harness::new().await;
    let pk = "PRODUCT#t1#old\u{10FFFF}";
    let sk = "P\u{10FFFF}1";
    h.seed(pk, sk, 2, false).await;
    let item = h
        .get(&USER_T1, &format!("/items/{}/{}", enc(pk), enc(sk)))
        .await;
    assert_eq!(item.status, 200, "{}", item.body);
    assert_eq!(item.body["sk"], sk, "{}", item.body);
    assert_eq!(item.body["version"], 2, "{}", item.body);
    let versions = h
        .get(
            &USER_T1,
            &format!("/items/{}/{}/versions", enc(pk), enc(sk)),
        )
        .await;
    assert_eq!(versions.status, 200, "{}", versions.body);
    assert_eq!(versions.items().len(), 2, "{}", versions.body);
    let partition = h.get(&USER_T1, &format!("/items/{}", enc(pk))).await;
    assert_eq!(partition.status, 200, "{}", partition.body);
    assert_eq!(partition.sks(), vec![sk.to_string()], "{}", partition.body);
    // Every other rule still holds beside it.
    let bad = h
        .get(
            &USER_T1,
            &format!("/items/{}/{}", enc(pk), enc("P\u{10FFFF}@1")),
        )
        .await;
    bad.assert_problem(400, Some("sk"));
}
