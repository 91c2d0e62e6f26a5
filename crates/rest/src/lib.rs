//! The REST face of the lifecycle: an operation's typed answer as the response its route
//! gives (the status code, `Preference-Applied` for an honoured `Prefer: wait`) with the
//! operation's follow-up work run once the response is out. The MCP endpoint is the other
//! face of the same answers.

use gatehouse_http::{Reply, json_response};
use gatehouse_lifecycle::{Outcome, Progress};
use serde::Serialize;

/// `200 OK` with the answer.
pub fn ok(answer: &impl Serialize) -> Reply {
    json_response(200, answer).into()
}

/// `201 Created` with the answer.
pub fn created(answer: &impl Serialize) -> Reply {
    json_response(201, answer).into()
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
