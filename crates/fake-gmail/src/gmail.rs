//! The Gmail API methods under `/gmail/v1/users/{userId}/`.
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use hyper::StatusCode;
use serde_json::{Map, Value, json};

use crate::google_error::GoogleError;
use crate::headers::HeaderBlock;
use crate::mailbox::{self, NewMessage, StoredDraft, StoredMessage};
use crate::message_format::Format;
use crate::responses::{self, Answer};
use crate::routes::{GmailCall, Incoming};
use crate::scopes;
use crate::search::Query;
use crate::state::Shared;
use crate::tokens::TokenCheck;

/// Gmail's limit on a message, 35 MB.
const MAX_MESSAGE_BYTES: usize = 36_700_160;

const MESSAGE_FIELDS: &[&str] = &[
    "id",
    "threadId",
    "thread_id",
    "labelIds",
    "label_ids",
    "snippet",
    "historyId",
    "history_id",
    "internalDate",
    "internal_date",
    "payload",
    "sizeEstimate",
    "size_estimate",
    "raw",
    "classificationLabelValues",
    "classification_label_values",
];
const DRAFT_FIELDS: &[&str] = &["id", "message"];

type Outcome = Result<Answer, GoogleError>;

pub(crate) fn handle(shared: &Shared, user_id: &str, call: &GmailCall, request: &Incoming) -> Answer {
    let outcome = authorize(shared, user_id, call, request).and_then(|()| match call {
        GmailCall::DraftsCreate => create_draft(shared, request),
        GmailCall::DraftsList => list_drafts(shared, request),
        GmailCall::DraftsGet(id) => get_draft(shared, id, request),
        GmailCall::DraftsSend => send_draft(shared, request),
        GmailCall::DraftsDelete(id) => delete_draft(shared, id),
        GmailCall::MessagesSend => send_message(shared, request),
        GmailCall::MessagesList => list_messages(shared, request),
        GmailCall::MessagesGet(id) => get_message(shared, id, request),
    });
    outcome.unwrap_or_else(GoogleError::into_answer)
}

/// Token first, then whose mailbox, then scopes: the order in which Gmail refuses a request.
fn authorize(shared: &Shared, user_id: &str, call: &GmailCall, request: &Incoming) -> Result<(), GoogleError> {
    let token = bearer_token(request)?;
    let TokenCheck::Valid { scopes: granted } = shared.lock().tokens.check(&token) else {
        return Err(GoogleError::invalid_credentials());
    };
    if user_id != "me" && !user_id.eq_ignore_ascii_case(&shared.config.sender) {
        return Err(GoogleError::delegation_denied(user_id));
    }
    scopes::check(call, &granted, request)
}

fn bearer_token(request: &Incoming) -> Result<String, GoogleError> {
    if let Some(value) = request.header("authorization") {
        return match value.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
                Ok(token.trim().to_owned())
            }
            _ => Err(GoogleError::invalid_credentials()),
        };
    }
    request.query_param("access_token").map(str::to_owned).ok_or_else(GoogleError::missing_credentials)
}

fn create_draft(shared: &Shared, request: &Incoming) -> Outcome {
    let body = json_object(request)?;
    reject_unknown_fields(&body, DRAFT_FIELDS, None)?;
    let Some(message) = body.get("message").and_then(Value::as_object) else {
        return Err(GoogleError::invalid_argument("Missing draft message"));
    };
    let new = new_message(message, "message.raw", Some("message"))?;
    // Gmail keeps a draft without recipients but refuses one whose recipient headers are malformed.
    HeaderBlock::parse(&new.raw).recipients().map_err(|invalid| GoogleError::invalid_recipient_header(invalid.0))?;
    let draft = shared.lock().mailbox.create_draft(new);
    Ok(responses::json(StatusCode::OK, &json!({"id": draft.id, "message": message_reference(&draft.message)})))
}

fn list_drafts(shared: &Shared, request: &Incoming) -> Outcome {
    let page = Page::from_request(request)?;
    let query = Query::parse(request.query_param("q").unwrap_or_default());
    let mut drafts: Vec<StoredDraft> =
        shared.lock().mailbox.drafts().into_iter().filter(|draft| query.matches(&draft.message)).collect();
    drafts.reverse();
    let total = drafts.len();
    let (items, next) = page.slice(&drafts);
    let mut body = json!({"resultSizeEstimate": total});
    if !items.is_empty() {
        body["drafts"] = items
            .iter()
            .map(|draft| json!({"id": draft.id, "message": {"id": draft.message.id, "threadId": draft.message.thread_id}}))
            .collect();
    }
    if let Some(token) = next {
        body["nextPageToken"] = json!(token);
    }
    Ok(responses::json(StatusCode::OK, &body))
}

fn get_draft(shared: &Shared, id: &str, request: &Incoming) -> Outcome {
    let format = Format::parse(request.query_param("format"))?;
    let state = shared.lock();
    let draft = state.mailbox.draft(id).ok_or_else(GoogleError::not_found)?;
    let message = message_resource(&draft.message, format, &[], state.mailbox.history_id());
    Ok(responses::json(StatusCode::OK, &json!({"id": draft.id, "message": message})))
}

fn send_draft(shared: &Shared, request: &Incoming) -> Outcome {
    let body = json_object(request)?;
    reject_unknown_fields(&body, DRAFT_FIELDS, None)?;
    let Some(draft_id) = body.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()) else {
        return Err(GoogleError::invalid_argument("Invalid draft"));
    };
    let replacement = match body.get("message").and_then(Value::as_object) {
        Some(message) => {
            reject_unknown_fields(message, MESSAGE_FIELDS, Some("message"))?;
            decode_raw(message.get("raw"), "message.raw")?
        }
        None => None,
    };
    let sent = {
        let mut state = shared.lock();
        let draft = state.mailbox.draft(draft_id).ok_or_else(GoogleError::not_found)?;
        let raw = replacement.as_deref().unwrap_or(&draft.message.raw);
        require_recipients(raw)?;
        if let Some(raw) = replacement.clone() {
            state.mailbox.replace_draft_content(draft_id, raw);
        }
        state.mailbox.send_draft(draft_id).ok_or_else(GoogleError::not_found)?
    };
    file_sent_copy(shared, &sent);
    Ok(responses::json(StatusCode::OK, &message_reference(&sent)))
}

fn delete_draft(shared: &Shared, id: &str) -> Outcome {
    if shared.lock().mailbox.delete_draft(id) {
        Ok(responses::empty(StatusCode::NO_CONTENT))
    } else {
        Err(GoogleError::not_found())
    }
}

fn send_message(shared: &Shared, request: &Incoming) -> Outcome {
    let body = json_object(request)?;
    let new = new_message(&body, "raw", None)?;
    require_recipients(&new.raw)?;
    let sent = shared.lock().mailbox.send(new);
    file_sent_copy(shared, &sent);
    Ok(responses::json(StatusCode::OK, &message_reference(&sent)))
}

fn list_messages(shared: &Shared, request: &Incoming) -> Outcome {
    let page = Page::from_request(request)?;
    let query = Query::parse(request.query_param("q").unwrap_or_default());
    let labels = request.query_params("labelIds");
    let matching: Vec<StoredMessage> = shared
        .lock()
        .mailbox
        .newest_first()
        .filter(|message| labels.iter().all(|label| message.has_label(label)) && query.matches(message))
        .cloned()
        .collect();
    let (items, next) = page.slice(&matching);
    // Gmail leaves `messages` out altogether, rather than sending an empty list, when none match.
    let mut body = json!({"resultSizeEstimate": matching.len()});
    if !items.is_empty() {
        body["messages"] = items.iter().map(|m| json!({"id": m.id, "threadId": m.thread_id})).collect();
    }
    if let Some(token) = next {
        body["nextPageToken"] = json!(token);
    }
    Ok(responses::json(StatusCode::OK, &body))
}

fn get_message(shared: &Shared, id: &str, request: &Incoming) -> Outcome {
    if id.is_empty() || id.len() > 16 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(GoogleError::invalid_argument("Invalid id value"));
    }
    let format = Format::parse(request.query_param("format"))?;
    let wanted_headers = request.query_params("metadataHeaders");
    let state = shared.lock();
    let message = state.mailbox.message(&id.to_ascii_lowercase()).ok_or_else(GoogleError::not_found)?;
    let resource = message_resource(message, format, &wanted_headers, state.mailbox.history_id());
    Ok(responses::json(StatusCode::OK, &resource))
}

/// The request body as a JSON object; an empty body is an empty object, as in Google's parser.
fn json_object(request: &Incoming) -> Result<Map<String, Value>, GoogleError> {
    if request.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(&request.body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(GoogleError::invalid_value("Invalid JSON payload received. Expected an object.")),
        Err(e) => Err(GoogleError::invalid_value(format!(
            "Invalid JSON payload received. Unexpected token at line {} column {}.",
            e.line(),
            e.column()
        ))),
    }
}

/// Google's parser refuses names the resource does not have, so a misspelt field fails loudly.
fn reject_unknown_fields(object: &Map<String, Value>, known: &[&str], at: Option<&str>) -> Result<(), GoogleError> {
    match object.keys().find(|key| !known.contains(&key.as_str())) {
        None => Ok(()),
        Some(unknown) => {
            let at = at.map(|path| format!(" at '{path}'")).unwrap_or_default();
            Err(GoogleError::invalid_value(format!(
                "Invalid JSON payload received. Unknown name \"{unknown}\"{at}: Cannot find field."
            )))
        }
    }
}

fn new_message(message: &Map<String, Value>, raw_path: &str, at: Option<&str>) -> Result<NewMessage, GoogleError> {
    reject_unknown_fields(message, MESSAGE_FIELDS, at)?;
    let raw = decode_raw(message.get("raw"), raw_path)?.ok_or_else(|| {
        GoogleError::invalid_argument(
            "'raw' RFC822 payload message string or uploading message via /upload/* URL required",
        )
    })?;
    let thread_id =
        message.get("threadId").or_else(|| message.get("thread_id")).and_then(Value::as_str).map(str::to_owned);
    Ok(NewMessage { raw, thread_id })
}

/// Base64url as Gmail documents it, but also padded or unpadded, and the standard alphabet,
/// which Google's decoder takes as well.
fn decode_raw(value: Option<&Value>, field: &str) -> Result<Option<Vec<u8>>, GoogleError> {
    let text = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) if text.is_empty() => return Ok(None),
        Some(Value::String(text)) => text,
        Some(other) => {
            return Err(GoogleError::invalid_value(format!("Invalid value at '{field}' (TYPE_BYTES), {other}")));
        }
    };
    let normalized: String = text
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    let lenient = GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    let raw = lenient.decode(normalized.as_bytes()).map_err(|_| {
        GoogleError::invalid_value(format!("Invalid value at '{field}' (TYPE_BYTES), Base64 decoding failed"))
    })?;
    if raw.len() > MAX_MESSAGE_BYTES {
        return Err(GoogleError::payload_too_large(MAX_MESSAGE_BYTES));
    }
    Ok(Some(raw))
}

fn require_recipients(raw: &[u8]) -> Result<(), GoogleError> {
    let recipients =
        HeaderBlock::parse(raw).recipients().map_err(|invalid| GoogleError::invalid_recipient_header(invalid.0))?;
    if recipients.is_empty() {
        return Err(GoogleError::recipient_required());
    }
    Ok(())
}

/// What create and send answer: ids and labels only.
fn message_reference(message: &StoredMessage) -> Value {
    json!({"id": message.id, "threadId": message.thread_id, "labelIds": message.label_ids})
}

fn message_resource(message: &StoredMessage, format: Format, wanted_headers: &[&str], history_id: u64) -> Value {
    let mut resource = json!({
        "id": message.id,
        "threadId": message.thread_id,
        "labelIds": message.label_ids,
        "snippet": mailbox::snippet(message),
        "sizeEstimate": message.raw.len(),
        "historyId": history_id.to_string(),
        "internalDate": message.created_at_ms.to_string(),
    });
    let headers = message.headers();
    let header_list = |filter: &[&str]| -> Value {
        headers
            .fields()
            .iter()
            .filter(|(name, _)| filter.is_empty() || filter.iter().any(|wanted| wanted.eq_ignore_ascii_case(name)))
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect()
    };
    let mime_type = headers
        .get("Content-Type")
        .and_then(|value| value.split(';').next())
        .map(|value| value.trim().to_ascii_lowercase())
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| "text/plain".into());
    match format {
        Format::Minimal => {}
        Format::Raw => resource["raw"] = json!(URL_SAFE.encode(&message.raw)),
        Format::Metadata => {
            resource["payload"] = json!({"mimeType": mime_type, "headers": header_list(wanted_headers)})
        }
        Format::Full => {
            let body = crate::headers::body(&message.raw);
            // Multipart bodies are not split into parts here; a single-part body is given whole.
            let body_json = if mime_type.starts_with("multipart/") {
                json!({"size": 0})
            } else {
                json!({"size": body.len(), "data": URL_SAFE.encode(body)})
            };
            resource["payload"] = json!({
                "partId": "",
                "mimeType": mime_type,
                "filename": "",
                "headers": header_list(&[]),
                "body": body_json,
            });
        }
    }
    resource
}

/// `maxResults` and `pageToken`; the token is the offset of the next item.
struct Page {
    offset: usize,
    size: usize,
}

impl Page {
    fn from_request(request: &Incoming) -> Result<Page, GoogleError> {
        let size = match request.query_param("maxResults") {
            None => 100,
            Some(text) => text.parse::<u32>().map_err(|_| {
                GoogleError::invalid_value(format!("Invalid value at 'max_results' (TYPE_UINT32), \"{text}\""))
            })?,
        };
        let offset = match request.query_param("pageToken") {
            None | Some("") => 0,
            Some(token) => token.parse::<usize>().map_err(|_| GoogleError::invalid_argument("Invalid pageToken"))?,
        };
        // Gmail treats 0 as the default and caps the page at 500.
        let size = match size {
            0 => 100,
            n => n.min(500) as usize,
        };
        Ok(Page { offset, size })
    }

    fn slice<'a, T>(&self, items: &'a [T]) -> (&'a [T], Option<String>) {
        let start = self.offset.min(items.len());
        let end = start.saturating_add(self.size).min(items.len());
        let next = (end < items.len()).then(|| end.to_string());
        (&items[start..end], next)
    }
}

/// Writes a sent message to the mail directory. The send has happened whatever becomes of the
/// copy, so a failure is reported on stderr rather than to the client.
fn file_sent_copy(shared: &Shared, message: &StoredMessage) {
    let Some(dir) = &shared.config.mail_dir else { return };
    let path = dir.join(format!("{}.eml", message.id));
    let partial = dir.join(format!(".{}.eml.partial", message.id));
    let written = std::fs::write(&partial, &message.raw).and_then(|()| std::fs::rename(&partial, &path));
    if let Err(e) = written {
        eprintln!(
            "{}",
            json!({"level": "warn", "message": "cannot write a sent message to the mail directory", "path": path.display().to_string(), "error": e.to_string()})
        );
    }
}
