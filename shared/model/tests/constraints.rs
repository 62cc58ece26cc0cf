//! The declared constraints of issue 38 (`unique`, `limits`, `references`, `roles`): parsed into the
//! model, evaluated by the pure functions the store and the command handler share, and absent from a
//! model that does not declare them (which behaves, and is revised, exactly as before).

use std::collections::{BTreeMap, BTreeSet};

use cqrs_model::{
    Condition, Model, Scope, ValueRef, WriteOp, WriteRule, guard_budget, lint_source,
};

/// The lending library with its rules as declarations (the README's example).
pub const LIBRARY: &str = r#"
[entities.member]
pk = "MEMBER#{tenant}"
sk = "{memberId}"
attributes.memberId = { type = "string", required = true, max = 40 }
attributes.name = { type = "string", required = true, max = 100 }
attributes.tier = { type = "enum", values = ["basic", "plus"], required = true }

[entities.copy]
pk = "COPY#{tenant}"
sk = "{copyId}"
attributes.copyId = { type = "string", required = true, max = 40 }
attributes.isbn = { type = "string", required = true, max = 13, case = "upper" }
attributes.copyNo = { type = "number", required = true }
attributes.reference = { type = "boolean" }
unique.copy_number = { attributes = ["isbn", "copyNo"] }
roles = { create = ["librarian"], update = ["librarian"], delete = ["librarian"] }

[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
id = "loanId"
attributes.loanId = { type = "string", max = 26 }
attributes.memberId = { type = "string", required = true, max = 40 }
attributes.copyId = { type = "string", required = true, max = 40 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }
limits.loans_out = { per = "memberId", when = { status = ["out"] }, at_most = 3 }
references.copy = { entity = "copy", unless = { reference = ["true"] } }
references.member = { entity = "member" }
roles = { create = ["librarian"], update = ["librarian"] }
"#;

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_model_without_the_new_keys_is_todays_model() {
    // The revision is the model file's digest: the same text gives the same revision as before
    // issue 38 (values printed by d3cc2ac's code for the same files). The library's model as of
    // d3cc2ac is kept in fixtures/ (tests/library/model.toml itself now declares constraints).
    let files = [
        (cqrs_model::EXAMPLE_TOML, "example"),
        (include_str!("fixtures/library-d3cc2ac.toml"), "library"),
        (
            include_str!("../../../tests/upgrade/48d8ccf/model.toml"),
            "upgrade 48d8ccf",
        ),
    ];
    for (text, what) in files {
        let model = Model::parse(text).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            model.revision(),
            format!("{:016x}", cqrs_keys::fnv1a_64(text.as_bytes())),
            "{what}"
        );
        for entity in model.entities() {
            assert!(entity.unique.is_empty(), "{what}: {}", entity.name);
            assert!(entity.limits.is_empty(), "{what}: {}", entity.name);
            assert!(entity.references.is_empty(), "{what}: {}", entity.name);
            assert!(entity.roles.is_empty(), "{what}: {}", entity.name);
            assert!(!entity.has_constraints());
            assert_eq!(guard_budget(entity), 0);
            assert!(!model.is_referenced(&entity.name));
            assert!(model.mirrored(&entity.name).is_empty());
        }
        // No lint finding of the new rules.
        let report = lint_source(text).unwrap();
        assert!(
            report.findings.iter().all(|f| !matches!(
                f.rule,
                "hot-guard" | "unique-low-cardinality" | "large-guard"
            )),
            "{what}: {:#?}",
            report.findings
        );
    }
    // The example as d3cc2ac had it: today's without the consumer it declares since (issue 39).
    let (example, _) = cqrs_model::EXAMPLE_TOML
        .split_once("\n# The service's consumer of its own change events")
        .unwrap();
    assert_eq!(Model::parse(example).unwrap().revision(), REVISIONS[0]);
    assert_eq!(
        Model::parse(include_str!("fixtures/library-d3cc2ac.toml"))
            .unwrap()
            .revision(),
        REVISIONS[1]
    );
    assert_eq!(
        Model::parse(include_str!("../../../tests/upgrade/48d8ccf/model.toml"))
            .unwrap()
            .revision(),
        REVISIONS[2]
    );
}

/// The revisions of the example, the library and the 48d8ccf upgrade models, as d3cc2ac gives them.
const REVISIONS: [&str; 3] = ["2d3d644cd12ccdf5", "7d9664d3ce6fe685", "ccd3ba1fb940ca08"];

#[test]
fn the_library_declarations_parse() {
    let model = Model::parse(LIBRARY).unwrap_or_else(|e| panic!("{e}"));
    let copy = model.entity("copy").unwrap();
    assert_eq!(copy.unique.len(), 1);
    assert_eq!(copy.unique[0].name, "copy_number");
    assert_eq!(copy.unique[0].attributes, strings(&["isbn", "copyNo"]));
    assert_eq!(copy.unique[0].scope, Scope::Tenant);
    assert_eq!(
        copy.roles.roles(WriteOp::Delete),
        Some(&strings(&["librarian"])[..])
    );
    assert_eq!(guard_budget(copy), 2);

    let loan = model.entity("loan").unwrap();
    let limit = &loan.limits[0];
    assert_eq!(limit.name, "loans_out");
    assert_eq!(limit.per, strings(&["memberId"]));
    assert_eq!(limit.at_most, 3);
    assert_eq!(
        limit.condition,
        Condition {
            when: BTreeMap::from([("status".into(), strings(&["out"]))]),
            unless: BTreeMap::new(),
        }
    );
    let names: Vec<&str> = loan.references.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["copy", "member"]);
    assert_eq!(
        loan.references[0].key,
        BTreeMap::from([("copyId".to_string(), "copyId".to_string())])
    );
    assert_eq!(
        loan.references[1].key,
        BTreeMap::from([("memberId".to_string(), "memberId".to_string())])
    );
    assert_eq!(loan.roles.roles(WriteOp::Delete), None);
    assert_eq!(
        loan.roles,
        WriteRule {
            create: Some(strings(&["librarian"])),
            update: Some(strings(&["librarian"])),
            delete: None,
        }
    );
    assert_eq!(guard_budget(loan), 4);

    assert!(model.is_referenced("copy"));
    assert!(model.is_referenced("member"));
    assert!(!model.is_referenced("loan"));
    assert_eq!(
        model.mirrored("copy"),
        BTreeSet::from(["reference".to_string()])
    );
    assert!(model.mirrored("member").is_empty());
    assert_eq!(model.referenced_by("copy").len(), 1);
}

#[test]
fn unique_values_are_key_parts_and_absent_when_deleted_or_missing() {
    let model = Model::parse(LIBRARY).unwrap();
    let copy = model.entity("copy").unwrap();
    let unique = &copy.unique[0];
    let a = [
        ("isbn", ValueRef::Str("97801x")),
        ("copyNo", ValueRef::Num("007")),
    ];
    // `case = "upper"` and the number's key part (no leading zeros).
    assert_eq!(
        unique.value(copy, &a, false),
        Some(strings(&["97801X", "7"]))
    );
    let b = [
        ("isbn", ValueRef::Str("97801X")),
        ("copyNo", ValueRef::Num("7.0")),
    ];
    assert_eq!(unique.value(copy, &b, false), unique.value(copy, &a, false));
    assert_eq!(unique.value(copy, &a, true), None);
    assert_eq!(
        unique.value(
            copy,
            &[("isbn", ValueRef::Str("1")), ("copyNo", ValueRef::Null)],
            false
        ),
        None
    );
    // A value no key could hold still constrains (it goes into a digest, never into a key).
    let hashed = [
        ("isbn", ValueRef::Str("a#b")),
        ("copyNo", ValueRef::Num("-1.50")),
    ];
    assert_eq!(
        unique.value(copy, &hashed, false),
        Some(strings(&["A#B", "-15E-1"]))
    );
}

#[test]
fn limit_groups_follow_the_condition_and_the_grouping_attribute() {
    let model = Model::parse(LIBRARY).unwrap();
    let loan = model.entity("loan").unwrap();
    let limit = &loan.limits[0];
    let out = [
        ("memberId", ValueRef::Str("m1")),
        ("status", ValueRef::Str("out")),
    ];
    let moved = [
        ("memberId", ValueRef::Str("m2")),
        ("status", ValueRef::Str("out")),
    ];
    let back = [
        ("memberId", ValueRef::Str("m1")),
        ("status", ValueRef::Str("returned")),
    ];
    assert_eq!(limit.group(loan, &out, false), Some(strings(&["m1"])));
    assert_eq!(limit.group(loan, &moved, false), Some(strings(&["m2"])));
    assert_eq!(limit.group(loan, &back, false), None);
    assert_eq!(limit.group(loan, &out, true), None);
    assert_eq!(
        limit.group(loan, &[("status", ValueRef::Str("out"))], false),
        None
    );

    let per_tenant = Model::parse(&LIBRARY.replace("per = \"memberId\", ", "")).unwrap();
    let loan = per_tenant.entity("loan").unwrap();
    assert_eq!(loan.limits[0].per, Vec::<String>::new());
    assert_eq!(loan.limits[0].group(loan, &out, false), Some(Vec::new()));
}

#[test]
fn references_name_the_target_by_its_key() {
    let model = Model::parse(LIBRARY).unwrap();
    let loan = model.entity("loan").unwrap();
    let copy_ref = &loan.references[0];
    let copy = model.entity("copy").unwrap();
    let item = [
        ("copyId", ValueRef::Str("C-17")),
        ("memberId", ValueRef::Str("m1")),
    ];
    assert_eq!(
        copy_ref.target_attributes(&item),
        Some(vec![("copyId", ValueRef::Str("C-17"))])
    );
    assert_eq!(
        copy_ref.target_key(copy, "t1", &item),
        Some(Ok(("COPY#t1".to_string(), "C-17".to_string())))
    );
    assert!(
        copy_ref
            .target_key(copy, "t1", &[("copyId", ValueRef::Null)])
            .is_none()
    );
    let other = [
        ("copyId", ValueRef::Str("C-18")),
        ("memberId", ValueRef::Str("m1")),
    ];
    assert!(copy_ref.changed(&item, &other));
    assert!(!copy_ref.changed(&item, &[("copyId", ValueRef::Str("C-17"))]));
    // The condition applies to the target.
    assert!(
        copy_ref
            .condition
            .holds(&[("reference", ValueRef::Bool(false))])
    );
    assert!(
        !copy_ref
            .condition
            .holds(&[("reference", ValueRef::Bool(true))])
    );
}

#[test]
fn a_reference_maps_other_names_and_a_common_target_takes_the_common_tenant() {
    let model = Model::parse(
        r#"
[entities.branch]
common = true
pk = "BRANCH#common"
sk = "{region}#{branchCode}"
attributes.region = { type = "enum", values = ["north", "south"], required = true }
attributes.branchCode = { type = "string", required = true, max = 8 }

[entities.visit]
pk = "VISIT#{tenant}"
sk = "{visitId}"
attributes.visitId = { type = "string", required = true, max = 26 }
attributes.area = { type = "enum", values = ["north", "south"] }
attributes.branch = { type = "string", max = 8 }
references.at = { entity = "branch", key = { region = "area", branchCode = "branch" } }
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let visit = model.entity("visit").unwrap();
    let branch = model.entity("branch").unwrap();
    let at = &visit.references[0];
    let item = [
        ("area", ValueRef::Str("north")),
        ("branch", ValueRef::Str("B1")),
    ];
    assert_eq!(
        at.target_key(branch, "t1", &item),
        Some(Ok(("BRANCH#common".to_string(), "north#B1".to_string())))
    );
    // One of the two absent: no reference.
    assert!(
        at.target_key(branch, "t1", &[("area", ValueRef::Str("north"))])
            .is_none()
    );
}

#[test]
fn unique_takes_one_attribute_or_a_tuple_and_a_global_scope() {
    let model = Model::parse(
        r#"
[entities.user]
pk = "USER#{tenant}"
sk = "{userId}"
attributes.userId = { type = "string", required = true, max = 26 }
attributes.email = { type = "string", max = 254, case = "lower" }
attributes.handle = { type = "string", max = 30 }
unique.email = { attributes = "email", scope = "global" }
unique.handle = { attributes = ["handle"] }
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let user = model.entity("user").unwrap();
    assert_eq!(user.unique[0].name, "email");
    assert_eq!(user.unique[0].scope, Scope::Global);
    assert_eq!(user.unique[1].scope, Scope::Tenant);
    assert_eq!(
        user.unique[0].value(user, &[("email", ValueRef::Str("A@B.example"))], false),
        Some(strings(&["a@b.example"]))
    );
    assert_eq!(guard_budget(user), 4);
}
