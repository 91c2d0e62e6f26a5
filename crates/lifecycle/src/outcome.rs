//! What an operation answers, independent of how it is asked: the REST routes and the MCP
//! endpoint each turn the same outcome into their own answer.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use gatehouse_domain::{Status, ToolCallId};
use gatehouse_store::ToolCall;
use serde::Serialize;

/// Work an operation goes on with once its answer is out (SPEC §4): the executor hand-off, a
/// discard, the relay's callbacks. The answer never waits on it.
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

/// The short answer about one call: its id, its status and the sentence to speak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Brief {
    pub tool_call_id: ToolCallId,
    pub status: Status,
    pub message: String,
}

/// Where a confirm or a resume left the call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Progress {
    /// Running in the background: the executor has it.
    Running(Brief),
    /// Settled (or at its checkpoint) within the caller's `Prefer: wait`: the call in full.
    Reached(Box<ToolCall>),
    /// A resume whose action was cancel.
    Cancelled(Brief),
}
