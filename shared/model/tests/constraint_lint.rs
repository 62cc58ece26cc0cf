//! The key-design lint's rules on declared constraints: `hot-guard`, `unique-low-cardinality` and
//! `large-guard`, each with a model that triggers it, one that passes, and the allow mechanism.

use cqrs_model::{Finding, Model, Severity, lint};

const LOAN: &str = r#"
[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
attributes.loanId = { type = "string", required = true, max = 26 }
attributes.memberId = { type = "string", required = true, max = 40 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }
attributes.rush = { type = "boolean" }
"#;

fn findings(extra: &str) -> Vec<Finding> {
    let model = Model::parse(&format!("{LOAN}{extra}")).unwrap_or_else(|e| panic!("{e}"));
    lint(&model)
}

fn of_rule<'a>(found: &'a [Finding], rule: &str) -> Vec<&'a Finding> {
    found.iter().filter(|f| f.rule == rule).collect()
}

#[test]
fn hot_guard_a_limit_grouped_by_nothing_or_by_enums() {
    let found = findings("limits.all_out = { when = { status = [\"out\"] }, at_most = 3 }\n");
    let hot = of_rule(&found, "hot-guard");
    assert_eq!(hot.len(), 1, "{found:#?}");
    assert_eq!(hot[0].entity, "loan");
    assert_eq!(hot[0].field, "limits.all_out");
    assert_eq!(hot[0].template, "per = []");
    assert_eq!(hot[0].severity, Severity::Warning);
    assert!(hot[0].message.contains("one group per tenant"));
    assert!(!hot[0].fails());

    let found = findings("limits.by_kind = { per = [\"status\", \"rush\"], at_most = 3 }\n");
    let hot = of_rule(&found, "hot-guard");
    assert_eq!(hot.len(), 1, "{found:#?}");
    assert_eq!(hot[0].template, "per = [\"status\", \"rush\"]");

    // Grouped by a member: no finding.
    let found = findings("limits.loans_out = { per = \"memberId\", at_most = 3 }\n");
    assert!(of_rule(&found, "hot-guard").is_empty(), "{found:#?}");
}

#[test]
fn hot_guard_fails_a_write_heavy_entity_unless_allowed() {
    let found = findings("writes = \"high\"\nlimits.all = { at_most = 3 }\n");
    let hot = of_rule(&found, "hot-guard");
    assert_eq!(hot[0].severity, Severity::Error);
    assert!(hot[0].fails());

    let found = findings(
        "writes = \"high\"\nlimits.all = { at_most = 3 }\nallow.hot-guard = \"three a day\"\n",
    );
    let hot = of_rule(&found, "hot-guard");
    assert_eq!(hot[0].allowed.as_deref(), Some("three a day"));
    assert!(!hot[0].fails(), "{found:#?}");
}

#[test]
fn unique_low_cardinality() {
    let found = findings("unique.one_per_status = { attributes = [\"status\", \"rush\"] }\n");
    let low = of_rule(&found, "unique-low-cardinality");
    assert_eq!(low.len(), 1, "{found:#?}");
    assert_eq!(low[0].field, "unique.one_per_status");
    assert_eq!(low[0].template, "attributes = [\"status\", \"rush\"]");
    assert_eq!(low[0].severity, Severity::Warning);

    let found = findings("unique.member_status = { attributes = [\"memberId\", \"status\"] }\n");
    assert!(of_rule(&found, "unique-low-cardinality").is_empty());
}

#[test]
fn large_guard() {
    let found = findings("limits.many = { per = \"memberId\", at_most = 41 }\n");
    let large = of_rule(&found, "large-guard");
    assert_eq!(large.len(), 1, "{found:#?}");
    assert_eq!(large[0].field, "limits.many");
    assert!(large[0].message.contains("at_most = 41"));
    assert_eq!(large[0].severity, Severity::Warning);

    let found = findings("limits.many = { per = \"memberId\", at_most = 40 }\n");
    assert!(of_rule(&found, "large-guard").is_empty());
}

#[test]
fn an_allow_of_a_new_rule_that_does_not_fire_is_reported() {
    let found = findings("allow.large-guard = \"no\"\n");
    let unused = of_rule(&found, "unused-allow");
    assert_eq!(unused.len(), 1, "{found:#?}");
    assert!(unused[0].message.contains("matches no finding"));
}
