//! [`Recorder`]: an in-memory [`Publish`], the test and local double of the SNS topic.
//!
//! It records every call and every entry it accepted, in order, and fails on request: the entries
//! of given deduplication ids (as SNS's per-entry `Failed` list does), or whole calls (as a
//! throttled or unreachable SNS does), a given number of times each. The local stack and the
//! chaos run use it where no SNS FIFO topic exists; tests assert on what it holds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::{BoxFuture, FutureExt};

use crate::publish::{CallResult, Entry, MAX_CALL_BYTES, MAX_CALL_ENTRIES, Publish, PublishError};

/// What the recorder holds behind its lock.
#[derive(Debug, Default)]
struct State {
    /// Entries accepted, in order.
    published: Vec<Entry>,
    /// Every call, as it came (accepted or not).
    calls: Vec<Vec<Entry>>,
    /// Dedup ids to fail, with how many more times and the error.
    fail_entries: HashMap<String, (usize, PublishError)>,
    /// How many more calls to fail as a whole.
    fail_calls: usize,
}

/// An in-memory topic: records the entries it accepts, in order, and fails entries or calls on
/// request. Cloning shares the recording (hand one clone to the [`crate::Publisher`], keep one to
/// look at). A call breaking the topic's rules (more than [`MAX_CALL_ENTRIES`] entries, more than
/// [`MAX_CALL_BYTES`], two entries of one message group) is refused as a whole with code
/// `InvalidCall`, so a test of the publisher sees a violation as a failure too.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use cqrs_event_publisher::{Attributes, Entry, Publish, Recorder};
/// let entry = |group: &str, id: &str| Entry {
///     group_id: group.into(),
///     dedup_id: id.into(),
///     body: "{}".into(),
///     attributes: Attributes { event_type: "a.created".into(), tenant: "t1".into(), entity: "a".into() },
///     reference: false,
/// };
/// let recorder = Recorder::new();
/// recorder.fail_entry("e2", 1);
/// let results = recorder.publish_batch(&[entry("g1", "e1"), entry("g2", "e2")]).await.unwrap();
/// assert!(results[0].is_ok() && results[1].is_err());
/// recorder.fail_calls(1);
/// assert!(recorder.publish_batch(&[entry("g2", "e2")]).await.is_err());
/// assert!(recorder.publish_batch(&[entry("g2", "e2")]).await.unwrap()[0].is_ok());
/// assert_eq!(recorder.dedup_ids(), ["e1", "e2"]);
/// assert_eq!(recorder.calls().len(), 3);
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    state: Arc<Mutex<State>>,
}

impl Recorder {
    /// An empty recorder that accepts everything.
    ///
    /// ```
    /// assert!(cqrs_event_publisher::Recorder::new().published().is_empty());
    /// ```
    pub fn new() -> Self {
        Recorder::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the recording as it was: keep using it.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fails the entry of deduplication id `dedup_id` the next `times` times it is sent (code
    /// `InternalError`), as SNS's per-entry `Failed` list does.
    ///
    /// ```
    /// let recorder = cqrs_event_publisher::Recorder::new();
    /// recorder.fail_entry("e1", 2);
    /// ```
    pub fn fail_entry(&self, dedup_id: impl Into<String>, times: usize) {
        let dedup_id = dedup_id.into();
        let error = PublishError::new(
            "InternalError",
            format!("the recorder was told to fail {dedup_id}"),
        );
        self.fail_entry_with(dedup_id, times, error);
    }

    /// Fails the entry of deduplication id `dedup_id` the next `times` times it is sent with
    /// `error` (e.g. a sender fault, [`PublishError::sender`]), as SNS's per-entry `Failed` list
    /// does.
    ///
    /// ```
    /// use cqrs_event_publisher::{PublishError, Recorder};
    /// let recorder = Recorder::new();
    /// recorder.fail_entry_with("e1", 1, PublishError::sender("ParameterValueInvalid", "bad attribute"));
    /// ```
    pub fn fail_entry_with(&self, dedup_id: impl Into<String>, times: usize, error: PublishError) {
        let mut state = self.state();
        let slot = state
            .fail_entries
            .entry(dedup_id.into())
            .or_insert((0, error.clone()));
        slot.0 += times;
        slot.1 = error;
    }

    /// Fails the next `times` calls as a whole (code `Throttled`).
    ///
    /// ```
    /// let recorder = cqrs_event_publisher::Recorder::new();
    /// recorder.fail_calls(1);
    /// ```
    pub fn fail_calls(&self, times: usize) {
        self.state().fail_calls += times;
    }

    /// The entries accepted, in order.
    ///
    /// ```
    /// assert!(cqrs_event_publisher::Recorder::new().published().is_empty());
    /// ```
    pub fn published(&self) -> Vec<Entry> {
        self.state().published.clone()
    }

    /// The deduplication ids of the entries accepted, in order.
    ///
    /// ```
    /// assert!(cqrs_event_publisher::Recorder::new().dedup_ids().is_empty());
    /// ```
    pub fn dedup_ids(&self) -> Vec<String> {
        self.state()
            .published
            .iter()
            .map(|e| e.dedup_id.clone())
            .collect()
    }

    /// Every call received, with its entries, in order (failed calls included).
    ///
    /// ```
    /// assert!(cqrs_event_publisher::Recorder::new().calls().is_empty());
    /// ```
    pub fn calls(&self) -> Vec<Vec<Entry>> {
        self.state().calls.clone()
    }

    /// Forgets what was published and received (failures still pending stay).
    ///
    /// ```
    /// let recorder = cqrs_event_publisher::Recorder::new();
    /// recorder.clear();
    /// assert!(recorder.calls().is_empty());
    /// ```
    pub fn clear(&self) {
        let mut state = self.state();
        state.published.clear();
        state.calls.clear();
    }
}

/// Why a call breaks the topic's rules, if it does.
fn invalid(entries: &[Entry]) -> Option<String> {
    if entries.len() > MAX_CALL_ENTRIES {
        return Some(format!(
            "{} entries (at most {MAX_CALL_ENTRIES})",
            entries.len()
        ));
    }
    let bytes: usize = entries.iter().map(Entry::size).sum();
    if bytes > MAX_CALL_BYTES {
        return Some(format!("{bytes} bytes (at most {MAX_CALL_BYTES})"));
    }
    let mut groups = std::collections::HashSet::new();
    for entry in entries {
        if !groups.insert(entry.group_id.as_str()) {
            return Some(format!(
                "two entries of message group {} in one call",
                entry.group_id
            ));
        }
    }
    None
}

impl Publish for Recorder {
    fn publish_batch<'a>(&'a self, entries: &'a [Entry]) -> BoxFuture<'a, CallResult> {
        let mut state = self.state();
        state.calls.push(entries.to_vec());
        let answer = if let Some(why) = invalid(entries) {
            Err(PublishError::new("InvalidCall", why))
        } else if state.fail_calls > 0 {
            state.fail_calls -= 1;
            Err(PublishError::new(
                "Throttled",
                "the recorder was told to fail this call",
            ))
        } else {
            let mut results = Vec::with_capacity(entries.len());
            for entry in entries {
                let fail = match state.fail_entries.get_mut(&entry.dedup_id) {
                    Some((left, error)) if *left > 0 => {
                        *left -= 1;
                        Some(error.clone())
                    }
                    _ => None,
                };
                if let Some(error) = fail {
                    results.push(Err(error));
                } else {
                    state.published.push(entry.clone());
                    results.push(Ok(()));
                }
            }
            Ok(results)
        };
        drop(state);
        async move { answer }.boxed()
    }
}
