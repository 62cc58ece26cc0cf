//! `constraints::verify` and `constraints::repair` against DynamoDB Local: guard items that drifted
//! from the data (a deleted guard, a version written without its moves: a missing claim, a missing
//! member, an extra member, a stale head mirror, a stray claim) are found, confirmed and repaired
//! newest-wins, after which verify is clean; two live holders of one value are reported and never
//! repaired.

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_item::Item;
use cqrs_keys::{guard_key, member_token};
use cqrs_model::Model;
use cqrs_store::constraints::{Difference, plan, repair, verify};
use cqrs_store::{Store, Tables};
use cqrs_testkit::TestTables;

/// One declared constraint of each kind.
const MODEL: &str = cqrs_testkit::models::CONSTRAINED_LIBRARY;

async fn store() -> (Store, TestTables) {
    let t = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        t.client.clone(),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    );
    (store, t)
}

fn item(entity: &str, pk: &str, base: &str, version: i64, json: &str) -> Item {
    let mut item = Item::example();
    item.pk = pk.into();
    item.sk = cqrs_keys::add_sort_key_version(base, version);
    item.id = cqrs_keys::generate_id(pk, base);
    item.version = version;
    item.tenant_code = "t1".into();
    item.entity = Some(entity.into());
    item.attributes = serde_json::from_str(json).unwrap();
    item
}

fn copy(base: &str, version: i64, no: u32) -> Item {
    let json = format!(r#"{{"copyId":"{base}","isbn":"978","copyNo":{no}}}"#);
    item("copy", "COPY#t1", base, version, &json)
}

fn loan(base: &str, version: i64, status: &str) -> Item {
    let json =
        format!(r#"{{"loanId":"{base}","memberId":"m1","status":"{status}","copyId":"C1"}}"#);
    item("loan", "LOAN#t1", base, version, &json)
}

/// Writes `new` with the constraints' moves from `base`, as the command handler does.
async fn write(store: &Store, model: &Model, base: Option<&Item>, new: &Item) {
    let entity = model.entity(new.entity.as_deref().unwrap()).unwrap();
    let moves = plan(model, entity, "t1", base, new).unwrap();
    let guards: Vec<_> = moves.guards.into_iter().map(|(g, _)| g).collect();
    store
        .write_version_constrained(
            new,
            base.map(|b| b.version),
            None,
            &guards,
            moves.mirror.as_ref(),
        )
        .await
        .unwrap();
}

fn kinds(differences: &[Difference]) -> Vec<String> {
    let mut kinds: Vec<String> = differences
        .iter()
        .map(|d| {
            let text = format!("{d:?}");
            let kind = text
                .split([' ', '{'])
                .next()
                .unwrap_or_default()
                .to_string();
            match d {
                Difference::Unclaimed { holder, .. } => format!("{kind} {}", holder.1),
                Difference::MissingMember { member, .. } => format!("{kind} {}", member.1),
                Difference::ExtraMember { member, .. } => format!(
                    "{kind} {}",
                    member.as_ref().map_or("unknown", |m| m.1.as_str())
                ),
                Difference::StaleMirror { sk, .. } => format!("{kind} {sk}"),
                Difference::StrayClaim { guard_holder, .. } => format!("{kind} {}", guard_holder.1),
                Difference::TwoHolders { holders, .. } => format!(
                    "{kind} {}",
                    holders
                        .iter()
                        .map(|h| h.1.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                Difference::Dangling { item, .. } => format!("{kind} {}", item.1),
                Difference::OverLimit { members, .. } => format!("{kind} {members}"),
            }
        })
        .collect();
    kinds.sort();
    kinds
}

async fn members(t: &TestTables, key: &str) -> Vec<String> {
    let item = t
        .client
        .get_item()
        .table_name(&t.idempotency)
        .key("pk", AttributeValue::S(key.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item;
    let mut set = match item.as_ref().and_then(|i| i.get("m")) {
        Some(AttributeValue::Ss(set)) => set.clone(),
        _ => Vec::new(),
    };
    set.sort();
    set
}

#[tokio::test]
async fn verify_finds_drift_and_repair_fixes_it_newest_wins() {
    let model = Model::parse(MODEL).unwrap();
    let (store, t) = store().await;
    let c1 = copy("C1", 1, 1);
    write(&store, &model, None, &c1).await;
    write(&store, &model, None, &copy("C2", 1, 2)).await;
    write(&store, &model, None, &loan("L1", 1, "out")).await;
    let l2 = loan("L2", 1, "out");
    write(&store, &model, None, &l2).await;
    // A return through the constraints: L2 leaves the group.
    write(&store, &model, Some(&l2), &loan("L2", 2, "returned")).await;
    let report = verify(&store, &model, Some("t1")).await.unwrap();
    assert!(report.is_clean(), "{:#?}", report.differences);

    // Drift: C1's guard deleted; C3 written without its claim; L4 written out without its join;
    // L5's token added to the group though L5 is returned; a token of no item in the group; C2's
    // next version written without its head mirror; a claim of C9, which holds nothing.
    let c1_key = guard_key("t1", "copy", "copy_number", &["978".into(), "1".into()]);
    t.client
        .delete_item()
        .table_name(&t.idempotency)
        .key("pk", AttributeValue::S(c1_key.clone()))
        .send()
        .await
        .unwrap();
    store
        .write_version(&copy("C3", 1, 3), None, None)
        .await
        .unwrap();
    store
        .write_version(&loan("L4", 1, "out"), None, None)
        .await
        .unwrap();
    store
        .write_version(&loan("L5", 1, "returned"), None, None)
        .await
        .unwrap();
    let group = guard_key("t1", "loan", "loans_out", &["m1".into()]);
    for token in [
        member_token("LOAN#t1", "L5"),
        member_token("LOAN#t1", "GONE"),
    ] {
        t.client
            .update_item()
            .table_name(&t.idempotency)
            .key("pk", AttributeValue::S(group.clone()))
            .update_expression("ADD #m :t")
            .expression_attribute_names("#m", "m")
            .expression_attribute_values(":t", AttributeValue::Ss(vec![token]))
            .send()
            .await
            .unwrap();
    }
    store
        .write_version(&copy("C2", 2, 2), Some(1), None)
        .await
        .unwrap();
    let stray = guard_key("t1", "copy", "copy_number", &["978".into(), "9".into()]);
    t.client
        .put_item()
        .table_name(&t.idempotency)
        .item("pk", AttributeValue::S(stray.clone()))
        .item("o", AttributeValue::S("COPY#t1".into()))
        .item("s", AttributeValue::S("C9".into()))
        .send()
        .await
        .unwrap();

    let report = verify(&store, &model, Some("t1")).await.unwrap();
    assert_eq!(
        kinds(&report.differences),
        [
            "ExtraMember L5",
            "ExtraMember unknown",
            "MissingMember L4",
            "StaleMirror C2",
            "StaleMirror C3",
            "StrayClaim C9",
            "Unclaimed C1",
            "Unclaimed C3",
        ],
        "{:#?}",
        report.differences
    );
    for difference in &report.differences {
        assert!(!difference.to_string().is_empty());
    }
    // Verify changed nothing.
    assert_eq!(verify(&store, &model, None).await.unwrap(), report);

    let repaired = repair(&store, &model, Some("t1")).await.unwrap();
    assert_eq!(kinds(&repaired.repaired), kinds(&report.differences));
    assert!(repaired.is_clean(), "{:#?}", repaired.differences);
    let again = verify(&store, &model, None).await.unwrap();
    assert!(again.is_clean(), "{:#?}", again.differences);
    let mut expected = vec![member_token("LOAN#t1", "L1"), member_token("LOAN#t1", "L4")];
    expected.sort();
    assert_eq!(members(&t, &group).await, expected);

    // The repaired guards hold as if the versions had been written through the constraints: a
    // fourth copy with C1's values is refused, C1 may move its own value on.
    let dup = copy("C4", 1, 1);
    let entity = model.entity("copy").unwrap();
    let moves = plan(&model, entity, "t1", None, &dup).unwrap();
    let guards: Vec<_> = moves.guards.into_iter().map(|(g, _)| g).collect();
    assert!(matches!(
        store
            .write_version_constrained(&dup, None, None, &guards, moves.mirror.as_ref())
            .await,
        Err(cqrs_store::StoreError::GuardFailed { index: 0, .. })
    ));
    write(&store, &model, Some(&c1), &copy("C1", 2, 7)).await;
    assert!(verify(&store, &model, None).await.unwrap().is_clean());
}

#[tokio::test]
async fn two_live_holders_are_reported_and_not_repaired() {
    let model = Model::parse(MODEL).unwrap();
    let (store, _t) = store().await;
    let mut older = copy("C1", 1, 1);
    older.created_at = "2026-01-01T00:00:00Z".into();
    let mut newer = copy("C2", 1, 1);
    newer.created_at = "2026-02-01T00:00:00Z".into();
    // Both written without their claims (e.g. before the constraint was declared).
    store.write_version(&newer, None, None).await.unwrap();
    store.write_version(&older, None, None).await.unwrap();
    let report = repair(&store, &model, None).await.unwrap();
    assert_eq!(kinds(&report.differences), ["TwoHolders C1,C2"]);
    // The guard went to the older holder, and both stay listed (their heads, written without the
    // mirror, got it).
    assert_eq!(
        kinds(&report.repaired),
        ["StaleMirror C1", "StaleMirror C2", "Unclaimed C1"]
    );
    let again = verify(&store, &model, None).await.unwrap();
    assert_eq!(kinds(&again.differences), ["TwoHolders C1,C2"]);
}
