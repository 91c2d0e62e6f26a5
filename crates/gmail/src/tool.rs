//! `send_email` on the tool contract: the draft is the checkpoint, sending it is the
//! irreversible step.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gatehouse_domain::contract::{Checkpoint, Executed, ToolDescription, ToolEffects, ToolRequest};
use gatehouse_domain::{FieldProblem, SessionOf};
use gatehouse_tool::{Tool, ToolFailure};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::api::{Draft, Gmail, MessageRef};
use crate::config::GmailConfig;
use crate::error::GmailError;
use crate::message::Message;
use crate::params::{self, EmailParameters};

pub struct GmailTool;

/// What `prepare` leaves in the checkpoint for `execute` and `discard`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct DraftState {
    draft_id: String,
    /// The `Message-ID` header, angle brackets included.
    message_id: String,
}

/// Gmail's search may trail a send by a moment; a reconciling retry looks this many times.
const SEARCH_ATTEMPTS: u32 = 3;
const SEARCH_PAUSE: Duration = Duration::from_millis(700);
/// How many times a request with a lost answer is settled and tried again.
const UNCERTAIN_ROUNDS: u32 = 3;

impl Tool for GmailTool {
    fn describe(&self) -> ToolDescription {
        let recipients = json!({"oneOf": [
            {"type": "string", "format": "email"},
            {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1}
        ]});
        ToolDescription {
            name: "send_email".into(),
            aliases: vec!["send_gmail".into()],
            description: "Sends an email from the configured Gmail account. A draft is created at the checkpoint and \
                          sent only after the caller says to go ahead."
                .into(),
            parameters_schema: json!({
                "type": "object",
                "required": ["to", "subject", "body"],
                "additionalProperties": false,
                "properties": {
                    "to": recipients, "cc": recipients, "bcc": recipients,
                    "subject": {"type": "string", "maxLength": params::MAX_SUBJECT_CHARS, "description": "One line, no line breaks"},
                    "body": {"type": "string", "description": "Plain text"},
                    "reference_context": {"type": "string", "description": "A session context key whose data the email uses, e.g. last_query_results"}
                },
                "examples": [{"to": "john.smith@gmail.com", "subject": "Meeting Tomorrow", "body": "Hi John, shall we meet at 10?"}]
            }),
            needs_checkpoint: true,
            // Sending adds a message to other people's mailboxes: nothing is overwritten, but
            // sending twice sends twice.
            effects: Some(ToolEffects { read_only: false, destructive: false, idempotent: false, open_world: true }),
            ..ToolDescription::default()
        }
    }

    fn validate(&self, parameters: Map<String, Value>) -> Result<Map<String, Value>, Vec<FieldProblem>> {
        EmailParameters::parse(&parameters).map(|(_, normalized)| normalized)
    }

    fn check_references(&self, parameters: &Map<String, Value>, session: Option<SessionOf<'_>>) -> Vec<FieldProblem> {
        let Some(key) = parameters.get("reference_context").and_then(Value::as_str) else {
            return Vec::new();
        };
        let Some(session) = session else {
            return vec![FieldProblem::new("reference_context", "needs the session the context belongs to")];
        };
        let found = gatehouse_platform::open_db()
            .map_err(|e| e.message)
            .and_then(|db| gatehouse_store::session_context_get(&db, session, key).map_err(|e| e.to_string()));
        match found {
            Ok(Some(_)) => Vec::new(),
            Ok(None) => vec![FieldProblem::new(
                "reference_context",
                format!("there is no context '{key}' for this session, or it has expired; run the query again"),
            )],
            Err(problem) => vec![FieldProblem::new("reference_context", format!("could not be checked: {problem}"))],
        }
    }

    fn summarize(&self, parameters: &Map<String, Value>) -> String {
        match EmailParameters::parse(parameters) {
            Ok((email, _)) => params::summarize(&email),
            Err(_) => "I'll send that email. Confirm to proceed.".into(),
        }
    }

    async fn prepare(&self, request: &ToolRequest) -> Result<Option<Checkpoint>, ToolFailure> {
        let config = GmailConfig::load()?;
        let gmail = Gmail::new(&config);
        let email = email(request)?;
        let message = Message::build(&config.sender, &email, &tool_call_id(request)?, now());
        // A prepare that is run again (after a crash, or a lost answer) adopts its own draft.
        let existing =
            if request.attempt > 1 { gmail.find_draft(&message.message_id).await.map_err(failure)? } else { None };
        let draft = match existing {
            Some(draft) => draft,
            None => create_draft_once(&gmail, &message).await?,
        };
        let state = DraftState { draft_id: draft.id, message_id: message.message_id };
        Ok(Some(Checkpoint {
            message: format!(
                "The email to {} about '{}' is ready. Shall I send it?",
                spoken_recipients(&email),
                email.subject
            ),
            state: serde_json::to_value(state)
                .map_err(|e| ToolFailure::new(format!("encoding the draft state: {e}")))?,
        }))
    }

    async fn execute(&self, request: &ToolRequest) -> Result<Executed, ToolFailure> {
        let config = GmailConfig::load()?;
        let gmail = Gmail::new(&config);
        let email = email(request)?;
        let state = draft_state(request)?;
        if request.side_effect_may_have_started
            && let Some(sent) = search_sent(&gmail, &state.message_id).await?
        {
            return Ok(sent_result(&email, &state, sent));
        }
        if gmail.get_draft(&state.draft_id).await.map_err(failure)?.is_none() {
            // A send may have happened and Gmail does not show it: never send blind.
            if request.side_effect_may_have_started {
                return Err(cannot_tell(&email));
            }
            // The draft went away before this call sent anything (someone deleted it in
            // Gmail): the message is rebuilt, identical, and sent whole.
            let message = Message::build(&config.sender, &email, &tool_call_id(request)?, now());
            return match gmail.send_message(&message.raw).await {
                Ok(sent) => Ok(sent_result(&email, &state, sent)),
                Err(GmailError::Uncertain(_)) => match search_sent(&gmail, &state.message_id).await? {
                    Some(sent) => Ok(sent_result(&email, &state, sent)),
                    None => Err(cannot_tell(&email)),
                },
                Err(other) => Err(failure(other)),
            };
        }
        send_draft_once(&gmail, &email, &state).await
    }

    async fn discard(&self, request: &ToolRequest) -> Result<(), ToolFailure> {
        let config = GmailConfig::load()?;
        let state = draft_state(request)?;
        Gmail::new(&config).delete_draft(&state.draft_id).await.map_err(failure)?;
        Ok(())
    }
}

/// Creates the draft. When an answer is lost, Gmail is asked whether the draft exists before
/// creating it again, so a call never leaves two drafts.
async fn create_draft_once(gmail: &Gmail<'_>, message: &Message) -> Result<Draft, ToolFailure> {
    for attempt in 1..=UNCERTAIN_ROUNDS {
        match gmail.create_draft(&message.raw).await {
            Ok(draft) => return Ok(draft),
            Err(GmailError::Uncertain(_)) => {
                if let Some(draft) = gmail.find_draft(&message.message_id).await.map_err(failure)? {
                    return Ok(draft);
                }
            }
            Err(other) => return Err(failure(other)),
        }
        if attempt < UNCERTAIN_ROUNDS {
            gatehouse_platform::sleep(SEARCH_PAUSE * attempt).await;
        }
    }
    Err(failure(GmailError::Unavailable("drafts.create kept failing".into())))
}

/// Sends the draft. When an answer is lost, the Sent folder and the draft say what happened:
/// the message is there (done), or the draft still is (not sent, so sending again is safe),
/// or neither (unknown: the call fails rather than risk a second email).
async fn send_draft_once(
    gmail: &Gmail<'_>,
    email: &EmailParameters,
    state: &DraftState,
) -> Result<Executed, ToolFailure> {
    for attempt in 1..=UNCERTAIN_ROUNDS {
        match gmail.send_draft(&state.draft_id).await {
            Ok(sent) => return Ok(sent_result(email, state, sent)),
            Err(GmailError::Uncertain(_)) => {
                if let Some(sent) = search_sent(gmail, &state.message_id).await? {
                    return Ok(sent_result(email, state, sent));
                }
                if gmail.get_draft(&state.draft_id).await.map_err(failure)?.is_none() {
                    return Err(cannot_tell(email));
                }
            }
            Err(other) => return Err(failure(other)),
        }
        if attempt < UNCERTAIN_ROUNDS {
            gatehouse_platform::sleep(SEARCH_PAUSE * attempt).await;
        }
    }
    Err(failure(GmailError::Unavailable("drafts.send kept failing".into())))
}

async fn search_sent(gmail: &Gmail<'_>, message_id: &str) -> Result<Option<MessageRef>, ToolFailure> {
    for attempt in 1..=SEARCH_ATTEMPTS {
        if let Some(sent) = gmail.find_sent(message_id).await.map_err(failure)? {
            return Ok(Some(sent));
        }
        if attempt < SEARCH_ATTEMPTS {
            gatehouse_platform::sleep(SEARCH_PAUSE).await;
        }
    }
    Ok(None)
}

fn sent_result(email: &EmailParameters, state: &DraftState, sent: MessageRef) -> Executed {
    let to = spoken_recipients(email);
    Executed {
        result: json!({
            "success": true,
            "message_id": sent.id,
            "thread_id": sent.thread_id,
            "rfc822_message_id": state.message_id,
            "to": email.to.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "subject": email.subject,
        }),
        voice_response: format!("Email sent to {to} successfully!"),
    }
}

fn cannot_tell(email: &EmailParameters) -> ToolFailure {
    ToolFailure::new(format!(
        "I couldn't confirm whether the email to {} went out, so I haven't sent it again. Please check the Sent folder.",
        spoken_recipients(email)
    ))
}

/// A Gmail problem as the sentence the agent speaks; the detail goes to the log only.
fn failure(error: GmailError) -> ToolFailure {
    gatehouse_platform::log_line("warn", &format!("gmail: {error}"));
    let sentence = match error {
        GmailError::Credentials(_) => "Gmail didn't accept this server's credentials, so the email was not sent.",
        GmailError::NotFound => "The draft for this email is gone, so it was not sent.",
        GmailError::Refused { .. } => "Gmail refused this email, so it was not sent.",
        GmailError::Unavailable(_) => {
            "Gmail isn't responding right now, so the email was not sent. Please try again in a minute."
        }
        GmailError::Uncertain(_) => "Gmail didn't answer clearly, and the email was not sent.",
    };
    ToolFailure::new(sentence)
}

fn email(request: &ToolRequest) -> Result<EmailParameters, ToolFailure> {
    EmailParameters::parse(&request.parameters)
        .map(|(email, _)| email)
        .map_err(|_| ToolFailure::new("The email's details are no longer valid, so it was not sent."))
}

fn draft_state(request: &ToolRequest) -> Result<DraftState, ToolFailure> {
    request
        .checkpoint
        .as_ref()
        .and_then(|checkpoint| serde_json::from_value(checkpoint.state.clone()).ok())
        .ok_or_else(|| ToolFailure::new("There is no prepared draft for this email, so it was not sent."))
}

fn tool_call_id(request: &ToolRequest) -> Result<String, ToolFailure> {
    request
        .tool_call_id
        .as_ref()
        .map(ToString::to_string)
        .ok_or_else(|| ToolFailure::new("The email has no tool call to belong to, so it was not prepared."))
}

fn spoken_recipients(email: &EmailParameters) -> String {
    email.to.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}
