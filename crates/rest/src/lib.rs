//! The REST face of the lifecycle: an operation's typed answer as the response its route
//! gives (the status code, `Preference-Applied` for an honoured `Prefer: wait`) with the
//! operation's follow-up work run once the response is out. The MCP endpoint is the other
//! face of the same answers.

use gatehouse_domain::ApiError;
use gatehouse_http::{Params, Reply, Request, json_response};
use gatehouse_lifecycle::{Created, Ctx, Envelope, Outcome, Progress};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The context of a request made with a key: its operations see only the key's tenant
/// (docs/architecture.md, "Tenants").
pub fn ctx(params: &Params) -> Result<Ctx, ApiError> {
    Ok(Ctx::for_grant(params.grant()?.clone()))
}

/// `200 OK` with the answer.
pub fn ok(answer: &impl Serialize) -> Reply {
    json_response(200, answer).into()
}

/// `201 Created` with the new call, its id also in the `gatehouse-call-id` header (which a
/// trace reads, docs/architecture.md, "Traces").
pub fn created(created: &Created) -> Reply {
    let mut response = json_response(201, created);
    response.set_header(gatehouse_domain::contract::CALL_ID_HEADER, created.tool_call_id.to_string());
    response.into()
}

/// `200 OK` with the outcome's answer, then its follow-up work.
pub fn outcome<T: Serialize>(outcome: Outcome<T>) -> Reply {
    answer_with(200, outcome)
}

/// Where a confirm or resume left the call: `202 Accepted` while it runs in the background,
/// `200 OK` with the call once it settled (or paused) within the wait, or with the cancel.
pub fn progress(outcome: Outcome<Progress>) -> Reply {
    let status = match outcome.answer {
        Progress::Running(_) => 202,
        Progress::Reached(_) | Progress::Cancelled(_) => 200,
    };
    answer_with(status, outcome)
}

fn answer_with<T: Serialize>(status: u16, outcome: Outcome<T>) -> Reply {
    let mut response = json_response(status, &outcome.answer);
    if let Some(wait) = outcome.waited {
        response.set_header("preference-applied", gatehouse_domain::preference_applied(wait));
    }
    let reply = Reply::from(response);
    match outcome.follow_up {
        Some(work) => reply.then(work),
        None => reply,
    }
}

/// A direct flow's request body: the [`Envelope`] every direct flow takes, and the tool's own
/// fields as `F` declares them (with `deny_unknown_fields`, so a field neither knows is
/// refused), handed on as the tool's parameters.
pub fn direct_request<F: DeserializeOwned + Serialize>(
    req: &Request,
) -> Result<(Envelope, Map<String, Value>), ApiError> {
    let mut body: Map<String, Value> = gatehouse_http::read_json(req)?;
    let envelope: Map<String, Value> =
        Envelope::FIELDS.iter().filter_map(|name| Some(((*name).to_owned(), body.remove(*name)?))).collect();
    let envelope: Envelope = gatehouse_http::from_json_value(Value::Object(envelope))?;
    let fields: F = gatehouse_http::from_json_value(Value::Object(body))?;
    match serde_json::to_value(fields) {
        Ok(Value::Object(parameters)) => Ok((envelope, parameters)),
        _ => Err(ApiError::internal().with_detail("a direct flow's fields did not serialize as an object")),
    }
}
