//! Moving a data-sync target to a consumer of its own: [`FromSyncTarget`] runs a
//! [`cqrs_data_sync::SyncTarget`] unchanged as a [`Consumer`], so that it gets its own queue,
//! dead-letter queue, lag alarm and redrive instead of running inside data-sync, where a failing
//! target holds back every item of its stream shard (and the projection with it).
//!
//! What the target sees changes in three ways, all within what [`cqrs_data_sync::SyncTarget`]
//! promised:
//!
//! - **Later.** A version reaches it once data-sync has projected it and the publisher has
//!   published it (a second or so), not within data-sync's batch.
//! - **[`DataWrite`] is [`DataWrite::Written`]**, except for a version the runtime read from the
//!   history table to fill a gap ([`Delivered::filled`]): [`DataWrite::AlreadyCurrent`]. Data-sync
//!   may have collapsed a version into a later one of its batch, so `Written` does not promise that
//!   the data row held it: a target that keeps only the latest state compares versions, as it had
//!   to already.
//! - **`sequence_number` and `event_id` are the event's id** (there is no stream record): both are
//!   stable per version, as a target's idempotent write needs.
//!
//! TTL removals (the data row expired) are not handed to a target: data-sync never saw them, and a
//! target written for data-sync has no case for them. They are acknowledged (the consumer's marker
//! moves on).

use chrono::{DateTime, Utc};
use cqrs_data_sync::{Change, SyncTarget};
use cqrs_events::Removal;
use cqrs_item::Item;
use cqrs_store::projection::DataWrite;
use futures::future::{BoxFuture, FutureExt};

use crate::{Consumer, ConsumerError, Delivered};

/// A [`SyncTarget`] run as a [`Consumer`] of the same name (see the [module docs](self)).
///
/// ```
/// use cqrs_consumer::{Consumer, FromSyncTarget};
/// use cqrs_data_sync::{Change, SyncTarget, TargetError};
/// use futures::future::{BoxFuture, FutureExt};
///
/// struct SearchIndex;
/// #[allow(deprecated)] // SyncTarget is deprecated: this is its way out.
/// impl SyncTarget for SearchIndex {
///     fn name(&self) -> &str { "search-index" }
///     fn apply<'a>(&'a self, change: &'a Change) -> BoxFuture<'a, Result<(), TargetError>> {
///         async move { println!("{} v{}", change.item.sk, change.item.version); Ok(()) }.boxed()
///     }
/// }
///
/// let consumer = FromSyncTarget::new(SearchIndex).with_entities(&["product"]);
/// assert_eq!(consumer.name(), "search-index");
/// assert!(consumer.takes("product") && !consumer.takes("order"));
/// // The service's src/bin/search-index.rs: cqrs_consumer::run(MODEL, consumer).await
/// ```
pub struct FromSyncTarget<T> {
    target: T,
    name: String,
    entities: Option<Vec<&'static str>>,
}

#[allow(deprecated)]
impl<T: SyncTarget> FromSyncTarget<T> {
    /// `target` as a consumer named as the target is ([`SyncTarget::name`]): that name is its
    /// `[consumers.<name>]` in `model.toml` and its binary's.
    ///
    /// ```
    /// # use cqrs_data_sync::{Change, SyncTarget, TargetError};
    /// # use futures::future::{BoxFuture, FutureExt};
    /// # struct Audit;
    /// # #[allow(deprecated)]
    /// # impl SyncTarget for Audit {
    /// #     fn name(&self) -> &str { "audit" }
    /// #     fn apply<'a>(&'a self, _c: &'a Change) -> BoxFuture<'a, Result<(), TargetError>> { async { Ok(()) }.boxed() }
    /// # }
    /// use cqrs_consumer::Consumer;
    /// assert_eq!(cqrs_consumer::FromSyncTarget::new(Audit).entities(), None);
    /// ```
    pub fn new(target: T) -> Self {
        FromSyncTarget {
            name: target.name().to_string(),
            target,
            entities: None,
        }
    }

    /// Takes only events of `entities` (as `[consumers.<name>] entities` says).
    ///
    /// ```
    /// # use cqrs_data_sync::{Change, SyncTarget, TargetError};
    /// # use futures::future::{BoxFuture, FutureExt};
    /// # struct Audit;
    /// # #[allow(deprecated)]
    /// # impl SyncTarget for Audit {
    /// #     fn name(&self) -> &str { "audit" }
    /// #     fn apply<'a>(&'a self, _c: &'a Change) -> BoxFuture<'a, Result<(), TargetError>> { async { Ok(()) }.boxed() }
    /// # }
    /// use cqrs_consumer::Consumer;
    /// let consumer = cqrs_consumer::FromSyncTarget::new(Audit).with_entities(&["order"]);
    /// assert_eq!(consumer.entities(), Some(&["order"][..]));
    /// ```
    pub fn with_entities(mut self, entities: &[&'static str]) -> Self {
        self.entities = Some(entities.to_vec());
        self
    }

    /// The wrapped target.
    ///
    /// ```
    /// # use cqrs_data_sync::{Change, SyncTarget, TargetError};
    /// # use futures::future::{BoxFuture, FutureExt};
    /// # struct Audit;
    /// # #[allow(deprecated)]
    /// # impl SyncTarget for Audit {
    /// #     fn name(&self) -> &str { "audit" }
    /// #     fn apply<'a>(&'a self, _c: &'a Change) -> BoxFuture<'a, Result<(), TargetError>> { async { Ok(()) }.boxed() }
    /// # }
    /// let consumer = cqrs_consumer::FromSyncTarget::new(Audit);
    /// let _target: &Audit = consumer.target();
    /// ```
    pub fn target(&self) -> &T {
        &self.target
    }
}

#[allow(deprecated)]
impl<T: SyncTarget> Consumer for FromSyncTarget<T> {
    fn name(&self) -> &str {
        &self.name
    }

    fn entities(&self) -> Option<&[&str]> {
        self.entities.as_deref()
    }

    fn handle<'a>(&'a self, delivered: &'a Delivered) -> BoxFuture<'a, Result<(), ConsumerError>> {
        async move {
            let Some(change) = change_of(delivered) else {
                return Ok(());
            };
            self.target
                .apply(&change)
                .await
                .map_err(ConsumerError::Retry)
        }
        .boxed()
    }
}

/// The [`Change`] a sync target would have seen for `delivered`'s version; `None` for a TTL
/// removal, which data-sync never handed to a target.
///
/// ```
/// let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
/// let mut item = cqrs_item::Item::example();
/// item.entity = Some("product".into());
/// let data = item.clone().into_data_item();
/// let event = feed.version_event(&data, None, chrono::Utc::now()).unwrap();
/// let change = cqrs_consumer::sync_target::change_of(&cqrs_consumer::Delivered::new(event.clone(), data)).unwrap();
/// assert_eq!(change.item, item, "the command table's form: sk with its version");
/// assert_eq!(change.event_id, event.id);
/// assert_eq!(change.data, cqrs_store::projection::DataWrite::Written);
/// ```
pub fn change_of(delivered: &Delivered) -> Option<Change> {
    if delivered.event.removal == Some(Removal::Ttl) {
        return None;
    }
    let approximate_creation = DateTime::parse_from_rfc3339(&delivered.event.time)
        .map(|time| time.with_timezone(&Utc))
        .unwrap_or(delivered.sent);
    Some(Change {
        item: command_form(delivered.item.clone()),
        data: if delivered.filled {
            DataWrite::AlreadyCurrent
        } else {
            DataWrite::Written
        },
        sequence_number: delivered.event.id.clone(),
        event_id: delivered.event.id.clone(),
        approximate_creation,
    })
}

/// The command table's form of a data-table item: its `cpk`/`csk` back as its keys (`sk` with
/// its version).
fn command_form(mut item: Item) -> Item {
    match (item.cpk.take(), item.csk.take()) {
        (Some(cpk), Some(csk)) => {
            item.pk = cpk;
            item.sk = csk;
        }
        (cpk, _) => {
            if let Some(cpk) = cpk {
                item.pk = cpk;
            }
            if !item.sk.contains('@') {
                item.sk = format!("{}@{}", item.sk, item.version);
            }
        }
    }
    item
}

#[cfg(test)]
#[allow(deprecated)]
mod tests {
    use std::sync::{Arc, Mutex};

    use cqrs_data_sync::TargetError;

    use super::*;
    use crate::Runtime;
    use crate::marker::MemoryMarkers;
    use crate::park::MemoryPark;
    use crate::sqs::{SqsEvent, SqsMessage};

    /// Records what it was given; fails while `failing`.
    #[derive(Default)]
    struct Recorder {
        seen: Mutex<Vec<(String, i64, DataWrite)>>,
        failing: Mutex<bool>,
    }

    impl SyncTarget for Recorder {
        fn name(&self) -> &str {
            "recorder"
        }
        fn apply<'a>(&'a self, change: &'a Change) -> BoxFuture<'a, Result<(), TargetError>> {
            async move {
                if *self.failing.lock().unwrap() {
                    return Err("the index is away".into());
                }
                self.seen.lock().unwrap().push((
                    change.item.sk.clone(),
                    change.item.version,
                    change.data,
                ));
                Ok(())
            }
            .boxed()
        }
    }

    fn version(v: i64) -> Item {
        let mut item = Item::example();
        item.entity = Some("product".into());
        item.version = v;
        item.sk = format!("P001@{v}");
        item.updated_at = format!("2026-01-0{v}T00:00:00Z");
        item
    }

    fn message(id: &str, event: &cqrs_events::ChangeEvent) -> SqsMessage {
        SqsMessage {
            message_id: id.into(),
            body: serde_json::to_string(event).unwrap(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_target_gets_each_version_once_in_order_in_the_command_form_and_no_ttl_removal() {
        let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
        let (v1, v2) = (version(1), version(2));
        let e1 = feed
            .version_event(&v1.clone().into_data_item(), None, Utc::now())
            .unwrap();
        let e2 = feed
            .version_event(
                &v2.clone().into_data_item(),
                Some(&v1.clone().into_data_item()),
                Utc::now(),
            )
            .unwrap();
        let gone = feed
            .ttl_event(&v2.clone().into_data_item(), Utc::now())
            .unwrap();
        let target = Arc::new(Recorder::default());
        let runtime = Runtime::new(
            FromSyncTarget::new(target.clone()),
            feed,
            Vec::<Item>::new(),
            MemoryMarkers::default(),
            MemoryPark::default(),
        );
        let batch = SqsEvent {
            records: vec![
                message("m1", &e1),
                message("m1-again", &e1),
                message("m2", &e2),
                message("m3", &gone),
            ],
        };
        let answer = runtime.handle(batch).await;
        assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
        assert_eq!(
            *target.seen.lock().unwrap(),
            vec![
                ("P001@1".to_string(), 1, DataWrite::Written),
                ("P001@2".to_string(), 2, DataWrite::Written),
            ],
            "v1 once (its duplicate dropped), then v2, keyed as the command table keys them; the TTL removal acknowledged without the target"
        );
    }

    #[tokio::test]
    async fn a_failing_target_is_retried_by_its_queue_and_the_item_waits() {
        let feed = cqrs_events::Feed::new(cqrs_model::Model::example(), "urn:cqrs:shop");
        let (v1, v2) = (version(1), version(2));
        let e1 = feed
            .version_event(&v1.clone().into_data_item(), None, Utc::now())
            .unwrap();
        let e2 = feed
            .version_event(&v2.into_data_item(), Some(&v1.into_data_item()), Utc::now())
            .unwrap();
        let target = Arc::new(Recorder::default());
        *target.failing.lock().unwrap() = true;
        let runtime = Runtime::new(
            FromSyncTarget::new(target.clone()),
            feed,
            Vec::<Item>::new(),
            MemoryMarkers::default(),
            MemoryPark::default(),
        );
        let batch = || SqsEvent {
            records: vec![message("m1", &e1), message("m2", &e2)],
        };
        let answer = runtime.handle(batch()).await;
        let failed: Vec<_> = answer
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(failed, ["m1", "m2"], "v1 failed, v2 waits behind it");
        assert!(target.seen.lock().unwrap().is_empty());

        *target.failing.lock().unwrap() = false;
        let answer = runtime.handle(batch()).await;
        assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
        assert_eq!(target.seen.lock().unwrap().len(), 2);
    }

    #[test]
    fn the_command_form_of_a_data_item_is_the_command_items_keys() {
        let item = version(3);
        assert_eq!(command_form(item.clone().into_data_item()), item);
        let mut bare = item.clone().into_data_item();
        (bare.cpk, bare.csk) = (None, None);
        assert_eq!(command_form(bare).sk, "P001@3");
    }
}
