//! ULID generation, monotonic within one millisecond.
//!
//! Wraps the `ulid` crate's [`Generator`], which, within
//! one millisecond (or when the clock steps back), increments the previous
//! ULID instead of drawing new random bits, so that ULIDs from one generator
//! strictly increase. The generator sits behind a `Mutex` so one instance can
//! be shared between threads; [`new_ulid`] uses a process-wide one.
//!
//! ```
//! use cqrs_keys::ulid_gen::new_ulid;
//! let (a, b) = (new_ulid(), new_ulid());
//! assert!(a < b);
//! ```

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use ::ulid::Generator;

/// A thread-safe, monotonic ULID generator giving Crockford base-32 strings
/// (26 characters, which sort in generation order).
///
/// ```
/// use cqrs_keys::UlidGenerator;
///
/// let generator = UlidGenerator::new();
/// let a = generator.generate();
/// let b = generator.generate();
/// assert_eq!(a.len(), 26);
/// assert!(a < b);
/// ```
pub struct UlidGenerator {
    inner: Mutex<Generator>,
}

impl UlidGenerator {
    /// A new generator.
    ///
    /// ```
    /// static IDS: cqrs_keys::UlidGenerator = cqrs_keys::UlidGenerator::new();
    /// assert_eq!(IDS.generate().len(), 26);
    /// ```
    pub const fn new() -> Self {
        Self {
            inner: Mutex::new(Generator::new()),
        }
    }

    /// The next ULID, greater than every earlier one from this generator.
    ///
    /// In the (practically unreachable) case that 2^80 ULIDs were made in one
    /// millisecond, waits for the next millisecond.
    ///
    /// ```
    /// let generator = cqrs_keys::UlidGenerator::default();
    /// let ids: Vec<String> = (0..100).map(|_| generator.generate()).collect();
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    /// ```
    pub fn generate(&self) -> String {
        loop {
            // A panic while holding the lock cannot leave the generator in a
            // state that breaks monotonicity, so a poisoned lock is usable.
            let next = self
                .inner
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .generate();
            match next {
                Ok(ulid) => return ulid.to_string(),
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }
}

impl std::fmt::Debug for UlidGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UlidGenerator").finish_non_exhaustive()
    }
}

impl Default for UlidGenerator {
    fn default() -> Self {
        Self::new()
    }
}

static PROCESS_GENERATOR: UlidGenerator = UlidGenerator::new();

/// A new ULID string from a process-wide [`UlidGenerator`]: monotonic across
/// all threads of the process.
///
/// ```
/// let a = cqrs_keys::new_ulid();
/// let b = cqrs_keys::new_ulid();
/// assert!(a < b);
/// ```
pub fn new_ulid() -> String {
    PROCESS_GENERATOR.generate()
}
