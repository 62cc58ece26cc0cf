//! `constraints::plan`, pure (no DynamoDB): the guard moves of every row of design 38's table
//! (create, create deleted, update with values unchanged and changed, condition flips, a moving
//! group, soft delete, restore, update of a deleted item), the references checked only when the
//! item enters the live state or names another target, a self-reference evaluated in memory, and
//! the head mirror of a referenced entity.

use cqrs_item::Item;
use cqrs_keys::{guard_key, member_token};
use cqrs_model::Model;
use cqrs_store::constraints::{Violation, plan};
use cqrs_store::guard::{Guard, HeadCondition};

const MODEL: &str = r#"
[entities.copy]
pk = "COPY#{tenant}"
sk = "{copyId}"
attributes.copyId = { type = "string", required = true, max = 40 }
attributes.isbn = { type = "string", required = true, max = 13 }
attributes.copyNo = { type = "number", required = true }
attributes.reference = { type = "boolean" }
unique.copy_number = { attributes = ["isbn", "copyNo"] }
unique.barcode = { attributes = "barcode", scope = "global" }
attributes.barcode = { type = "string", max = 20 }

[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
attributes.loanId = { type = "string", required = true, max = 26 }
attributes.memberId = { type = "string", required = true, max = 40 }
attributes.copyId = { type = "string", required = true, max = 40 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }
limits.loans_out = { per = "memberId", when = { status = ["out"] }, at_most = 3 }
references.copy = { entity = "copy", unless = { reference = ["true"] } }

[entities.node]
pk = "NODE#{tenant}"
sk = "{nodeId}"
attributes.nodeId = { type = "string", required = true, max = 20 }
attributes.parentId = { type = "string", max = 20 }
attributes.open = { type = "boolean" }
references.parent = { entity = "node", key = { nodeId = "parentId" }, when = { open = ["true"] } }
"#;

fn model() -> Model {
    Model::parse(MODEL).unwrap()
}

fn item(pk: &str, base: &str, version: i64, deleted: bool, json: &str) -> Item {
    let mut item = Item::example();
    item.pk = pk.into();
    item.sk = cqrs_keys::add_sort_key_version(base, version);
    item.id = cqrs_keys::generate_id(pk, base);
    item.version = version;
    item.is_deleted = deleted;
    item.attributes = serde_json::from_str(json).unwrap();
    item
}

fn loan(version: i64, deleted: bool, member: &str, status: &str, copy: &str) -> Item {
    let json =
        format!(r#"{{"loanId":"L1","memberId":"{member}","status":"{status}","copyId":"{copy}"}}"#);
    item("LOAN#t1", "L1", version, deleted, &json)
}

fn copy(version: i64, deleted: bool, isbn: &str, no: u32) -> Item {
    let json = format!(r#"{{"copyId":"C1","isbn":"{isbn}","copyNo":{no}}}"#);
    item("COPY#t1", "C1", version, deleted, &json)
}

/// The guards of a plan, shown compactly: `claim <values>`, `release <values>`, `join <group>`,
/// `leave <group>`, `require <pk>/<sk>`.
fn moves(model: &Model, entity: &str, base: Option<&Item>, new: &Item) -> Vec<String> {
    let entity = model.entity(entity).unwrap();
    let plan = cqrs_store::constraints::plan(model, entity, "t1", base, new).unwrap();
    plan.guards
        .iter()
        .map(|(guard, violation)| {
            let values = match violation {
                Violation::Unique { values, .. } => values.join(","),
                Violation::Limit { group, .. } => group.join(","),
                Violation::Reference {
                    target_pk,
                    target_sk,
                    ..
                } => format!("{target_pk}/{target_sk}"),
                Violation::Drift { key, .. } => key.clone(),
            };
            let kind = match guard {
                Guard::Claim { .. } => "claim",
                Guard::Release { .. } => "release",
                Guard::Join { .. } => "join",
                Guard::Leave { .. } => "leave",
                Guard::RequireHead { .. } => "require",
                _ => "other",
            };
            format!("{kind} {values}")
        })
        .collect()
}

#[test]
fn unique_moves_for_every_state_change() {
    let m = model();
    let key = |values: &[&str]| {
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        guard_key("t1", "copy", "copy_number", &values)
    };
    // Create: claim, with the owner's base sort key; nothing read for it.
    let created = copy(1, false, "978", 2);
    let plan =
        cqrs_store::constraints::plan(&m, m.entity("copy").unwrap(), "t1", None, &created).unwrap();
    assert_eq!(plan.guards.len(), 1);
    let (
        Guard::Claim {
            key: claimed,
            owner_pk,
            owner_sk,
            values,
            constraint,
        },
        _,
    ) = &plan.guards[0]
    else {
        panic!("{:?}", plan.guards)
    };
    assert_eq!(claimed, &key(&["978", "2"]));
    assert_eq!((owner_pk.as_str(), owner_sk.as_str()), ("COPY#t1", "C1"));
    assert_eq!(values, &["978", "2"]);
    assert_eq!(constraint, "copy.copy_number");
    // Create deleted: nothing.
    assert!(moves(&m, "copy", None, &copy(1, true, "978", 2)).is_empty());
    // Update, value unchanged: nothing.
    assert!(moves(&m, "copy", Some(&created), &copy(2, false, "978", 2)).is_empty());
    // Update u -> u': release u, claim u'.
    assert_eq!(
        moves(&m, "copy", Some(&created), &copy(2, false, "978", 3)),
        [
            format!("release {}", key(&["978", "2"])),
            "claim 978,3".to_string()
        ]
    );
    // Soft delete: release.
    assert_eq!(
        moves(&m, "copy", Some(&created), &copy(2, true, "978", 2)),
        [format!("release {}", key(&["978", "2"]))]
    );
    // Restore: claim (may be taken now).
    assert_eq!(
        moves(
            &m,
            "copy",
            Some(&copy(2, true, "978", 2)),
            &copy(3, false, "978", 2)
        ),
        ["claim 978,2"]
    );
    // Update of a deleted item: nothing, even with another value.
    assert!(
        moves(
            &m,
            "copy",
            Some(&copy(2, true, "978", 2)),
            &copy(3, true, "979", 5)
        )
        .is_empty()
    );
    // An absent attribute holds no value: a global barcode appears, then goes.
    let with_barcode = item(
        "COPY#t1",
        "C1",
        2,
        false,
        r#"{"copyId":"C1","isbn":"978","copyNo":2,"barcode":"B-7"}"#,
    );
    let plan = cqrs_store::constraints::plan(
        &m,
        m.entity("copy").unwrap(),
        "t1",
        Some(&created),
        &with_barcode,
    )
    .unwrap();
    let Guard::Claim { key: global, .. } = &plan.guards[0].0 else {
        panic!("{:?}", plan.guards)
    };
    assert_eq!(*global, guard_key("@", "copy", "barcode", &["B-7".into()]));
    assert_eq!(
        moves(&m, "copy", Some(&with_barcode), &copy(3, false, "978", 2)),
        [format!("release {global}")]
    );
}

#[test]
fn limit_moves_for_every_state_change() {
    let m = model();
    let out = loan(1, false, "m1", "out", "C1");
    let back = loan(2, false, "m1", "returned", "C1");
    // Create (condition holds): join; create returned: nothing; create deleted: nothing.
    assert_eq!(
        moves(&m, "loan", None, &out),
        ["join m1", "require COPY#t1/C1"]
    );
    assert_eq!(
        moves(&m, "loan", None, &loan(1, false, "m1", "returned", "C1")),
        ["require COPY#t1/C1"]
    );
    assert!(moves(&m, "loan", None, &loan(1, true, "m1", "out", "C1")).is_empty());
    // Update, group and condition unchanged: nothing.
    assert!(moves(&m, "loan", Some(&out), &loan(2, false, "m1", "out", "C1")).is_empty());
    // Condition true -> false (a return): leave; false -> true: join.
    assert_eq!(moves(&m, "loan", Some(&out), &back), ["leave m1"]);
    assert_eq!(
        moves(&m, "loan", Some(&back), &loan(3, false, "m1", "out", "C1")),
        ["join m1"]
    );
    // Group g -> g' while the condition holds: leave g, join g' (bounded).
    assert_eq!(
        moves(&m, "loan", Some(&out), &loan(2, false, "m2", "out", "C1")),
        ["leave m1", "join m2"]
    );
    // Group moves while returned: nothing.
    assert!(
        moves(
            &m,
            "loan",
            Some(&back),
            &loan(3, false, "m2", "returned", "C1")
        )
        .is_empty()
    );
    // Soft delete while out: leave (frees the slot); restore: join; update of a deleted item: nothing.
    let deleted = loan(2, true, "m1", "out", "C1");
    assert_eq!(moves(&m, "loan", Some(&out), &deleted), ["leave m1"]);
    assert_eq!(
        moves(
            &m,
            "loan",
            Some(&deleted),
            &loan(3, false, "m1", "out", "C1")
        ),
        ["join m1", "require COPY#t1/C1"]
    );
    assert!(
        moves(
            &m,
            "loan",
            Some(&deleted),
            &loan(3, true, "m2", "out", "C2")
        )
        .is_empty()
    );
    // The join's token and bound.
    let plan =
        cqrs_store::constraints::plan(&m, m.entity("loan").unwrap(), "t1", None, &out).unwrap();
    let Guard::Join {
        key,
        token,
        at_most,
        values,
        constraint,
    } = &plan.guards[0].0
    else {
        panic!("{:?}", plan.guards)
    };
    assert_eq!(key, &guard_key("t1", "loan", "loans_out", &["m1".into()]));
    assert_eq!(token, &member_token("LOAN#t1", "L1"));
    assert_eq!((*at_most, values.as_slice()), (3, &["m1".to_string()][..]));
    assert_eq!(constraint, "loan.loans_out");
}

#[test]
fn references_are_checked_when_the_item_enters_the_live_state_or_names_another_target() {
    let m = model();
    let out = loan(1, false, "m1", "out", "C1");
    let plan =
        cqrs_store::constraints::plan(&m, m.entity("loan").unwrap(), "t1", None, &out).unwrap();
    let (Guard::RequireHead { pk, sk, condition }, violation) = &plan.guards[1] else {
        panic!("{:?}", plan.guards)
    };
    assert_eq!((pk.as_str(), sk.as_str()), ("COPY#t1", "C1"));
    assert_eq!(
        condition,
        &HeadCondition {
            live: true,
            unless: [("reference".to_string(), vec!["true".to_string()])].into(),
            ..HeadCondition::default()
        }
    );
    assert_eq!(
        violation,
        &Violation::Reference {
            constraint: "loan.copy".into(),
            target_pk: "COPY#t1".into(),
            target_sk: "C1".into()
        }
    );
    // Another copy: checked; same copy (a return): not checked; deleted: never checked.
    assert_eq!(
        moves(&m, "loan", Some(&out), &loan(2, false, "m1", "out", "C2")),
        ["require COPY#t1/C2"]
    );
    assert!(
        moves(&m, "loan", Some(&out), &loan(2, true, "m1", "out", "C2"))
            .iter()
            .all(|g| !g.starts_with("require"))
    );
    // The loan is not referenced: no mirror. The copy is: its mirror, with the mirrored attribute.
    assert!(plan.mirror.is_none());
    let reference_copy = item(
        "COPY#t1",
        "C9",
        1,
        false,
        r#"{"copyId":"C9","isbn":"1","copyNo":1,"reference":true}"#,
    );
    let copy_plan =
        cqrs_store::constraints::plan(&m, m.entity("copy").unwrap(), "t1", None, &reference_copy)
            .unwrap();
    let mirror = copy_plan.mirror.unwrap();
    assert!(!mirror.is_deleted);
    assert_eq!(mirror.attributes["reference"], "true");
    let deleted = cqrs_store::constraints::plan(
        &m,
        m.entity("copy").unwrap(),
        "t1",
        Some(&reference_copy),
        &copy(2, true, "1", 1),
    )
    .unwrap();
    let mirror = deleted.mirror.unwrap();
    assert!(mirror.is_deleted && mirror.attributes.is_empty());
}

#[test]
fn a_reference_to_the_item_itself_is_evaluated_in_memory() {
    let m = model();
    let node = m.entity("node").unwrap();
    // Parent n1 of n2: a head check of n1.
    let child = item(
        "NODE#t1",
        "n2",
        1,
        false,
        r#"{"nodeId":"n2","parentId":"n1"}"#,
    );
    let p = cqrs_store::constraints::plan(&m, node, "t1", None, &child).unwrap();
    assert!(matches!(&p.guards[..], [(Guard::RequireHead { sk, .. }, _)] if sk == "n1"));
    assert!(p.refused.is_none());
    assert!(
        p.mirror.is_some(),
        "node is referenced: its heads carry the mirror"
    );
    // Its own parent, open: no guard (it would be on the command's own head), accepted.
    let own_open = item(
        "NODE#t1",
        "n1",
        1,
        false,
        r#"{"nodeId":"n1","parentId":"n1","open":true}"#,
    );
    let p = cqrs_store::constraints::plan(&m, node, "t1", None, &own_open).unwrap();
    assert!(p.guards.is_empty() && p.refused.is_none(), "{p:?}");
    assert_eq!(p.mirror.unwrap().attributes["open"], "true");
    // Its own parent, not open: refused in memory, nothing to send.
    let own_closed = item(
        "NODE#t1",
        "n1",
        1,
        false,
        r#"{"nodeId":"n1","parentId":"n1","open":false}"#,
    );
    let p = cqrs_store::constraints::plan(&m, node, "t1", None, &own_closed).unwrap();
    assert!(p.guards.is_empty());
    assert_eq!(
        p.refused,
        Some(Violation::Reference {
            constraint: "node.parent".into(),
            target_pk: "NODE#t1".into(),
            target_sk: "n1".into()
        })
    );
    // No parent: no reference.
    let root = item("NODE#t1", "n0", 1, false, r#"{"nodeId":"n0"}"#);
    assert!(plan(&m, node, "t1", None, &root).unwrap().guards.is_empty());
}
