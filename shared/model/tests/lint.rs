//! The key-design lint: for every rule, one small model that triggers it (naming the rule, the
//! entity, the field and the template, with a fix) and one that does not; and the example model,
//! which passes with its deliberate exceptions documented.

use cqrs_model::{Finding, Model, Severity, lint, lint_source};

/// The findings of a model that must pass the model check.
fn findings(text: &str) -> Vec<Finding> {
    let model = Model::parse(text).unwrap_or_else(|e| panic!("{e}"));
    lint(&model)
}

/// The findings of one rule.
fn of_rule(found: &[Finding], rule: &str) -> Vec<Finding> {
    found.iter().filter(|f| f.rule == rule).cloned().collect()
}

#[track_caller]
fn assert_one(found: &[Finding], rule: &str, entity: &str, field: &str, template: &str) -> Finding {
    let hits = of_rule(found, rule);
    assert_eq!(hits.len(), 1, "expected one {rule}, got {found:#?}");
    let f = hits[0].clone();
    assert_eq!(
        (f.entity.as_str(), f.field.as_str(), f.template.as_str()),
        (entity, field, template)
    );
    assert!(!f.fix.is_empty() && !f.message.is_empty());
    f
}

#[test]
fn the_example_model_passes_and_documents_its_exceptions() {
    let report = lint_source(cqrs_model::EXAMPLE_TOML).unwrap();
    assert!(report.check_errors.is_empty());
    let failing: Vec<_> = report.findings.iter().filter(|f| f.fails()).collect();
    assert!(failing.is_empty(), "{failing:#?}");
    // Every exception is used and carries its reason.
    assert!(of_rule(&report.findings, "unused-allow").is_empty());
    let mut allowed: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.allowed.is_some())
        .map(|f| (f.entity.as_str(), f.rule))
        .collect();
    allowed.sort();
    assert_eq!(
        allowed,
        [
            ("log", "sequential-partition"),
            ("order", "low-cardinality-partition"),
            ("product", "low-cardinality-partition"),
        ]
    );
    let shown = report
        .findings
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(shown.contains("allowed: mbc pattern 6"), "{shown}");
}

const BIG_STATUS: &str = r#"
[entities.ticket]
pk = "TICKET#{tenant}#{status}"
sk = "{ticketId}"
id = "ticketId"
size = "large"
attributes.ticketId = { type = "string", max = 26 }
attributes.status = { type = "enum", required = true, values = ["OPEN", "CLOSED"] }
"#;

#[test]
fn low_cardinality_partition_of_a_large_entity() {
    let found = findings(BIG_STATUS);
    let f = assert_one(
        &found,
        "low-cardinality-partition",
        "ticket",
        "pk",
        "TICKET#{tenant}#{status}",
    );
    assert_eq!(f.severity, Severity::Error);
    assert!(f.fails());
    assert!(
        f.fix.contains("TICKET#{tenant}#{status}#{ticketId}"),
        "{}",
        f.fix
    );

    // A write-heavy entity's enum-only index partition is found too; the sharded one is not.
    let indexed = r#"
[indexes.gsi1]
pk = "gsi1pk"
sk = "gsi1sk"

[indexes.gsi2]
pk = "gsi2pk"
sk = "gsi2sk"

[entities.ticket]
pk = "TICKET#{tenant}#{ticketId}"
sk = "TICKET"
id = "ticketId"
writes = "high"
attributes.ticketId = { type = "string", max = 26 }
attributes.status = { type = "enum", required = true, values = ["OPEN", "CLOSED"] }
indexes.gsi1 = { pk = "STATUS#{tenant}#{status}", sk = "{ticketId}" }
indexes.gsi2 = { pk = "STATUS#{tenant}#{status}#SHARD#{shard:8}", sk = "{ticketId}" }
"#;
    let found = findings(indexed);
    let f = assert_one(
        &found,
        "low-cardinality-partition",
        "ticket",
        "indexes.gsi1.pk",
        "STATUS#{tenant}#{status}",
    );
    assert!(f.fix.contains("SHARD"));
}

#[test]
fn low_cardinality_partition_passes_small_or_spread_entities() {
    // The same keys for an entity that declares nothing: no finding.
    let small = BIG_STATUS.replace("size = \"large\"\n", "");
    assert_eq!(findings(&small), Vec::new());
    // A large entity partitioned by a high-cardinality attribute: no finding.
    let spread = BIG_STATUS.replace(
        "{status}\"\nsk = \"{ticketId}\"",
        "{ticketId}\"\nsk = \"T\"",
    );
    assert!(spread.contains("TICKET#{tenant}#{ticketId}"));
    assert_eq!(findings(&spread), Vec::new());
}

const EVENTS: &str = r#"
[entities.event]
pk = "EVENT#{tenant}#{at:day}"
sk = "{eventId}"
id = "eventId"
attributes.at = { type = "timestamp", required = true }
attributes.eventId = { type = "string", max = 26 }
attributes.seqNo = { type = "number", width = 12, sequential = true }
attributes.source = { type = "string", required = true, max = 64 }
"#;

#[test]
fn sequential_partition() {
    let found = findings(EVENTS);
    let f = assert_one(
        &found,
        "sequential-partition",
        "event",
        "pk",
        "EVENT#{tenant}#{at:day}",
    );
    assert!(f.message.contains("{at} is a timestamp"));
    // A number declared sequential, first in an index partition; `createdAt` too.
    let numbered = format!(
        "[indexes.gsi1]\npk = \"gsi1pk\"\nsk = \"gsi1sk\"\n{}indexes.gsi1 = {{ pk = \"SEQ#{{tenant}}#{{seqNo}}\", sk = \"{{eventId}}\" }}\n",
        EVENTS.replace("{at:day}", "{source}")
    );
    let found = findings(&numbered);
    let f = assert_one(
        &found,
        "sequential-partition",
        "event",
        "indexes.gsi1.pk",
        "SEQ#{tenant}#{seqNo}",
    );
    assert!(f.message.contains("declared sequential"));
    let created = EVENTS.replace("{at:day}", "{createdAt:day}");
    assert_one(
        &findings(&created),
        "sequential-partition",
        "event",
        "pk",
        "EVENT#{tenant}#{createdAt:day}",
    );
}

#[test]
fn sequential_partition_passes_time_in_the_sort_key_or_after_an_owner() {
    let fine = EVENTS
        .replace("{at:day}\"", "{source}\"")
        .replace("sk = \"{eventId}\"", "sk = \"{at}#{eventId}\"");
    assert_eq!(findings(&fine), Vec::new());
    let after_owner = EVENTS.replace("{at:day}\"", "{source}#{at:day}\"");
    assert_eq!(findings(&after_owner), Vec::new());
}

const PAIR: &str = r#"
[entities.pair]
pk = "PAIR#{tenant}"
sk = "{left}#{right}"
attributes.left = { type = "string", required = true, max = 8 }
attributes.right = { type = "string", required = true, max = 8 }
"#;

#[test]
fn undelimited_references() {
    // The model check refuses these: the lint reports them with its rule and fix, on the text.
    for sk in ["{left}{right}", "{left}-{right}"] {
        let report = lint_source(&PAIR.replace("{left}#{right}", sk)).unwrap();
        assert!(report.fails());
        assert!(!report.check_errors.is_empty());
        let f = assert_one(&report.findings, "undelimited-references", "pair", "sk", sk);
        assert!(f.fix.contains("`#`"));
    }
}

#[test]
fn undelimited_references_pass_with_a_separator() {
    assert_eq!(findings(PAIR), Vec::new());
    assert!(!lint_source(PAIR).unwrap().fails());
}

const WIDE: &str = r#"
[entities.cell]
pk = "CELL#{tenant}#{a}"
sk = "{b}#{c}#{d}#{e}#{f}"
attributes.a = { type = "string", required = true, max = 8 }
attributes.b = { type = "string", required = true, max = 8 }
attributes.c = { type = "string", required = true, max = 8 }
attributes.d = { type = "string", required = true, max = 8 }
attributes.e = { type = "string", required = true, max = 8 }
attributes.f = { type = "string", required = true, max = 8 }
"#;

#[test]
fn complex_key() {
    let six = WIDE.replace("{f}\"", "{f}#{a}\"");
    let found = findings(&six);
    let f = assert_one(
        &found,
        "complex-key",
        "cell",
        "sk",
        "{b}#{c}#{d}#{e}#{f}#{a}",
    );
    assert_eq!(f.severity, Severity::Warning);
    assert!(!f.fails(), "a warning never fails the lint");
}

#[test]
fn complex_key_passes_five_parts() {
    assert_eq!(findings(WIDE), Vec::new());
}

const TENANT_INDEX: &str = r#"
[indexes.gsi1]
pk = "gsi1pk"
sk = "gsi1sk"

[entities.note]
pk = "NOTE#{tenant}#{noteId}"
sk = "NOTE"
id = "noteId"
attributes.noteId = { type = "string", max = 26 }
indexes.gsi1 = { pk = "ALL_NOTES#{tenant}", sk = "{createdAt}#{noteId}" }
"#;

#[test]
fn unsharded_index_partition() {
    let found = findings(TENANT_INDEX);
    let f = assert_one(
        &found,
        "unsharded-index-partition",
        "note",
        "indexes.gsi1.pk",
        "ALL_NOTES#{tenant}",
    );
    assert_eq!(f.severity, Severity::Warning);
    // Write-heavy: an error, and reported once (not also as low-cardinality).
    let heavy = TENANT_INDEX.replace("id = \"noteId\"\n", "id = \"noteId\"\nwrites = \"high\"\n");
    let found = findings(&heavy);
    let f = assert_one(
        &found,
        "unsharded-index-partition",
        "note",
        "indexes.gsi1.pk",
        "ALL_NOTES#{tenant}",
    );
    assert_eq!(f.severity, Severity::Error);
    assert!(of_rule(&found, "low-cardinality-partition").is_empty());
}

#[test]
fn unsharded_index_partition_passes_with_shards() {
    let sharded = TENANT_INDEX.replace("ALL_NOTES#{tenant}", "ALL_NOTES#{tenant}#SHARD#{shard:4}");
    assert_eq!(findings(&sharded), Vec::new());
}

#[test]
fn exceptions_silence_an_error_and_stale_ones_warn() {
    let allowed = BIG_STATUS.replace(
        "size = \"large\"\n",
        "size = \"large\"\nallow.low-cardinality-partition = \"two statuses, few tickets per tenant\"\nallow.complex-key = \"stale\"\nallow.no-such-rule = \"typo\"\n",
    );
    let report = lint_source(&allowed).unwrap();
    assert!(!report.fails(), "{:#?}", report.findings);
    let f = assert_one(
        &report.findings,
        "low-cardinality-partition",
        "ticket",
        "pk",
        "TICKET#{tenant}#{status}",
    );
    assert_eq!(
        f.allowed.as_deref(),
        Some("two statuses, few tickets per tenant")
    );
    let stale = of_rule(&report.findings, "unused-allow");
    let fields: Vec<_> = stale.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["allow.complex-key", "allow.no-such-rule"]);
    assert!(stale[1].message.contains("no rule"));
}

#[test]
fn unknown_declarations() {
    let found = findings(&BIG_STATUS.replace("\"large\"", "\"huge\""));
    let f = assert_one(&found, "declaration", "ticket", "size", "");
    assert!(f.fails());
    assert!(
        findings(&BIG_STATUS.replace("size = \"large\"", "size = \"small\"\nwrites = \"low\""))
            .is_empty()
    );
}

#[test]
fn findings_serialise_for_scripts() {
    let found = findings(TENANT_INDEX);
    let json = serde_json::to_value(&found).unwrap();
    assert_eq!(json[0]["rule"], "unsharded-index-partition");
    assert_eq!(json[0]["severity"], "warning");
    assert_eq!(json[0]["allowed"], serde_json::Value::Null);
}
