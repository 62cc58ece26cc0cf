//! Every model check, each with a small model that triggers it (and the error naming the entity and
//! the field) and the example model that passes them all.

use cqrs_model::{Model, ModelError};

/// A minimal valid entity to build on.
const BASE: &str = r#"
[indexes.gsi1]
pk = "gsi1pk"
sk = "gsi1sk"

[entities.order]
pk = "ORDER#{tenant}"
sk = "ORDER#{orderId}"
id = "orderId"
attributes.orderId = { type = "string", max = 26 }
attributes.userId = { type = "string", required = true, max = 64 }
attributes.status = { type = "enum", values = ["OPEN", "DONE"] }
attributes.total = { type = "number" }
"#;

fn errors(extra: &str) -> Vec<ModelError> {
    match Model::parse(&format!("{BASE}{extra}")) {
        Ok(_) => Vec::new(),
        Err(e) => e.0,
    }
}

/// Asserts that exactly the expected problem is found: place, field and a word of the message.
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

#[test]
fn the_base_and_the_example_model_pass() {
    assert_eq!(errors(""), Vec::new());
    Model::parse(cqrs_model::EXAMPLE_TOML).unwrap();
}

#[test]
fn unknown_attribute_in_a_template() {
    assert_error(
        "indexes.gsi1 = { pk = \"USER#{tenant}#{user}\", sk = \"X\" }\n",
        "entity `order`",
        "indexes.gsi1.pk",
        "\"user\"",
    );
}

#[test]
fn references_without_a_separator_between_them() {
    assert_error(
        "indexes.gsi1 = { pk = \"USER#{tenant}#{userId}{status}\", sk = \"X\" }\n",
        "entity `order`",
        "indexes.gsi1.pk",
        "not separated",
    );
    assert_error(
        "indexes.gsi1 = { pk = \"USER#{tenant}#{userId}-{status}\", sk = \"X\" }\n",
        "entity `order`",
        "indexes.gsi1.pk",
        "not separated",
    );
}

#[test]
fn enum_values_that_would_break_keys() {
    let model = BASE.replace("[\"OPEN\", \"DONE\"]", "[\"OPEN\", \"DONE#2\"]");
    let found = Model::parse(&model).unwrap_err().0;
    assert!(
        found
            .iter()
            .any(|e| e.field == "attributes.status" && e.message.contains("DONE#2"))
    );
}

#[test]
fn keys_that_collide_as_strings_not_as_text() {
    assert_error(
        r#"
[entities.admin]
pk = "ORDER#{tenant}"
sk = "ORDER#ADMIN"
"#,
        "entity `admin`",
        "pk/sk",
        "entity `order`",
    );
    // A distinct literal keeps them apart.
    assert_eq!(
        errors("[entities.admin]\npk = \"ORDER#{tenant}\"\nsk = \"ADMIN#1\"\n"),
        Vec::new()
    );
}

#[test]
fn index_partition_without_tenant() {
    assert_error(
        "indexes.gsi1 = { pk = \"USER#{userId}\", sk = \"X\" }\n",
        "entity `order`",
        "indexes.gsi1.pk",
        "mix tenants",
    );
}

#[test]
fn table_partition_must_name_the_tenant_after_the_prefix() {
    let model = BASE.replace(
        "pk = \"ORDER#{tenant}\"",
        "pk = \"ORDER#{userId}#{tenant}\"",
    );
    let found = Model::parse(&model).unwrap_err().0;
    assert!(
        found
            .iter()
            .any(|e| e.field == "pk" && e.message.contains("PREFIX#{tenant}"))
    );
    // A common entity says so, and has no {tenant}.
    assert_eq!(
        errors(
            "[entities.user]\ncommon = true\npk = \"USER#common\"\nsk = \"{id}\"\nattributes.id = { type = \"string\" }\n"
        ),
        Vec::new()
    );
    assert_error(
        "[entities.user]\npk = \"USER#common\"\nsk = \"{id}\"\nattributes.id = { type = \"string\" }\n",
        "entity `user`",
        "pk",
        "PREFIX#{tenant}",
    );
}

#[test]
fn sort_key_numbers_need_a_width() {
    assert_error(
        "indexes.gsi1 = { pk = \"USER#{tenant}#{userId}\", sk = \"{total}#{orderId}\" }\n",
        "entity `order`",
        "indexes.gsi1.sk",
        "width",
    );
}

#[test]
fn over_twenty_gsis() {
    let many: String = (2..=21)
        .map(|i| format!("[indexes.gsi{i:02}]\npk = \"g{i}pk\"\n"))
        .collect();
    assert_error(&many, "model", "indexes", "at most 20");
}

#[test]
fn keys_longer_than_dynamodb_allows_for_declared_lengths() {
    assert_error(
        "attributes.note = { type = \"string\", max = 2000 }\nindexes.gsi1 = { pk = \"USER#{tenant}#{note}\", sk = \"X\" }\n",
        "entity `order`",
        "indexes.gsi1.pk",
        "over DynamoDB's 2048",
    );
    let model = BASE.replace(
        "{ type = \"string\", max = 26 }",
        "{ type = \"string\", max = 1010 }",
    );
    let found = Model::parse(&model).unwrap_err().0;
    assert!(
        found
            .iter()
            .any(|e| e.field == "sk" && e.message.contains("bytes"))
    );
}

#[test]
fn index_attribute_names_that_are_item_fields() {
    let model = BASE.replace("pk = \"gsi1pk\"", "pk = \"version\"");
    let found = Model::parse(&model).unwrap_err().0;
    assert!(
        found
            .iter()
            .any(|e| e.place == "index `gsi1`" && e.message.contains("\"version\""))
    );
}

#[test]
fn native_multi_attribute_keys_stay_within_four_and_types_match() {
    assert_error(
        r#"
[indexes.loc]
pk = [{ name = "a1", type = "S" }, { name = "a2", type = "S" }, { name = "a3", type = "S" }, { name = "a4", type = "S" }, { name = "a5", type = "S" }]
"#,
        "index `loc`",
        "pk",
        "1 to 4",
    );
    assert_error(
        r#"
indexes.loc = { pk = ["{tenant}", "{userId}"] }
[indexes.loc]
pk = [{ name = "locT", type = "S" }, { name = "locN", type = "N" }]
"#,
        "entity `order`",
        "indexes.loc.pk",
        "number",
    );
}

#[test]
fn patterns_name_real_entities_indexes_and_parameters() {
    assert_error(
        "[patterns.p]\nentity = \"nope\"\n",
        "pattern `p`",
        "entity",
        "no entity",
    );
    assert_error(
        "[patterns.p]\nentity = \"order\"\nindex = \"gsi9\"\n",
        "pattern `p`",
        "index",
        "no index",
    );
    assert_error(
        "indexes.gsi1 = { pk = \"USER#{tenant}#{userId}\", sk = \"X\" }\n[patterns.p]\nentity = \"order\"\nindex = \"gsi1\"\n",
        "pattern `p`",
        "params",
        "\"userId\"",
    );
    assert_error(
        "[patterns.p]\nentity = \"order\"\nparams = [\"tenant\"]\n",
        "pattern `p`",
        "params",
        "never parameters",
    );
}

#[test]
fn misspelt_fields_are_refused_not_ignored() {
    let found = errors(
        "[entities.x]\npk = \"X#{tenant}\"\nsk = \"1\"\nattribtues.a = { type = \"string\" }\n",
    );
    assert_eq!(found.len(), 1);
    assert!(found[0].message.contains("attribtues"), "{found:?}");
}

#[test]
fn sparse_conditions_name_declared_values() {
    assert_error(
        "indexes.gsi1 = { pk = \"S#{tenant}#{status}\", sk = \"{orderId}\", when = { status = [\"LOST\"] } }\n",
        "entity `order`",
        "indexes.gsi1.when.status",
        "LOST",
    );
}

#[test]
fn read_rules_belong_to_common_entities_and_name_a_known_rule() {
    let common = |read: &str| {
        format!(
            "[entities.link]\ncommon = true\n{read}\npk = \"LINK#common\"\nsk = \"{{who}}\"\nattributes.who = {{ type = \"string\", max = 64 }}\n"
        )
    };
    // Additive: a model without `read` means what it meant (everyone reads common).
    let model = Model::parse(&format!("{BASE}{}", common(""))).unwrap();
    assert_eq!(
        model.entity("link").unwrap().read_rule(),
        cqrs_model::ReadRule::Everyone
    );
    assert_eq!(model.entity("link").unwrap().read, None);
    let model = Model::parse(&format!("{BASE}{}", common("read = \"system_admin\""))).unwrap();
    assert_eq!(
        model.partition_read_rule("LINK#common"),
        cqrs_model::ReadRule::SystemAdmin
    );
    assert_error(
        &common("read = \"admins\""),
        "entity `link`",
        "read",
        "\"admins\"",
    );
    // A tenant's own partition is read by that tenant: a read rule there makes no sense.
    for rule in ["system_admin", "everyone"] {
        assert_error(
            &format!(
                "[entities.note]\nread = \"{rule}\"\npk = \"NOTE#{{tenant}}\"\nsk = \"{{noteId}}\"\nattributes.noteId = {{ type = \"string\", max = 26 }}\n"
            ),
            "entity `note`",
            "read",
            "tenant entity",
        );
    }
}

#[test]
fn the_change_logs_prefix_is_no_entitys() {
    for (common, pk) in [
        ("", "CQRS_CHANGE_LOG#{tenant}#{orderId}"),
        ("common = true\n", "CQRS_CHANGE_LOG#common"),
    ] {
        assert_error(
            &format!(
                "[entities.mine]\n{common}pk = \"{pk}\"\nsk = \"{{orderId}}\"\nattributes.orderId = {{ type = \"string\", max = 26 }}\n"
            ),
            "entity `mine`",
            "pk",
            "CQRS_CHANGE_LOG",
        );
    }
    // A prefix that merely begins like it is another prefix.
    assert!(errors("[entities.mine]\npk = \"CQRS_CHANGE_LOGS#{tenant}\"\nsk = \"x\"\n").is_empty());
}

#[test]
fn names_hold_no_control_character() {
    // An attribute name that would end a SQL comment (`-- ...`) and start a statement of its own
    // in a migration of the relational read model.
    assert_error(
        "attributes.\"a\\nDROP TABLE x; --\" = { type = \"string\" }\n",
        "entity `order`",
        "attributes.a\nDROP TABLE x; --",
        "control character",
    );
    assert_error(
        "attributes.\"tab\\tbed\" = { type = \"number\" }\n",
        "entity `order`",
        "attributes.tab\tbed",
        "control character",
    );
    assert_error(
        "[patterns.\"by\\u0000user\"]\nentity = \"order\"\n",
        "pattern `by\0user`",
        "name",
        "control character",
    );
}

#[test]
fn names_postgresql_would_shorten_or_merge_are_refused() {
    // PostgreSQL keeps 63 bytes of an identifier and cuts the rest silently: a table (and its
    // `<entity>_tenant_updated` index), a column.
    let long_entity = "e".repeat(49);
    assert_error(
        &format!(
            "[entities.{long_entity}]\npk = \"E#{{tenant}}\"\nsk = \"{{eId}}\"\nattributes.eId = {{ type = \"string\" }}\n"
        ),
        &format!("entity `{long_entity}`"),
        "name",
        "63 bytes",
    );
    let fits = "e".repeat(48);
    assert_eq!(
        errors(&format!(
            "[entities.{fits}]\npk = \"E#{{tenant}}\"\nsk = \"{{eId}}\"\nattributes.eId = {{ type = \"string\" }}\n"
        )),
        Vec::new()
    );
    let long_attribute = "a".repeat(64);
    assert_error(
        &format!("attributes.{long_attribute} = {{ type = \"string\" }}\n"),
        "entity `order`",
        &format!("attributes.{long_attribute}"),
        "63 bytes",
    );
    assert_eq!(
        errors(&format!(
            "attributes.{} = {{ type = \"string\" }}\n",
            "a".repeat(63)
        )),
        Vec::new()
    );
    // `code` is an envelope column of the read model: its column is `attr_code`, which an
    // attribute of that name would share.
    assert_error(
        "attributes.code = { type = \"string\" }\nattributes.attr_code = { type = \"string\" }\n",
        "entity `order`",
        "attributes.code",
        "same column `attr_code`",
    );
    // The framework's own tables (`cqrs_items`, `cqrs_removed`, ...) are no entity's.
    assert_error(
        "[entities.cqrs_items]\npk = \"CI#{tenant}\"\nsk = \"{ciId}\"\nattributes.ciId = { type = \"string\" }\n",
        "entity `cqrs_items`",
        "name",
        "cqrs_",
    );
}

#[test]
fn key_literals_and_enum_values_hold_no_highest_code_point() {
    // U+10FFFF ends every range read of the keys that begin with a prefix, so the key crate refuses
    // it in key parts: a literal holding it would make every write of the entity a 400.
    let model = BASE.replace(
        "sk = \"ORDER#{orderId}\"",
        "sk = \"ORDER\u{10FFFF}#{orderId}\"",
    );
    let found = Model::parse(&model).unwrap_err().0;
    assert!(
        found.iter().any(|e| e.place == "entity `order`"
            && e.field == "sk"
            && e.message.contains("U+10FFFF")),
        "{found:#?}"
    );
    let model = BASE.replace("[\"OPEN\", \"DONE\"]", "[\"OPEN\", \"DONE\u{10FFFF}\"]");
    let found = Model::parse(&model).unwrap_err().0;
    assert!(
        found
            .iter()
            .any(|e| e.field == "attributes.status" && e.message.contains("U+10FFFF")),
        "{found:#?}"
    );
}
