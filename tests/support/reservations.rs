//! A restaurant's reservation service, as a team's backend behind a declared tool would be: a
//! separate HTTP server that holds a table (`POST /holds`), books it (`POST /holds/:id/confirm`)
//! and releases it (`DELETE /holds/:id`). It checks the bearer key and Gatehouse's signature as
//! docs/tools.md ("What your backend receives") tells a team to: the recipe over the request as
//! it arrived, and each nonce once. It does each action once per `Idempotency-Key` (answering a
//! repeated key with the first answer), and records every request it got, so a test can count
//! what was really done and send a captured one again. Started with [`ReservationFlaws`], it is
//! a backend broken on purpose, for the conformance kit to fail (`tools check FILE --backend`).
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use gatehouse_domain::signing::{self, Refusal, SignedRequest};
use serde_json::{Value, json};

use crate::http_server::{Exchange, Reply, serve_on};

pub const API_KEY: &str = "rsv-test-key";
pub const SIGNING_SECRET: &str = "rsv-signing-secret";

/// One request the service got.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub idempotency_key: Option<String>,
    /// The `X-Gatehouse-Signature` it carried, to send a captured request again.
    pub signature: Option<String>,
    /// Whether the signature was good and its nonce unused; else which part failed.
    pub signature_valid: bool,
    pub refused_as: Option<Refusal>,
    pub authorized: bool,
    pub raw_body: Vec<u8>,
    pub body: Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldState {
    Held,
    Booked,
    Released,
}

#[derive(Debug, Clone)]
pub struct Hold {
    pub id: String,
    pub state: HoldState,
    pub request: Value,
}

#[derive(Default)]
struct Book {
    received: Vec<Received>,
    holds: Vec<Hold>,
    answered: HashMap<String, (u16, Value)>,
    /// The signatures' nonces already accepted: each is good once.
    spent_nonces: HashSet<String>,
    /// How long to wait before answering a confirm (after booking): a backend slower than the
    /// tool's timeout.
    confirm_delay: Duration,
    /// Statuses the next confirms answer with before doing anything (no `Retry-After`): a 5xx
    /// as an overloaded service gives, a 422 as one that turns the booking down.
    confirm_faults: std::collections::VecDeque<u16>,
    flaws: ReservationFlaws,
}

/// Ways the service breaks what docs/tools.md asks of a backend; none by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReservationFlaws {
    /// Acts on any request, signed or not, with whatever secret, however often (it still checks
    /// the bearer key): a captured request can be sent again or aimed at another hold.
    pub accepts_unsigned: bool,
    /// Acts on every request afresh, whatever its `Idempotency-Key`, and books a booked hold
    /// again under a new confirmation number.
    pub ignores_idempotency_key: bool,
}

pub struct Reservations {
    pub url: String,
    book: Arc<Mutex<Book>>,
}

impl Reservations {
    pub async fn start() -> Result<Reservations> {
        Reservations::start_with(ReservationFlaws::default()).await
    }

    /// The service with `flaws`.
    pub async fn start_with(flaws: ReservationFlaws) -> Result<Reservations> {
        let book = Arc::new(Mutex::new(Book { flaws, ..Book::default() }));
        let shared = book.clone();
        let url = serve_on("127.0.0.1:0", move |exchange| {
            let book = shared.clone();
            async move { serve(exchange, &book).await }
        })
        .await?;
        Ok(Reservations { url, book })
    }

    /// The variables that point the fixture's `book-table` component at this service.
    pub fn variables(&self) -> Vec<(&'static str, String)> {
        vec![
            ("reservations_url", self.url.clone()),
            ("reservations_api_key", API_KEY.to_owned()),
            ("book_table_signing_secret", SIGNING_SECRET.to_owned()),
        ]
    }

    pub fn received(&self) -> Vec<Received> {
        self.book.lock().map(|book| book.received.clone()).unwrap_or_default()
    }

    pub fn holds(&self) -> Vec<Hold> {
        self.book.lock().map(|book| book.holds.clone()).unwrap_or_default()
    }

    /// The next confirms, one each, answer `statuses` without booking anything.
    pub fn fail_next_confirms(&self, statuses: &[u16]) {
        if let Ok(mut book) = self.book.lock() {
            book.confirm_faults.extend(statuses);
        }
    }

    /// Answers every confirm only after `delay` (the booking itself is made at once).
    pub fn delay_confirm_answers(&self, delay: Duration) {
        if let Ok(mut book) = self.book.lock() {
            book.confirm_delay = delay;
        }
    }
}

async fn serve(exchange: Exchange, book: &Mutex<Book>) -> Reply {
    let header = |name: &str| exchange.header(name).map(str::to_owned);
    let (signature, key, authorization) =
        (header("x-gatehouse-signature"), header("idempotency-key"), header("authorization"));
    let Exchange { method, path, target, body: raw, .. } = exchange;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let as_sent = SignedRequest {
        method: &method,
        target: &target,
        idempotency_key: key.as_deref().unwrap_or_default(),
        body: &raw,
    };
    let verified = signing::verify(&[SIGNING_SECRET.as_bytes()], signature.as_deref(), &as_sent, now);
    let authorized = authorization.as_deref() == Some(&format!("Bearer {API_KEY}"));
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);

    let (status, answer, delay) = {
        let Ok(mut book) = book.lock() else { return Reply::json(500, json!({"message": "poisoned"})) };
        let refused_as = match verified {
            Ok(signed) if book.spent_nonces.insert(signed.nonce.clone()) => None,
            _ if book.flaws.accepts_unsigned => None,
            Ok(_) => Some(Refusal::Replayed),
            Err(refusal) => Some(refusal),
        };
        book.received.push(Received {
            method: method.clone(),
            path: path.clone(),
            idempotency_key: key.clone(),
            signature: signature.clone(),
            signature_valid: refused_as.is_none(),
            refused_as,
            authorized,
            raw_body: raw.clone(),
            body: body.clone(),
        });
        if let Some(refusal) = refused_as {
            (401, json!({"message": refusal.to_string(), "code": refusal.code().as_str()}), Duration::ZERO)
        } else if !authorized {
            (401, json!({"message": "The request was not signed by Gatehouse."}), Duration::ZERO)
        } else if let Some(fault) = path.ends_with("/confirm").then(|| book.confirm_faults.pop_front()).flatten() {
            let said = if fault == 422 { "The restaurant is full that night." } else { "Try again." };
            (fault, json!({"message": said}), Duration::ZERO)
        } else if let Some(first) =
            key.as_ref().filter(|_| !book.flaws.ignores_idempotency_key).and_then(|key| book.answered.get(key)).cloned()
        {
            (first.0, first.1, Duration::ZERO)
        } else {
            let (status, answer, delay) = act(&mut book, &method, &path, &body);
            if let Some(key) = key {
                book.answered.insert(key, (status, answer.clone()));
            }
            (status, answer, delay)
        }
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    Reply::json(status, answer)
}

fn act(book: &mut Book, method: &str, path: &str, body: &Value) -> (u16, Value, Duration) {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        ("POST", ["holds"]) => {
            let id = format!("h{}", book.holds.len() + 1);
            book.holds.push(Hold { id: id.clone(), state: HoldState::Held, request: body.clone() });
            (201, json!({"hold_id": id, "date": body["date"], "time": body["time"]}), Duration::ZERO)
        }
        ("POST", ["holds", id, "confirm"]) => match book.holds.iter_mut().find(|hold| hold.id == *id) {
            Some(hold) if hold.state == HoldState::Held => {
                hold.state = HoldState::Booked;
                let answer = json!({"confirmation": format!("R-{}", hold.id), "date": hold.request["date"], "time": hold.request["time"]});
                (200, answer, book.confirm_delay)
            }
            // A second booking of the same table: what a backend that ignores the key does.
            Some(hold) if hold.state == HoldState::Booked && book.flaws.ignores_idempotency_key => {
                let again = book.received.len();
                let answer = json!({"confirmation": format!("R-{}-{again}", hold.id), "date": hold.request["date"], "time": hold.request["time"]});
                (200, answer, book.confirm_delay)
            }
            Some(_) => (409, json!({"message": "That table is no longer held."}), Duration::ZERO),
            None => (404, json!({"message": "There is no such hold."}), Duration::ZERO),
        },
        ("DELETE", ["holds", id]) => match book.holds.iter_mut().find(|hold| hold.id == *id) {
            Some(hold) if hold.state == HoldState::Held => {
                hold.state = HoldState::Released;
                (200, json!({"released": true}), Duration::ZERO)
            }
            Some(_) => (409, json!({"message": "That hold can no longer be released."}), Duration::ZERO),
            None => (404, json!({"message": "There is no such hold."}), Duration::ZERO),
        },
        _ => (404, json!({"message": "No such route."}), Duration::ZERO),
    }
}
