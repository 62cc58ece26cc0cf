//! Counting what a request costs in DynamoDB: every call a client makes (operation, table, the
//! `pk` of a single-item call), when it started and ended, and from that the number of
//! **sequential round trips**: the longest chain of calls in which each starts only after the
//! previous one ended. Calls made concurrently (`try_join!`) overlap and count once; a read whose
//! answer the next call waits for counts apart. It depends on the code's structure, not on the
//! machine's speed, so tests may assert it.
//!
//! ```no_run
//! # async fn demo() {
//! use cqrs_testkit::round_trips::CallLog;
//!
//! let tables = cqrs_testkit::fresh_tables().await;
//! let log = CallLog::default();
//! let client = log.client(&tables.client);
//! client.list_tables().send().await.unwrap();
//! assert_eq!(log.round_trips(), 1);
//! assert_eq!(log.operations(), ["ListTables"]);
//! # }
//! ```

use std::sync::{Arc, Mutex};
use std::time::Instant;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};

/// One DynamoDB call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The operation (`GetItem`, `TransactWriteItems`, ...).
    pub operation: String,
    /// The table of a single-table call (`None` for batches and transactions).
    pub table: Option<String>,
    /// The `pk` of a single-item call (`GetItem`, `PutItem`, `UpdateItem`, `DeleteItem`).
    pub pk: Option<String>,
    /// Whether a read asked for strongly consistent reads (`ConsistentRead`; for a
    /// `BatchGetItem`, `true` only when every table's keys did); `None` for writes and other
    /// calls.
    pub consistent: Option<bool>,
    /// When the SDK began the call.
    pub start: Instant,
    /// When it ended (`None` while it runs).
    pub end: Option<Instant>,
}

/// Every call of the clients made by [`CallLog::client`], in the order they started. Clones share
/// the log.
#[derive(Debug, Clone, Default)]
pub struct CallLog {
    calls: Arc<Mutex<Vec<Call>>>,
}

/// The position of the running call in the log, kept in the call's own configuration.
#[derive(Debug, Clone, Copy)]
struct Position(usize);

impl Storable for Position {
    type Storer = StoreReplace<Self>;
}

impl CallLog {
    /// `client` with this log's interceptor: same configuration, every call recorded.
    pub fn client(&self, client: &aws_sdk_dynamodb::Client) -> aws_sdk_dynamodb::Client {
        let config = client
            .config()
            .to_builder()
            .interceptor(self.clone())
            .build();
        aws_sdk_dynamodb::Client::from_conf(config)
    }

    /// Forgets every call so far (e.g. after warming a container's caches).
    pub fn clear(&self) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.clear();
        }
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// The operations so far, in the order they started.
    pub fn operations(&self) -> Vec<String> {
        self.calls().into_iter().map(|c| c.operation).collect()
    }

    /// The number of sequential round trips so far: the longest chain of calls each of which
    /// started after the one before it ended. Panics if a call is still running.
    pub fn round_trips(&self) -> usize {
        let calls = self.calls();
        let mut depth = vec![0usize; calls.len()];
        for (i, call) in calls.iter().enumerate() {
            let before = calls
                .iter()
                .zip(&depth)
                .take(i)
                .filter(|(earlier, _)| {
                    earlier.end.expect("round_trips counts finished calls only") <= call.start
                })
                .map(|(_, d)| *d)
                .max()
                .unwrap_or(0);
            if let Some(slot) = depth.get_mut(i) {
                *slot = before + 1;
            }
        }
        depth.into_iter().max().unwrap_or(0)
    }
}

/// The table and `pk` of a single-item call and whether a read is strongly consistent, read
/// from its input.
fn target(
    context: &BeforeSerializationInterceptorContextRef<'_>,
) -> (Option<String>, Option<String>, Option<bool>) {
    use aws_sdk_dynamodb::operation::{
        batch_get_item::BatchGetItemInput, delete_item::DeleteItemInput, get_item::GetItemInput,
        put_item::PutItemInput, query::QueryInput, scan::ScanInput, update_item::UpdateItemInput,
    };
    let pk = |key: Option<&std::collections::HashMap<String, AttributeValue>>| {
        key.and_then(|k| k.get("pk"))
            .and_then(|v| v.as_s().ok())
            .cloned()
    };
    let consistent = |flag: Option<bool>| Some(flag.unwrap_or(false));
    let input = context.input();
    if let Some(i) = input.downcast_ref::<GetItemInput>() {
        (
            i.table_name.clone(),
            pk(i.key.as_ref()),
            consistent(i.consistent_read),
        )
    } else if let Some(i) = input.downcast_ref::<PutItemInput>() {
        (i.table_name.clone(), pk(i.item.as_ref()), None)
    } else if let Some(i) = input.downcast_ref::<UpdateItemInput>() {
        (i.table_name.clone(), pk(i.key.as_ref()), None)
    } else if let Some(i) = input.downcast_ref::<DeleteItemInput>() {
        (i.table_name.clone(), pk(i.key.as_ref()), None)
    } else if let Some(i) = input.downcast_ref::<QueryInput>() {
        (i.table_name.clone(), None, consistent(i.consistent_read))
    } else if let Some(i) = input.downcast_ref::<ScanInput>() {
        (i.table_name.clone(), None, consistent(i.consistent_read))
    } else if let Some(i) = input.downcast_ref::<BatchGetItemInput>() {
        let all = i
            .request_items
            .as_ref()
            .is_some_and(|r| r.values().all(|k| k.consistent_read == Some(true)));
        (None, None, Some(all))
    } else {
        (None, None, None)
    }
}

impl Intercept for CallLog {
    fn name(&self) -> &'static str {
        "CallLog"
    }

    // Not `read_before_execution`: a client's interceptors see that before the operation's
    // configuration (its name) is in the bag. Serialization happens once per call, before the
    // first attempt.
    fn read_before_serialization(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = cfg
            .load::<Metadata>()
            .map(|m| m.name().to_string())
            .unwrap_or_default();
        let (table, pk, consistent) = target(context);
        let mut calls = self.calls.lock().map_err(|e| e.to_string())?;
        calls.push(Call {
            operation,
            table,
            pk,
            consistent,
            start: Instant::now(),
            end: None,
        });
        cfg.interceptor_state().store_put(Position(calls.len() - 1));
        Ok(())
    }

    fn read_after_execution(
        &self,
        _context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let now = Instant::now();
        if let Some(Position(index)) = cfg.load::<Position>().copied()
            && let Ok(mut calls) = self.calls.lock()
            && let Some(call) = calls.get_mut(index)
        {
            call.end = Some(now);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(start: u64, end: u64, base: Instant) -> Call {
        Call {
            operation: "X".into(),
            table: None,
            pk: None,
            consistent: None,
            start: base + std::time::Duration::from_millis(start),
            end: Some(base + std::time::Duration::from_millis(end)),
        }
    }

    #[test]
    fn overlapping_calls_count_once_chained_calls_each() {
        let base = Instant::now();
        let log = CallLog::default();
        assert_eq!(log.round_trips(), 0);
        // Three concurrent reads, then a write after all of them, then another.
        *log.calls.lock().unwrap() = vec![
            call(0, 10, base),
            call(1, 12, base),
            call(2, 8, base),
            call(12, 20, base),
            call(20, 30, base),
        ];
        assert_eq!(log.round_trips(), 3);
        // A call that starts when only one of the reads ended still waits on that one.
        log.calls.lock().unwrap().push(call(9, 11, base));
        assert_eq!(log.round_trips(), 3);
        log.calls.lock().unwrap().push(call(31, 32, base));
        assert_eq!(log.round_trips(), 4);
    }
}

#[cfg(test)]
mod against_dynamodb_local {
    use super::*;

    #[tokio::test]
    async fn calls_are_named_with_their_table_and_key() {
        let tables = crate::fresh_tables().await;
        let log = CallLog::default();
        let client = log.client(&tables.client);
        let get = client
            .get_item()
            .table_name(&tables.data)
            .key("pk", AttributeValue::S("P#t1".into()))
            .key("sk", AttributeValue::S("a".into()));
        let (a, b) = tokio::join!(get.clone().send(), get.send());
        a.unwrap();
        b.unwrap();
        assert_eq!(log.round_trips(), 1, "two concurrent reads");
        client.list_tables().send().await.unwrap();
        assert_eq!(log.round_trips(), 2);
        assert_eq!(log.operations(), ["GetItem", "GetItem", "ListTables"]);
        let first = &log.calls()[0];
        assert_eq!(first.table.as_deref(), Some(tables.data.as_str()));
        assert_eq!(first.pk.as_deref(), Some("P#t1"));
        assert_eq!(first.consistent, Some(false), "not asked for");
        assert_eq!(log.calls()[2].consistent, None, "not a read");
    }
}
