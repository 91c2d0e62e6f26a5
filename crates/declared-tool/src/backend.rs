//! Sending a declared tool's requests to the team's backend, and when to send one again.
//!
//! A request is sent again only where that cannot do the action twice: no connection was made,
//! or the backend answered 429 or 503 with a short `Retry-After`; and, when the declaration says
//! the backend honours `Idempotency-Key`, after a timeout, a broken answer or any 5xx too (a
//! 503 without `Retry-After` included). An `execute` that may already have run is sent again
//! only to such a backend; otherwise the call fails with a sentence that says the action may
//! have happened, and what `prepare` left is kept. When the tries of such a backend run out
//! without an answer that settles the request, the lifecycle asks again later with the same key
//! (docs/architecture.md, "Declared tools").

use std::time::Duration;

use gatehouse_declaration::{BackendRequest, Declared, HttpMethod, Origin, StepKind};
use gatehouse_platform::{Method, OutboundResponse, SendFailure};
use gatehouse_tool::ToolFailure;
use serde_json::{Map, Value};
use spin_sdk::variables;

use crate::SIGNING_SECRET_VARIABLE;

/// Tries of one request, the first included.
const MAX_TRIES: u32 = 3;
/// The longest `Retry-After` waited for; a longer one fails the operation now.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(5);
/// The pause before trying again after no connection was made.
const RECONNECT_PAUSE: Duration = Duration::from_millis(250);
/// The longest sentence of the backend's own that is passed on to the caller.
const MAX_SPOKEN_REFUSAL: usize = 200;

/// The backend as one call sees it: where it is, the variables the templates read, and the
/// signing secret. No `Debug`: the variables hold secrets.
pub(crate) struct Backend {
    tool: String,
    origin: String,
    pub(crate) variables: Map<String, Value>,
    signing_secret: Vec<u8>,
    timeout: Duration,
    honours_idempotency_key: bool,
}

/// What the backend answered.
pub(crate) enum Answered {
    /// A 2xx, its body read as JSON (an empty body is `null`, a body that is not JSON a string).
    Json(Value),
    /// A `discard` whose target the backend no longer has (404 or 410): nothing left to undo.
    Gone,
}

fn not_set_up(what: &str) -> ToolFailure {
    gatehouse_platform::log_line("error", what);
    ToolFailure::new("This tool isn't set up on this server yet, so nothing was sent.")
}

fn read_variable(name: &str) -> Result<String, ToolFailure> {
    let value = variables::get(name).map_err(|e| not_set_up(&format!("reading the {name} variable: {e:?}")))?;
    let value = value.trim().to_owned();
    if value.is_empty() {
        return Err(not_set_up(&format!("the {name} variable is empty")));
    }
    Ok(value)
}

impl Backend {
    pub(crate) fn configure(declared: &Declared) -> Result<Backend, ToolFailure> {
        let declaration = declared.declaration();
        let mut variables = Map::new();
        for name in declared.variables() {
            let value = read_variable(&name)?;
            variables.insert(name, Value::String(value));
        }
        let origin = match declared.origin() {
            Origin::Literal(origin) => origin.clone(),
            Origin::Variable(name) => {
                let value = variables.get(name).and_then(Value::as_str).unwrap_or_default();
                Origin::literal(value).map_err(|problem| not_set_up(&format!("the {name} variable: {problem}")))?
            }
        };
        Ok(Backend {
            tool: declaration.name.clone(),
            origin,
            variables,
            signing_secret: read_variable(SIGNING_SECRET_VARIABLE)?.into_bytes(),
            timeout: Duration::from_millis(declaration.backend.timeout_ms),
            honours_idempotency_key: declaration.backend.honours_idempotency_key,
        })
    }

    /// Sends `request` (step `kind`), trying again only where that is safe.
    pub(crate) async fn send(
        &self,
        kind: StepKind,
        request: BackendRequest,
        may_have_run: bool,
    ) -> Result<Answered, ToolFailure> {
        if kind == StepKind::Execute && may_have_run && !self.honours_idempotency_key {
            return Err(ToolFailure::may_have_acted(
                "An earlier try may already have gone through, and this service can't tell me whether it did, \
                 so I haven't sent it again. Please check before asking me to try again.",
            ));
        }
        let url = format!("{}{}", self.origin, request.path);
        let mut tries = 0;
        loop {
            tries += 1;
            let mut signed = request.clone();
            // Each try signed afresh, with a nonce of its own: the backend spends each once.
            signed.sign(&self.signing_secret, gatehouse_platform::unix_now(), &gatehouse_platform::new_token());
            let headers: Vec<(&str, &str)> = signed.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let answer =
                gatehouse_platform::send(method(signed.method), &url, &headers, signed.body.clone(), self.timeout)
                    .await;
            let last = tries >= MAX_TRIES;
            // The backend asked to be tried again, and said when (429 or 503 with Retry-After).
            let asked_pause =
                answer.as_ref().ok().filter(|response| matches!(response.status, 429 | 503)).and_then(retry_after);
            if let (Some(pause), false) = (asked_pause, last) {
                gatehouse_platform::sleep(pause).await;
                continue;
            }
            match answer {
                Ok(response) if response.is_success() => return Ok(Answered::Json(json_body(&response))),
                Ok(response) if kind == StepKind::Discard && matches!(response.status, 404 | 410) => {
                    return Ok(Answered::Gone);
                }
                // Any 5xx, a 503 without Retry-After included: the key makes a second try safe.
                Ok(response) if !last && response.status >= 500 && self.honours_idempotency_key => {
                    self.log(
                        kind,
                        &format!("HTTP {}; the backend honours Idempotency-Key, so trying again", response.status),
                    );
                    gatehouse_platform::sleep(RECONNECT_PAUSE).await;
                }
                // A 429, or a 503 to a backend that does not honour the key, without a usable
                // Retry-After: not sent again.
                Ok(response) if response.status == 429 || (response.status == 503 && !self.honours_idempotency_key) => {
                    return Err(self.failed(kind, &format!("HTTP {} without a usable Retry-After", response.status)));
                }
                Ok(response) if (400..500).contains(&response.status) => return Err(self.refused(kind, &response)),
                Ok(response) if response.status >= 500 && self.honours_idempotency_key => {
                    return Err(self.unsettled(kind, &format!("HTTP {}", response.status)));
                }
                Ok(response) => return Err(self.failed(kind, &format!("HTTP {}", response.status))),
                Err(SendFailure::NotConnected(cause)) if !last => {
                    self.log(kind, &format!("no connection ({cause}), trying again"));
                    gatehouse_platform::sleep(RECONNECT_PAUSE).await;
                }
                Err(SendFailure::Denied) => {
                    return Err(self.failed(kind, "refused by the component's allowed_outbound_hosts"));
                }
                // Never reached the backend: nothing was done.
                Err(SendFailure::NotConnected(cause)) => return Err(self.failed(kind, &cause.to_string())),
                // Sent, and no answer came back whole: the backend may have acted.
                Err(failure) if !last && self.honours_idempotency_key => {
                    self.log(kind, &format!("{failure}; the backend honours Idempotency-Key, so trying again"));
                }
                Err(failure) => return Err(self.unsettled(kind, &failure.to_string())),
            }
        }
    }

    /// A request that was sent and got no answer that settles it. A backend that honours the
    /// key is asked again later, with the same key, until it answers (docs/architecture.md,
    /// "Declared tools"); for any other, an `execute` may have acted and cannot be asked again.
    fn unsettled(&self, kind: StepKind, cause: &str) -> ToolFailure {
        if self.honours_idempotency_key {
            self.log(kind, &format!("{cause}; asking again later with the same Idempotency-Key"));
            return ToolFailure::ask_again_later(
                "The service hasn't answered yet, so I'm checking with it before I tell you anything.",
            );
        }
        if kind != StepKind::Execute {
            return self.failed(kind, cause);
        }
        self.log(kind, &format!("{cause}; not sent again"));
        ToolFailure::may_have_acted(
            "The service didn't answer in time, so I can't tell whether it went through, and I haven't sent it \
             again. Please check before asking me to try again.",
        )
    }

    fn log(&self, kind: StepKind, what: &str) {
        gatehouse_platform::log_line("warn", &format!("{} {}: {what}", self.tool, kind.as_str()));
    }

    /// The backend could not be used: the cause goes to the log, a sentence to the caller.
    fn failed(&self, kind: StepKind, cause: &str) -> ToolFailure {
        self.log(kind, cause);
        ToolFailure::new(match kind {
            StepKind::Prepare => "I couldn't reach the service to set that up, so nothing was done.",
            StepKind::Execute => "I couldn't reach the service, so it wasn't done.",
            StepKind::Discard => "I couldn't reach the service to release what was set up.",
        })
    }

    /// The backend said no (4xx): its own short sentence when it gave one.
    fn refused(&self, kind: StepKind, response: &OutboundResponse) -> ToolFailure {
        self.log(kind, &format!("refused with HTTP {}", response.status));
        let said = json_body(response);
        let sentence = ["message", "error", "detail"]
            .iter()
            .find_map(|key| said.get(key).and_then(Value::as_str))
            .filter(|text| !text.is_empty() && text.chars().count() <= MAX_SPOKEN_REFUSAL);
        ToolFailure::new(match sentence {
            Some(text) => format!("The service said no: {text}"),
            None => "The service turned that down.".to_owned(),
        })
    }
}

fn method(method: HttpMethod) -> Method {
    match method {
        HttpMethod::Get => Method::Get,
        HttpMethod::Post => Method::Post,
        HttpMethod::Put => Method::Put,
        HttpMethod::Patch => Method::Patch,
        HttpMethod::Delete => Method::Delete,
    }
}

fn json_body(response: &OutboundResponse) -> Value {
    if response.body.iter().all(u8::is_ascii_whitespace) {
        return Value::Null;
    }
    serde_json::from_slice(&response.body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&response.body).into_owned()))
}

/// `Retry-After` in seconds, when it is short enough to wait for.
fn retry_after(response: &OutboundResponse) -> Option<Duration> {
    let seconds: u64 = response.header("retry-after")?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds)).filter(|pause| *pause <= MAX_RETRY_AFTER)
}
