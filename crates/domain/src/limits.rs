//! The bounds on what a client may send and on what a call may gather, in one place. A value
//! past its bound is refused with 400 `invalid_input` naming the field, before anything is
//! written; the OpenAPI description states each one (`maxLength`, `maxItems`).
//!
//! Why bounds at all: every string a client sends may be stored and then answered again, to
//! this client and to every reader of the call (the status route, the dashboard, MCP). Without
//! a bound, a few requests make a call large enough to take down the component that reads it
//! (docs/architecture.md, "Bounds").

use crate::ApiError;

/// A reason given for a correction, a cancel or a resume; stored with the call's history.
pub const MAX_REASON_CHARS: usize = 500;

/// A label a relay attaches to a call or names a tool by: `function_name`, `intent_id`,
/// `connection_id`.
pub const MAX_LABEL_CHARS: usize = 200;

/// A callback URL.
pub const MAX_URL_CHARS: usize = 2048;

/// A call's parameters, as compact JSON: what the tool validated, kept with the call.
pub const MAX_PARAMETERS_BYTES: usize = 48 * 1024;

/// Everything a call's corrections may add to its `parameters_history`, as compact JSON. With
/// [`MAX_PARAMETERS_BYTES`] and at most 50 corrections, a call's status answer stays a few
/// hundred kilobytes at most, whatever a relay does.
pub const MAX_PARAMETERS_HISTORY_BYTES: usize = 256 * 1024;

/// A sentence a tool gives back (a refusal, a failure) that is stored and spoken: longer text
/// is cut, not refused, since the tool, not the client, wrote it.
pub const MAX_TOOL_SENTENCE_CHARS: usize = 1000;

/// Refuses `value` of `field` when it has more than `max` characters.
pub fn check_length(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.chars().count() <= max {
        return Ok(());
    }
    Err(ApiError::invalid_input(format!("The {field} is too long: at most {max} characters."))
        .with_field(field, format!("must be at most {max} characters")))
}

/// [`check_length`] for a field the client may leave out.
pub fn check_optional_length(field: &str, value: Option<&str>, max: usize) -> Result<(), ApiError> {
    value.map_or(Ok(()), |value| check_length(field, value, max))
}

/// Refuses parameters larger than [`MAX_PARAMETERS_BYTES`] as compact JSON.
pub fn check_parameters_size(parameters: &serde_json::Map<String, serde_json::Value>) -> Result<(), ApiError> {
    let size = serde_json::to_string(parameters).map_or(usize::MAX, |text| text.len());
    if size <= MAX_PARAMETERS_BYTES {
        return Ok(());
    }
    Err(ApiError::invalid_input(format!(
        "The parameters are too large: at most {} KB of JSON.",
        MAX_PARAMETERS_BYTES / 1024
    ))
    .with_field("parameters", format!("must be at most {MAX_PARAMETERS_BYTES} bytes as JSON")))
}

/// `text` cut to at most `max` characters, with an ellipsis when something was cut.
pub fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn lengths_count_characters_not_bytes() {
        assert!(check_length("reason", &"é".repeat(MAX_REASON_CHARS), MAX_REASON_CHARS).is_ok());
        let error = check_length("reason", &"é".repeat(MAX_REASON_CHARS + 1), MAX_REASON_CHARS).err();
        assert_eq!(error.as_ref().map(|e| e.code), Some(ErrorCode::InvalidInput));
        assert_eq!(error.map(|e| e.fields[0].field.clone()).as_deref(), Some("reason"));
        assert!(check_optional_length("reason", None, 1).is_ok());
    }

    #[test]
    fn long_sentences_are_cut_on_a_character_boundary() {
        assert_eq!(truncate_chars("short", 10), "short");
        assert_eq!(truncate_chars("ééééé", 3), "ééé…");
    }
}
