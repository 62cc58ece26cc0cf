//! Read heat from the query handler's access log: one JSON object per sampled request,
//! `{"cqrsAccess":1,"ms":<unix ms>,"table":"data","index":null,"pk":"...","op":"query","items":3,"sampleRate":0.01}`,
//! found in a line as the function printed it (local function log), inside a JSON export of
//! CloudWatch Logs Insights (`"@message": "..."`) or in its CSV export (quotes doubled). Every line
//! counts `1 / sampleRate` requests, each at least one read unit.

use std::io::BufRead;

use serde::Deserialize;

use super::stats::Touch;

/// The marker every access line starts with.
const MARKER: &str = "{\"cqrsAccess\"";

#[derive(Debug, Deserialize)]
struct AccessLine {
    ms: i64,
    table: String,
    index: Option<String>,
    pk: String,
    #[serde(rename = "sampleRate")]
    sample_rate: f64,
}

/// What the access log held.
#[derive(Debug, Default)]
pub struct Reads {
    /// One touch per line, scaled by its sample rate.
    pub touches: Vec<Touch>,
    /// Lines that held the marker but could not be read.
    pub unreadable: u64,
}

/// Reads every access line of `reader` whose time falls in `from..=to` (unix seconds).
pub fn read_access_log(reader: impl BufRead, from: i64, to: i64) -> std::io::Result<Reads> {
    let mut reads = Reads::default();
    for line in reader.lines() {
        let line = line?;
        let Some(access) = find(&line) else {
            if line.contains("cqrsAccess") {
                reads.unreadable += 1;
            }
            continue;
        };
        let second = access.ms.div_euclid(1000);
        if second < from || second > to {
            continue;
        }
        let rate = if access.sample_rate > 0.0 && access.sample_rate <= 1.0 {
            access.sample_rate
        } else {
            1.0
        };
        let scope = match (&access.index, access.table.as_str()) {
            (Some(index), "data") => format!("index {index}"),
            (Some(index), table) => format!("index {table}:{index}"),
            (None, table) => format!("table {table}"),
        };
        reads.touches.push(Touch {
            scope,
            partition: access.pk,
            second,
            units: 1.0 / rate,
        });
    }
    Ok(reads)
}

fn find(line: &str) -> Option<AccessLine> {
    if let Some(at) = line.find(MARKER) {
        return first_object(line.get(at..)?);
    }
    // CSV export: quotes doubled.
    if line.contains("{\"\"cqrsAccess\"\"") {
        let unquoted = line.replace("\"\"", "\"");
        let at = unquoted.find(MARKER)?;
        return first_object(unquoted.get(at..)?);
    }
    // JSON export: the line is an object whose message holds the access line as a string.
    let outer: serde_json::Value = serde_json::from_str(line).ok()?;
    ["@message", "message"]
        .iter()
        .filter_map(|k| outer.get(k)?.as_str())
        .find_map(|m| first_object(m.get(m.find(MARKER)?..)?))
}

fn first_object(text: &str) -> Option<AccessLine> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<AccessLine>()
        .next()?
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_the_function_log_and_of_logs_insights_exports() {
        let log = concat!(
            "{\"cqrsAccess\":1,\"ms\":1700000000500,\"table\":\"data\",\"index\":null,\"pk\":\"ORDER#t1\",\"op\":\"query\",\"items\":3,\"sampleRate\":0.5}\n",
            "2023-11-14T22:13:20Z INFO something else\n",
            "{\"@timestamp\":\"x\",\"@message\":\"{\\\"cqrsAccess\\\":1,\\\"ms\\\":1700000000900,\\\"table\\\":\\\"data\\\",\\\"index\\\":\\\"gsi1\\\",\\\"pk\\\":\\\"U#t1\\\",\\\"op\\\":\\\"query\\\",\\\"items\\\":1,\\\"sampleRate\\\":1}\"}\n",
            "\"2023-11-14 22:13:21\",\"{\"\"cqrsAccess\"\":1,\"\"ms\"\":1700000001000,\"\"table\"\":\"\"history\"\",\"\"index\"\":null,\"\"pk\"\":\"\"ORDER#t1\"\",\"\"op\"\":\"\"get\"\",\"\"items\"\":1,\"\"sampleRate\"\":1}\"\n",
            "{\"cqrsAccess\":1,\"broken\n",
            "{\"cqrsAccess\":1,\"ms\":1800000000000,\"table\":\"data\",\"index\":null,\"pk\":\"LATER\",\"op\":\"get\",\"items\":1,\"sampleRate\":1}\n",
        );
        let reads = read_access_log(log.as_bytes(), 1_700_000_000, 1_700_000_100).unwrap();
        let seen: Vec<_> = reads
            .touches
            .iter()
            .map(|t| (t.scope.as_str(), t.partition.as_str(), t.second, t.units))
            .collect();
        assert_eq!(
            seen,
            [
                ("table data", "ORDER#t1", 1_700_000_000, 2.0),
                ("index gsi1", "U#t1", 1_700_000_000, 1.0),
                ("table history", "ORDER#t1", 1_700_000_001, 1.0),
            ]
        );
        assert_eq!(reads.unreadable, 1);
    }
}
