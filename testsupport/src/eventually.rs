//! Waiting for something a test cannot be told about (a socket appearing, a counter
//! reaching a value, a process exiting): poll it until it holds, and fail with a message
//! naming what never came. A sleep of a guessed length is too short on a loaded machine
//! and wastes time on an idle one.

use std::time::{Duration, Instant};

/// How often [`eventually`] looks again: soon at first, then every 50 ms at most (a poll
/// may start a process).
const FIRST: Duration = Duration::from_millis(1);
const EVERY: Duration = Duration::from_millis(50);

/// What a poll returns: a value when the wait is over ([`Option`]), or whether it is
/// (`bool`).
pub trait Outcome {
    type Value;
    fn done(self) -> Option<Self::Value>;
}

impl<T> Outcome for Option<T> {
    type Value = T;
    fn done(self) -> Option<T> {
        self
    }
}

impl Outcome for bool {
    type Value = ();
    fn done(self) -> Option<()> {
        self.then_some(())
    }
}

/// Calls `poll` until it returns `Some` (or `true`), and returns its value;
/// panics after `timeout` saying that `what` did not happen. `poll` runs at least once,
/// also after the deadline, so a slow first call does not fail a wait that holds.
pub fn eventually<R: Outcome>(
    what: &str,
    timeout: Duration,
    mut poll: impl FnMut() -> R,
) -> R::Value {
    let start = Instant::now();
    let mut every = FIRST;
    loop {
        let last_chance = start.elapsed() >= timeout;
        if let Some(value) = poll().done() {
            return value;
        }
        assert!(!last_chance, "{what}: not so after {timeout:?}");
        std::thread::sleep(every.min(timeout.saturating_sub(start.elapsed())));
        every = (every * 2).min(EVERY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_the_value_once_the_poll_gives_one() {
        let mut calls = 0;
        let v = eventually("three calls", Duration::from_secs(10), || {
            calls += 1;
            (calls == 3).then_some(calls * 10)
        });
        assert_eq!(v, 30);
    }

    #[test]
    fn a_bool_poll_waits_for_true() {
        let mut calls = 0;
        eventually("two calls", Duration::from_secs(10), || {
            calls += 1;
            calls == 2
        });
        assert_eq!(calls, 2);
    }

    #[test]
    #[should_panic(expected = "the socket exists: not so after 50ms")]
    fn a_wait_that_never_ends_fails_naming_it() {
        eventually("the socket exists", Duration::from_millis(50), || false);
    }
}
