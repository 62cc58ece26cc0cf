//! `cqrs report`: what the data says about the key design. Reads the data table (parallel scan,
//! optionally a sample of its segments), the history table's versions over a time window (write
//! heat) and the query handler's access log (read heat), and reports per entity and per index:
//! items, distinct partitions, the top 20 partitions by items and by bytes, a Gini skew figure,
//! item size percentiles and items over 100 KB; per partition, write and read heat as per-second
//! peaks, flagged near DynamoDB's per-partition limits (1,000 WCU, 3,000 RCU per second).
//! Output: a summary on stdout, `--json FILE` for scripts and `--html FILE`, one self-contained
//! page with inline SVG charts.
//!
//! Exit codes: 0 nothing flagged, 1 something flagged, 2 the report could not be made.

mod html;
mod reads;
mod scan;
mod stats;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use cqrs_model::Model;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use scan::{Item, Plan, text};
use stats::{
    Flag, HeatReport, ItemFacts, PARTITION_RCU, PARTITION_WCU, ScopeCounter, ScopeReport,
    Thresholds, Touch,
};

/// `cqrs report`'s options.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The stack's table prefix (the template's `Prefix`): reads `<prefix>-data` and
    /// `<prefix>-history`.
    #[arg(long)]
    prefix: Option<String>,
    /// The data table (instead of `<prefix>-data`).
    #[arg(long)]
    data_table: Option<String>,
    /// The history table (instead of `<prefix>-history`); its versions give the write heat.
    #[arg(long)]
    history_table: Option<String>,
    /// The model file: which attributes are the GSIs' keys.
    #[arg(long, default_value = "model.toml")]
    model: PathBuf,
    /// Start of the heat window (RFC 3339); default 24 hours before --until.
    #[arg(long)]
    since: Option<String>,
    /// End of the heat window (RFC 3339); default now.
    #[arg(long)]
    until: Option<String>,
    /// The query handler's access log lines (local function log, or a CloudWatch Logs Insights
    /// export): read heat.
    #[arg(long)]
    access_log: Option<PathBuf>,
    /// Fraction of the table to read (whole partitions, by scan segment), e.g. 0.1 for a big
    /// table; counts are scaled up, top partitions are exact for the partitions read.
    #[arg(long, default_value_t = 1.0)]
    sample: f64,
    /// Parallel scan segments.
    #[arg(long, default_value_t = 8)]
    segments: u32,
    /// Flag heat at this fraction of a partition's limit.
    #[arg(long, default_value_t = 0.8)]
    heat_threshold: f64,
    /// Write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the report as one self-contained HTML page to this file.
    #[arg(long)]
    html: Option<PathBuf>,
}

/// The whole report, as `--json` writes it.
#[derive(Debug, Serialize)]
pub struct Report {
    /// When it was made (RFC 3339).
    pub generated_at: String,
    /// The data table read.
    pub data_table: String,
    /// The history table read, if any.
    pub history_table: Option<String>,
    /// How much of the tables was read.
    pub sample: SampleFigures,
    /// The heat window (RFC 3339).
    pub window: [String; 2],
    /// The flags' thresholds.
    pub thresholds: Thresholds,
    /// Per entity and per index.
    pub scopes: Vec<ScopeReport>,
    /// Write heat (history versions), when a history table was read.
    pub write_heat: Option<HeatReport>,
    /// Read heat (access log), when one was given.
    pub read_heat: Option<HeatReport>,
    /// What the report calls out.
    pub flags: Vec<Flag>,
}

/// The sample of a report.
#[derive(Debug, Serialize)]
pub struct SampleFigures {
    /// `TotalSegments`.
    pub segments: i32,
    /// Segments read.
    pub segments_read: usize,
    /// Fraction of the tables read.
    pub fraction: f64,
    /// Items read from the data table.
    pub data_items_read: u64,
    /// Versions read from the history table.
    pub history_items_read: u64,
    /// Access log lines counted.
    pub access_lines: u64,
}

/// Runs `cqrs report`.
pub fn run(args: ReportArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cqrs report: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match runtime.block_on(make(&args)) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("cqrs report: {e}");
            return ExitCode::from(2);
        }
    };
    print_summary(&report);
    if let Some(path) = &args.json {
        let written = serde_json::to_string_pretty(&report)
            .map_err(|e| e.to_string())
            .and_then(|text| std::fs::write(path, text).map_err(|e| e.to_string()));
        if let Err(e) = written {
            eprintln!("cqrs report: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if let Some(path) = &args.html
        && let Err(e) = std::fs::write(path, html::page(&report))
    {
        eprintln!("cqrs report: cannot write {}: {e}", path.display());
        return ExitCode::from(2);
    }
    if report.flags.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn time_arg(name: &str, value: Option<&str>) -> Result<Option<i64>, String> {
    value
        .map(|v| {
            chrono::DateTime::parse_from_rfc3339(v)
                .map(|t| t.timestamp())
                .map_err(|e| format!("--{name} {v:?} is not an RFC 3339 time: {e}"))
        })
        .transpose()
}

async fn make(args: &ReportArgs) -> Result<Report, String> {
    let data_table = args
        .data_table
        .clone()
        .or_else(|| args.prefix.as_ref().map(|p| format!("{p}-data")))
        .ok_or("give --prefix or --data-table")?;
    let history_table = args
        .history_table
        .clone()
        .or_else(|| args.prefix.as_ref().map(|p| format!("{p}-history")));
    if !(args.sample > 0.0 && args.sample <= 1.0) {
        return Err(format!("--sample {} is not in (0, 1]", args.sample));
    }
    let model_text = std::fs::read_to_string(&args.model)
        .map_err(|e| format!("cannot read {}: {e}", args.model.display()))?;
    let model = Model::parse(&model_text).map_err(|e| format!("{}: {e}", args.model.display()))?;
    let until =
        time_arg("until", args.until.as_deref())?.unwrap_or_else(|| chrono::Utc::now().timestamp());
    let since = time_arg("since", args.since.as_deref())?.unwrap_or(until - 24 * 3600);
    if since > until {
        return Err("--since is after --until".into());
    }
    let thresholds = Thresholds {
        heat: args.heat_threshold,
        ..Thresholds::default()
    };
    let plan = Plan::new(args.segments, args.sample);
    let config = aws_config::load_from_env().await;
    let client = aws_sdk_dynamodb::Client::new(&config);

    // The data table: sizes and partitions.
    let mut counters: HashMap<String, ScopeCounter> = HashMap::new();
    let bar = progress(&client, &data_table, &plan).await?;
    let data_items_read = scan::scan(&client, &data_table, &plan, &bar, |item| {
        let facts = facts(&model, &item);
        counters
            .entry(format!("entity {}", facts.entity))
            .or_default()
            .add(&facts.pk, facts.size);
        for (index, partition) in &facts.indexes {
            counters
                .entry(format!("index {index}"))
                .or_default()
                .add(partition, facts.size);
        }
    })
    .await?;
    bar.finish_and_clear();
    let scopes = stats::scope_reports(counters, plan.fraction());

    // The history table: write heat.
    let mut history_items_read = 0;
    let write_heat = match &history_table {
        None => None,
        Some(table) => {
            let mut touches = Vec::new();
            let bar = progress(&client, table, &plan).await?;
            history_items_read = scan::scan(&client, table, &plan, &bar, |item| {
                write_touches(&model, &item, since, until, &mut touches)
            })
            .await?;
            bar.finish_and_clear();
            Some(stats::heat("write", PARTITION_WCU, &touches, 120))
        }
    };

    // The access log: read heat.
    let mut access_lines = 0;
    let read_heat = match &args.access_log {
        None => None,
        Some(path) => {
            let file = std::fs::File::open(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let reads = reads::read_access_log(std::io::BufReader::new(file), since, until)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            if reads.unreadable > 0 {
                eprintln!(
                    "cqrs report: {} access line(s) of {} could not be read",
                    reads.unreadable,
                    path.display()
                );
            }
            access_lines = reads.touches.len() as u64;
            Some(stats::heat("read", PARTITION_RCU, &reads.touches, 120))
        }
    };

    let heats: Vec<&HeatReport> = write_heat.iter().chain(read_heat.iter()).collect();
    let flags = stats::flags(&scopes, &heats, &thresholds);
    let stamp = |s: i64| {
        chrono::DateTime::from_timestamp(s, 0)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_default()
    };
    Ok(Report {
        generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        data_table,
        history_table,
        sample: SampleFigures {
            segments: plan.total,
            segments_read: plan.read.len(),
            fraction: plan.fraction(),
            data_items_read,
            history_items_read,
            access_lines,
        },
        window: [stamp(since), stamp(until)],
        thresholds,
        scopes,
        write_heat,
        read_heat,
        flags,
    })
}

/// A progress bar for a scan of `table`, sized from DynamoDB's (approximate) item count.
async fn progress(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    plan: &Plan,
) -> Result<ProgressBar, String> {
    let described = client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| {
            format!(
                "table {table}: {}",
                aws_sdk_dynamodb::error::DisplayErrorContext(aws_sdk_dynamodb::Error::from(e))
            )
        })?;
    let approx = described
        .table()
        .and_then(|t| t.item_count())
        .unwrap_or(0)
        .max(0) as f64
        * plan.fraction();
    let bar = if approx >= 1.0 {
        ProgressBar::new(approx as u64)
    } else {
        ProgressBar::no_length()
    };
    let style = ProgressStyle::with_template(
        "{prefix} [{elapsed_precise}] {wide_bar} {human_pos}/~{human_len} items ({per_sec})",
    )
    .map_err(|e| e.to_string())?;
    bar.set_style(style);
    bar.set_prefix(table.to_string());
    Ok(bar)
}

/// The entity, partition, size and index partitions of one data item.
fn facts(model: &Model, item: &Item) -> ItemFacts {
    let entity = text(item, "entity")
        .or_else(|| text(item, "type"))
        .unwrap_or("-")
        .to_string();
    ItemFacts {
        entity,
        pk: text(item, "pk").unwrap_or_default().to_string(),
        size: cqrs_item::item_size(item) as u64,
        indexes: index_partitions(model, item),
    }
}

/// The partitions of the model's GSIs that an item is in (an item missing a key attribute is not
/// in that index). A native multi-attribute partition is shown as its values joined by ` / `.
fn index_partitions(model: &Model, item: &Item) -> Vec<(String, String)> {
    model
        .indexes()
        .iter()
        .filter_map(|index| {
            let values: Option<Vec<&str>> = index.pk.iter().map(|k| text(item, &k.name)).collect();
            Some((index.name.clone(), values?.join(" / ")))
        })
        .collect()
}

/// The writes one history version made: its data table partition and its index partitions, at
/// the second it was written, one write unit per KB.
fn write_touches(model: &Model, item: &Item, since: i64, until: i64, touches: &mut Vec<Touch>) {
    let Some(second) = text(item, "updatedAt")
        .or_else(|| text(item, "createdAt"))
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp())
    else {
        return;
    };
    if second < since || second > until {
        return;
    }
    let units = (cqrs_item::item_size(item) as f64 / 1024.0).ceil().max(1.0);
    if let Some(pk) = text(item, "pk") {
        touches.push(Touch {
            scope: "table data".into(),
            partition: pk.to_string(),
            second,
            units,
        });
    }
    for (index, partition) in index_partitions(model, item) {
        touches.push(Touch {
            scope: format!("index {index}"),
            partition,
            second,
            units,
        });
    }
}

fn print_summary(report: &Report) {
    println!(
        "{}: {} items read ({:.0}% of the table, {} of {} segments)",
        report.data_table,
        report.sample.data_items_read,
        report.sample.fraction * 100.0,
        report.sample.segments_read,
        report.sample.segments
    );
    for s in &report.scopes {
        let top = s
            .top_by_items
            .first()
            .map(|t| format!("{} ({:.0}%)", t.partition, t.share * 100.0))
            .unwrap_or_default();
        println!(
            "  {:<24} {:>9} items {:>7} partitions  gini {:.2}  p50 {} B  p99 {} B  >100KB {}  top {top}",
            s.scope,
            s.items,
            s.partitions,
            s.gini,
            s.item_bytes.p50,
            s.item_bytes.p99,
            s.over_100kb
        );
    }
    for h in [&report.write_heat, &report.read_heat]
        .into_iter()
        .flatten()
    {
        let unit = if h.kind == "write" { "WCU" } else { "RCU" };
        println!("{} heat ({} events), per-second peaks:", h.kind, h.events);
        for f in h.hottest.iter().take(5) {
            println!(
                "  {:<24} {:<40} {:>8.0} {unit}/s at {}",
                f.scope, f.partition, f.peak_per_second, f.peak_at
            );
        }
    }
    if report.flags.is_empty() {
        println!("nothing flagged");
    }
    for f in &report.flags {
        println!("FLAG {}: {}", f.kind, f.message);
    }
}
