//! The deployment's heads state as a warm container knows it: whether every item has a head
//! ([`cqrs_store::HeadsState`]), which decides whether a command needs reads in front of its
//! transaction ([`crate::publish`]).
//!
//! A container reads the state with its first command (with the TTL policy, concurrently) and
//! keeps it: `complete` for good (a deployment never becomes incomplete again, short of an operator
//! removing the record), anything else for [`STATE_MAX_AGE`], so that `cqrs heads seed` finishing
//! reaches every container within that time. A deployment without a state record whose tables
//! are all empty is marked complete by that first read ([`Store::complete_heads_if_empty`]);
//! once a container has seen them hold items, it reads the state record alone.
//!
//! [`Store::complete_heads_if_empty`]: cqrs_store::Store::complete_heads_if_empty

use std::sync::Mutex;
use std::time::{Duration, Instant};

use cqrs_problem::ApiError;
use cqrs_store::HeadsState;

use crate::App;
use crate::publish::HeadKnowledge;

/// How long a container keeps a state other than `complete` before reading it again.
pub const STATE_MAX_AGE: Duration = Duration::from_secs(60);

/// The heads state a warm container has read, and when.
#[derive(Debug, Default)]
pub struct HeadsCache {
    state: Mutex<Option<(Instant, HeadsState)>>,
    /// The tables were seen holding items: they will not be empty again, so the state record
    /// alone is read from then on.
    tables_hold_items: std::sync::atomic::AtomicBool,
}

impl HeadsCache {
    /// The cached state, if it is still good: `complete` always, the others for
    /// [`STATE_MAX_AGE`].
    fn fresh(&self) -> Option<HeadsState> {
        let state = self.state.lock().ok()?;
        state
            .filter(|(at, state)| state.is_complete() || at.elapsed() < STATE_MAX_AGE)
            .map(|(_, state)| state)
    }

    fn store(&self, state: HeadsState) {
        if let Ok(mut cached) = self.state.lock() {
            *cached = Some((Instant::now(), state));
        }
    }
}

/// What the command handler knows of heads for this command: from the cache, else one read of
/// the state record (and, while there is none, whether the tables are empty).
pub async fn knowledge(app: &App) -> Result<HeadKnowledge, ApiError> {
    if let Some(state) = app.heads.fresh() {
        return Ok(HeadKnowledge::of(state));
    }
    let seen = std::sync::atomic::Ordering::Relaxed;
    let state = if app.heads.tables_hold_items.load(seen) {
        app.store.heads_state().await?
    } else {
        let state = app.store.complete_heads_if_empty().await?;
        if state == HeadsState::Incomplete {
            app.heads.tables_hold_items.store(true, seen);
        }
        state
    };
    app.heads.store(state);
    Ok(HeadKnowledge::of(state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_is_kept_for_good_the_rest_for_a_minute() {
        let cache = HeadsCache::default();
        assert_eq!(cache.fresh(), None, "never read");
        let long_ago = Instant::now()
            .checked_sub(STATE_MAX_AGE + Duration::from_secs(1))
            .unwrap();
        for state in [HeadsState::Incomplete, HeadsState::Shared] {
            cache.store(state);
            assert_eq!(cache.fresh(), Some(state));
            *cache.state.lock().unwrap() = Some((long_ago, state));
            assert_eq!(cache.fresh(), None, "{state:?} read again after a minute");
        }
        *cache.state.lock().unwrap() = Some((long_ago, HeadsState::Complete));
        assert_eq!(cache.fresh(), Some(HeadsState::Complete));
    }
}
