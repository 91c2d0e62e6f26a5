//! The kit pointed at a declared tool's backend (`gatehouse tools check FILE --backend`,
//! docs/tools.md, "Checking a tool"). A declared tool promises its callers what any tool does,
//! and part of that promise is kept by the team's backend, not by Gatehouse: it must refuse a
//! request Gatehouse did not sign, one it already got, and one signed for another target, and,
//! when the declaration says so, act once per `Idempotency-Key` (docs/tools.md, "What your
//! backend receives"; docs/architecture.md, "Declared tools" and "Signed hops").
//!
//! The kit sends the requests the declaration describes, built by `Declared::request` and signed
//! by `BackendRequest::sign`, exactly as the declared-tool component sends them; then the same
//! requests unsigned, wrongly signed, sent again and aimed at another target. `prepare` (or,
//! for a tool without one, `execute`) really runs: point the kit at a test backend.

use std::collections::BTreeMap;
use std::time::Duration;

use gatehouse_declaration::{BackendRequest, Declared, Inputs, Origin, StepKind};
use gatehouse_domain::{callback, signing};
use reqwest::Method;
use serde_json::{Map, Value};

use crate::contract::{Answer, Signature, cut, new_call_id, nonce, unix_now};
use crate::{Finding, KitError, Report, Rule, Verdict};

/// The key of the wrongly signed request: anything but the signing secret.
const WRONG_KEY: &[u8] = b"not-the-signing-secret";
/// The session the kit's calls name.
const SESSION: &str = "conformance";

/// A declared tool's backend, as the kit reaches it. No `Debug`: the variables hold secrets.
pub struct Backend<'a> {
    pub declared: &'a Declared,
    /// The Spin variables the declaration reads (`Declared::variables`: `vars.*`, `secrets.*`
    /// and the one that holds the origin), by name, as the component is given them.
    pub variables: BTreeMap<String, String>,
    /// The tool's signing secret (`Declared::signing_secret_variable`).
    pub signing_secret: String,
    /// Parameters the tool accepts; without them, the first of the declaration's `examples`.
    pub example: Option<Map<String, Value>>,
}

impl Backend<'_> {
    /// The backend's origin: as the declaration writes it, or the variable that holds it,
    /// checked as the component checks it (`Origin::literal`).
    pub fn origin(&self) -> Result<String, KitError> {
        match self.declared.origin() {
            Origin::Literal(origin) => Ok(origin.clone()),
            Origin::Variable(name) => {
                let value = self.variables.get(name).ok_or_else(|| KitError::Origin(format!("{name} is not set")))?;
                Origin::literal(value).map_err(|problem| KitError::Origin(format!("{name}: {problem}")))
            }
        }
    }

    /// What the templates read for call `call`: the component gives `vars` and `secrets` the
    /// same variables.
    fn inputs(&self, parameters: &Map<String, Value>, call: &str, prepared: Option<Value>) -> Inputs {
        let variables: Map<String, Value> =
            self.variables.iter().map(|(name, value)| (name.clone(), Value::String(value.clone()))).collect();
        Inputs {
            parameters: parameters.clone(),
            prepared,
            response: None,
            tool_call_id: Some(call.to_owned()),
            session_id: Some(SESSION.to_owned()),
            vars: variables.clone(),
            secrets: variables,
        }
    }

    /// Step `kind` for `inputs`, as the component builds it.
    fn request(&self, kind: StepKind, inputs: &Inputs) -> Result<BackendRequest, String> {
        match self.declared.request(kind, inputs) {
            Ok(Some(request)) => Ok(request),
            Ok(None) => Err(format!("the declaration has no {} step", kind.as_str())),
            Err(error) => Err(format!("building the {} request: {error}", kind.as_str())),
        }
    }

    /// The parameters to check with, as the declaration's schema accepts them.
    fn parameters(&self) -> Result<Map<String, Value>, String> {
        let example = match &self.example {
            Some(example) => example.clone(),
            None => self
                .declared
                .declaration()
                .parameters
                .get("examples")
                .and_then(Value::as_array)
                .and_then(|examples| examples.first())
                .and_then(Value::as_object)
                .cloned()
                .ok_or("the parameters schema has no `examples` to check with (or pass parameters with --example)")?,
        };
        self.declared.validate(example).map_err(|problems| {
            let said: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.field, p.problem)).collect();
            format!("the example parameters do not match the declaration's schema: {}", said.join("; "))
        })
    }
}

/// Runs every backend rule ([`Rule::BACKEND`]) against the backend `backend` names.
pub async fn run(backend: &Backend<'_>) -> Result<Report, KitError> {
    let origin = backend.origin()?;
    let declaration = backend.declared.declaration();
    let sender = Sender::new(&origin, Duration::from_millis(declaration.backend.timeout_ms))?;
    let secret = backend.signing_secret.as_bytes();
    let findings = judge_all(backend, &sender, secret).await;
    Ok(Report { base_url: origin, tool: Some(format!("the backend of {}", declaration.name)), findings })
}

/// What the kit's first request left: its call, its parameters, the request as signed and sent,
/// and the backend's answer.
struct Probe {
    kind: StepKind,
    call: String,
    parameters: Map<String, Value>,
    unsigned: BackendRequest,
    signed: BackendRequest,
    answer: Answer,
}

async fn judge_all(backend: &Backend<'_>, sender: &Sender, secret: &[u8]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let probe = match accepts_signed(backend, sender, secret).await {
        Ok(probe) => probe,
        Err(reason) => {
            findings.push(Finding { rule: Rule::AcceptsSigned, verdict: Verdict::Fail(reason) });
            let why = "a correctly signed request was not accepted, so a refusal would prove nothing";
            for rule in Rule::BACKEND.into_iter().skip(1) {
                findings.push(Finding { rule, verdict: Verdict::Skip(why.to_owned()) });
            }
            return findings;
        }
    };
    findings.push(Finding { rule: Rule::AcceptsSigned, verdict: Verdict::Pass });
    // What the kit made and must release at the end: the probe's hold, and any a refused
    // request made after all.
    let mut made = vec![(probe.call.clone(), probe.answer.body.clone())];
    let mut judge = |rule: Rule, verdict: Result<Verdict, String>| {
        findings.push(Finding { rule, verdict: verdict.unwrap_or_else(Verdict::Fail) });
    };

    let what = format!("an unsigned {}", probe.kind.as_str());
    judge(Rule::RefusesUnsigned, refused(sender, &probe, &probe.unsigned, &what, &mut made).await);
    let (wrong, _) = signed(&probe.unsigned, WRONG_KEY);
    let what = format!("a {} signed with another key", probe.kind.as_str());
    judge(Rule::RefusesWrongSignature, refused(sender, &probe, &wrong, &what, &mut made).await);
    let what = format!("the same signed {} sent again (the same nonce)", probe.kind.as_str());
    judge(Rule::RefusesReplay, refused(sender, &probe, &probe.signed, &what, &mut made).await);
    judge(Rule::RefusesRetargeted, retargeting(backend, sender, secret, &probe).await);
    judge(Rule::HonoursIdempotencyKey, idempotent(backend, sender, secret, &probe.parameters, &mut made).await);
    judge(Rule::DiscardsPrepared, discard(backend, sender, secret, &probe, &made).await);
    findings
}

/// The first step (`prepare`, or `execute` for a tool without one) for a new call, signed as
/// Gatehouse signs it, is answered 2xx.
async fn accepts_signed(backend: &Backend<'_>, sender: &Sender, secret: &[u8]) -> Result<Probe, String> {
    let parameters = backend.parameters()?;
    let kind = if backend.declared.declaration().prepare.is_some() { StepKind::Prepare } else { StepKind::Execute };
    let call = new_call_id();
    let unsigned = backend.request(kind, &backend.inputs(&parameters, &call, None))?;
    let (signed, signature) = signed(&unsigned, secret);
    let answer = sender.send(&signed, Some(signature)).await?;
    if !is_success(answer.status) {
        return Err(format!("a signed {} was answered {}", kind.as_str(), answer.told()));
    }
    Ok(Probe { kind, call, parameters, unsigned, signed, answer })
}

/// `request` is refused with 401 or 403. A 2xx that is not the probe's own answer again (a
/// backend that honours the key answers it from the first) made something: it is released at
/// the end.
async fn refused(
    sender: &Sender,
    probe: &Probe,
    request: &BackendRequest,
    what: &str,
    made: &mut Vec<(String, Value)>,
) -> Result<Verdict, String> {
    let answer = sender.send(request, None).await?;
    match answer.status {
        401 | 403 => Ok(Verdict::Pass),
        status if is_success(status) => {
            if probe.kind == StepKind::Prepare && answer.body != probe.answer.body {
                made.push((probe.call.clone(), answer.body.clone()));
            }
            Err(format!("{what} was answered {}: the backend accepted it", answer.told()))
        }
        _ => Err(format!("{what} was answered {}, not 401 or 403", answer.told())),
    }
}

/// A `discard` (or, for a tool without one, an `execute`) signed for another target and sent
/// to the probe's own: a captured request aimed at another record must be refused.
async fn retargeting(backend: &Backend<'_>, sender: &Sender, secret: &[u8], probe: &Probe) -> Result<Verdict, String> {
    let kind = if backend.declared.declaration().discard.is_some() { StepKind::Discard } else { StepKind::Execute };
    let inputs = backend.inputs(&probe.parameters, &probe.call, prepared(probe));
    let real = backend.request(kind, &inputs)?;
    let other = another_target(backend.declared, kind, &inputs, &real.path);
    let (sent, _) = retargeted(&real, &other, secret, unix_now(), &nonce());
    let answer = sender.send(&sent, None).await?;
    let what = format!("a {} signed for {other} and sent to {}", kind.as_str(), real.path);
    match answer.status {
        401 | 403 => Ok(Verdict::Pass),
        status if is_success(status) => Err(format!(
            "{what} was answered {}: the backend acted on a target the signature is not for",
            answer.told()
        )),
        _ => Err(format!("{what} was answered {}, not 401 or 403", answer.told())),
    }
}

/// With `honours_idempotency_key`, the same `execute` sent twice under one key, each time
/// signed afresh (two valid requests), answers the same both times: the backend acted once.
async fn idempotent(
    backend: &Backend<'_>,
    sender: &Sender,
    secret: &[u8],
    parameters: &Map<String, Value>,
    made: &mut Vec<(String, Value)>,
) -> Result<Verdict, String> {
    if !backend.declared.declaration().backend.honours_idempotency_key {
        return Ok(Verdict::Skip(
            "the declaration does not say the backend honours Idempotency-Key \
             (backend.honours_idempotency_key), so Gatehouse never sends it an execute twice"
                .to_owned(),
        ));
    }
    // A call of its own, so the probe's hold is left for the discard rule.
    let call = new_call_id();
    let mut prepared = None;
    if backend.declared.declaration().prepare.is_some() {
        let request = backend.request(StepKind::Prepare, &backend.inputs(parameters, &call, None))?;
        let (request, signature) = signed(&request, secret);
        let answer = sender.send(&request, Some(signature)).await?;
        if !is_success(answer.status) {
            return Err(format!("a signed prepare for a second call was answered {}", answer.told()));
        }
        prepared = Some(answer.body);
    }
    let execute = backend.request(StepKind::Execute, &backend.inputs(parameters, &call, prepared.clone()))?;
    let key = execute.header("idempotency-key").unwrap_or_default().to_owned();
    let (once, signature) = signed(&execute, secret);
    let first = sender.send(&once, Some(signature)).await?;
    if !is_success(first.status) {
        made.extend(prepared.map(|prepared| (call, prepared)));
        return Err(format!("a signed execute was answered {}", first.told()));
    }
    let (again, signature) = signed(&execute, secret);
    let second = sender.send(&again, Some(signature)).await?;
    if !is_success(second.status) {
        return Err(format!(
            "the same execute sent again under Idempotency-Key {key} was answered {}; a backend that honours \
             the key answers a repeated key with its first answer ({})",
            second.told(),
            first.told()
        ));
    }
    if first.body != second.body {
        return Err(format!(
            "the same execute under Idempotency-Key {key} answered {} then {}: it acted twice under the same key",
            cut(first.body.to_string(), 160),
            cut(second.body.to_string(), 160)
        ));
    }
    Ok(Verdict::Pass)
}

/// Releases what the kit prepared, signed as Gatehouse signs a discard: answered 2xx, or 404 or
/// 410 (nothing left to undo, as the declared tool reads it).
async fn discard(
    backend: &Backend<'_>,
    sender: &Sender,
    secret: &[u8],
    probe: &Probe,
    made: &[(String, Value)],
) -> Result<Verdict, String> {
    if backend.declared.declaration().discard.is_none() || probe.kind != StepKind::Prepare {
        return Ok(Verdict::Skip("the declaration has no prepare and discard steps".to_owned()));
    }
    let mut problems = Vec::new();
    for (call, prepared) in made {
        let request =
            backend.request(StepKind::Discard, &backend.inputs(&probe.parameters, call, Some(prepared.clone())));
        let request = match request {
            Ok(request) => request,
            Err(problem) => {
                problems.push(problem);
                continue;
            }
        };
        let (signed, signature) = signed(&request, secret);
        match sender.send(&signed, Some(signature)).await {
            Ok(answer) if is_success(answer.status) || matches!(answer.status, 404 | 410) => {}
            Ok(answer) => problems.push(format!("a signed discard of {} was answered {}", request.path, answer.told())),
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() { Ok(Verdict::Pass) } else { Err(problems.join("; ")) }
}

/// The probe's answer as the templates read it (`prepared`), when the probe was a `prepare`.
fn prepared(probe: &Probe) -> Option<Value> {
    (probe.kind == StepKind::Prepare).then(|| probe.answer.body.clone())
}

fn is_success(status: u16) -> bool {
    (200..300).contains(&status)
}

/// `request` signed with `key` as Gatehouse signs it (a fresh nonce), and the signature, to
/// show its recipe when the backend refuses it.
fn signed(request: &BackendRequest, key: &[u8]) -> (BackendRequest, Signature) {
    let (now, nonce) = (unix_now(), nonce());
    let mut signed = request.clone();
    signed.sign(key, now, &nonce);
    let signature = signature_of(&signed, now, &nonce);
    (signed, signature)
}

fn signature_of(request: &BackendRequest, now: u64, nonce: &str) -> Signature {
    Signature {
        header_name: callback::SIGNATURE_HEADER,
        header: request.header(callback::SIGNATURE_HEADER).unwrap_or_default().to_owned(),
        content: signing::content(now, nonce, &request.signed_request()),
    }
}

/// `request` signed as if it went to `signed_for` and sent to its own path: a captured request
/// aimed at another record (docs/tools.md: a signed `DELETE /holds/H4` sent to `/holds/H3`).
pub(crate) fn retargeted(
    request: &BackendRequest,
    signed_for: &str,
    key: &[u8],
    now: u64,
    nonce: &str,
) -> (BackendRequest, Signature) {
    let mut aimed = BackendRequest { path: signed_for.to_owned(), ..request.clone() };
    aimed.sign(key, now, nonce);
    let signature = signature_of(&aimed, now, nonce);
    aimed.path = request.path.clone();
    (aimed, signature)
}

/// Another target for step `kind` than `path`: the step's path for other values (another hold
/// than the one prepared), or, when its path reads none, `path` with a query added.
fn another_target(declared: &Declared, kind: StepKind, inputs: &Inputs, path: &str) -> String {
    let other = Inputs {
        parameters: changed_fields(&inputs.parameters),
        prepared: inputs.prepared.as_ref().map(changed),
        ..inputs.clone()
    };
    match declared.request(kind, &other) {
        Ok(Some(request)) if request.path != path => request.path,
        _ => format!("{path}{}conformance=another-target", if path.contains('?') { '&' } else { '?' }),
    }
}

/// Every value of `value` changed, keeping its type.
fn changed(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(format!("{text}-another")),
        Value::Number(number) => match number.as_i64() {
            Some(whole) => Value::from(whole.wrapping_add(1)),
            None => Value::from(number.as_f64().unwrap_or_default() + 1.0),
        },
        Value::Bool(yes) => Value::Bool(!yes),
        Value::Array(items) => Value::Array(items.iter().map(changed).collect()),
        Value::Object(fields) => Value::Object(changed_fields(fields)),
        Value::Null => Value::String("another".to_owned()),
    }
}

fn changed_fields(fields: &Map<String, Value>) -> Map<String, Value> {
    fields.iter().map(|(name, value)| (name.clone(), changed(value))).collect()
}

/// Sends requests to the backend, each cut at the declaration's timeout.
struct Sender {
    http: reqwest::Client,
    origin: String,
    timeout: Duration,
}

impl Sender {
    fn new(origin: &str, timeout: Duration) -> Result<Sender, KitError> {
        let http = reqwest::Client::builder().build().map_err(|e| KitError::Client(e.to_string()))?;
        Ok(Sender { http, origin: origin.trim_end_matches('/').to_owned(), timeout })
    }

    /// `request` as it is, headers and all; the answer's body as JSON (an empty one `null`, one
    /// that is not JSON a string, as the declared tool reads it).
    async fn send(&self, request: &BackendRequest, signed_as: Option<Signature>) -> Result<Answer, String> {
        let told = format!("{} {}", request.method.as_str(), request.path);
        let method = Method::from_bytes(request.method.as_str().as_bytes()).map_err(|e| format!("{told}: {e}"))?;
        let mut builder = self.http.request(method, format!("{}{}", self.origin, request.path)).timeout(self.timeout);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let response = builder.body(request.body.clone()).send().await.map_err(|error| {
            if error.is_timeout() {
                format!("{told}: no answer within {} ms (backend.timeout_ms)", self.timeout.as_millis())
            } else {
                format!("{told}: {error}")
            }
        })?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(|e| format!("{told}: reading the answer: {e}"))?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Ok(Answer { status, body, signed_as })
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_domain::signing::{Refusal, SignedRequest};
    use serde_json::json;

    use super::*;

    fn book_table() -> Declared {
        Declared::parse(include_str!("../../../tools/book_table.toml"))
            .unwrap_or_else(|problems| panic!("tools/book_table.toml: {problems:?}"))
    }

    fn inputs(prepared: Value) -> Inputs {
        let variables: Map<String, Value> = [
            ("reservations_url".to_owned(), json!("http://127.0.0.1:8000")),
            ("reservations_api_key".to_owned(), json!("key")),
        ]
        .into_iter()
        .collect();
        Inputs {
            parameters: json!({"name": "Ada", "party_size": 4, "date": "2026-12-01", "time": "19:30"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            prepared: Some(prepared),
            tool_call_id: Some("tc_0123456789ab".to_owned()),
            session_id: Some(SESSION.to_owned()),
            vars: variables.clone(),
            secrets: variables,
            response: None,
        }
    }

    fn verify(request: &BackendRequest, secret: &[u8], target: &str, now: u64) -> Result<(), Refusal> {
        let as_received = SignedRequest { target, ..request.signed_request() };
        signing::verify(&[secret], request.header(callback::SIGNATURE_HEADER), &as_received, now).map(|_| ())
    }

    /// The re-targeted discard goes to the prepared hold, and its signature is good for the other
    /// hold's path only: a backend that checks the target refuses it.
    #[test]
    fn a_retargeted_request_is_signed_for_one_path_and_sent_to_another() {
        let declared = book_table();
        let inputs = inputs(json!({"hold_id": "h1", "date": "2026-12-01", "time": "19:30"}));
        let real = declared.request(StepKind::Discard, &inputs).ok().flatten().unwrap_or_else(|| panic!("discard"));
        assert_eq!(real.path, "/holds/h1");
        let other = another_target(&declared, StepKind::Discard, &inputs, &real.path);
        assert_eq!(other, "/holds/h1-another");

        let (secret, now) = (b"rsv-signing-secret", 1_767_225_600);
        let (sent, signature) = retargeted(&real, &other, secret, now, "0f1e2d3c4b5a69788796a5b4c3d2e1f0");
        assert_eq!(sent.path, real.path, "it goes to the real hold");
        assert_eq!(sent.header("idempotency-key"), real.header("idempotency-key"));
        assert_eq!(sent.header("authorization"), real.header("authorization"));
        assert_eq!(verify(&sent, secret, &other, now), Ok(()), "the signature is for the other path");
        assert_eq!(verify(&sent, secret, &sent.path, now), Err(Refusal::Mismatch), "and not for the one it goes to");
        assert!(String::from_utf8_lossy(&signature.content).contains("DELETE /holds/h1-another\n"));
    }

    /// A path that reads no value is re-targeted by a query, which the signature binds too.
    #[test]
    fn a_path_without_values_is_retargeted_by_its_query() {
        let declared = book_table();
        let inputs = inputs(json!({"hold_id": "h1"}));
        assert_eq!(
            another_target(&declared, StepKind::Prepare, &inputs, "/holds"),
            "/holds?conformance=another-target"
        );
        let request = declared.request(StepKind::Prepare, &inputs).ok().flatten().unwrap_or_else(|| panic!("prepare"));
        let (sent, _) = retargeted(&request, "/holds?conformance=another-target", b"s", 1, "0123456789abcdef");
        assert_eq!(verify(&sent, b"s", "/holds", 1), Err(Refusal::Mismatch));
    }

    /// The kit signs a backend request as the component does: the backend's check (the one
    /// recipe) accepts it with the secret, and refuses the wrongly signed and the unsigned one.
    #[test]
    fn the_kit_signs_backend_requests_by_the_one_recipe() {
        let declared = book_table();
        let request = declared
            .request(StepKind::Prepare, &inputs(Value::Null))
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("prepare"));
        let (secret, now) = (b"whsec-kit-test", unix_now());
        let (good, signature) = signed(&request, secret);
        assert_eq!(verify(&good, secret, "/holds", now), Ok(()));
        assert_eq!(signature.header_name, callback::SIGNATURE_HEADER);
        assert_eq!(
            signature.content,
            signing::content(now, signature_nonce(&signature.header), &good.signed_request())
        );
        let (wrong, _) = signed(&request, WRONG_KEY);
        assert_eq!(verify(&wrong, secret, "/holds", now), Err(Refusal::Mismatch));
        assert_eq!(verify(&request, secret, "/holds", now), Err(Refusal::Missing));
        let refused = Answer { status: 403, body: json!({"message": "no"}), signed_as: Some(signature) };
        let told = refused.told();
        assert!(told.contains(callback::SIGNATURE_HEADER) && told.contains(r"POST /holds\n"), "{told}");
        assert!(!told.contains("whsec-kit-test"), "never the secret: {told}");
    }

    fn signature_nonce(header: &str) -> &str {
        header.rsplit_once(",n=").map(|(_, nonce)| nonce).unwrap_or_default()
    }

    #[test]
    fn every_value_is_changed_and_keeps_its_type() {
        let changed = changed(&json!({"id": "h1", "n": 4, "ok": true, "list": [1.5], "none": null}));
        assert_eq!(changed, json!({"id": "h1-another", "n": 5, "ok": false, "list": [2.5], "none": "another"}));
    }
}
