//! `cqrs report` against DynamoDB Local: a seeded skewed data set (one hot status partition, one
//! large item class, a write burst and a read burst on the hot partition) is flagged on every count;
//! an even one is not; a sample reads part of the table and scales its counts.

mod common;

use common::{
    ATTACHMENTS, BURST_READS, BURST_WRITES, HOT_PARTITION, READ_SAMPLE, Shape, TICKETS, report,
};
use serde_json::Value;

fn scope<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["scope"] == name)
        .unwrap_or_else(|| panic!("no scope {name} in {report:#}"))
}

fn flagged<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["flags"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

#[tokio::test]
async fn a_skewed_data_set_is_flagged() {
    let (code, out, report) = report(Shape::Skewed, "skewed", &[]).await;
    assert_eq!(code, 1, "something flagged: exit 1\n{out}");

    let tickets = scope(&report, "entity ticket");
    assert_eq!(tickets["items"], TICKETS as u64);
    assert_eq!(tickets["partitions"], TICKETS as u64);
    assert_eq!(tickets["top_by_items"].as_array().unwrap().len(), 20);
    let status = scope(&report, "index gsi1");
    assert_eq!(status["partitions"], 5);
    assert_eq!(status["top_by_items"][0]["partition"], HOT_PARTITION);
    assert_eq!(
        status["top_by_items"][0]["items"],
        (TICKETS * 9 / 10) as u64
    );
    let gini = status["gini"].as_f64().unwrap();
    assert!((0.65..0.75).contains(&gini), "gini {gini}");

    let hot = flagged(&report, "hot-partition");
    assert_eq!(hot.len(), 1, "{hot:#?}");
    assert_eq!(hot[0]["scope"], "index gsi1");
    assert_eq!(hot[0]["partition"], HOT_PARTITION);
    assert_eq!(flagged(&report, "skew")[0]["scope"], "index gsi1");

    let attachments = scope(&report, "entity attachment");
    assert_eq!(attachments["items"], ATTACHMENTS as u64);
    assert_eq!(attachments["over_100kb"], (ATTACHMENTS / 10) as u64);
    assert!(attachments["item_bytes"]["max"].as_u64().unwrap() > 120 * 1024);
    let large = flagged(&report, "large-items");
    assert_eq!(large.len(), 1);
    assert_eq!(large[0]["scope"], "entity attachment");

    // The burst: 900 writes in one second on the status partition, a per-second peak.
    let writes = flagged(&report, "write-heat");
    assert_eq!(writes.len(), 1, "{writes:#?}");
    assert_eq!(writes[0]["scope"], "index gsi1");
    assert_eq!(writes[0]["partition"], HOT_PARTITION);
    assert_eq!(writes[0]["figure"], BURST_WRITES as f64);
    assert_eq!(
        report["write_heat"]["hottest"][0]["peak_at"],
        "2026-01-01T00:00:30Z"
    );
    // 120 sampled lines at 4%: 3,000 reads in one second.
    let reads = flagged(&report, "read-heat");
    assert_eq!(reads.len(), 1, "{reads:#?}");
    assert_eq!(reads[0]["partition"], HOT_PARTITION);
    let expected = BURST_READS as f64 / READ_SAMPLE;
    assert!((reads[0]["figure"].as_f64().unwrap() - expected).abs() < 1e-6);
    println!(
        "report: skewed set of {} items flagged {} finding(s): {}",
        TICKETS + ATTACHMENTS,
        report["flags"].as_array().unwrap().len(),
        report["flags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["kind"].as_str().unwrap())
            .collect::<Vec<_>>()
            .join(", ")
    );
}

#[tokio::test]
async fn an_even_data_set_is_not_flagged() {
    let (code, out, report) = report(Shape::Even, "even", &[]).await;
    assert_eq!(report["flags"], Value::Array(vec![]), "{out}");
    assert_eq!(code, 0);
    assert!(out.contains("nothing flagged"));
    let status = scope(&report, "index gsi1");
    assert_eq!(status["partitions"], 5);
    assert_eq!(status["gini"], 0.0);
    assert_eq!(scope(&report, "entity attachment")["over_100kb"], 0);
    // The heat was counted, and is low.
    let peak = report["write_heat"]["hottest"][0]["peak_per_second"]
        .as_f64()
        .unwrap();
    assert!((1.0..10.0).contains(&peak), "{peak}");
    assert!(report["read_heat"]["events"].as_u64().unwrap() == BURST_READS as u64);
    println!(
        "report: even set of {} items, 0 findings",
        TICKETS + ATTACHMENTS
    );
}

#[tokio::test]
async fn a_sample_reads_part_of_the_table_and_scales_its_counts() {
    let (_, _, report) = report(
        Shape::Skewed,
        "sampled",
        &["--sample", "0.5", "--segments", "4"],
    )
    .await;
    assert_eq!(report["sample"]["segments_read"], 2);
    let tickets = scope(&report, "entity ticket");
    let read = tickets["items_read"].as_u64().unwrap();
    let estimate = tickets["items"].as_u64().unwrap();
    assert!(read < TICKETS as u64 && read > 0, "{read}");
    assert_eq!(estimate, read * 2);
    // Segments split by partition: each partition read is read whole.
    assert!(tickets["top_by_items"][0]["items"] == 1);
    println!("report: a 50% sample read {read} of {TICKETS} tickets, estimated {estimate}");
}
