//! A team's own tool host: a separate HTTP server that serves the tool contract itself, as a
//! tool written outside this repository would (docs/tools.md, "The tool contract"). It is a
//! helpdesk's `open_ticket`: `prepare` drafts the ticket, `execute` opens it, `discard` throws
//! the draft away. It checks Gatehouse's contract signature and spends each nonce once, keeps
//! the contract's ordering rules, runs `execute` once per call, and never writes Gatehouse's
//! history (it has no database), so the caller records its executions. It follows
//! openapi/tool-contract.yaml.
//!
//! [`Flaws`] make it break one rule on purpose, for the conformance kit's tests.
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use gatehouse_domain::service_auth;
use gatehouse_domain::signing::{self, SignedRequest};
use serde_json::{Map, Value, json};

use crate::http_server::{Exchange, Reply, serve_on};

pub const TOOL_NAME: &str = "open_ticket";

/// Rules this host breaks on purpose.
#[derive(Debug, Clone, Copy, Default)]
pub struct Flaws {
    /// Opens a new ticket on every `execute`, even one repeated for the same call.
    pub runs_execute_twice: bool,
    /// Answers requests without a valid contract signature.
    pub accepts_unsigned: bool,
    /// Answers every `execute` only after this long.
    pub slow_execute: Option<Duration>,
    /// Answers `prepare` with `{"hold": ...}` and no `checkpoint` key, though it declares
    /// `needs_checkpoint: true` (issue 49: such a call ran without the second yes).
    pub omits_checkpoint: bool,
    /// Answers `execute` with a body outside the contract (no `voice_response`).
    pub answers_off_contract: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Draft {
    Drafted,
    Opened(Value),
    Discarded,
}

#[derive(Default)]
struct Desk {
    secret: String,
    flaws: Flaws,
    spent_nonces: HashSet<String>,
    drafts: HashMap<String, Draft>,
    /// Every ticket really opened, in order.
    opened: Vec<String>,
    /// Each operation it answered, by name.
    answered: Vec<String>,
}

pub struct ToolHost {
    /// The contract's base URL, for a `tool_registry` entry.
    pub url: String,
    desk: Arc<Mutex<Desk>>,
}

impl ToolHost {
    /// A host that requires requests signed with `secret`.
    pub async fn start(secret: &str, flaws: Flaws) -> Result<ToolHost> {
        let desk = Arc::new(Mutex::new(Desk { secret: secret.to_owned(), flaws, ..Desk::default() }));
        let shared = desk.clone();
        let url = serve_on("127.0.0.1:0", move |exchange| {
            let desk = shared.clone();
            async move {
                let reply = answer(&desk, &exchange);
                if let Some(delay) = flaws.slow_execute.filter(|_| exchange.path == "/tool/execute") {
                    tokio::time::sleep(delay).await;
                }
                reply
            }
        })
        .await?;
        Ok(ToolHost { url, desk })
    }

    /// The tickets opened so far.
    pub fn opened(&self) -> Vec<String> {
        self.desk.lock().map(|desk| desk.opened.clone()).unwrap_or_default()
    }

    /// The operations answered so far (refused requests are not counted).
    pub fn answered(&self) -> Vec<String> {
        self.desk.lock().map(|desk| desk.answered.clone()).unwrap_or_default()
    }
}

fn refusal(status: u16, error: &str) -> Reply {
    Reply::json(status, json!({"error": error}))
}

fn answer(desk: &Mutex<Desk>, exchange: &Exchange) -> Reply {
    let Ok(mut desk) = desk.lock() else { return refusal(500, "poisoned") };
    let Some(operation) = exchange.path.strip_prefix("/tool/") else { return refusal(404, "No such route.") };
    if operation == "describe" {
        desk.answered.push(operation.to_owned());
        return Reply::json(200, description());
    }
    if exchange.method != "POST" {
        return refusal(405, "Only POST.");
    }
    if !desk.flaws.accepts_unsigned && !signed_once(&mut desk, exchange) {
        return refusal(401, "The request is not signed by Gatehouse, or was already used.");
    }
    let Ok(request) = serde_json::from_slice::<Value>(&exchange.body) else {
        return refusal(400, "The body is not JSON.");
    };
    let parameters = request["parameters"].as_object().cloned().unwrap_or_default();
    let call = request["tool_call_id"].as_str().map(str::to_owned);
    desk.answered.push(operation.to_owned());
    match (operation, call) {
        ("validate", _) => match validate(&parameters) {
            Ok(parameters) => {
                let summary = summarize(&parameters);
                Reply::json(200, json!({"parameters": parameters, "summary": summary, "needs_checkpoint": true}))
            }
            Err(fields) => Reply::json(422, json!({"error": "Some of the details aren't valid.", "fields": fields})),
        },
        ("summarize", _) => Reply::json(200, json!({"summary": summarize(&parameters)})),
        ("prepare", Some(call)) => match desk.drafts.get(&call).cloned() {
            Some(Draft::Discarded) => refusal(409, "That ticket was discarded."),
            Some(Draft::Opened(_)) => refusal(409, "That ticket was already opened."),
            Some(Draft::Drafted) | None if desk.flaws.omits_checkpoint => {
                desk.drafts.insert(call.clone(), Draft::Drafted);
                Reply::json(200, json!({"hold": "H-1"}))
            }
            Some(Draft::Drafted) | None => {
                desk.drafts.insert(call.clone(), Draft::Drafted);
                let message = format!("The ticket \"{}\" is drafted. Shall I open it?", subject(&parameters));
                Reply::json(200, json!({"checkpoint": {"message": message, "state": {"draft": call}}}))
            }
        },
        ("execute", Some(call)) => match desk.drafts.get(&call).cloned() {
            Some(Draft::Opened(first)) if !desk.flaws.runs_execute_twice => Reply::json(200, first),
            Some(Draft::Drafted | Draft::Opened(_)) => {
                let ticket = format!("T-{}", desk.opened.len() + 1);
                desk.opened.push(ticket.clone());
                let executed = if desk.flaws.answers_off_contract {
                    json!({"ticket": ticket, "ok": true})
                } else {
                    json!({"result": {"ticket": ticket}, "voice_response": format!("I've opened ticket {ticket}.")})
                };
                desk.drafts.insert(call, Draft::Opened(executed.clone()));
                Reply::json(200, executed)
            }
            Some(Draft::Discarded) => refusal(409, "That ticket was discarded."),
            None => refusal(409, "That ticket was never drafted."),
        },
        ("discard", Some(call)) => match desk.drafts.get(&call).cloned() {
            Some(Draft::Opened(_)) => refusal(409, "That ticket was already opened."),
            _ => {
                desk.drafts.insert(call, Draft::Discarded);
                Reply::json(200, json!({"discarded": true}))
            }
        },
        ("prepare" | "execute" | "discard", None) => refusal(400, "A tool_call_id is required."),
        _ => refusal(404, "No such operation."),
    }
}

/// Whether the request carries a valid contract signature whose nonce was not used before.
fn signed_once(desk: &mut Desk, exchange: &Exchange) -> bool {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let request = SignedRequest {
        method: &exchange.method,
        target: &exchange.target,
        idempotency_key: exchange.header("idempotency-key").unwrap_or_default(),
        body: &exchange.body,
    };
    let header = exchange.header(service_auth::SIGNATURE_HEADER);
    let signed = signing::verify(&[desk.secret.as_bytes()], header, &request, now);
    signed.is_ok_and(|signed| desk.spent_nonces.insert(signed.nonce))
}

fn description() -> Value {
    json!({
        "name": TOOL_NAME,
        "aliases": ["file_ticket"],
        "description": "Open a helpdesk ticket.",
        "parameters_schema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "required": ["subject"],
            "additionalProperties": false,
            "properties": {
                "subject": {"type": "string", "minLength": 1, "maxLength": 200},
                "priority": {"enum": ["low", "normal", "urgent"]}
            },
            "examples": [{"subject": "The printer is on fire", "priority": "urgent"}]
        },
        "needs_checkpoint": true,
        "version": "1.0.0",
        "effects": {"read_only": false, "destructive": false, "idempotent": false, "open_world": true}
    })
}

fn validate(parameters: &Map<String, Value>) -> Result<Map<String, Value>, Vec<Value>> {
    let mut problems = Vec::new();
    let subject = parameters.get("subject").and_then(Value::as_str);
    if !subject.is_some_and(|s| !s.trim().is_empty() && s.chars().count() <= 200) {
        problems.push(json!({"field": "subject", "problem": "must be a sentence of at most 200 characters"}));
    }
    let priority = parameters.get("priority").cloned().unwrap_or_else(|| json!("normal"));
    if !matches!(priority.as_str(), Some("low" | "normal" | "urgent")) {
        problems.push(json!({"field": "priority", "problem": "must be low, normal or urgent"}));
    }
    for unknown in parameters.keys().filter(|key| !matches!(key.as_str(), "subject" | "priority")) {
        problems.push(json!({"field": unknown, "problem": "is not a detail of a ticket"}));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut normalized = parameters.clone();
    normalized.insert("priority".to_owned(), priority);
    Ok(normalized)
}

fn subject(parameters: &Map<String, Value>) -> &str {
    parameters.get("subject").and_then(Value::as_str).unwrap_or_default()
}

fn summarize(parameters: &Map<String, Value>) -> String {
    let priority = parameters.get("priority").and_then(Value::as_str).unwrap_or("normal");
    format!("I'll open a {priority} ticket: \"{}\". Shall I?", subject(parameters))
}
