//! `cqrs verify --sql` and `cqrs rebuild --sql`: the relational read model (PostgreSQL) compared
//! with the data table, and repaired from it (`cqrs_sql::verify`).
//!
//! The data table is scanned in parallel segments; each state is the row it must be under the
//! service's model; PostgreSQL is read back, from every table of the read model it holds, and
//! compared (`missing`, `behind`, `ahead`, `misplaced`, `content`, `orphan`, `unstorable`). The
//! scan and PostgreSQL are not read at one instant while sql-sync writes, so `verify --sql`
//! confirms each difference by reading its item again on both sides (a consistent `BatchGetItem`)
//! before it reports it. `rebuild --sql` repairs the differences newest-wins from the item read
//! again, as sql-sync writes (never a version lowered, never a removal undone; each item locked
//! against sql-sync while it is repaired), then reads every repaired item again on both sides to
//! say what remains (`cqrs_sql::verify::reconcile`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use cqrs_model::Model;
use cqrs_sql::rows::Rows;
use cqrs_sql::verify::{SqlDifference, reconcile};
use cqrs_store::rebuild::{ItemTable, ScanScope};

use super::{Connection, EXIT_DIFFERENCE, Need, fail, spinner};

/// What `--sql` runs: compare, or compare and repair.
pub struct SqlRun<'a> {
    /// The tables.
    pub connection: &'a Connection,
    /// The database's connection string.
    pub url: &'a str,
    /// The service's model file.
    pub model: &'a Path,
    /// Parallel scan segments of the data table.
    pub segments: u32,
    /// How many differing keys to list.
    pub show: usize,
    /// JSON output.
    pub json: bool,
    /// Repair what differs.
    pub repair: bool,
}

/// Runs it; the exit code is 1 when differences remain.
pub async fn run(run: SqlRun<'_>) -> ExitCode {
    let command = if run.repair {
        "rebuild --sql"
    } else {
        "verify --sql"
    };
    match go(&run).await {
        Ok(code) => code,
        Err(e) => fail(command, e),
    }
}

async fn go(run: &SqlRun<'_>) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(run.model)
        .map_err(|e| format!("cannot read the model file {}: {e}", run.model.display()))?;
    let model = Model::parse(&text).map_err(|e| format!("{}: {e}", run.model.display()))?;
    let rows = Rows::new(model);
    let store = run.connection.store(&[Need::Data]).await?;
    let progress = spinner(run.json, "data table rows read");
    let scope = ScanScope {
        tenant: None,
        entity: None,
    };
    let items =
        super::verify::scan_all(&store, ItemTable::Data, &scope, run.segments, &progress).await?;
    progress.finish_and_clear();
    let count = items.len();
    let expected: Vec<_> = items.into_iter().map(|item| rows.row(item)).collect();
    let (mut client, connection) = tokio_postgres::connect(run.url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("connecting to the database: {e}"))?;
    tokio::spawn(connection);
    // The data table's items of some keys as they are now (strongly consistent).
    let reread = |keys: Vec<(String, String)>| {
        let store = &store;
        async move { store.get_data_items(&keys).await }
    };
    let outcome = reconcile(&mut client, &rows, &expected, run.repair, reread)
        .await
        .map_err(|e| e.to_string())?;
    let differences = outcome.remaining;
    report(run, count, &outcome.found, outcome.repaired, &differences);
    Ok(if differences.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DIFFERENCE)
    })
}

fn counts(differences: &[SqlDifference]) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for d in differences {
        *counts.entry(d.kind).or_default() += 1;
    }
    counts
}

fn report(
    run: &SqlRun<'_>,
    items: usize,
    found: &[SqlDifference],
    repaired: usize,
    remaining: &[SqlDifference],
) {
    let first = |list: &[SqlDifference]| -> Vec<serde_json::Value> {
        list.iter()
            .take(run.show)
            .map(|d| {
                serde_json::json!({"kind": d.kind, "pk": d.pk, "sk": d.sk,
                    "dataVersion": d.data_version, "sqlVersion": d.sql_version})
            })
            .collect()
    };
    if run.json {
        let out = serde_json::json!({
            "dataItems": items,
            "differences": found.len(),
            "byKind": counts(found),
            "first": first(found),
            "repaired": repaired,
            "remaining": remaining.len(),
            "remainingByKind": counts(remaining),
            "remainingFirst": first(remaining),
        });
        println!("{out}");
        return;
    }
    let kinds: Vec<String> = counts(found)
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    println!(
        "{}: {items} items in the data table: {} differences in PostgreSQL{}",
        if run.repair {
            "rebuild --sql"
        } else {
            "verify --sql"
        },
        found.len(),
        if kinds.is_empty() {
            String::new()
        } else {
            format!(" ({})", kinds.join(", "))
        }
    );
    let v = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    for d in found.iter().take(run.show) {
        println!(
            "  {:<10} {} / {}  data v{}  sql v{}",
            d.kind,
            d.pk,
            d.sk,
            v(d.data_version),
            v(d.sql_version)
        );
    }
    if run.repair {
        let kinds: Vec<String> = counts(remaining)
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        println!(
            "repaired {repaired}; {} differences remain (each item read again on both sides){}",
            remaining.len(),
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            }
        );
        for d in remaining.iter().take(run.show) {
            println!(
                "  {:<10} {} / {}  data v{}  sql v{}",
                d.kind,
                d.pk,
                d.sk,
                v(d.data_version),
                v(d.sql_version)
            );
        }
    }
}
