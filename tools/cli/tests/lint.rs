//! `cqrs model lint` as an operator runs it: exit codes and the JSON for scripts.

use std::process::Command;

fn cqrs(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cqrs"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_example_model_lints_clean_with_its_exceptions() {
    let (code, out) = cqrs(&["model", "lint"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("allowed[low-cardinality-partition] entity `order`"),
        "{out}"
    );
    assert!(out.contains("0 error(s)"), "{out}");
}

#[test]
fn an_error_fails_with_exit_1_and_json_names_rule_entity_and_fix() {
    let dir = std::env::temp_dir().join(format!("cqrs-lint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("model.toml");
    std::fs::write(
        &file,
        "[entities.event]\npk = \"EVENT#{tenant}#{at}\"\nsk = \"{eventId}\"\n\
         attributes.at = { type = \"timestamp\", required = true }\n\
         attributes.eventId = { type = \"string\", required = true, max = 26 }\n",
    )
    .unwrap();
    let (code, out) = cqrs(&["model", "lint", "--file", file.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1, "{out}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["ok"], false);
    let f = &json["findings"][0];
    assert_eq!(f["rule"], "sequential-partition");
    assert_eq!(f["severity"], "error");
    assert_eq!(f["entity"], "event");
    assert_eq!(f["template"], "EVENT#{tenant}#{at}");
    assert!(f["fix"].as_str().unwrap().contains("sort key"));
    let (code, _) = cqrs(&["model", "lint", "--file", "/nonexistent/model.toml"]);
    assert_eq!(code, 2);
}
