//! The constraint guards against DynamoDB Local: each operation's semantics (a join is idempotent
//! and bounded, a leave of an absent member is a no-op, a claim by its owner twice holds, a
//! release by another item is refused), a `RequireHead` tells missing / deleted / condition /
//! stale apart from the head its cancellation returns (no read), the head mirror is written by
//! `write_version_constrained`, and the largest transaction each constraint type makes is
//! accepted (100 items), while 98 guards are refused by `prepare()` before any call.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use cqrs_item::Item;
use cqrs_keys::{add_sort_key_version, guard_key, member_token};
use cqrs_store::guard::{
    CommandKeys, Guard, GuardError, HeadCondition, HeadMirror, HeadRefusal, MAX_GUARDS, prepare,
};
use cqrs_store::{IdempotencyRecord, Store, StoreError, Tables};
use cqrs_testkit::TestTables;
use cqrs_testkit::round_trips::CallLog;

async fn store() -> (Store, TestTables) {
    let t = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        t.client.clone(),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    );
    (store, t)
}

fn version_in(pk: &str, base: &str, v: i64) -> Item {
    let mut item = Item::example();
    item.pk = pk.to_string();
    item.sk = add_sort_key_version(base, v);
    item.id = cqrs_keys::generate_id(pk, base);
    item.version = v;
    item
}

fn record(key: &str, item: &Item) -> IdempotencyRecord {
    IdempotencyRecord {
        key: key.into(),
        fingerprint: "f".into(),
        item_pk: item.pk.clone(),
        item_sk: item.sk.clone(),
        item_id: item.id.clone(),
        version: item.version,
        ttl: 4_000_000_000,
    }
}

async fn get(
    t: &TestTables,
    key: &str,
) -> Option<std::collections::HashMap<String, AttributeValue>> {
    t.client
        .get_item()
        .table_name(&t.idempotency)
        .key("pk", AttributeValue::S(key.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
}

fn members(item: &Option<std::collections::HashMap<String, AttributeValue>>) -> Vec<String> {
    let mut set = match item.as_ref().and_then(|i| i.get("m")) {
        Some(AttributeValue::Ss(set)) => set.clone(),
        _ => Vec::new(),
    };
    set.sort();
    set
}

/// Writes version 1 of `LOAN#t1 / <base>` with `guards`.
async fn write(store: &Store, base: &str, guards: &[Guard]) -> Result<(), StoreError> {
    let item = version_in("LOAN#t1", base, 1);
    store
        .write_version_constrained(&item, None, None, guards, None)
        .await
}

fn join(key: &str, base: &str, at_most: u32) -> Guard {
    Guard::Join {
        key: key.into(),
        token: member_token("LOAN#t1", base),
        at_most,
        values: vec!["m1".into()],
        constraint: "loan.loans_out".into(),
    }
}

#[tokio::test]
async fn a_join_is_idempotent_and_bounded_and_a_leave_of_an_absent_member_is_a_no_op() {
    let (store, t) = store().await;
    let key = guard_key("t1", "loan", "loans_out", &["m1".into()]);
    for base in ["L1", "L2"] {
        write(&store, base, &[join(&key, base, 2)]).await.unwrap();
    }
    // A third member is refused, and the refusal carries the set as it was (ALL_OLD).
    let err = write(&store, "L3", &[join(&key, "L3", 2)])
        .await
        .unwrap_err();
    let StoreError::GuardFailed { index: 0, old } = err else {
        panic!("{err:?}")
    };
    assert_eq!(members(&old).len(), 2, "{old:?}");
    assert_eq!(
        old.as_ref().and_then(|o| o.get("c")),
        Some(&AttributeValue::S("loan.loans_out".into()))
    );
    // Joining again as a member holds (another version of L1 in the same group) and adds nothing.
    let v2 = version_in("LOAN#t1", "L1", 2);
    store
        .write_version_constrained(&v2, Some(1), None, &[join(&key, "L1", 2)], None)
        .await
        .unwrap();
    let mut expected = vec![member_token("LOAN#t1", "L1"), member_token("LOAN#t1", "L2")];
    expected.sort();
    assert_eq!(members(&get(&t, &key).await), expected);
    assert_eq!(store.limit_members(&key).await.unwrap(), 2);

    // A leave of a token that is not in the set (or of a group never written) holds.
    let leave_absent = Guard::Leave {
        key: key.clone(),
        token: member_token("LOAN#t1", "L9"),
    };
    let nowhere = Guard::Leave {
        key: guard_key("t1", "loan", "loans_out", &["nobody".into()]),
        token: member_token("LOAN#t1", "L9"),
    };
    write(&store, "L9", &[leave_absent, nowhere]).await.unwrap();
    assert_eq!(members(&get(&t, &key).await), expected);
    // UpdateItem creates the item it updates: a leave of a group never written leaves an item
    // with its key alone, which counts no member (verify and repair ignore or remove it).
    let nobody = get(
        &t,
        &guard_key("t1", "loan", "loans_out", &["nobody".into()]),
    )
    .await;
    assert_eq!(members(&nobody), Vec::<String>::new());
    assert_eq!(nobody.map(|item| item.len()), Some(1));
    // L2 leaves: L3 now gets in.
    let v2 = version_in("LOAN#t1", "L2", 2);
    let leave = Guard::Leave {
        key: key.clone(),
        token: member_token("LOAN#t1", "L2"),
    };
    store
        .write_version_constrained(&v2, Some(1), None, &[leave], None)
        .await
        .unwrap();
    write(&store, "L3", &[join(&key, "L3", 2)]).await.unwrap();
    assert_eq!(store.limit_members(&key).await.unwrap(), 2);

    // CheckMembers: at most 2 holds, at most 1 does not; an absent group has 0 members.
    let check = |at_most| Guard::CheckMembers {
        key: key.clone(),
        at_most,
    };
    write(&store, "C1", &[check(2)]).await.unwrap();
    let err = write(&store, "C2", &[check(1)]).await.unwrap_err();
    assert!(
        matches!(
            &err,
            StoreError::GuardFailed {
                index: 0,
                old: Some(_)
            }
        ),
        "{err:?}"
    );
    let empty = Guard::CheckMembers {
        key: guard_key("t1", "loan", "loans_out", &["m7".into()]),
        at_most: 0,
    };
    write(&store, "C3", &[empty]).await.unwrap();
    // Both members leave: the emptied set disappears, and the group counts 0.
    for (base, version) in [("L1", 3), ("L3", 2)] {
        let item = version_in("LOAN#t1", base, version);
        let leave = Guard::Leave {
            key: key.clone(),
            token: member_token("LOAN#t1", base),
        };
        store
            .write_version_constrained(&item, Some(version - 1), None, &[leave], None)
            .await
            .unwrap();
    }
    assert_eq!(members(&get(&t, &key).await), Vec::<String>::new());
    assert_eq!(store.limit_members(&key).await.unwrap(), 0);
    write(&store, "C4", &[check(0)]).await.unwrap();
}

fn claim(key: &str, owner: &str) -> Guard {
    Guard::Claim {
        key: key.into(),
        owner_pk: "COPY#t1".into(),
        owner_sk: owner.into(),
        values: vec!["978".into(), "2".into()],
        constraint: "copy.copy_number".into(),
    }
}

fn release(key: &str, owner: &str) -> Guard {
    Guard::Release {
        key: key.into(),
        owner_pk: "COPY#t1".into(),
        owner_sk: owner.into(),
    }
}

#[tokio::test]
async fn a_claim_by_its_owner_holds_twice_and_another_owner_is_refused_with_the_holder() {
    let (store, t) = store().await;
    let key = guard_key("t1", "copy", "copy_number", &["978".into(), "2".into()]);
    let copy = |base: &str, v: i64| version_in("COPY#t1", base, v);
    store
        .write_version_constrained(&copy("C1", 1), None, None, &[claim(&key, "C1")], None)
        .await
        .unwrap();
    // The owner claims it again (an update that keeps the value, or a retry): it holds.
    store
        .write_version_constrained(&copy("C1", 2), Some(1), None, &[claim(&key, "C1")], None)
        .await
        .unwrap();
    // Another item is refused, and the refusal names the holder (ALL_OLD, no read).
    let err = store
        .write_version_constrained(&copy("C2", 1), None, None, &[claim(&key, "C2")], None)
        .await
        .unwrap_err();
    let StoreError::GuardFailed {
        index: 0,
        old: Some(old),
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(old.get("o"), Some(&AttributeValue::S("COPY#t1".into())));
    assert_eq!(old.get("s"), Some(&AttributeValue::S("C1".into())));
    assert_eq!(
        old.get("v"),
        Some(&AttributeValue::L(vec![
            AttributeValue::S("978".into()),
            AttributeValue::S("2".into())
        ]))
    );
    // Nothing of C2 was written.
    assert_eq!(store.get_head("COPY#t1", "C2").await.unwrap(), None);

    // A release by another item is refused (drift, never a normal move) and leaves the claim.
    let err = store
        .write_version_constrained(&copy("C2", 1), None, None, &[release(&key, "C2")], None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            StoreError::GuardFailed {
                index: 0,
                old: Some(_)
            }
        ),
        "{err:?}"
    );
    assert!(get(&t, &key).await.is_some());
    // The owner releases it (a soft delete), then C2 takes it; a release of a free key holds.
    store
        .write_version_constrained(&copy("C1", 3), Some(2), None, &[release(&key, "C1")], None)
        .await
        .unwrap();
    assert_eq!(get(&t, &key).await, None);
    store
        .write_version_constrained(&copy("C1", 4), Some(3), None, &[release(&key, "C1")], None)
        .await
        .unwrap();
    store
        .write_version_constrained(&copy("C2", 1), None, None, &[claim(&key, "C2")], None)
        .await
        .unwrap();
    let held = get(&t, &key).await.unwrap();
    assert_eq!(held.get("s"), Some(&AttributeValue::S("C2".into())));
    assert_eq!(
        held.get("c"),
        Some(&AttributeValue::S("copy.copy_number".into()))
    );
}

fn require(base: &str, condition: HeadCondition) -> Guard {
    Guard::RequireHead {
        pk: "COPY#t1".into(),
        sk: base.into(),
        condition,
    }
}

fn not_a_reference() -> HeadCondition {
    HeadCondition {
        live: true,
        unless: [("reference".to_string(), vec!["true".to_string()])].into(),
        ..HeadCondition::default()
    }
}

fn mirror(is_deleted: bool, reference: Option<&str>) -> HeadMirror {
    HeadMirror {
        is_deleted,
        attributes: reference
            .map(|r| ("reference".to_string(), r.to_string()))
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
    }
}

/// Writes a loan whose only guard is `guard`; the refusal read from the failed guard.
async fn refusal(store: &Store, loan: &str, guard: Guard) -> Option<HeadRefusal> {
    match write(store, loan, &[guard]).await {
        Ok(()) => None,
        Err(StoreError::GuardFailed { index: 0, old }) => Some(HeadRefusal::of(old.as_ref())),
        Err(other) => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_required_head_tells_missing_deleted_condition_and_stale_apart_without_a_read() {
    let (store, t) = store().await;
    let copy = |base: &str, v: i64| version_in("COPY#t1", base, v);
    // C1: a lendable copy; C2: a reference copy; C3: deleted; C4: its head raised past its mirror;
    // C5: written without a mirror (an unreferenced entity's head, or an older release).
    let m = |d, r| Some(mirror(d, r));
    for (base, mir) in [
        ("C1", m(false, Some("false"))),
        ("C2", m(false, Some("true"))),
        ("C3", m(true, None)),
        ("C4", m(false, None)),
        ("C5", None),
    ] {
        store
            .write_version_constrained(&copy(base, 1), None, None, &[], mir.as_ref())
            .await
            .unwrap();
    }
    let head = get(&t, &cqrs_keys::head_key("COPY#t1", "C1"))
        .await
        .unwrap();
    assert_eq!(head.get("mv"), Some(&AttributeValue::N("1".into())));
    assert_eq!(head.get("del"), Some(&AttributeValue::Bool(false)));
    assert_eq!(
        head.get("m"),
        Some(&AttributeValue::M(
            [("reference".to_string(), AttributeValue::S("false".into()))].into()
        ))
    );
    let plain = get(&t, &cqrs_keys::head_key("COPY#t1", "C5"))
        .await
        .unwrap();
    assert!(
        !plain.contains_key("mv") && !plain.contains_key("m"),
        "{plain:?}"
    );
    assert!(store.raise_head("COPY#t1", "C4", 5).await.unwrap());

    assert_eq!(
        refusal(&store, "L1", require("C1", not_a_reference())).await,
        None
    );
    assert_eq!(
        refusal(&store, "L2", require("C0", not_a_reference())).await,
        Some(HeadRefusal::Missing)
    );
    assert_eq!(
        refusal(&store, "L3", require("C2", not_a_reference())).await,
        Some(HeadRefusal::Condition)
    );
    assert_eq!(
        refusal(&store, "L4", require("C3", not_a_reference())).await,
        Some(HeadRefusal::Deleted)
    );
    assert_eq!(
        refusal(&store, "L5", require("C4", not_a_reference())).await,
        Some(HeadRefusal::Stale { latest: Some(5) })
    );
    assert_eq!(
        refusal(&store, "L6", require("C5", not_a_reference())).await,
        Some(HeadRefusal::Stale { latest: Some(1) })
    );
    // `when`: C2 is a reference copy, C1 is not.
    let reference_only = HeadCondition {
        when: [("reference".to_string(), vec!["true".to_string()])].into(),
        ..HeadCondition::default()
    };
    assert_eq!(
        refusal(&store, "L7", require("C2", reference_only.clone())).await,
        None
    );
    assert_eq!(
        refusal(&store, "L8", require("C1", reference_only)).await,
        Some(HeadRefusal::Condition)
    );
    // Existence alone needs no mirror: a raised or mirror-less head exists.
    for (loan, base) in [("L9", "C4"), ("L10", "C5"), ("L11", "C3")] {
        assert_eq!(
            refusal(&store, loan, require(base, HeadCondition::default())).await,
            None
        );
    }
    assert_eq!(
        refusal(&store, "L12", require("C0", HeadCondition::default())).await,
        Some(HeadRefusal::Missing)
    );
    // The next write with the mirror makes C4's head current again.
    store
        .write_version_constrained(&copy("C4", 6), Some(5), None, &[], m(false, None).as_ref())
        .await
        .unwrap();
    assert_eq!(
        refusal(&store, "L13", require("C4", not_a_reference())).await,
        None
    );
}

/// A command's 3 items, one hook counter and 96 more: 100, DynamoDB's limit.
async fn write_100(store: &Store, base: &str, mut guards: Vec<Guard>) {
    guards.push(Guard::counter("t1", "hook", 1, 5).unwrap());
    let item = version_in("LOAN#t1", base, 1);
    let record = record(&format!("rec-{base}"), &item);
    let tables = store.tables();
    let keys = CommandKeys {
        tables,
        pk: &item.pk,
        sk: &item.sk,
        record: Some(&record.key),
    };
    let prepared: Vec<Guard> = prepare(guards.into_iter().map(|g| (g, ())).collect(), &keys)
        .unwrap()
        .into_iter()
        .map(|(g, ())| g)
        .collect();
    assert_eq!(prepared.len(), MAX_GUARDS);
    store
        .write_version_constrained(&item, None, Some(&record), &prepared, None)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_largest_transaction_of_each_constraint_type_is_accepted() {
    let (store, t) = store().await;
    let values = |i: usize| vec![format!("v{i}")];
    // 48 unique moves: release an old value, claim a new one (96 guards).
    let unique: Vec<Guard> = (0..48)
        .flat_map(|i| {
            let old = guard_key("t1", "loan", &format!("u{i}"), &values(0));
            let new = guard_key("t1", "loan", &format!("u{i}"), &values(1));
            [
                Guard::Release {
                    key: old,
                    owner_pk: "LOAN#t1".into(),
                    owner_sk: "U".into(),
                },
                Guard::Claim {
                    key: new,
                    owner_pk: "LOAN#t1".into(),
                    owner_sk: "U".into(),
                    values: values(1),
                    constraint: format!("loan.u{i}"),
                },
            ]
        })
        .collect();
    write_100(&store, "U", unique).await;
    let claimed = guard_key("t1", "loan", "u47", &values(1));
    assert!(get(&t, &claimed).await.is_some());

    // 48 limit moves: leave a group, join another (96 guards).
    let token = member_token("LOAN#t1", "G");
    let limit: Vec<Guard> = (0..48)
        .flat_map(|i| {
            [
                Guard::Leave {
                    key: guard_key("t1", "loan", &format!("l{i}"), &values(0)),
                    token: token.clone(),
                },
                Guard::Join {
                    key: guard_key("t1", "loan", &format!("l{i}"), &values(1)),
                    token: token.clone(),
                    at_most: 3,
                    values: values(1),
                    constraint: format!("loan.l{i}"),
                },
            ]
        })
        .collect();
    write_100(&store, "G", limit).await;
    assert_eq!(
        store
            .limit_members(&guard_key("t1", "loan", "l47", &values(1)))
            .await
            .unwrap(),
        1
    );

    // 96 reference checks + the hook counter = 97: each on a head with a current mirror.
    for i in 0..96 {
        let copy = version_in("COPY#t1", &format!("R{i}"), 1);
        store
            .write_version_constrained(&copy, None, None, &[], Some(&mirror(false, Some("false"))))
            .await
            .unwrap();
    }
    let references: Vec<Guard> = (0..96)
        .map(|i| require(&format!("R{i}"), not_a_reference()))
        .collect();
    write_100(&store, "R", references).await;

    // 97 reference checks and no hook guard: also 100 items.
    let item = version_in("LOAN#t1", "R97", 1);
    let copy = version_in("COPY#t1", "R96", 1);
    store
        .write_version_constrained(&copy, None, None, &[], Some(&mirror(false, None)))
        .await
        .unwrap();
    let references: Vec<Guard> = (0..97)
        .map(|i| require(&format!("R{i}"), not_a_reference()))
        .collect();
    store
        .write_version_constrained(
            &item,
            None,
            Some(&record("rec-R97", &item)),
            &references,
            None,
        )
        .await
        .unwrap();
    assert_eq!(store.get_head("LOAN#t1", "R97").await.unwrap(), Some(1));
}

#[tokio::test]
async fn ninety_eight_guards_are_refused_before_any_call() {
    let log = CallLog::default();
    let t = cqrs_testkit::fresh_tables().await;
    let store = Store::new(
        log.client(&t.client),
        Tables::new(&t.command, &t.data, &t.history, &t.idempotency),
    );
    let item = version_in("LOAN#t1", "X", 1);
    let keys = CommandKeys {
        tables: store.tables(),
        pk: &item.pk,
        sk: &item.sk,
        record: None,
    };
    let guards: Vec<(Guard, ())> = (0..98)
        .map(|i| {
            let guard = Guard::Claim {
                key: guard_key("t1", "loan", &format!("u{i}"), &["a".into()]),
                owner_pk: item.pk.clone(),
                owner_sk: "X".into(),
                values: vec!["a".into()],
                constraint: format!("loan.u{i}"),
            };
            (guard, ())
        })
        .collect();
    assert_eq!(
        prepare(guards, &keys).unwrap_err(),
        GuardError::TooMany { count: 98 }
    );
    assert!(log.calls().is_empty(), "{:?}", log.operations());
    // A guard on the command's own head (a self-reference) is refused as well.
    let own = Guard::RequireHead {
        pk: item.pk.clone(),
        sk: "X".into(),
        condition: HeadCondition::default(),
    };
    assert!(matches!(
        prepare(vec![(own, ())], &keys).unwrap_err(),
        GuardError::OnCommandItem {
            what: "its own head",
            ..
        }
    ));
    assert!(log.calls().is_empty(), "{:?}", log.operations());
}

/// Writes `guards` with version 1 of `LOAN#t1 / base`, trying again on a transaction conflict
/// (concurrent transactions on one guard item are cancelled, as a client would be told 409).
async fn settle(store: Store, base: String, guards: Vec<Guard>) -> Result<(), StoreError> {
    loop {
        match write(&store, &base, &guards).await {
            Err(StoreError::WriteConflict(_)) => continue,
            other => return other,
        }
    }
}

#[tokio::test]
async fn twenty_concurrent_writers_never_pass_a_bound_or_share_a_value() {
    let (store, _t) = store().await;
    let group = guard_key("t1", "loan", "loans_out", &["m1".into()]);
    let value = guard_key("t1", "loan", "ref", &["x".into()]);
    let writers = (0..20).map(|i| {
        let store = store.clone();
        let base = format!("W{i}");
        let guards = vec![join(&group, &base, 3)];
        tokio::spawn(settle(store, base, guards))
    });
    let results = futures::future::join_all(writers).await;
    let written = results.iter().filter(|r| matches!(r, Ok(Ok(())))).count();
    let refused = results
        .iter()
        .filter(|r| matches!(r, Ok(Err(StoreError::GuardFailed { index: 0, .. }))))
        .count();
    assert_eq!((written, refused), (3, 17), "{results:?}");
    assert_eq!(store.limit_members(&group).await.unwrap(), 3);

    let writers = (0..20).map(|i| {
        let store = store.clone();
        let base = format!("U{i}");
        let guards = vec![Guard::Claim {
            key: value.clone(),
            owner_pk: "LOAN#t1".into(),
            owner_sk: base.clone(),
            values: vec!["x".into()],
            constraint: "loan.ref".into(),
        }];
        tokio::spawn(settle(store, base, guards))
    });
    let results = futures::future::join_all(writers).await;
    let written = results.iter().filter(|r| matches!(r, Ok(Ok(())))).count();
    assert_eq!(written, 1, "{results:?}");
}
