//! `cqrs verify --sql` and `cqrs rebuild --sql`: the relational read model (PostgreSQL) compared
//! with the data table, and repaired from it (`cqrs_sql::verify`).
//!
//! The data table is scanned in parallel segments; each state is the row it must be under the
//! service's model; PostgreSQL is read back and compared (`missing`, `behind`, `ahead`, `misplaced`,
//! `content`, `orphan`). `rebuild --sql` then writes the data table's state over every difference in
//! one transaction, and verifies again.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use cqrs_model::Model;
use cqrs_sql::schema::Schema;
use cqrs_sql::verify::{SqlDifference, compare, repair};
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
    let schema = Schema::of(&model);
    let store = run.connection.store(&[Need::Data]).await?;
    let progress = spinner(run.json, "data table rows read");
    let scope = ScanScope {
        tenant: None,
        entity: None,
    };
    let items =
        super::verify::scan_all(&store, ItemTable::Data, &scope, run.segments, &progress).await?;
    progress.finish_and_clear();
    let expected: Vec<_> = items
        .iter()
        .map(|item| cqrs_sql::rows::row(&model, &schema, item))
        .collect();
    let (mut client, connection) = tokio_postgres::connect(run.url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("connecting to the database: {e}"))?;
    tokio::spawn(connection);
    let sql_error = |e: tokio_postgres::Error| match e.as_db_error() {
        Some(db) => format!("the database: {}", db.message()),
        None => format!("the database: {e}"),
    };
    let mut differences = compare(&client, &schema, &expected)
        .await
        .map_err(sql_error)?;
    let found = differences.clone();
    let mut repaired = 0;
    if run.repair && !differences.is_empty() {
        repaired = repair(&mut client, &schema, &expected, &differences)
            .await
            .map_err(sql_error)?;
        differences = compare(&client, &schema, &expected)
            .await
            .map_err(sql_error)?;
    }
    report(run, items.len(), &found, repaired, &differences);
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
            "  {:<9} {} / {}  data v{}  sql v{}",
            d.kind,
            d.pk,
            d.sk,
            v(d.data_version),
            v(d.sql_version)
        );
    }
    if run.repair {
        println!(
            "repaired {repaired}; {} differences remain",
            remaining.len()
        );
    }
}
