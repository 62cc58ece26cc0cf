//! `cqrs model lint`: the key-design lint of a model file, for people (one block per finding, with
//! the fix) and for scripts (`--json`). Exit 1 when the model has a check error or a lint error it
//! does not allow, 0 otherwise (warnings and documented exceptions never fail).

use std::path::Path;
use std::process::ExitCode;

use cqrs_model::{LintReport, lint_source};

/// Runs the lint on `file` and prints the findings.
pub fn run(file: &Path, json: bool) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("cqrs: cannot read {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let report = match lint_source(&text) {
        Ok(report) => report,
        Err(errors) => {
            // Not a model file at all (bad TOML, an unknown field): nothing to lint.
            if json {
                println!("{}", not_a_model_json(&errors));
            } else {
                eprintln!("{}: {errors}", file.display());
            }
            return ExitCode::from(1);
        }
    };
    if json {
        println!("{}", report_json(&report));
    } else {
        print_report(file, &report);
    }
    if report.fails() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn not_a_model_json(errors: &cqrs_model::ModelErrors) -> serde_json::Value {
    let list: Vec<_> = errors
        .0
        .iter()
        .map(|e| serde_json::json!({"place": e.place, "field": e.field, "message": e.message}))
        .collect();
    serde_json::json!({"ok": false, "check_errors": list, "findings": []})
}

fn report_json(report: &LintReport) -> serde_json::Value {
    let errors: Vec<_> = report
        .check_errors
        .iter()
        .map(|e| serde_json::json!({"place": e.place, "field": e.field, "message": e.message}))
        .collect();
    serde_json::json!({
        "ok": !report.fails(),
        "check_errors": errors,
        "findings": report.findings,
    })
}

fn print_report(file: &Path, report: &LintReport) {
    for e in &report.check_errors {
        println!("error[check] {e}");
    }
    for f in &report.findings {
        println!("{f}");
    }
    let count = |pred: &dyn Fn(&cqrs_model::Finding) -> bool| {
        report.findings.iter().filter(|f| pred(f)).count()
    };
    let errors = report.check_errors.len() + count(&|f| f.fails());
    let warnings = count(&|f| f.severity == cqrs_model::Severity::Warning);
    let allowed = count(&|f| f.allowed.is_some());
    println!(
        "{}: {} ({errors} error(s), {warnings} warning(s), {allowed} allowed exception(s))",
        file.display(),
        if report.fails() { "fails" } else { "ok" }
    );
}
