use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::config::FakeGmailConfig;
use crate::faults::FaultQueue;
use crate::mailbox::Mailbox;
use crate::records::RequestRecord;
use crate::tokens::TokenStore;

/// Everything the request handlers share. One lock: every operation is short and never awaits
/// while holding it, so a finer split would buy nothing.
pub(crate) struct Shared {
    pub config: FakeGmailConfig,
    pub started: Instant,
    state: Mutex<State>,
}

pub(crate) struct State {
    pub mailbox: Mailbox,
    pub tokens: TokenStore,
    pub faults: FaultQueue,
    pub requests: Vec<RequestRecord>,
}

impl State {
    pub fn reset(&mut self) {
        self.mailbox = Mailbox::default();
        self.faults = FaultQueue::default();
        self.requests.clear();
    }
}

impl Shared {
    pub fn new(config: FakeGmailConfig) -> Self {
        Shared {
            config,
            started: Instant::now(),
            state: Mutex::new(State {
                mailbox: Mailbox::default(),
                tokens: TokenStore::default(),
                faults: FaultQueue::default(),
                requests: Vec::new(),
            }),
        }
    }

    /// A handler that panicked while holding the lock leaves data that is still consistent
    /// (every mutation is a single push, insert or remove), so a poisoned lock is used as is.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}
