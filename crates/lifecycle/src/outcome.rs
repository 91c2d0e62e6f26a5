//! An operation's outcome, independent of how it is asked: its answer (one of the types in
//! `answers`), the `Prefer: wait` it honoured, and the work it goes on with after. The REST
//! routes and the MCP endpoint each turn the same outcome into their own answer.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// Work an operation goes on with once its answer is out (docs/architecture.md, "Work after
/// the answer"): the executor hand-off, a discard, the relay's callbacks. The answer never
/// waits on it.
pub type FollowUp = Pin<Box<dyn Future<Output = ()>>>;

/// An operation's answer, and what it does after.
pub struct Outcome<T> {
    pub answer: T,
    /// The `Prefer: wait` the operation honoured, if the caller asked for one.
    pub waited: Option<Duration>,
    pub follow_up: Option<FollowUp>,
}

impl<T> Outcome<T> {
    pub fn new(answer: T) -> Outcome<T> {
        Outcome { answer, waited: None, follow_up: None }
    }

    /// The same outcome with its answer changed.
    pub fn map<U>(self, change: impl FnOnce(T) -> U) -> Outcome<U> {
        Outcome { answer: change(self.answer), waited: self.waited, follow_up: self.follow_up }
    }

    /// Work to do after the answer; whatever it yields is not needed by then.
    pub(crate) fn then<R>(mut self, work: impl Future<Output = R> + 'static) -> Outcome<T> {
        self.follow_up = Some(Box::pin(async move {
            work.await;
        }));
        self
    }

    pub(crate) fn waited(mut self, wait: Option<Duration>) -> Outcome<T> {
        self.waited = wait;
        self
    }
}
