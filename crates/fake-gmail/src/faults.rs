use serde::{Deserialize, Serialize};

/// The operations a fault can target; `*` targets any of them.
pub const OPERATIONS: &[&str] = &[
    "token",
    "drafts.create",
    "drafts.get",
    "drafts.list",
    "drafts.send",
    "drafts.delete",
    "messages.send",
    "messages.list",
    "messages.get",
];

/// A misbehaviour armed for the next `times` requests of an operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// One of [`OPERATIONS`], or `*`.
    pub operation: String,
    /// The status to answer with (401, 429, 500, 503, ...); `None` answers normally, which
    /// together with `delay_ms` makes a slow but successful answer.
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default = "one")]
    pub times: u32,
    /// Sent as `Retry-After`; a 429 without it says 1 second.
    #[serde(default)]
    pub retry_after_seconds: Option<u64>,
    /// Holds the answer back this long. Whether the operation took effect is decided by
    /// `status` and `after_effect`, not by the delay, so a client that gives up waiting has
    /// already caused (or not) the effect it would have caused.
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Performs the operation for real and then answers with `status`: the effect happened
    /// but the client is told it failed.
    #[serde(default)]
    pub after_effect: bool,
}

fn one() -> u32 {
    1
}

impl Default for Fault {
    fn default() -> Self {
        Fault {
            operation: "*".into(),
            status: None,
            times: 1,
            retry_after_seconds: None,
            delay_ms: None,
            after_effect: false,
        }
    }
}

impl Fault {
    /// Answers `status` to the next request of `operation`.
    pub fn status(operation: &str, status: u16) -> Self {
        Fault { operation: operation.into(), status: Some(status), ..Fault::default() }
    }

    pub fn times(mut self, times: u32) -> Self {
        self.times = times;
        self
    }

    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_seconds = Some(seconds);
        self
    }

    pub fn delay_ms(mut self, delay_ms: u64) -> Self {
        self.delay_ms = Some(delay_ms);
        self
    }

    pub fn after_effect(mut self) -> Self {
        self.after_effect = true;
        self
    }

    /// Why this fault cannot be armed, if it cannot.
    pub fn problem(&self) -> Option<String> {
        if self.operation != "*" && !OPERATIONS.contains(&self.operation.as_str()) {
            return Some(format!(
                "unknown operation {:?}; expected one of {} or \"*\"",
                self.operation,
                OPERATIONS.join(", ")
            ));
        }
        if let Some(status) = self.status
            && !(400..=599).contains(&status)
        {
            return Some(format!("status {status} is not an error status (400-599)"));
        }
        if self.times == 0 {
            return Some("times must be at least 1".into());
        }
        if self.after_effect && self.status.is_none() {
            return Some("after_effect needs a status to answer with".into());
        }
        None
    }

    fn matches(&self, operation: &str) -> bool {
        self.operation == "*" || self.operation == operation
    }
}

#[derive(Default)]
pub(crate) struct FaultQueue {
    armed: Vec<Fault>,
}

impl FaultQueue {
    /// Faults that could never fire are dropped rather than kept forever.
    pub fn arm(&mut self, fault: Fault) {
        if fault.problem().is_none() {
            self.armed.push(fault);
        }
    }

    pub fn armed(&self) -> Vec<Fault> {
        self.armed.clone()
    }

    /// Uses up one firing of the first fault armed for `operation`.
    pub fn take(&mut self, operation: &str) -> Option<Fault> {
        let index = self.armed.iter().position(|fault| fault.matches(operation))?;
        let fault = &mut self.armed[index];
        fault.times -= 1;
        let fired = fault.clone();
        if fault.times == 0 {
            self.armed.remove(index);
        }
        Some(fired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_fires_its_number_of_times_then_is_gone() {
        let mut queue = FaultQueue::default();
        queue.arm(Fault::status("drafts.send", 429).times(2));
        assert!(queue.take("messages.send").is_none());
        assert_eq!(queue.take("drafts.send").and_then(|f| f.status), Some(429));
        assert_eq!(queue.take("drafts.send").and_then(|f| f.status), Some(429));
        assert!(queue.take("drafts.send").is_none());
    }

    #[test]
    fn a_wildcard_matches_any_operation_in_arming_order() {
        let mut queue = FaultQueue::default();
        queue.arm(Fault::status("*", 503));
        queue.arm(Fault::status("token", 500));
        assert_eq!(queue.take("token").and_then(|f| f.status), Some(503));
        assert_eq!(queue.take("token").and_then(|f| f.status), Some(500));
    }

    #[test]
    fn faults_that_cannot_fire_are_refused() {
        assert!(Fault::status("drafts.frobnicate", 500).problem().is_some());
        assert!(Fault::status("token", 200).problem().is_some());
        assert!(Fault::status("token", 500).times(0).problem().is_some());
        assert!(Fault { after_effect: true, ..Fault::default() }.problem().is_some());
        assert!(Fault::status("*", 503).delay_ms(10).problem().is_none());
    }

    #[test]
    fn json_defaults_to_one_time() {
        let fault: Fault = serde_json::from_str(r#"{"operation":"messages.send","status":500}"#).unwrap();
        assert_eq!(fault, Fault::status("messages.send", 500));
    }
}
