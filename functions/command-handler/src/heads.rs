//! The deployment's heads state as a warm container knows it: whether every item has a head
//! ([`cqrs_store::HeadsState`]), which decides whether a command needs reads in front of its
//! transaction ([`crate::publish`]).
//!
//! A container reads the state with its first command and keeps it for [`STATE_MAX_AGE`]
//! (whatever it says, `complete` included), then reads it again: a mark (`cqrs heads mark shared`
//! or `incomplete`, the seed's `complete`) reaches every container within that time, and a
//! command that starts later is decided on the new state. The state is read together with the
//! command's TTL policy ([`crate::ttl_policy`]) in one `BatchGetItem`
//! ([`Store::heads_state_with_ttl_policy`]) whenever that policy is to be read too, so the first
//! command of a container makes the calls of a hand-written create: that read, then the
//! transaction.
//!
//! A deployment without a state record that holds no version and no head is marked complete by
//! that first read ([`Store::complete_heads_if_empty_from`]); once a container has seen the
//! tables hold something, it reads the state record alone.
//!
//! Time comes from the cache's [`Clock`], which tests move forward instead of waiting.
//!
//! [`Store::heads_state_with_ttl_policy`]: cqrs_store::Store::heads_state_with_ttl_policy
//! [`Store::complete_heads_if_empty_from`]: cqrs_store::Store::complete_heads_if_empty_from

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cqrs_problem::ApiError;
use cqrs_store::HeadsState;

use crate::App;
use crate::entity::ModelEntity;
use crate::input::CommandInput;
use crate::publish::HeadKnowledge;
use crate::ttl_policy;

/// How long a container keeps the heads state it read before reading it again (every state):
/// [`cqrs_store::head::HEADS_STATE_MAX_AGE`].
pub const STATE_MAX_AGE: Duration = cqrs_store::head::HEADS_STATE_MAX_AGE;

/// The container's clock for its caches: the monotonic clock, or (for a test) one stopped at a
/// moment and moved only by [`Clock::advance`].
///
/// ```
/// use std::time::Duration;
/// let clock = cqrs_command_handler::heads::Clock::default();
/// clock.freeze();
/// let before = clock.now();
/// clock.advance(Duration::from_secs(61));
/// assert_eq!(clock.now(), before + Duration::from_secs(61));
/// ```
#[derive(Debug, Default)]
pub struct Clock {
    /// Where a stopped clock stands; `None`: the monotonic clock.
    stopped: Mutex<Option<Instant>>,
}

impl Clock {
    /// Now, as the caches see it.
    pub fn now(&self) -> Instant {
        match self.stopped.lock().map(|s| *s) {
            Ok(Some(at)) => at,
            _ => Instant::now(),
        }
    }

    /// Stops this clock where it stands: from then on only [`Clock::advance`] moves it.
    pub fn freeze(&self) {
        let now = Instant::now();
        if let Ok(mut stopped) = self.stopped.lock() {
            stopped.get_or_insert(now);
        }
    }

    /// Moves this clock `by` forward, stopping it first (tests: what a warm container sees that
    /// much later).
    pub fn advance(&self, by: Duration) {
        self.freeze();
        if let Ok(mut stopped) = self.stopped.lock()
            && let Some(at) = stopped.as_mut()
        {
            *at += by;
        }
    }
}

/// The heads state a warm container has read, and when.
#[derive(Debug, Default)]
pub struct HeadsCache {
    state: Mutex<Option<(Instant, HeadsState)>>,
    /// The tables were seen holding something: they will not be empty again, so the state record
    /// alone is read from then on.
    tables_hold_items: AtomicBool,
    /// The clock of this container's caches (the heads state's and the TTL policies').
    pub clock: Clock,
}

impl HeadsCache {
    /// The cached state when it was read less than [`STATE_MAX_AGE`] before `now`.
    fn fresh(&self, now: Instant) -> Option<HeadsState> {
        let state = self.state.lock().ok()?;
        state
            .filter(|(at, _)| now.saturating_duration_since(*at) < STATE_MAX_AGE)
            .map(|(_, state)| state)
    }

    fn store(&self, state: HeadsState, now: Instant) {
        if let Ok(mut cached) = self.state.lock() {
            *cached = Some((now, state));
        }
    }

    /// `state` as read from the state record, completed when the tables are empty (while the
    /// container has not seen them hold anything), then cached.
    async fn settle(
        &self,
        app: &App,
        state: HeadsState,
        now: Instant,
    ) -> Result<HeadsState, ApiError> {
        let state =
            if state == HeadsState::Incomplete && !self.tables_hold_items.load(Ordering::Relaxed) {
                let state = app.store.complete_heads_if_empty_from(state).await?;
                if state == HeadsState::Incomplete {
                    self.tables_hold_items.store(true, Ordering::Relaxed);
                }
                state
            } else {
                state
            };
        self.store(state, now);
        Ok(state)
    }
}

/// What the command handler knows of heads for this command: from the cache, else one read of
/// the state record (and, while there is none, whether the tables are empty).
pub async fn knowledge(app: &App) -> Result<HeadKnowledge, ApiError> {
    let now = app.heads.clock.now();
    if let Some(state) = app.heads.fresh(now) {
        return Ok(HeadKnowledge::of(state));
    }
    let state = app.store.heads_state().await?;
    Ok(HeadKnowledge::of(app.heads.settle(app, state, now).await?))
}

/// What a command needs before it is published: the heads state and, when the command gives no
/// `ttl`, its TTL policy applied to `input` ([`ttl_policy::apply`]'s rules). From the caches when
/// both are fresh; when the policy is to be read, one `BatchGetItem` reads it with the state;
/// when only the state is, one read of its record.
pub async fn prepare(
    app: &App,
    input: &mut CommandInput,
    entity: Option<ModelEntity<'_>>,
) -> Result<HeadKnowledge, ApiError> {
    let now = app.heads.clock.now();
    let cached = app.heads.fresh(now);
    let Some((key, policy)) = ttl_policy::needed(app, input, entity, now) else {
        // No policy to apply: the state alone.
        return match cached {
            Some(state) => Ok(HeadKnowledge::of(state)),
            None => knowledge(app).await,
        };
    };
    let (state, policy) = match (cached, policy) {
        (Some(state), Some(policy)) => (state, policy),
        (None, Some(policy)) => (knowledge_state(app, now).await?, policy),
        // The policy is to be read: the state comes with it, fresh or not.
        (_, None) => {
            let (state, policy) = app
                .store
                .heads_state_with_ttl_policy(&key.0, &key.1, chrono::Utc::now().timestamp())
                .await?;
            app.ttl_policies.store(key, policy, now);
            (app.heads.settle(app, state, now).await?, policy)
        }
    };
    ttl_policy::set(input, policy);
    Ok(HeadKnowledge::of(state))
}

/// The state record read alone, settled and cached.
async fn knowledge_state(app: &App, now: Instant) -> Result<HeadsState, ApiError> {
    let state = app.store.heads_state().await?;
    app.heads.settle(app, state, now).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36, item 3: `complete` too is read again, so that `cqrs heads mark shared` or
    /// `incomplete` reaches a warm container.
    #[test]
    fn every_state_is_read_again_after_a_minute() {
        let cache = HeadsCache::default();
        let now = cache.clock.now();
        assert_eq!(cache.fresh(now), None, "never read");
        for state in [
            HeadsState::Incomplete,
            HeadsState::Shared,
            HeadsState::Complete,
        ] {
            cache.store(state, cache.clock.now());
            assert_eq!(cache.fresh(cache.clock.now()), Some(state));
            cache.clock.advance(STATE_MAX_AGE - Duration::from_secs(1));
            assert_eq!(cache.fresh(cache.clock.now()), Some(state), "{state:?}");
            cache.clock.advance(Duration::from_secs(1));
            assert_eq!(
                cache.fresh(cache.clock.now()),
                None,
                "{state:?} read again after a minute"
            );
        }
    }
}
