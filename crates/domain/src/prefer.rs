//! `Prefer: wait=N` (RFC 7240): the caller would rather wait up to N seconds for the call to
//! settle than get a 202 at once.

use std::time::Duration;

/// The longest wait a caller can ask for; a longer one is cut to this, as RFC 7240 allows.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// The `wait` preference of a `Prefer` header value, capped at [`MAX_WAIT`]. A header without
/// a well-formed `wait` is ignored, as RFC 7240 says unknown or bad preferences must be.
pub fn wait_preference(header: &str) -> Option<Duration> {
    header.split(',').flat_map(|preference| preference.split(';').next()).find_map(|token| {
        let (name, value) = token.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("wait") {
            return None;
        }
        let seconds: f64 = value.trim().trim_matches('"').parse().ok()?;
        (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds).min(MAX_WAIT))
    })
}

/// The `Preference-Applied` value for a wait that was honoured, e.g. `wait=1.5`.
pub fn preference_applied(wait: Duration) -> String {
    format!("wait={}", wait.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_wait_preference() {
        assert_eq!(wait_preference("wait=5"), Some(Duration::from_secs(5)));
        assert_eq!(wait_preference("respond-async, wait=2"), Some(Duration::from_secs(2)));
        assert_eq!(wait_preference("Wait = \"1.5\""), Some(Duration::from_millis(1500)));
        assert_eq!(wait_preference("wait=0"), Some(Duration::ZERO));
        assert_eq!(wait_preference("wait=3600"), Some(MAX_WAIT));
    }

    #[test]
    fn echoes_the_applied_wait() {
        assert_eq!(preference_applied(Duration::from_secs(10)), "wait=10");
        assert_eq!(preference_applied(Duration::from_millis(1500)), "wait=1.5");
    }

    #[test]
    fn ignores_malformed_or_other_preferences() {
        assert_eq!(wait_preference("return=minimal"), None);
        assert_eq!(wait_preference("wait=soon"), None);
        assert_eq!(wait_preference("wait=-1"), None);
        assert_eq!(wait_preference("wait"), None);
        assert_eq!(wait_preference(""), None);
    }
}
