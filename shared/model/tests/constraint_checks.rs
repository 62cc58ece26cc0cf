//! Every refusal of the model check for the declared constraints of issue 38 (`unique`, `limits`,
//! `references`, `roles`): each a small model that should be refused, the error naming the entity
//! and the field; and the models that should pass.

use cqrs_model::{Model, ModelError};

/// Two entities to build on: a copy (referenced) and a loan (constrained).
const BASE: &str = r#"
[entities.copy]
pk = "COPY#{tenant}"
sk = "{copyId}"
attributes.copyId = { type = "string", required = true, max = 40 }
attributes.isbn = { type = "string", required = true, max = 13 }
attributes.copyNo = { type = "number" }
attributes.note = { type = "string" }
attributes.state = { type = "enum", values = ["shelf", "repair"] }
attributes.reference = { type = "boolean" }
attributes.tags = { type = "list" }
attributes.extra = { type = "map" }

[entities.settings]
common = true
pk = "SETTINGS#common"
sk = "{code}"
attributes.code = { type = "string", required = true, max = 20 }

[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
attributes.loanId = { type = "string", required = true, max = 26 }
attributes.memberId = { type = "string", required = true, max = 40 }
attributes.copyId = { type = "string", required = true, max = 40 }
attributes.copyNumber = { type = "number" }
attributes.code = { type = "string", max = 20 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }
attributes.lines = { type = "list" }
attributes.due = { type = "timestamp" }
"#;

fn errors(extra: &str) -> Vec<ModelError> {
    match Model::parse(&format!("{BASE}{extra}")) {
        Ok(_) => Vec::new(),
        Err(e) => e.0,
    }
}

/// Asserts that the expected problem is found: place, field and a word of the message.
#[track_caller]
fn assert_error(extra: &str, place: &str, field: &str, word: &str) {
    let found = errors(extra);
    assert!(
        found
            .iter()
            .any(|e| e.place == place && e.field == field && e.message.contains(word)),
        "expected {place} / {field} / {word:?}, got {found:#?}"
    );
}

#[track_caller]
fn assert_passes(extra: &str) {
    assert_eq!(errors(extra), Vec::new());
}

const LOAN: &str = "entity `loan`";

#[test]
fn the_base_and_well_formed_constraints_pass() {
    assert_passes("");
    assert_passes(
        r#"unique.one_out = { attributes = ["copyId", "copyNumber"], scope = "global" }
limits.loans_out = { per = ["memberId"], when = { status = ["out"] }, unless = { code = ["x"] }, at_most = 100 }
limits.everything = { at_most = 1 }
references.copy = { entity = "copy", when = { state = ["shelf"] }, unless = { reference = ["true"] } }
references.setting = { entity = "settings", key = { code = "code" } }
roles = { create = ["librarian"], delete = ["librarian", "admin"] }
"#,
    );
}

#[test]
fn unique_attributes_must_be_declared_values() {
    assert_error(
        "unique.u = { attributes = [\"nope\"] }\n",
        LOAN,
        "unique.u.attributes",
        "\"nope\" is not an attribute",
    );
    assert_error(
        "unique.u = { attributes = \"lines\" }\n",
        LOAN,
        "unique.u.attributes",
        "is a list",
    );
    assert_error(
        "unique.u = { attributes = [] }\n",
        LOAN,
        "unique.u.attributes",
        "at least one",
    );
    assert_error(
        "unique.u = { attributes = [\"code\", \"code\"] }\n",
        LOAN,
        "unique.u.attributes",
        "twice",
    );
}

#[test]
fn a_map_is_no_unique_or_grouping_value() {
    // On the copy entity: a map attribute.
    let found = match Model::parse(&BASE.replace(
        "attributes.extra = { type = \"map\" }",
        "attributes.extra = { type = \"map\" }\nunique.x = { attributes = \"extra\" }\nlimits.y = { per = \"extra\", at_most = 2 }",
    )) {
        Ok(_) => Vec::new(),
        Err(e) => e.0,
    };
    for field in ["unique.x.attributes", "limits.y.per"] {
        assert!(
            found.iter().any(|e| e.place == "entity `copy`"
                && e.field == field
                && e.message.contains("is a map")),
            "{field}: {found:#?}"
        );
    }
}

#[test]
fn unique_scope_is_tenant_or_global() {
    assert_error(
        "unique.u = { attributes = \"code\", scope = \"world\" }\n",
        LOAN,
        "unique.u.scope",
        "\"world\"",
    );
}

#[test]
fn limit_per_and_conditions_name_declared_attributes_and_values() {
    assert_error(
        "limits.l = { per = \"member\", at_most = 3 }\n",
        LOAN,
        "limits.l.per",
        "\"member\" is not an attribute",
    );
    assert_error(
        "limits.l = { per = \"lines\", at_most = 3 }\n",
        LOAN,
        "limits.l.per",
        "is a list",
    );
    assert_error(
        "limits.l = { per = [\"memberId\", \"memberId\"], at_most = 3 }\n",
        LOAN,
        "limits.l.per",
        "twice",
    );
    assert_error(
        "limits.l = { per = \"memberId\", when = { state = [\"out\"] }, at_most = 3 }\n",
        LOAN,
        "limits.l.when.state",
        "not an attribute of the entity",
    );
    assert_error(
        "limits.l = { per = \"memberId\", when = { status = [\"lost\"] }, at_most = 3 }\n",
        LOAN,
        "limits.l.when.status",
        "\"lost\" is not one of",
    );
    assert_error(
        "limits.l = { per = \"memberId\", unless = { status = [\"lost\"] }, at_most = 3 }\n",
        LOAN,
        "limits.l.unless.status",
        "\"lost\" is not one of",
    );
    assert_error(
        "limits.l = { per = \"memberId\", when = { due = [\"x\"] }, at_most = 3 }\n",
        LOAN,
        "limits.l.when.due",
        "conditions take enum, string or boolean",
    );
    assert_error(
        "limits.l = { per = \"memberId\", when = { status = [] }, at_most = 3 }\n",
        LOAN,
        "limits.l.when.status",
        "never holds",
    );
    assert_error(
        "limits.l = { per = \"memberId\", unless = { status = [] }, at_most = 3 }\n",
        LOAN,
        "limits.l.unless.status",
        "excludes nothing",
    );
}

#[test]
fn at_most_is_from_1_to_100() {
    for bad in ["0", "101", "-1", "5000000000"] {
        assert_error(
            &format!("limits.l = {{ per = \"memberId\", at_most = {bad} }}\n"),
            LOAN,
            "limits.l.at_most",
            "is not from 1 to 100",
        );
    }
    assert_passes("limits.l = { per = \"memberId\", at_most = 1 }\n");
}

#[test]
fn references_name_a_known_entity() {
    assert_error(
        "references.r = { entity = \"book\" }\n",
        LOAN,
        "references.r.entity",
        "there is no entity \"book\"",
    );
}

#[test]
fn a_reference_key_covers_the_targets_key_attributes_with_the_same_types() {
    // The default key needs `copyId` on the loan: rename it away.
    let renamed = BASE.replace(
        "attributes.copyId = { type = \"string\", required = true, max = 40 }\nattributes.copyNumber",
        "attributes.copy = { type = \"string\", required = true, max = 40 }\nattributes.copyNumber",
    );
    let found = match Model::parse(&format!(
        "{renamed}references.r = {{ entity = \"copy\" }}\n"
    )) {
        Ok(_) => Vec::new(),
        Err(e) => e.0,
    };
    assert!(
        found.iter().any(|e| e.place == LOAN
            && e.field == "references.r.key.copyId"
            && e.message
                .contains("\"copyId\" is not an attribute of the entity")),
        "{found:#?}"
    );
    assert_error(
        "references.r = { entity = \"copy\", key = { isbn = \"copyId\" } }\n",
        LOAN,
        "references.r.key",
        "use \"copyId\"",
    );
    assert_error(
        "references.r = { entity = \"copy\", key = { copyId = \"copyId\", isbn = \"code\" } }\n",
        LOAN,
        "references.r.key.isbn",
        "not an attribute of `copy`'s keys",
    );
    assert_error(
        "references.r = { entity = \"copy\", key = { copyId = \"copyNumber\" } }\n",
        LOAN,
        "references.r.key.copyId",
        "the types must be the same",
    );
}

#[test]
fn a_reference_to_an_item_keyed_by_created_at_is_refused() {
    let found = errors(
        r#"
[entities.event]
pk = "EVENT#{tenant}"
sk = "{createdAt}#{eventId}"
attributes.eventId = { type = "string", required = true, max = 26 }

[entities.note]
pk = "NOTE#{tenant}"
sk = "{noteId}"
attributes.noteId = { type = "string", required = true, max = 26 }
attributes.eventId = { type = "string", max = 26 }
attributes.createdAt = { type = "timestamp" }
references.event = { entity = "event" }
"#,
    );
    assert!(
        found.iter().any(|e| e.place == "entity `note`"
            && e.field == "references.event.key.createdAt"
            && e.message.contains("set by the server")),
        "{found:#?}"
    );
}

#[test]
fn a_common_entity_references_no_tenant_entity() {
    let found = match Model::parse(&BASE.replace(
        "attributes.code = { type = \"string\", required = true, max = 20 }\n",
        "attributes.code = { type = \"string\", required = true, max = 20 }\nattributes.copyId = { type = \"string\", max = 40 }\nreferences.copy = { entity = \"copy\" }\n",
    )) {
        Ok(_) => Vec::new(),
        Err(e) => e.0,
    };
    assert!(
        found.iter().any(|e| e.place == "entity `settings`"
            && e.field == "references.copy.entity"
            && e.message.contains("no tenant")),
        "{found:#?}"
    );
    // A tenant entity may reference a common one.
    assert_passes("references.s = { entity = \"settings\" }\n");
}

#[test]
fn reference_conditions_read_the_targets_attributes() {
    assert_error(
        "references.r = { entity = \"copy\", when = { status = [\"out\"] } }\n",
        LOAN,
        "references.r.when.status",
        "not an attribute of the target entity `copy`",
    );
    assert_error(
        "references.r = { entity = \"copy\", unless = { state = [\"lost\"] } }\n",
        LOAN,
        "references.r.unless.state",
        "\"lost\" is not one of",
    );
    assert_error(
        "references.r = { entity = \"copy\", unless = { reference = [\"yes\"] } }\n",
        LOAN,
        "references.r.unless.reference",
        "\"true\" or \"false\"",
    );
    assert_error(
        "references.r = { entity = \"copy\", when = { copyNo = [\"1\"] } }\n",
        LOAN,
        "references.r.when.copyNo",
        "conditions take enum, string or boolean",
    );
}

#[test]
fn a_mirrored_string_needs_a_max() {
    assert_error(
        "references.r = { entity = \"copy\", unless = { note = [\"lost\"] } }\n",
        LOAN,
        "references.r.unless.note",
        "declare its `max`",
    );
    assert_passes("references.r = { entity = \"copy\", unless = { isbn = [\"0\"] } }\n");
}

#[test]
fn constraint_names_are_key_safe_and_distinct() {
    assert_error(
        "unique.\"a#b\" = { attributes = \"code\" }\n",
        LOAN,
        "unique.a#b",
        "lower-case letters",
    );
    assert_error(
        "unique.x = { attributes = \"code\" }\nlimits.x = { at_most = 3 }\n",
        LOAN,
        "limits.x",
        "`unique.x` has the same name",
    );
}

#[test]
fn roles_name_known_operations_and_some_roles() {
    assert_error(
        "roles = { create = [] }\n",
        LOAN,
        "roles.create",
        "empty list",
    );
    assert_error(
        "roles = { delete = [\"lib rarian\"] }\n",
        LOAN,
        "roles.delete",
        "not a role name",
    );
    // An unknown operation is an unknown field of the file.
    let err = Model::parse(&format!("{BASE}roles = {{ read = [\"x\"] }}\n")).unwrap_err();
    assert!(err.to_string().contains("read"), "{err}");
}

#[test]
fn the_new_keys_refuse_misspelt_fields() {
    for extra in [
        "unique.u = { attribute = \"code\" }\n",
        "limits.l = { per = \"memberId\", atmost = 3 }\n",
        "references.r = { entity = \"copy\", keys = { copyId = \"copyId\" } }\n",
    ] {
        assert!(Model::parse(&format!("{BASE}{extra}")).is_err(), "{extra}");
    }
}

#[test]
fn more_guard_items_than_a_transaction_holds_are_refused() {
    // 48 uniques (96 guards) + 1 reference = 97: the most a command may add.
    let mut fits = String::new();
    for i in 0..48 {
        fits.push_str(&format!("unique.u{i} = {{ attributes = \"code\" }}\n"));
    }
    fits.push_str("references.r = { entity = \"copy\" }\n");
    assert_passes(&fits);
    let over = format!("{fits}references.s = {{ entity = \"settings\" }}\n");
    assert_error(
        &over,
        LOAN,
        "unique, limits, references",
        "add 98 guard items",
    );
    assert_error(&over, LOAN, "unique, limits, references", "100 - 3 = 97");
}
