//! The report as one self-contained HTML page: inline CSS and SVG charts (top partitions, the
//! partition size distribution, heat over time), nothing fetched from the network. A few lines of
//! inline script only mark each chart with how many bars the browser drew (`data-drawn`), so a
//! test can tell a drawn chart from markup that renders nothing.

use std::fmt::Write;

use super::Report;
use super::stats::{HeatReport, ScopeReport};

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d2330;max-width:1100px}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccd}h3{font-size:15px;margin:20px 0 6px}\
table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #e3e6ee;text-align:right}\
td:first-child,th:first-child{text-align:left}.flag{color:#9b1c1c}.ok{color:#1c6b2e}\
svg{display:block;margin:6px 0;background:#fafbfd;border:1px solid #e3e6ee}\
.bar{fill:#3b6fd8}.hot .bar{fill:#d8553b}.label,.value,.axis{font-size:12px;fill:#1d2330}\
.limit{stroke:#d8553b;stroke-dasharray:6 4}.threshold{stroke:#e0a030;stroke-dasharray:3 3}.muted{color:#667}";

const SCRIPT: &str = "for(const s of document.querySelectorAll('svg.chart')){let n=0;\
for(const r of s.querySelectorAll('rect.bar')){const b=r.getBoundingClientRect();if(b.width>0&&b.height>0)n++}\
s.setAttribute('data-drawn',String(n))}";

/// Escapes text for HTML and SVG.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let head: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{head}…")
    }
}

/// The page.
pub fn page(report: &Report) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>cqrs report: {table}</title><style>{CSS}</style></head><body>\
         <h1>Partition report: {table}</h1><p class=\"muted\">Made {at}; read {pct:.0}% of the table ({read} of {total} scan segments, {items} items); heat window {from} to {to}.</p>",
        table = esc(&report.data_table),
        at = esc(&report.generated_at),
        pct = report.sample.fraction * 100.0,
        read = report.sample.segments_read,
        total = report.sample.segments,
        items = report.sample.data_items_read,
        from = esc(&report.window[0]),
        to = esc(&report.window[1]),
    );
    out.push_str("<section id=\"flags\"><h2>Flags</h2>");
    if report.flags.is_empty() {
        out.push_str("<p class=\"ok\">Nothing flagged.</p>");
    } else {
        out.push_str("<ul>");
        for f in &report.flags {
            let _ = write!(
                out,
                "<li class=\"flag\" data-kind=\"{}\"><b>{}</b>: {}</li>",
                esc(f.kind),
                esc(f.kind),
                esc(&f.message)
            );
        }
        out.push_str("</ul>");
    }
    out.push_str("</section>");
    summary_table(&mut out, &report.scopes);
    let hot: Vec<(&str, &str)> = report
        .flags
        .iter()
        .filter_map(|f| Some((f.scope.as_str(), f.partition.as_deref()?)))
        .collect();
    for s in &report.scopes {
        let _ = write!(
            out,
            "<section class=\"scope\" data-scope=\"{0}\"><h3>{0}</h3><p class=\"muted\">Top {1} partitions by items</p>",
            esc(&s.scope),
            s.top_by_items.len()
        );
        top_chart(&mut out, s, &hot);
        out.push_str(
            "<p class=\"muted\">Partition size distribution (partitions by item count)</p>",
        );
        distribution_chart(&mut out, s);
        top_bytes_table(&mut out, s);
        out.push_str("</section>");
    }
    for heat in [&report.write_heat, &report.read_heat]
        .into_iter()
        .flatten()
    {
        heat_section(&mut out, heat, report.thresholds.heat);
    }
    let _ = writeln!(out, "<script>{SCRIPT}</script></body></html>");
    out
}

fn summary_table(out: &mut String, scopes: &[ScopeReport]) {
    out.push_str("<section id=\"scopes\"><h2>Entities and indexes</h2><table><tr><th>scope</th><th>items</th><th>partitions</th><th>Gini</th><th>p50 B</th><th>p90 B</th><th>p99 B</th><th>max B</th><th>&gt;100 KB</th></tr>");
    for s in scopes {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&s.scope),
            s.items,
            s.partitions,
            s.gini,
            s.item_bytes.p50,
            s.item_bytes.p90,
            s.item_bytes.p99,
            s.item_bytes.max,
            s.over_100kb
        );
    }
    out.push_str("</table></section>");
}

/// Horizontal bars, one per partition of the top list, labelled with the partition.
fn top_chart(out: &mut String, s: &ScopeReport, hot: &[(&str, &str)]) {
    const LABEL: f64 = 380.0;
    const BAR: f64 = 460.0;
    const ROW: f64 = 22.0;
    let height = ROW * s.top_by_items.len() as f64 + 10.0;
    let max = s
        .top_by_items
        .iter()
        .map(|p| p.items)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let _ = write!(
        out,
        "<svg class=\"chart top\" data-scope=\"{}\" width=\"960\" height=\"{height}\" viewBox=\"0 0 960 {height}\" role=\"img\">",
        esc(&s.scope)
    );
    for (i, p) in s.top_by_items.iter().enumerate() {
        let y = 5.0 + ROW * i as f64;
        let width = (p.items as f64 / max * BAR).max(1.0);
        let class = if hot.contains(&(s.scope.as_str(), p.partition.as_str())) {
            " class=\"hot\""
        } else {
            ""
        };
        let _ = write!(
            out,
            "<g{class}><title>{full}: {items} items, {bytes} bytes</title>\
             <text class=\"label\" x=\"{lx}\" y=\"{ty}\" text-anchor=\"end\">{label}</text>\
             <rect class=\"bar\" x=\"{LABEL}\" y=\"{y}\" width=\"{width:.1}\" height=\"{h}\"></rect>\
             <text class=\"value\" x=\"{vx:.1}\" y=\"{ty}\">{items} ({share:.0}%)</text></g>",
            full = esc(&p.partition),
            label = esc(&short(&p.partition, 52)),
            items = p.items,
            bytes = p.bytes,
            lx = LABEL - 8.0,
            ty = y + 14.0,
            h = ROW - 6.0,
            vx = LABEL + width + 6.0,
            share = p.share * 100.0,
        );
    }
    out.push_str("</svg>");
}

/// Vertical bars: how many partitions hold 1, 2-3, 4-7, ... items.
fn distribution_chart(out: &mut String, s: &ScopeReport) {
    let n = s.distribution.len().max(1) as f64;
    let column = (900.0 / n).min(80.0);
    let max = s
        .distribution
        .iter()
        .map(|b| b.partitions)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let _ = write!(
        out,
        "<svg class=\"chart distribution\" data-scope=\"{}\" width=\"960\" height=\"170\" viewBox=\"0 0 960 170\" role=\"img\">",
        esc(&s.scope)
    );
    for (i, b) in s.distribution.iter().enumerate() {
        let x = 40.0 + column * i as f64;
        let label = if b.min == b.max {
            b.min.to_string()
        } else {
            format!("{}-{}", b.min, b.max)
        };
        let _ = write!(
            out,
            "<text class=\"axis\" x=\"{cx:.1}\" y=\"162\" text-anchor=\"middle\">{label}</text>",
            cx = x + column / 2.0
        );
        if b.partitions > 0 {
            let h = (b.partitions as f64 / max * 120.0).max(1.0);
            let _ = write!(
                out,
                "<g><title>{} partitions hold {label} items</title><rect class=\"bar\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\"></rect>\
                 <text class=\"value\" x=\"{cx:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\">{}</text></g>",
                b.partitions,
                b.partitions,
                y = 140.0 - h,
                w = column - 4.0,
                cx = x + column / 2.0,
                ty = 136.0 - h,
            );
        }
    }
    out.push_str("</svg>");
}

fn top_bytes_table(out: &mut String, s: &ScopeReport) {
    out.push_str("<details><summary>Top partitions by bytes</summary><table><tr><th>partition</th><th>bytes</th><th>items</th></tr>");
    for p in &s.top_by_bytes {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&p.partition),
            p.bytes,
            p.items
        );
    }
    out.push_str("</table></details>");
}

/// The hottest partition's per-second peaks over the window, the limit and the flag threshold,
/// and the table of the hottest partitions.
fn heat_section(out: &mut String, heat: &HeatReport, fraction: f64) {
    let unit = if heat.kind == "write" { "WCU" } else { "RCU" };
    let _ = write!(
        out,
        "<section id=\"{kind}-heat\"><h2>{Kind} heat</h2><p class=\"muted\">{events} events; per-second peaks (not per-minute averages). Partition limit {limit:.0} {unit}/s.</p>",
        kind = heat.kind,
        Kind = if heat.kind == "write" {
            "Write"
        } else {
            "Read"
        },
        events = heat.events,
        limit = heat.limit_per_second,
    );
    if let Some(series) = &heat.series {
        let peak = series.peaks.iter().copied().fold(0.0f64, f64::max);
        let top = peak.max(1.0) * 1.15;
        let n = series.peaks.len().max(1) as f64;
        let column = 880.0 / n;
        let _ = write!(
            out,
            "<p>{} over time: <b>{}</b> ({}), {} s per column from {}</p>\
             <svg class=\"chart heat\" data-kind=\"{}\" data-partition=\"{}\" width=\"960\" height=\"230\" viewBox=\"0 0 960 230\" role=\"img\">",
            esc(&series.scope),
            esc(&series.partition),
            unit,
            series.seconds_per_column,
            esc(&series.start),
            heat.kind,
            esc(&series.partition),
        );
        let y = |v: f64| 200.0 - v / top * 180.0;
        for (i, v) in series.peaks.iter().enumerate() {
            if *v > 0.0 {
                let h = (200.0 - y(*v)).max(1.0);
                let _ = write!(
                    out,
                    "<rect class=\"bar\" x=\"{x:.1}\" y=\"{top:.1}\" width=\"{w:.2}\" height=\"{h:.1}\"><title>{v:.0} {unit}/s</title></rect>",
                    x = 50.0 + column * i as f64,
                    top = 200.0 - h,
                    w = (column - 1.0).max(0.5),
                );
            }
        }
        for (class, value, label) in [
            ("limit", heat.limit_per_second, "limit"),
            ("threshold", heat.limit_per_second * fraction, "flag"),
        ] {
            if value <= top {
                let _ = write!(
                    out,
                    "<line class=\"{class}\" x1=\"50\" x2=\"930\" y1=\"{y:.1}\" y2=\"{y:.1}\"></line><text class=\"axis\" x=\"46\" y=\"{ty:.1}\" text-anchor=\"end\">{label}</text>",
                    y = y(value),
                    ty = y(value) + 4.0,
                );
            }
        }
        let _ = write!(
            out,
            "<text class=\"axis\" x=\"46\" y=\"{:.1}\" text-anchor=\"end\">{peak:.0}</text><text class=\"axis\" x=\"46\" y=\"204\" text-anchor=\"end\">0</text></svg>",
            y(peak) + 4.0
        );
    }
    let _ = write!(
        out,
        "<table><tr><th>scope</th><th>partition</th><th>peak {unit}/s</th><th>at</th><th>total {unit}</th></tr>"
    );
    for f in &heat.hottest {
        let class = if f.peak_per_second >= heat.limit_per_second * fraction {
            " class=\"flag\""
        } else {
            ""
        };
        let _ = write!(
            out,
            "<tr{class}><td>{}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{:.0}</td></tr>",
            esc(&f.scope),
            esc(&f.partition),
            f.peak_per_second,
            esc(&f.peak_at),
            f.total
        );
    }
    out.push_str("</table></section>");
}
