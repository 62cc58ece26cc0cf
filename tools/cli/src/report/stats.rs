//! The report's arithmetic, pure: per-scope partition counts and sizes (top partitions, a Gini
//! skew figure, item size percentiles, items over 100 KB), per-partition heat as per-second peaks,
//! and the flags raised against DynamoDB's per-partition limits.

use std::collections::HashMap;

use serde::Serialize;

/// DynamoDB's write limit of one partition: 1,000 write units per second.
pub const PARTITION_WCU: f64 = 1000.0;
/// DynamoDB's read limit of one partition: 3,000 read units per second.
pub const PARTITION_RCU: f64 = 3000.0;
/// Items over this size are counted and flagged (a read of one costs 25+ read units).
pub const LARGE_ITEM_BYTES: u64 = 100 * 1024;
/// How many partitions the top lists hold.
pub const TOP_N: usize = 20;

/// The thresholds of the flags.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Thresholds {
    /// A heat flag is raised at this fraction of the partition limit (0.8: 800 WCU/s, 2,400 RCU/s).
    pub heat: f64,
    /// A partition holding at least this share of its scope's items is hot.
    pub hot_share: f64,
    /// A scope with a Gini coefficient at least this high (and 5+ partitions) is skewed.
    pub gini: f64,
    /// Scopes with fewer items read than this are too small to call hot or skewed.
    pub min_items: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            heat: 0.8,
            hot_share: 0.5,
            gini: 0.6,
            min_items: 50,
        }
    }
}

/// One item as the report sees it: where it lives and how big it is.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemFacts {
    /// Its entity (`entity`, else `type`, else `-`).
    pub entity: String,
    /// Its table partition.
    pub pk: String,
    /// DynamoDB's size of the item.
    pub size: u64,
    /// The index partitions it is in: (index name, partition).
    pub indexes: Vec<(String, String)>,
}

/// One write or read of a partition at one second.
#[derive(Debug, Clone, PartialEq)]
pub struct Touch {
    /// `table <name>` or `index <name>`.
    pub scope: String,
    /// The partition.
    pub partition: String,
    /// Unix seconds.
    pub second: i64,
    /// Capacity units (already scaled by any sample rate).
    pub units: f64,
}

/// Counts of one scope (an entity's table partitions, or an index) while reading.
#[derive(Debug, Default)]
pub struct ScopeCounter {
    partitions: HashMap<String, (u64, u64)>,
    sizes: Vec<u64>,
}

impl ScopeCounter {
    /// Adds one item of `size` bytes in `partition`.
    pub fn add(&mut self, partition: &str, size: u64) {
        let entry = self.partitions.entry(partition.to_string()).or_default();
        entry.0 += 1;
        entry.1 += size;
        self.sizes.push(size);
    }
}

/// One partition in a top list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartitionFigure {
    /// The partition (for a native multi-attribute key, its values joined by ` / `).
    pub partition: String,
    /// Items read in it.
    pub items: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Its share of the scope's items read.
    pub share: f64,
}

/// Item size percentiles, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
}

/// One bar of the partition size distribution: how many partitions hold `min..=max` items.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeBucket {
    /// Smallest item count of the bucket.
    pub min: u64,
    /// Largest item count of the bucket.
    pub max: u64,
    /// Partitions in it.
    pub partitions: u64,
}

/// The figures of one scope.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScopeReport {
    /// `entity <name>` or `index <name>`.
    pub scope: String,
    /// Items read.
    pub items_read: u64,
    /// Estimated items of the whole table (items read / fraction read).
    pub items: u64,
    /// Distinct partitions read.
    pub partitions_read: u64,
    /// Estimated distinct partitions of the whole table.
    pub partitions: u64,
    /// The largest partitions by items.
    pub top_by_items: Vec<PartitionFigure>,
    /// The largest partitions by bytes.
    pub top_by_bytes: Vec<PartitionFigure>,
    /// Gini coefficient of items per partition: 0 even, towards 1 all in one.
    pub gini: f64,
    /// Item sizes.
    pub item_bytes: Percentiles,
    /// Items over 100 KB.
    pub over_100kb: u64,
    /// Partitions by item count (powers of two).
    pub distribution: Vec<SizeBucket>,
}

/// Turns the counters into reports, scaling estimates by the fraction of the table read.
pub fn scope_reports(counters: HashMap<String, ScopeCounter>, fraction: f64) -> Vec<ScopeReport> {
    let mut reports: Vec<ScopeReport> = counters
        .into_iter()
        .map(|(scope, c)| scope_report(scope, c, fraction))
        .collect();
    reports.sort_by(|a, b| a.scope.cmp(&b.scope));
    reports
}

fn scope_report(scope: String, mut c: ScopeCounter, fraction: f64) -> ScopeReport {
    let items_read = c.sizes.len() as u64;
    let scale = |n: u64| (n as f64 / fraction.max(f64::MIN_POSITIVE)).round() as u64;
    let figure = |(partition, (items, bytes)): (&String, &(u64, u64))| PartitionFigure {
        partition: partition.clone(),
        items: *items,
        bytes: *bytes,
        share: *items as f64 / items_read.max(1) as f64,
    };
    let mut all: Vec<PartitionFigure> = c.partitions.iter().map(figure).collect();
    all.sort_by(|a, b| {
        b.items
            .cmp(&a.items)
            .then(b.bytes.cmp(&a.bytes))
            .then(a.partition.cmp(&b.partition))
    });
    let top_by_items = all.iter().take(TOP_N).cloned().collect();
    all.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.items.cmp(&a.items))
            .then(a.partition.cmp(&b.partition))
    });
    let top_by_bytes = all.iter().take(TOP_N).cloned().collect();
    let counts: Vec<u64> = c.partitions.values().map(|(n, _)| *n).collect();
    c.sizes.sort_unstable();
    ScopeReport {
        items_read,
        items: scale(items_read),
        partitions_read: counts.len() as u64,
        partitions: scale(counts.len() as u64),
        top_by_items,
        top_by_bytes,
        gini: gini(&counts),
        item_bytes: percentiles(&c.sizes),
        over_100kb: c.sizes.iter().filter(|s| **s > LARGE_ITEM_BYTES).count() as u64,
        distribution: distribution(&counts),
        scope,
    }
}

/// The Gini coefficient of non-negative counts: 0 when every partition holds the same, towards 1
/// when one holds everything.
pub fn gini(counts: &[u64]) -> f64 {
    let n = counts.len();
    let total: u64 = counts.iter().sum();
    if n < 2 || total == 0 {
        return 0.0;
    }
    let mut sorted = counts.to_vec();
    sorted.sort_unstable();
    let weighted: f64 = sorted
        .iter()
        .enumerate()
        .map(|(i, x)| (i as f64 + 1.0) * *x as f64)
        .sum();
    let n = n as f64;
    (2.0 * weighted / (n * total as f64) - (n + 1.0) / n).max(0.0)
}

/// Nearest-rank percentiles of sorted sizes.
pub fn percentiles(sorted: &[u64]) -> Percentiles {
    let rank = |p: f64| -> u64 {
        if sorted.is_empty() {
            return 0;
        }
        let index = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
        sorted.get(index).copied().unwrap_or_default()
    };
    Percentiles {
        p50: rank(0.50),
        p90: rank(0.90),
        p99: rank(0.99),
        max: sorted.last().copied().unwrap_or_default(),
    }
}

fn distribution(counts: &[u64]) -> Vec<SizeBucket> {
    let mut buckets: Vec<SizeBucket> = Vec::new();
    let mut min = 1u64;
    let largest = counts.iter().copied().max().unwrap_or(0);
    while min <= largest {
        let max = min.saturating_mul(2) - 1;
        let partitions = counts.iter().filter(|c| (min..=max).contains(*c)).count() as u64;
        buckets.push(SizeBucket {
            min,
            max,
            partitions,
        });
        min = min.saturating_mul(2);
    }
    buckets
}

/// One partition's heat: its per-second peak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeatFigure {
    /// `table <name>` or `index <name>`.
    pub scope: String,
    /// The partition.
    pub partition: String,
    /// Most capacity units in one second.
    pub peak_per_second: f64,
    /// That second (RFC 3339).
    pub peak_at: String,
    /// Units over the whole window.
    pub total: f64,
}

/// Heat over time of one partition: per-second peaks per column of the chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeatSeries {
    /// The partition's scope.
    pub scope: String,
    /// The partition.
    pub partition: String,
    /// The first second (RFC 3339).
    pub start: String,
    /// Seconds per column.
    pub seconds_per_column: i64,
    /// The largest per-second figure within each column.
    pub peaks: Vec<f64>,
}

/// Write or read heat.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeatReport {
    /// `write` or `read`.
    pub kind: &'static str,
    /// The per-partition limit (1,000 WCU or 3,000 RCU per second).
    pub limit_per_second: f64,
    /// What was counted (history versions, access log lines).
    pub events: u64,
    /// The hottest partitions, by per-second peak.
    pub hottest: Vec<HeatFigure>,
    /// The hottest partition over time.
    pub series: Option<HeatSeries>,
}

/// Per-second peaks of every partition touched.
pub fn heat(kind: &'static str, limit: f64, touches: &[Touch], columns: usize) -> HeatReport {
    let mut seconds: HashMap<(&str, &str), HashMap<i64, f64>> = HashMap::new();
    for t in touches {
        *seconds
            .entry((t.scope.as_str(), t.partition.as_str()))
            .or_default()
            .entry(t.second)
            .or_default() += t.units;
    }
    let mut hottest: Vec<HeatFigure> = seconds
        .iter()
        .map(|((scope, partition), per_second)| {
            let (at, peak) = per_second
                .iter()
                .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
                .map(|(s, u)| (*s, *u))
                .unwrap_or_default();
            HeatFigure {
                scope: scope.to_string(),
                partition: partition.to_string(),
                peak_per_second: peak,
                peak_at: rfc3339(at),
                total: per_second.values().sum(),
            }
        })
        .collect();
    hottest.sort_by(|a, b| {
        b.peak_per_second
            .total_cmp(&a.peak_per_second)
            .then(a.scope.cmp(&b.scope))
            .then(a.partition.cmp(&b.partition))
    });
    hottest.truncate(TOP_N);
    let series = hottest.first().and_then(|top| {
        let per_second = seconds.get(&(top.scope.as_str(), top.partition.as_str()))?;
        let first = touches.iter().map(|t| t.second).min()?;
        let last = touches.iter().map(|t| t.second).max()?;
        let span = last - first + 1;
        let width = ((span as f64) / columns.max(1) as f64).ceil().max(1.0) as i64;
        let n = ((span + width - 1) / width) as usize;
        let mut peaks = vec![0.0f64; n];
        for (second, units) in per_second {
            let column = ((second - first) / width) as usize;
            if let Some(p) = peaks.get_mut(column) {
                *p = p.max(*units);
            }
        }
        Some(HeatSeries {
            scope: top.scope.clone(),
            partition: top.partition.clone(),
            start: rfc3339(first),
            seconds_per_column: width,
            peaks,
        })
    });
    HeatReport {
        kind,
        limit_per_second: limit,
        events: touches.len() as u64,
        hottest,
        series,
    }
}

fn rfc3339(second: i64) -> String {
    chrono::DateTime::from_timestamp(second, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// Something the report calls out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flag {
    /// `hot-partition`, `skew`, `large-items`, `write-heat`, `read-heat`.
    pub kind: &'static str,
    /// The scope.
    pub scope: String,
    /// The partition, where one is meant.
    pub partition: Option<String>,
    /// The figure that raised it.
    pub figure: f64,
    /// The threshold it reached.
    pub threshold: f64,
    /// For people.
    pub message: String,
}

/// The flags of the figures.
pub fn flags(scopes: &[ScopeReport], heats: &[&HeatReport], thresholds: &Thresholds) -> Vec<Flag> {
    let mut flags = Vec::new();
    for s in scopes {
        let big_enough = s.items_read >= thresholds.min_items && s.partitions_read >= 2;
        if big_enough
            && let Some(top) = s.top_by_items.first()
            && top.share >= thresholds.hot_share
        {
            flags.push(Flag {
                    kind: "hot-partition",
                    scope: s.scope.clone(),
                    partition: Some(top.partition.clone()),
                    figure: top.share,
                    threshold: thresholds.hot_share,
                    message: format!(
                        "{} holds {:.0}% of the {} of {}: its reads and writes share one partition's limits",
                        top.partition,
                        top.share * 100.0,
                        plural(s.items_read, "item"),
                        s.scope
                    ),
                });
        }
        if big_enough && s.partitions_read >= 5 && s.gini >= thresholds.gini {
            flags.push(Flag {
                kind: "skew",
                scope: s.scope.clone(),
                partition: None,
                figure: s.gini,
                threshold: thresholds.gini,
                message: format!(
                    "items per partition of {} are skewed (Gini {:.2} over {} partitions)",
                    s.scope, s.gini, s.partitions_read
                ),
            });
        }
        if s.over_100kb > 0 && s.scope.starts_with("entity ") {
            flags.push(Flag {
                kind: "large-items",
                scope: s.scope.clone(),
                partition: None,
                figure: s.over_100kb as f64,
                threshold: LARGE_ITEM_BYTES as f64,
                message: format!(
                    "{} of {} over 100 KB (largest {} bytes): each read of one costs 25+ read units; keep large bodies in S3",
                    plural(s.over_100kb, "item"),
                    s.scope,
                    s.item_bytes.max
                ),
            });
        }
    }
    for h in heats {
        let threshold = h.limit_per_second * thresholds.heat;
        for f in h.hottest.iter().filter(|f| f.peak_per_second >= threshold) {
            let unit = if h.kind == "write" { "WCU" } else { "RCU" };
            flags.push(Flag {
                kind: if h.kind == "write" {
                    "write-heat"
                } else {
                    "read-heat"
                },
                scope: f.scope.clone(),
                partition: Some(f.partition.clone()),
                figure: f.peak_per_second,
                threshold,
                message: format!(
                    "{} of {} peaked at {:.0} {unit} in one second ({}), near the partition limit of {:.0} {unit}/s",
                    f.partition, f.scope, f.peak_per_second, f.peak_at, h.limit_per_second
                ),
            });
        }
    }
    flags
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gini_is_zero_when_even_and_high_when_one_holds_all() {
        assert_eq!(gini(&[5, 5, 5, 5]), 0.0);
        assert_eq!(gini(&[7]), 0.0);
        let g = gini(&[90, 2, 3, 2, 3]);
        assert!((0.65..0.8).contains(&g), "{g}");
        let g = gini(&[0, 0, 0, 100]);
        assert!((g - 0.75).abs() < 1e-9, "{g}");
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let sizes: Vec<u64> = (1..=100).collect();
        let p = percentiles(&sizes);
        assert_eq!((p.p50, p.p90, p.p99, p.max), (50, 90, 99, 100));
        assert_eq!(percentiles(&[]), Percentiles::default());
    }

    #[test]
    fn heat_is_a_per_second_peak_not_an_average() {
        // 900 writes in one second, then one per second for a minute: a per-minute average would
        // say 16 per second.
        let mut touches = Vec::new();
        for _ in 0..900 {
            touches.push(Touch {
                scope: "index gsi1".into(),
                partition: "HOT".into(),
                second: 1_700_000_000,
                units: 1.0,
            });
        }
        for s in 1..60 {
            touches.push(Touch {
                scope: "index gsi1".into(),
                partition: "COOL".into(),
                second: 1_700_000_000 + s,
                units: 1.0,
            });
        }
        let h = heat("write", PARTITION_WCU, &touches, 30);
        assert_eq!(h.hottest[0].partition, "HOT");
        assert_eq!(h.hottest[0].peak_per_second, 900.0);
        assert_eq!(h.hottest[0].peak_at, "2023-11-14T22:13:20Z");
        assert_eq!(h.hottest[1].peak_per_second, 1.0);
        let series = h.series.as_ref().unwrap();
        assert_eq!(series.seconds_per_column, 2);
        assert_eq!(series.peaks[0], 900.0);
        let flagged = flags(&[], &[&h], &Thresholds::default());
        assert_eq!(flagged.len(), 1);
        assert_eq!(flagged[0].kind, "write-heat");
        assert_eq!(flagged[0].partition.as_deref(), Some("HOT"));
    }

    #[test]
    fn a_partition_with_most_items_is_hot_and_an_even_scope_is_not() {
        let mut skewed = ScopeCounter::default();
        let mut even = ScopeCounter::default();
        for i in 0..100 {
            skewed.add(
                if i < 90 {
                    "OPEN"
                } else {
                    ["A", "B", "C", "D"][i % 4]
                },
                10,
            );
            even.add(["A", "B", "C", "D", "E"][i % 5], 10);
        }
        let reports = scope_reports(
            HashMap::from([
                ("index skewed".to_string(), skewed),
                ("index even".to_string(), even),
            ]),
            1.0,
        );
        let found = flags(&reports, &[], &Thresholds::default());
        let kinds: Vec<_> = found.iter().map(|f| (f.scope.as_str(), f.kind)).collect();
        assert_eq!(
            kinds,
            [("index skewed", "hot-partition"), ("index skewed", "skew")]
        );
        let skewed = &reports[1];
        assert_eq!(skewed.top_by_items[0].partition, "OPEN");
        assert_eq!(
            skewed
                .distribution
                .iter()
                .map(|b| b.partitions)
                .sum::<u64>(),
            5
        );
    }

    #[test]
    fn a_sample_scales_the_estimates() {
        let mut c = ScopeCounter::default();
        for i in 0..10 {
            c.add(&format!("P{i}"), 200_000);
        }
        let r = &scope_reports(HashMap::from([("entity doc".to_string(), c)]), 0.25)[0];
        assert_eq!((r.items_read, r.items, r.partitions), (10, 40, 40));
        assert_eq!(r.over_100kb, 10);
    }
}
