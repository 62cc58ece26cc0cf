//! Reading a table for the report: a parallel scan over segments (all of them, or a sample of
//! them), pages handed to one consumer, with a progress bar. Plain `Scan` calls without any
//! expression: the report reads whole items (it needs their sizes) and filters on its side.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use indicatif::ProgressBar;
use tokio::sync::mpsc;

/// One item as the SDK gives it.
pub type Item = HashMap<String, AttributeValue>;

/// Which segments of a parallel scan to read.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `TotalSegments` of every request.
    pub total: i32,
    /// The segments read.
    pub read: Vec<i32>,
}

impl Plan {
    /// `segments` parallel segments, of which a `sample` fraction (0 < sample <= 1) is read: the
    /// segments split the table by partition, so every partition read is read whole. A sample too
    /// small for `segments` raises the segment count.
    pub fn new(segments: u32, sample: f64) -> Plan {
        let sample = if sample.is_finite() {
            sample.clamp(0.0001, 1.0)
        } else {
            1.0
        };
        let mut total = segments.clamp(1, 1_000_000) as f64;
        if (total * sample) < 1.0 {
            total = (1.0 / sample).ceil();
        }
        let read = (total * sample).round().max(1.0) as i32;
        Plan {
            total: total as i32,
            read: (0..read).collect(),
        }
    }

    /// The fraction of the table read.
    pub fn fraction(&self) -> f64 {
        self.read.len() as f64 / self.total.max(1) as f64
    }
}

/// Scans `table` as `plan` says, calling `each` for every item (on the caller's task), and returns
/// how many items were read. The segments run concurrently.
pub async fn scan(
    client: &Client,
    table: &str,
    plan: &Plan,
    bar: &ProgressBar,
    mut each: impl FnMut(Item),
) -> Result<u64, String> {
    let (tx, mut rx) = mpsc::channel::<Result<Vec<Item>, String>>(plan.read.len() * 2);
    for segment in plan.read.iter().copied() {
        let tx = tx.clone();
        let client = client.clone();
        let table = table.to_string();
        let total = plan.total;
        tokio::spawn(async move {
            let mut start: Option<Item> = None;
            loop {
                let answer = client
                    .scan()
                    .table_name(&table)
                    .segment(segment)
                    .total_segments(total)
                    .set_exclusive_start_key(start.take())
                    .send()
                    .await;
                match answer {
                    Ok(page) => {
                        start = page.last_evaluated_key().cloned().filter(|k| !k.is_empty());
                        let items = page.items.unwrap_or_default();
                        if tx.send(Ok(items)).await.is_err() {
                            return;
                        }
                        if start.is_none() {
                            return;
                        }
                    }
                    Err(e) => {
                        let detail = aws_sdk_dynamodb::error::DisplayErrorContext(
                            aws_sdk_dynamodb::Error::from(e),
                        )
                        .to_string();
                        let _ = tx
                            .send(Err(format!("scan of {table} segment {segment}: {detail}")))
                            .await;
                        return;
                    }
                }
            }
        });
    }
    drop(tx);
    let mut count = 0u64;
    while let Some(page) = rx.recv().await {
        let items = page?;
        count += items.len() as u64;
        bar.inc(items.len() as u64);
        for item in items {
            each(item);
        }
    }
    Ok(count)
}

/// The string of an attribute (`S`, or the text of an `N`).
pub fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.get(name)? {
        AttributeValue::S(s) | AttributeValue::N(s) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_reads_a_share_of_the_segments() {
        assert_eq!(Plan::new(8, 1.0).read.len(), 8);
        let p = Plan::new(8, 0.25);
        assert_eq!((p.total, p.read.len()), (8, 2));
        assert_eq!(p.fraction(), 0.25);
        // Too few segments for the sample: more segments.
        let p = Plan::new(4, 0.1);
        assert_eq!((p.total, p.read.len()), (10, 1));
        assert_eq!(Plan::new(0, f64::NAN).fraction(), 1.0);
    }
}
