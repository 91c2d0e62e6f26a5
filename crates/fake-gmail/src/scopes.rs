//! Which OAuth scopes each Gmail method accepts, as Gmail's discovery document lists them.
use crate::google_error::GoogleError;
use crate::message_format::Format;
use crate::routes::{GmailCall, Incoming};

const FULL: &str = "https://mail.google.com/";
const MODIFY: &str = "https://www.googleapis.com/auth/gmail.modify";
const COMPOSE: &str = "https://www.googleapis.com/auth/gmail.compose";
const SEND: &str = "https://www.googleapis.com/auth/gmail.send";
const READONLY: &str = "https://www.googleapis.com/auth/gmail.readonly";
const METADATA: &str = "https://www.googleapis.com/auth/gmail.metadata";
const ADDON_COMPOSE: &str = "https://www.googleapis.com/auth/gmail.addons.current.action.compose";
const ADDON_MESSAGE_ACTION: &str = "https://www.googleapis.com/auth/gmail.addons.current.message.action";
const ADDON_MESSAGE_READONLY: &str = "https://www.googleapis.com/auth/gmail.addons.current.message.readonly";
const ADDON_MESSAGE_METADATA: &str = "https://www.googleapis.com/auth/gmail.addons.current.message.metadata";

fn accepted(call: &GmailCall) -> &'static [&'static str] {
    match call {
        GmailCall::DraftsCreate | GmailCall::DraftsSend | GmailCall::DraftsDelete(_) => {
            &[FULL, ADDON_COMPOSE, COMPOSE, MODIFY]
        }
        GmailCall::DraftsGet(_) => &[FULL, ADDON_COMPOSE, COMPOSE, MODIFY, READONLY],
        GmailCall::DraftsList => &[FULL, COMPOSE, MODIFY, READONLY],
        GmailCall::MessagesSend => &[FULL, ADDON_COMPOSE, COMPOSE, MODIFY, SEND],
        GmailCall::MessagesList => &[FULL, METADATA, MODIFY, READONLY],
        GmailCall::MessagesGet(_) => {
            &[FULL, ADDON_MESSAGE_ACTION, ADDON_MESSAGE_METADATA, ADDON_MESSAGE_READONLY, METADATA, MODIFY, READONLY]
        }
    }
}

/// Refuses the call unless one granted scope allows it; the metadata-only scopes also forbid
/// searching and reading bodies.
pub(crate) fn check(call: &GmailCall, granted: &[String], request: &Incoming) -> Result<(), GoogleError> {
    let accepted = accepted(call);
    let usable: Vec<&str> = accepted.iter().copied().filter(|scope| granted.iter().any(|g| g == scope)).collect();
    if usable.is_empty() {
        return Err(GoogleError::insufficient_scopes(accepted));
    }
    let metadata_only = usable.iter().all(|scope| *scope == METADATA || *scope == ADDON_MESSAGE_METADATA);
    if !metadata_only {
        return Ok(());
    }
    match call {
        GmailCall::MessagesList if request.query_param("q").is_some_and(|q| !q.is_empty()) => {
            Err(GoogleError::forbidden("Metadata scope does not support 'q' parameter"))
        }
        GmailCall::MessagesGet(_) => match Format::parse(request.query_param("format"))? {
            Format::Full => Err(GoogleError::forbidden("Metadata scope doesn't allow format FULL")),
            Format::Raw => Err(GoogleError::forbidden("Metadata scope doesn't allow format RAW")),
            Format::Minimal | Format::Metadata => Ok(()),
        },
        _ => Ok(()),
    }
}
