//! Reading a DynamoDB stream shard by shard, as the event source mapping does: every shard from
//! its start (`TRIM_HORIZON`), a parent shard before its children, new shards picked up as the
//! stream adds them.

use std::collections::{BTreeMap, HashSet};

use aws_sdk_dynamodbstreams::{
    Client,
    error::DisplayErrorContext,
    types::{Record, ShardIteratorType},
};

/// The position of the mapping in one shard.
#[derive(Debug, Clone)]
struct ShardState {
    parent: Option<String>,
    /// `None` before the first read, and again once the shard is closed and drained.
    iterator: Option<String>,
    started: bool,
    finished: bool,
    /// The sequence number of the last record returned, so that a shard read again from its
    /// start skips what was already returned.
    last_sequence: Option<String>,
}

/// Reads records from every shard of one stream, in order within each shard.
#[derive(Debug)]
pub struct StreamReader {
    client: Client,
    stream_arn: String,
    shards: BTreeMap<String, ShardState>,
}

/// A failed stream operation.
#[derive(Debug, thiserror::Error)]
#[error("{operation} on {stream_arn}: {detail}")]
pub struct StreamError {
    /// The API called.
    pub operation: &'static str,
    /// The stream.
    pub stream_arn: String,
    /// What went wrong.
    pub detail: String,
}

impl StreamReader {
    /// A reader of `stream_arn`, positioned at the start of every shard.
    pub fn new(client: Client, stream_arn: impl Into<String>) -> Self {
        StreamReader {
            client,
            stream_arn: stream_arn.into(),
            shards: BTreeMap::new(),
        }
    }

    fn error(&self, operation: &'static str, detail: impl std::fmt::Display) -> StreamError {
        StreamError {
            operation,
            stream_arn: self.stream_arn.clone(),
            detail: detail.to_string(),
        }
    }

    /// Learns the stream's shards (new ones start at their beginning).
    pub async fn refresh_shards(&mut self) -> Result<(), StreamError> {
        let mut start_after: Option<String> = None;
        loop {
            let output = self
                .client
                .describe_stream()
                .stream_arn(&self.stream_arn)
                .set_exclusive_start_shard_id(start_after.take())
                .send()
                .await
                .map_err(|e| self.error("DescribeStream", DisplayErrorContext(&e)))?;
            let Some(description) = output.stream_description() else {
                return Ok(());
            };
            for shard in description.shards() {
                let Some(id) = shard.shard_id() else { continue };
                self.shards
                    .entry(id.to_string())
                    .or_insert_with(|| ShardState {
                        parent: shard.parent_shard_id().map(str::to_string),
                        iterator: None,
                        started: false,
                        finished: false,
                        last_sequence: None,
                    });
            }
            match description.last_evaluated_shard_id() {
                Some(last) => start_after = Some(last.to_string()),
                None => return Ok(()),
            }
        }
    }

    /// The shards that may be read now: not finished, and whose parent (if this reader knows it)
    /// is finished and has no records `undelivered`, so a child never overtakes its parent.
    pub fn readable_shards(&self, undelivered: &HashSet<String>) -> Vec<String> {
        let finished: HashSet<&str> = self
            .shards
            .iter()
            .filter(|(id, s)| s.finished && !undelivered.contains(*id))
            .map(|(id, _)| id.as_str())
            .collect();
        self.shards
            .iter()
            .filter(|(_, s)| !s.finished)
            .filter(|(_, s)| match &s.parent {
                Some(parent) => {
                    !self.shards.contains_key(parent) || finished.contains(parent.as_str())
                }
                None => true,
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Reads the next records of `shard_id` (at most `limit`); empty when nothing new arrived.
    pub async fn read(&mut self, shard_id: &str, limit: usize) -> Result<Vec<Record>, StreamError> {
        let Some(state) = self.shards.get(shard_id).cloned() else {
            return Ok(Vec::new());
        };
        if state.finished {
            return Ok(Vec::new());
        }
        let iterator = match (state.started, state.iterator) {
            (true, Some(iterator)) => iterator,
            (true, None) => return Ok(Vec::new()),
            (false, _) => self.horizon(shard_id).await?,
        };
        let limit = i32::try_from(limit.clamp(1, 1000)).unwrap_or(1000);
        let output = match self
            .client
            .get_records()
            .shard_iterator(iterator)
            .limit(limit)
            .send()
            .await
        {
            Ok(output) => output,
            // DynamoDB Local (3.3.1) refuses the iterator an empty shard handed out once another
            // table is written before the shard's first record, and iterators expire: the shard
            // is read again from its start, and what was returned already is skipped below.
            Err(e)
                if e.as_service_error().is_some_and(|e| {
                    e.is_trimmed_data_access_exception() || e.is_expired_iterator_exception()
                }) =>
            {
                tracing::debug!(
                    shard = shard_id,
                    "iterator refused; reading the shard again from its start"
                );
                let iterator = self.horizon(shard_id).await?;
                self.client
                    .get_records()
                    .shard_iterator(iterator)
                    .limit(limit)
                    .send()
                    .await
                    .map_err(|e| self.error("GetRecords", DisplayErrorContext(&e)))?
            }
            Err(e) => return Err(self.error("GetRecords", DisplayErrorContext(&e))),
        };
        let next = output.next_shard_iterator().map(str::to_string);
        let state = self.shards.get_mut(shard_id).expect("shard known above");
        state.started = true;
        // A closed shard has no next iterator once drained: its children may be read.
        state.finished = next.is_none();
        state.iterator = next;
        let records: Vec<Record> = output
            .records()
            .iter()
            .filter(|record| {
                let sequence = record.dynamodb().and_then(|r| r.sequence_number());
                match (&state.last_sequence, sequence) {
                    (Some(last), Some(sequence)) => sequence_after(sequence, last),
                    _ => true,
                }
            })
            .cloned()
            .collect();
        if let Some(sequence) = records
            .last()
            .and_then(|r| r.dynamodb())
            .and_then(|r| r.sequence_number())
        {
            state.last_sequence = Some(sequence.to_string());
        }
        Ok(records)
    }

    /// A `TRIM_HORIZON` iterator of `shard_id`: its oldest record on.
    async fn horizon(&self, shard_id: &str) -> Result<String, StreamError> {
        self.client
            .get_shard_iterator()
            .stream_arn(&self.stream_arn)
            .shard_id(shard_id)
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .map_err(|e| self.error("GetShardIterator", DisplayErrorContext(&e)))?
            .shard_iterator()
            .map(str::to_string)
            .ok_or_else(|| self.error("GetShardIterator", "no iterator returned"))
    }
}

/// Whether stream sequence number `a` comes after `b` (decimal strings of up to 40 digits, ordered
/// as numbers).
fn sequence_after(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim_start_matches('0'), b.trim_start_matches('0'));
    (a.len(), a) > (b.len(), b)
}

#[cfg(test)]
mod tests {
    use super::sequence_after;

    #[test]
    fn sequence_numbers_compare_as_numbers() {
        assert!(sequence_after("10", "9"));
        assert!(sequence_after("000000000000000000010", "9"));
        assert!(!sequence_after("9", "000000000000000000009"));
        assert!(!sequence_after("8", "9"));
    }
}
