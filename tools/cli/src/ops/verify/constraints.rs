//! `cqrs verify --constraints` and `cqrs rebuild --constraints`: the model's declared constraints
//! (`unique`, `limits`, `references` of its entities) against the guard items that enforce them.
//!
//! Both run over `cqrs_store::constraints` (the command handler's concurrency tests call the same
//! code): [`verify`](cqrs_store::constraints::verify) scans the guard items and heads, then the
//! command and data tables, and confirms each difference on consistent re-reads;
//! [`repair`](cqrs_store::constraints::repair) fixes each one in a transaction tied to the version
//! of the items it is about (newest wins), so it runs beside live commands. Every difference is
//! printed on a line of its own, with its kind; two live holders of one value, a group over its
//! bound and a dangling reference are never repaired (a person decides): they stay, and the exit
//! code is 1 while anything differs.

use std::path::Path;
use std::process::ExitCode;

use cqrs_model::Model;
use cqrs_store::constraints::{Difference, Report};
use serde_json::json;

use crate::ops::{Connection, EXIT_DIFFERENCE, Need, fail, spinner};

/// What one run is asked.
pub struct Run<'a> {
    /// Where the tables are.
    pub connection: &'a Connection,
    /// The service's model file.
    pub model: &'a Path,
    /// Only this tenant's items and guards.
    pub tenant: Option<&'a str>,
    /// How many differences to list (text output).
    pub show: usize,
    /// JSON output.
    pub json: bool,
    /// Repair (`rebuild --constraints`) rather than only verify.
    pub repair: bool,
}

/// The kind of a difference, as printed and in JSON.
pub fn kind(difference: &Difference) -> &'static str {
    match difference {
        Difference::Unclaimed { .. } => "unclaimed",
        Difference::StrayClaim { .. } => "stray-claim",
        Difference::TwoHolders { .. } => "two-holders",
        Difference::MissingMember { .. } => "missing-member",
        Difference::ExtraMember { .. } => "extra-member",
        Difference::OverLimit { .. } => "over-limit",
        Difference::StaleMirror { .. } => "stale-mirror",
        Difference::Dangling { .. } => "dangling",
    }
}

fn entry(difference: &Difference) -> serde_json::Value {
    json!({
        "kind": kind(difference),
        "repairable": difference.is_repairable(),
        "text": difference.to_string(),
    })
}

/// Runs `cqrs verify --constraints` (or, with `repair`, `cqrs rebuild --constraints`).
pub async fn run(run: Run<'_>) -> ExitCode {
    let command = if run.repair {
        "rebuild --constraints"
    } else {
        "verify --constraints"
    };
    let text = match std::fs::read_to_string(run.model) {
        Ok(text) => text,
        Err(e) => {
            return fail(
                command,
                format!("cannot read the model file {}: {e}", run.model.display()),
            );
        }
    };
    let model = match Model::parse(&text) {
        Ok(model) => model,
        Err(e) => return fail(command, format!("{}: {e}", run.model.display())),
    };
    let constrained: Vec<&str> = model
        .entities()
        .iter()
        .filter(|e| e.has_constraints() || model.is_referenced(&e.name))
        .map(|e| e.name.as_str())
        .collect();
    let store = match run
        .connection
        .store(&[Need::Command, Need::Data, Need::Idempotency])
        .await
    {
        Ok(store) => store,
        Err(e) => return fail(command, e),
    };
    let progress = spinner(
        run.json,
        if run.repair {
            "rebuild --constraints: checking and repairing"
        } else {
            "verify --constraints: checking"
        },
    );
    let report = if run.repair {
        cqrs_store::constraints::repair(&store, &model, run.tenant).await
    } else {
        cqrs_store::constraints::verify(&store, &model, run.tenant).await
    };
    progress.finish_and_clear();
    let report = match report {
        Ok(report) => report,
        Err(e) => return fail(command, e),
    };
    print(&run, command, &constrained, &report);
    if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DIFFERENCE)
    }
}

fn print(run: &Run<'_>, command: &str, constrained: &[&str], report: &Report) {
    if run.json {
        let differences: Vec<serde_json::Value> = report.differences.iter().map(entry).collect();
        let out = if run.repair {
            json!({
                "clean": report.is_clean(),
                "entities": constrained,
                "differences": differences,
                "repaired": report.repaired.iter().map(entry).collect::<Vec<_>>(),
                "retries": report.retries,
            })
        } else {
            json!({
                "clean": report.is_clean(),
                "entities": constrained,
                "differences": differences,
            })
        };
        println!("{out}");
        return;
    }
    let scope = run
        .tenant
        .map_or_else(|| "every tenant".to_string(), |t| format!("tenant {t}"));
    if constrained.is_empty() {
        println!("{command}: the model declares no constraint ({scope}): nothing to check");
        return;
    }
    if run.repair {
        println!(
            "{command} ({scope}; {}): {} repaired ({} retried after a concurrent command), {} left",
            constrained.join(", "),
            report.repaired.len(),
            report.retries,
            report.differences.len()
        );
        for d in report.repaired.iter().take(run.show) {
            println!("  repaired {:<14} {d}", kind(d));
        }
        if report.repaired.len() > run.show {
            println!(
                "  ... and {} more repaired",
                report.repaired.len() - run.show
            );
        }
    } else {
        println!(
            "{command} ({scope}; {}): {} differences",
            constrained.join(", "),
            report.differences.len()
        );
    }
    for d in report.differences.iter().take(run.show) {
        let note = if d.is_repairable() {
            ""
        } else {
            "  (not repaired: a person decides)"
        };
        println!("  {:<14} {d}{note}", kind(d));
    }
    if report.differences.len() > run.show {
        println!(
            "  ... and {} more (--show N lists more)",
            report.differences.len() - run.show
        );
    }
    if !run.repair && report.differences.iter().any(Difference::is_repairable) {
        println!("  `cqrs rebuild --constraints` repairs what can be repaired");
    }
}
