//! A bounded property-based suite: malformed input at every door, generated from a fixed seed.
//!
//! For each route (and each route pattern, query and header family) the cases are generated
//! up front with proptest from [`SEED`], [`CASES`] per family, then sent over raw TCP to one
//! application (the real `gmail` component and a fake Gmail, on a database of its own). Three
//! invariants hold for every case:
//!
//! - (a) no answer is a 5xx;
//! - (b) every answer is JSON: a refusal has a string `code` (on `/mcp`, a JSON-RPC error with
//!   an integer `error.code`, a tool result with `isError` and a `code`, or a 202 with an empty
//!   body for a notification); a read that succeeds is JSON;
//! - (c) nothing changes: `tool_calls`, `session_context`, and the fake Gmail's sent mail and
//!   drafts are the same after each family's batch as before it.
//!
//! The application is seeded first with real targets, so the malformed requests aim at real
//! things: a PENDING `send_email` call, a PREPARED one waiting at its checkpoint with its draft,
//! and a stored session context. No generator ever produces a well-formed request that would
//! act: bodies are never objects of the right shape, path segments never decode to a real id,
//! and a valid body is only ever sent with a broken credential or a non-JSON media type.
//!
//! On failure the seed, the family, the case index and the exact bytes of the request are
//! printed (and saved under `target/properties-failures/`, to replay with `nc`); the number of
//! cases per family, with the statuses they got, is printed at the end.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use futures::StreamExt;
use gatehouse_fake_gmail::FakeGmail;
use gatehouse_tests::TOKEN;
use gatehouse_tests::gmail::{gmail_options, start_fake};
use gatehouse_tests::lifecycle::{App, Relay, ScratchDatabase};
use gatehouse_tests::raw::{self, RawRequest, RawResponse};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::{BoxedStrategy, Union, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use reqwest::Method;
use serde_json::{Value, json};

/// The seed every case is generated from (ChaCha). Each family mixes its index into the last
/// two bytes, so adding a family leaves the others' cases as they were.
const SEED: [u8; 32] = *b"gatehouse: strict at every door.";
/// Cases per family.
const CASES: usize = 100;
/// Requests in flight at once.
const CONCURRENCY: usize = 4;
/// The gap between two requests' starts: at most 250 requests a second.
const PACE: Duration = Duration::from_millis(4);
const SETTLE: Duration = Duration::from_secs(30);
const ACCEPT_MCP: &str = "application/json, text/event-stream";

/// What a family's answers may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A 4xx with a JSON body that has a string `code`.
    Refused,
    /// A read: a 2xx with a JSON body, or a 4xx as above.
    Read,
    /// `/mcp`: a JSON-RPC error, a tool result that is an error, a flat 4xx, or a 202 with no
    /// body (a notification).
    Mcp,
}

#[derive(Debug, Clone)]
struct Case {
    request: RawRequest,
    expect: Expect,
}

struct Family {
    name: String,
    cases: Vec<Case>,
}

/// The real things the malformed requests aim at.
#[derive(Debug, Clone)]
struct Targets {
    pending: String,
    prepared: String,
    session: String,
    context_key: String,
    relay_url: String,
}

impl Targets {
    fn ids(&self) -> Vec<String> {
        vec![self.pending.clone(), self.prepared.clone()]
    }
}

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

fn union<T: std::fmt::Debug + 'static>(arms: Vec<BoxedStrategy<T>>) -> BoxedStrategy<T> {
    Union::new(arms).boxed()
}

/// Text of any kind, short: ASCII words, arbitrary Unicode (control characters included),
/// and a few strings that mean something to the API.
fn junk_text() -> BoxedStrategy<String> {
    union(vec![
        "[a-z_]{0,12}".boxed(),
        any::<String>().prop_map(|s| s.chars().take(24).collect()).boxed(),
        select(vec!["proceed", "cancel", "PENDING", "send_email", "tc_000000000000", "", " ", "\u{0}", "💥"])
            .prop_map(str::to_owned)
            .boxed(),
    ])
}

fn key() -> BoxedStrategy<String> {
    union(vec!["[a-z_]{1,10}".boxed(), junk_text()])
}

/// Any JSON value, nested a few levels.
fn json_value() -> BoxedStrategy<Value> {
    let leaf = union(vec![
        Just(Value::Null).boxed(),
        any::<bool>().prop_map(Value::Bool).boxed(),
        any::<i64>().prop_map(Value::from).boxed(),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from).boxed(),
        junk_text().prop_map(Value::String).boxed(),
    ]);
    leaf.prop_recursive(4, 32, 6, |inner| {
        union(vec![
            vec(inner.clone(), 0..6).prop_map(Value::Array).boxed(),
            btree_map(key(), inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())).boxed(),
        ])
    })
    .boxed()
}

fn json_where(what: &'static str, keep: fn(&Value) -> bool) -> BoxedStrategy<Value> {
    json_value().prop_filter(what, keep).boxed()
}

fn not_a_string() -> BoxedStrategy<Value> {
    json_where("not a string", |v| !v.is_string())
}

/// Not a string and not null (null is "absent" for an optional field).
fn neither_string_nor_null() -> BoxedStrategy<Value> {
    json_where("neither string nor null", |v| !v.is_string() && !v.is_null())
}

fn not_an_object_value() -> BoxedStrategy<Value> {
    json_where("not an object", |v| !v.is_object())
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

fn parses_as_object(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Value>(bytes).is_ok_and(|v| v.is_object())
}

/// A body that is not a JSON object and not empty: arrays of anything, strings, numbers,
/// booleans, null, nested junk, invalid JSON bytes, truncated requests, the route's own valid
/// body wrapped in an array or laid out by position, and sizes up to about 60 KiB.
fn not_an_object_body(valid: &Value) -> BoxedStrategy<Vec<u8>> {
    let text = valid.to_string();
    let positional = Value::Array(valid.as_object().map(|o| o.values().cloned().collect()).unwrap_or_default());
    let wrapped = json!([valid]);
    union(vec![
        vec(json_value(), 0..8).prop_map(|v| Value::Array(v).to_string().into_bytes()).boxed(),
        not_an_object_value().prop_map(|v| v.to_string().into_bytes()).boxed(),
        junk_text().prop_map(|s| Value::String(s).to_string().into_bytes()).boxed(),
        any::<i64>().prop_map(|n| n.to_string().into_bytes()).boxed(),
        select(vec!["true", "false", "null", "0", "-0", "1e999", "\"\"", "[]", "[{}]", " [ ] "])
            .prop_map(|s| s.as_bytes().to_vec())
            .boxed(),
        select(vec![positional.to_string(), wrapped.to_string(), format!("\n\t {wrapped}")])
            .prop_map(String::into_bytes)
            .boxed(),
        (1usize..300).prop_map(|d| format!("{}{}", "[".repeat(d), "]".repeat(d)).into_bytes()).boxed(),
        (2_000usize..6_000)
            .prop_map(|n| Value::Array((0..n).map(|i| json!(i * 7919)).collect()).to_string().into_bytes())
            .boxed(),
        (10_000usize..60_000).prop_map(|n| format!("\"{}\"", "x".repeat(n)).into_bytes()).boxed(),
        (1..text.len()).prop_map(move |cut| text.as_bytes()[..cut].to_vec()).boxed(),
        vec(any::<u8>(), 1..64).boxed(),
        select(vec!["{", "{\"a\":", "{'action': 'proceed'}", "{\"action\": proceed}", "NaN", "{}}", "[1,]"])
            .prop_map(|s| s.as_bytes().to_vec())
            .boxed(),
    ])
    .prop_filter("neither empty nor an object", |b| !is_blank(b) && !parses_as_object(b))
    .boxed()
}

/// `base` with `field` set to a value from `values`.
fn with_field(base: &Value, field: &'static str, values: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    let base = base.clone();
    values
        .prop_map(move |value| {
            let mut body = base.clone();
            body[field] = value;
            body
        })
        .boxed()
}

/// `base` with one more member, whose name is none of `known`.
fn with_unknown_field(base: &Value, known: &'static [&'static str]) -> BoxedStrategy<Value> {
    let base = base.clone();
    (key().prop_filter("unknown", move |k| !known.contains(&k.as_str())), json_value())
        .prop_map(move |(name, value)| {
            let mut body = base.clone();
            body[name.as_str()] = value;
            body
        })
        .boxed()
}

/// `base` without `field`.
fn without(base: &Value, field: &str) -> BoxedStrategy<Value> {
    let mut body = base.clone();
    if let Some(object) = body.as_object_mut() {
        object.remove(field);
    }
    Just(body).boxed()
}

fn object_body(objects: BoxedStrategy<Value>) -> BoxedStrategy<Vec<u8>> {
    objects.prop_map(|v| v.to_string().into_bytes()).boxed()
}

/// A non-empty JSON object of anything, for routes that take no body.
fn some_object() -> BoxedStrategy<Value> {
    btree_map(key(), json_value(), 1..5).prop_map(|m| Value::Object(m.into_iter().collect())).boxed()
}

fn email() -> Value {
    json!({"to": "john@gmail.com", "subject": "Meeting Tomorrow", "body": "Let's discuss the Q3 numbers at 10."})
}

fn create_body(targets: &Targets) -> Value {
    json!({"session_id": "prop-created", "function_name": "send_email", "parameters": email(),
        "callback_url": targets.relay_url})
}

fn execute_gmail_body(targets: &Targets) -> Value {
    json!({"session_id": "prop-direct", "callback_url": targets.relay_url, "to": "john@gmail.com",
        "subject": "Hi", "body": "Hello"})
}

fn query_vector_body(targets: &Targets) -> Value {
    json!({"session_id": "prop-search", "callback_url": targets.relay_url, "user_query": "late shipments"})
}

/// An action that is neither `proceed` nor `cancel`.
fn not_an_action() -> BoxedStrategy<Value> {
    union(vec![
        not_a_string(),
        junk_text().prop_filter("not an action", |s| s != "proceed" && s != "cancel").prop_map(Value::String).boxed(),
        select(vec!["Proceed", "PROCEED", " proceed", "proceed ", "cancel\n", "yes"])
            .prop_map(|s| Value::String(s.to_owned()))
            .boxed(),
    ])
}

/// An address field the Gmail tool cannot take: not text, not a list.
fn not_an_address() -> BoxedStrategy<Value> {
    union(vec![any::<i64>().prop_map(Value::from).boxed(), any::<bool>().prop_map(Value::Bool).boxed(), some_object()])
}

/// Every body that a route's body family sends: half not objects, half objects with a field
/// of the wrong type, a missing required field or an unknown field.
fn body_family(valid: &Value, wrong_objects: Vec<BoxedStrategy<Value>>) -> BoxedStrategy<Vec<u8>> {
    union(vec![not_an_object_body(valid), object_body(union(wrong_objects))])
}

// ---------------------------------------------------------------------------------------------
// Paths and queries
// ---------------------------------------------------------------------------------------------

fn malformed_escape() -> BoxedStrategy<String> {
    select(vec!["%", "%z", "%zz", "%4", "%g0", "%%", "%C3", "%E2%82", "%C0%AF", "%ED%A0%80", "%FF", "%ff", "%80"])
        .prop_map(str::to_owned)
        .boxed()
}

/// The UTF-8 bytes of a character, percent-encoded.
fn encode_char(c: char) -> String {
    let mut buffer = [0u8; 4];
    c.encode_utf8(&mut buffer).bytes().map(|b| format!("%{b:02X}")).collect()
}

/// One piece of a path segment or query value: characters a URI may hold as they are, any
/// byte escaped (valid UTF-8 or not), a Unicode character escaped, a malformed escape.
fn piece() -> BoxedStrategy<String> {
    union(vec![
        "[A-Za-z0-9._~-]{1,6}".boxed(),
        select(vec!["!", "$", "&", "'", "(", ")", "*", "+", ",", ";", "=", ":", "@"]).prop_map(str::to_owned).boxed(),
        any::<u8>().prop_map(|b| format!("%{b:02X}")).boxed(),
        any::<u8>().prop_map(|b| format!("%{b:02x}")).boxed(),
        any::<char>().prop_map(encode_char).boxed(),
        malformed_escape(),
    ])
}

/// A path segment: junk, dot segments, an overlong one, or a real id spoiled.
fn segment(real: Vec<String>) -> BoxedStrategy<String> {
    let real = if real.is_empty() { vec!["tc_000000000000".to_owned()] } else { real };
    union(vec![
        vec(piece(), 1..8).prop_map(|p| p.concat()).boxed(),
        select(vec![".", "..", "%2e", "%2E%2E", ".%2e", "...", "%2F", "%2f..%2f"]).prop_map(str::to_owned).boxed(),
        (200usize..4_000, select(vec!["a", "0", "%41", "f"])).prop_map(|(n, c)| c.repeat(n)).boxed(),
        (select(real.clone()), malformed_escape()).prop_map(|(id, bad)| format!("{id}{bad}")).boxed(),
        (select(real.clone()), 0usize..15, malformed_escape())
            .prop_map(|(id, at, bad)| {
                let at = at.min(id.len());
                format!("{}{bad}{}", &id[..at], &id[at..])
            })
            .boxed(),
        (select(real.clone()), select(vec!["0", "%2F", "%20", "+", "%00", ".."]))
            .prop_map(|(id, tail)| format!("{id}{tail}"))
            .boxed(),
        select(real).prop_map(|id| id.to_uppercase()).boxed(),
    ])
}

/// A path built on a route pattern (`:x` is where the generated segment goes). Half the cases
/// keep the route's shape (doubled slashes and a trailing slash at most, which still reach
/// the route) so the generated segment reaches the component; the other half spoil it with
/// dot segments, escaped literals, extra segments and junk, for the fallback.
fn fuzz_path(pattern: &'static str, real: Vec<String>) -> BoxedStrategy<String> {
    let literals: Vec<&'static str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
    let n = literals.len();
    let query = || select(vec!["", "", "", "?", "?x=%zz", "?a=1&a=2", "?%", "?session_id=%ff"]);
    let clean =
        (segment(real.clone()), vec(select(vec!["/", "/", "/", "//"]), n), select(vec!["", "", "/", "//"]), query())
            .prop_map(move |(segment, separators, tail, query)| {
                let mut path = String::new();
                for (literal, separator) in literals.iter().zip(separators) {
                    path.push_str(separator);
                    path.push_str(if literal.starts_with(':') { &segment } else { literal });
                }
                path.push_str(tail);
                path.push_str(query);
                path
            });
    let literals: Vec<&'static str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
    let spoiled = (
        segment(real),
        vec(select(vec!["/", "/", "/", "//", "/./", "/x/../", "/%2e/"]), n),
        vec(0u8..4, n),
        select(vec!["", "/..", "/extra", "/%2e%2e", "/.", "/x/y/z"]),
        query(),
        vec(piece(), 1..3),
    )
        .prop_map(move |(segment, separators, spoil, tail, query, junk)| {
            let mut path = String::new();
            for (i, literal) in literals.iter().enumerate() {
                path.push_str(separators[i]);
                if literal.starts_with(':') {
                    path.push_str(&segment);
                } else if spoil[i] == 0 {
                    // The literal with one character escaped: no route has it.
                    let mut chars = literal.chars();
                    if let Some(first) = chars.next() {
                        path.push_str(&encode_char(first));
                        path.push_str(chars.as_str());
                    }
                } else if spoil[i] == 1 {
                    path.push_str(literal);
                    path.push_str(&junk.concat());
                } else {
                    path.push_str(literal);
                }
            }
            if !pattern.contains(':') {
                // A pattern without a parameter gets the generated segment appended.
                path.push('/');
                path.push_str(&segment);
            }
            path.push_str(tail);
            path.push_str(query);
            path
        });
    union(vec![clean.boxed(), spoiled.boxed()])
}

/// Strict percent-decoding, as the API does it for paths (`+` is a plus).
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let digits = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(digits, 16).ok().filter(|_| digits.bytes().all(|b| b.is_ascii_hexdigit()))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Whether a path could name one of the real calls: a segment that is, or decodes to, its id.
fn names_a_real_call(target: &str, real: &[String]) -> bool {
    let path = target.split('?').next().unwrap_or_default();
    path.split('/').any(|segment| real.iter().any(|id| segment == id || decode(segment).as_deref() == Some(id)))
}

/// A query string: known keys and junk ones, repeated, with values that are real, junk,
/// escaped, malformed or empty.
fn fuzz_query(keys: Vec<&'static str>, values: Vec<String>) -> BoxedStrategy<String> {
    let key =
        union(vec![select(keys).prop_map(str::to_owned).boxed(), vec(piece(), 1..3).prop_map(|p| p.concat()).boxed()]);
    let value = union(vec![
        select(values).boxed(),
        vec(piece(), 0..6).prop_map(|p| p.concat()).boxed(),
        malformed_escape(),
        select(vec!["", "+", "%2B", "a+b", "%20", "=", "==", "%00"]).prop_map(str::to_owned).boxed(),
    ]);
    let pair = (key, value, 0u8..6).prop_map(|(k, v, shape)| match shape {
        0 => k,
        1 => format!("{k}={v}={v}"),
        _ => format!("{k}={v}"),
    });
    (vec(pair, 0..6), select(vec!["&", "&", "&&", ";"]))
        .prop_map(|(pairs, separator)| format!("?{}", pairs.join(separator)))
        .boxed()
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

fn authed(method: &str, target: &str) -> RawRequest {
    RawRequest::new(method, target).bearer(TOKEN)
}

fn request_with(method: &'static str, target: String, body: Vec<u8>, expect: Expect) -> Case {
    let mut request = authed(method, &target);
    if target == "/mcp" {
        request = request.header("Accept", ACCEPT_MCP);
    }
    if !body.is_empty() {
        request = request.json_bytes(body);
    }
    Case { request, expect }
}

/// A family that sends generated bodies to one route.
fn bodies(method: &'static str, target: String, expect: Expect, bodies: BoxedStrategy<Vec<u8>>) -> BoxedStrategy<Case> {
    bodies.prop_map(move |body| request_with(method, target.clone(), body, expect)).boxed()
}

/// The MCP messages: not objects, envelopes that are not JSON-RPC, unknown methods, and
/// `tools/call` with params or arguments that are not objects or hold the wrong types.
fn mcp_bodies(targets: &Targets) -> BoxedStrategy<Vec<u8>> {
    let confirm = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "confirm_tool", "arguments": {"tool_call_id": targets.pending}}});
    let call = |name: &'static str, arguments: BoxedStrategy<Value>| -> BoxedStrategy<Value> {
        (arguments, any::<u32>())
            .prop_map(move |(arguments, id)| {
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": name, "arguments": arguments}})
            })
            .boxed()
    };
    let (pending, prepared) = (json!({"tool_call_id": targets.pending}), json!({"tool_call_id": targets.prepared}));
    let resume = json!({"tool_call_id": targets.prepared, "action": "proceed"});
    let modify = json!({"tool_call_id": targets.pending, "parameters": {"subject": "x"}});
    let request = json!({"session_id": "prop-mcp", "function_name": "send_email", "parameters": email()});
    let messages = union(vec![
        // Envelopes that are not JSON-RPC 2.0, with the real confirm inside.
        with_field(&confirm, "jsonrpc", json_where("not 2.0", |v| *v != "2.0")),
        with_field(&confirm, "method", not_a_string()),
        with_field(&confirm, "id", json_where("not an id", |v| !(v.is_string() || v.is_i64() || v.is_u64()))),
        with_field(&confirm, "params", not_an_object_value()),
        without(&confirm, "jsonrpc"),
        // Methods that do not exist.
        (junk_text(), any::<u32>())
            .prop_filter("not a method", |(m, _)| {
                !["initialize", "ping", "tools/list", "tools/call"].contains(&m.as_str())
            })
            .prop_map(|(method, id)| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}}))
            .boxed(),
        // tools/call whose arguments are not an object, or name no tool.
        call("confirm_tool", json_where("not an object", |v| !v.is_object() && !v.is_null())),
        call("cancel_tool", json_where("not an object", |v| !v.is_object() && !v.is_null())),
        (junk_text().prop_filter("unknown tool", |n| !n.ends_with("_tool") && !n.starts_with("get_")), any::<u32>())
            .prop_map(|(name, id)| {
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": {}}})
            })
            .boxed(),
        // The real tools, with an argument of the wrong type or one they do not take.
        call("confirm_tool", with_field(&pending, "tool_call_id", not_a_string())),
        call("confirm_tool", with_field(&pending, "callback_url", neither_string_nor_null())),
        call("confirm_tool", with_unknown_field(&pending, &["tool_call_id", "callback_url", "wait_seconds"])),
        call("resume_tool", with_field(&prepared, "action", not_an_action())),
        call("resume_tool", with_field(&resume, "reason", neither_string_nor_null())),
        call("cancel_tool", with_field(&prepared, "reason", neither_string_nor_null())),
        call("cancel_tool", with_unknown_field(&pending, &["tool_call_id", "reason"])),
        call("modify_tool", with_field(&modify, "parameters", not_an_object_value())),
        call("request_tool", with_field(&request, "session_id", not_a_string())),
        call("request_tool", with_field(&request, "parameters", not_an_object_value())),
        call("get_status", with_field(&pending, "tool_call_id", not_a_string())),
        // Notifications (no id): nothing is owed, nothing runs.
        json_value()
            .prop_map(|params| json!({"jsonrpc": "2.0", "method": "tools/call", "params": params}))
            .boxed(),
    ]);
    union(vec![not_an_object_body(&confirm), object_body(messages)])
}

/// Headers: a missing, doubled or malformed credential or a non-JSON media type on a request
/// that would otherwise act, and junk `Prefer`, `traceparent` and `Idempotency-Key` on one
/// whose body is malformed.
fn header_cases(targets: &Targets) -> BoxedStrategy<Case> {
    let valid: Vec<(&'static str, String, Vec<u8>)> = vec![
        ("POST", format!("/voice-tools/confirm/{}", targets.pending), b"{}".to_vec()),
        ("DELETE", format!("/voice-tools/cancel/{}", targets.prepared), br#"{"reason": "prop"}"#.to_vec()),
        (
            "PATCH",
            format!("/voice-tools/modify/{}", targets.pending),
            json!({"parameters": {"subject": "changed"}}).to_string().into_bytes(),
        ),
        ("POST", format!("/resume-execution/{}", targets.prepared), br#"{"action": "proceed"}"#.to_vec()),
        ("POST", "/voice-tools/pending".into(), create_body(targets).to_string().into_bytes()),
        ("POST", "/execute-gmail".into(), execute_gmail_body(targets).to_string().into_bytes()),
        ("POST", "/query-vector-db".into(), query_vector_body(targets).to_string().into_bytes()),
        ("POST", "/voice-tools/sweep".into(), b"{}".to_vec()),
        ("GET", format!("/voice-tools/status/{}", targets.pending), b"{}".to_vec()),
        ("GET", format!("/voice-tools/context/{}", targets.session), b"{}".to_vec()),
        (
            "POST",
            "/mcp".into(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "confirm_tool", "arguments": {"tool_call_id": targets.pending}}})
            .to_string()
            .into_bytes(),
        ),
    ];
    let printable = "[ -~]{0,40}";
    let right = format!("Bearer {TOKEN}");
    let credential = union(vec![
        Just(None).boxed(),
        printable
            .prop_filter("not the token", |v: &String| {
                let token =
                    v.trim().split_once(' ').filter(|(s, _)| s.eq_ignore_ascii_case("bearer")).map(|(_, t)| t.trim());
                token != Some(TOKEN)
            })
            .prop_map(|v| Some(vec![v]))
            .boxed(),
        (select(vec![right.clone(), "Bearer wrong".into(), format!("bearer {TOKEN}")]), any::<bool>())
            .prop_map(move |(other, first)| {
                let right = format!("Bearer {TOKEN}");
                Some(if first { vec![right, other] } else { vec![other, right] })
            })
            .boxed(),
    ]);
    let media_type = union(vec![
        select(vec![
            "text/plain",
            "text/html",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/xml",
            "application/jsonp",
            "application/json-seq",
            "json",
        ])
        .prop_map(str::to_owned)
        .boxed(),
        "[a-z]{1,8}/[a-z]{1,8}".boxed(),
    ])
    .prop_filter("not JSON", |t| {
        let media = t.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        media != "application/json" && !media.ends_with("+json")
    });
    let junk_header = (select(vec!["Prefer", "traceparent", "Idempotency-Key"]), "[ -~]{0,300}");
    let broken_body = not_an_object_body(&json!({"action": "proceed"}));
    let (valid_a, valid_b, valid_c) = (valid.clone(), valid.clone(), valid);
    union(vec![
        (select(valid_a), credential)
            .prop_map(|((method, target, body), credential)| {
                let mut request = RawRequest::new(method, &target);
                for value in credential.into_iter().flatten() {
                    request = request.header("Authorization", &value);
                }
                if target == "/mcp" {
                    request = request.header("Accept", ACCEPT_MCP);
                }
                Case { request: request.json_bytes(body), expect: Expect::Refused }
            })
            .boxed(),
        (select(valid_b), media_type)
            .prop_map(|((method, target, body), media_type)| {
                let mut request = authed(method, &target).header("Content-Type", &media_type).body(body);
                if target == "/mcp" {
                    request = request.header("Accept", ACCEPT_MCP);
                }
                Case { request, expect: Expect::Refused }
            })
            .boxed(),
        (select(valid_c), vec(junk_header, 1..4), broken_body)
            .prop_map(|((method, target, _), headers, body)| {
                let mut request = authed(method, &target);
                for (name, value) in headers {
                    request = request.header(name, value.trim());
                }
                let expect = if target == "/mcp" {
                    request = request.header("Accept", ACCEPT_MCP);
                    Expect::Mcp
                } else {
                    Expect::Refused
                };
                Case { request: request.json_bytes(body), expect }
            })
            .boxed(),
    ])
}

/// Every string leaf of `value`, as JSON pointers.
fn string_leaves(value: &Value, at: &str, found: &mut Vec<String>) {
    match value {
        Value::String(_) => found.push(at.to_owned()),
        Value::Array(items) => {
            items.iter().enumerate().for_each(|(i, v)| string_leaves(v, &format!("{at}/{i}"), found))
        }
        Value::Object(map) => map.iter().for_each(|(k, v)| string_leaves(v, &format!("{at}/{k}"), found)),
        _ => {}
    }
}

/// Every leaf (string or number) of `value`, as JSON pointers.
fn scalar_leaves(value: &Value, at: &str, found: &mut Vec<String>) {
    match value {
        Value::String(_) | Value::Number(_) => found.push(at.to_owned()),
        Value::Array(items) => {
            items.iter().enumerate().for_each(|(i, v)| scalar_leaves(v, &format!("{at}/{i}"), found))
        }
        Value::Object(map) => map.iter().for_each(|(k, v)| scalar_leaves(v, &format!("{at}/{k}"), found)),
        _ => {}
    }
}

/// `valid` with a NUL put into one of its strings, anywhere in it: a request that would act
/// but for a character PostgreSQL cannot hold.
fn with_a_nul(valid: &Value) -> BoxedStrategy<Value> {
    let mut leaves = Vec::new();
    string_leaves(valid, "", &mut leaves);
    let valid = valid.clone();
    (select(leaves), 0usize..64)
        .prop_map(move |(pointer, at)| {
            let mut body = valid.clone();
            if let Some(Value::String(text)) = body.pointer_mut(&pointer) {
                let at = text.char_indices().map(|(i, _)| i).nth(at).unwrap_or(text.len());
                text.insert(at, '\0');
            }
            body
        })
        .boxed()
}

/// `valid` with one of its strings or numbers replaced by a number at the edge of what JSON
/// and the integer types hold.
fn with_an_extreme_number(valid: &Value) -> BoxedStrategy<Value> {
    let mut leaves = Vec::new();
    scalar_leaves(valid, "", &mut leaves);
    let extremes: Vec<Value> = vec![
        json!(i64::MAX),
        json!(i64::MIN),
        json!(u64::MAX),
        json!(1e308),
        json!(-1e308),
        json!(5e-324),
        json!(-0.0),
        json!(9_007_199_254_740_993_u64),
        json!(2_147_483_648_u64),
        json!(-2_147_483_649_i64),
    ];
    let valid = valid.clone();
    (select(leaves), select(extremes))
        .prop_map(move |(pointer, number)| {
            let mut body = valid.clone();
            if let Some(leaf) = body.pointer_mut(&pointer) {
                *leaf = number;
            }
            body
        })
        .boxed()
}

/// Every family, generated.
fn families(targets: &Targets) -> Result<Vec<Family>> {
    let t = targets;
    let (pending, prepared) = (&t.pending, &t.prepared);
    let mut specs: Vec<(String, BoxedStrategy<Case>)> = Vec::new();

    let create = create_body(t);
    let create_fields =
        &["session_id", "function", "function_name", "parameters", "connection_id", "intent_id", "callback_url"];
    specs.push((
        "body POST /voice-tools/pending".into(),
        bodies(
            "POST",
            "/voice-tools/pending".into(),
            Expect::Refused,
            body_family(
                &create,
                vec![
                    with_field(&create, "session_id", not_a_string()),
                    with_field(&create, "parameters", not_an_object_value()),
                    with_field(&create, "function_name", neither_string_nor_null()),
                    with_field(&create, "callback_url", neither_string_nor_null()),
                    with_field(&create, "function_name", "zz_[a-z_]{0,10}".prop_map(Value::String).boxed()),
                    with_field(&create, "parameters", with_field(&email(), "to", not_an_address())),
                    with_unknown_field(&create, create_fields),
                    without(&create, "session_id"),
                ],
            ),
        ),
    ));

    let modify = json!({"parameters": {"subject": "Fuzzed"}, "reason": "prop"});
    specs.push((
        "body PATCH /voice-tools/modify/:id".into(),
        bodies(
            "PATCH",
            format!("/voice-tools/modify/{pending}"),
            Expect::Refused,
            body_family(
                &modify,
                vec![
                    with_field(&modify, "parameters", not_an_object_value()),
                    with_field(&modify, "reason", neither_string_nor_null()),
                    with_field(&modify, "parameters", not_an_address().prop_map(|v| json!({"to": v})).boxed()),
                    with_unknown_field(&modify, &["parameters", "reason"]),
                    without(&modify, "parameters"),
                ],
            ),
        ),
    ));

    let confirm = json!({"callback_url": t.relay_url});
    specs.push((
        "body POST /voice-tools/confirm/:id".into(),
        bodies(
            "POST",
            format!("/voice-tools/confirm/{pending}"),
            Expect::Refused,
            body_family(
                &confirm,
                vec![
                    with_field(&confirm, "callback_url", neither_string_nor_null()),
                    with_unknown_field(&confirm, &["callback_url"]),
                    with_unknown_field(&json!({}), &["callback_url"]),
                ],
            ),
        ),
    ));

    let resume = json!({"action": "proceed", "reason": "prop"});
    specs.push((
        "body POST /resume-execution/:id".into(),
        bodies(
            "POST",
            format!("/resume-execution/{prepared}"),
            Expect::Refused,
            body_family(
                &resume,
                vec![
                    with_field(&resume, "action", not_an_action()),
                    with_field(&resume, "reason", neither_string_nor_null()),
                    with_field(&json!({"action": "cancel"}), "reason", neither_string_nor_null()),
                    with_unknown_field(&resume, &["action", "reason"]),
                    without(&resume, "action"),
                ],
            ),
        ),
    ));

    let cancel = json!({"reason": "prop"});
    let cancel_bodies = body_family(
        &cancel,
        vec![with_field(&cancel, "reason", neither_string_nor_null()), with_unknown_field(&cancel, &["reason"])],
    );
    let (cancel_pending, cancel_prepared) =
        (format!("/voice-tools/cancel/{pending}"), format!("/voice-tools/cancel/{prepared}"));
    specs.push((
        "body DELETE /voice-tools/cancel/:id".into(),
        (cancel_bodies, any::<bool>())
            .prop_map(move |(body, which)| {
                let target = if which { cancel_pending.clone() } else { cancel_prepared.clone() };
                request_with("DELETE", target, body, Expect::Refused)
            })
            .boxed(),
    ));

    for (target, valid) in [("/execute-gmail", execute_gmail_body(t)), ("/query-vector-db", query_vector_body(t))] {
        let known: &'static [&'static str] = if target == "/execute-gmail" {
            &[
                "session_id",
                "intent_id",
                "connection_id",
                "callback_url",
                "to",
                "cc",
                "bcc",
                "subject",
                "body",
                "reference_context",
            ]
        } else {
            &["session_id", "intent_id", "connection_id", "callback_url", "user_query", "structured_query"]
        };
        specs.push((
            format!("body POST {target}"),
            bodies(
                "POST",
                target.into(),
                Expect::Refused,
                body_family(
                    &valid,
                    vec![
                        with_field(&valid, "session_id", not_a_string()),
                        with_field(&valid, "callback_url", not_a_string()),
                        with_unknown_field(&valid, known),
                        without(&valid, "callback_url"),
                        without(&valid, "session_id"),
                    ],
                ),
            ),
        ));
    }

    specs.push(("body POST /mcp".into(), bodies("POST", "/mcp".into(), Expect::Mcp, mcp_bodies(t))));

    // Bodies that would act but for one value: a NUL in any of their strings, or a number at
    // the edge of the types in place of any of their strings or numbers.
    let acting: Vec<(&'static str, String, Value)> = vec![
        ("POST", "/voice-tools/pending".into(), create_body(t)),
        (
            "PATCH",
            format!("/voice-tools/modify/{pending}"),
            json!({"parameters": {"subject": "Fuzzed"}, "reason": "prop"}),
        ),
        ("POST", format!("/voice-tools/confirm/{pending}"), json!({"callback_url": t.relay_url})),
        ("POST", format!("/resume-execution/{prepared}"), json!({"action": "proceed", "reason": "prop"})),
        ("DELETE", format!("/voice-tools/cancel/{prepared}"), json!({"reason": "prop"})),
        ("POST", "/execute-gmail".into(), execute_gmail_body(t)),
        ("POST", "/query-vector-db".into(), query_vector_body(t)),
    ];
    for (method, target, valid) in acting {
        let nul = with_a_nul(&valid).prop_map(|body| body.to_string().into_bytes()).boxed();
        specs.push((format!("nul {method} {target}"), bodies(method, target.clone(), Expect::Refused, nul)));
        let extreme = with_an_extreme_number(&valid).prop_map(|body| body.to_string().into_bytes()).boxed();
        specs.push((format!("numbers {method} {target}"), bodies(method, target, Expect::Refused, extreme)));
    }

    // Routes that take no body: anything but nothing or {} is refused.
    let no_body = || union(vec![not_an_object_body(&json!({"action": "proceed"})), object_body(some_object())]);
    for (method, pattern, target) in [
        ("GET", "/voice-tools/status/:id", format!("/voice-tools/status/{pending}")),
        ("GET", "/voice-tools/context/:session", format!("/voice-tools/context/{}", t.session)),
        (
            "GET",
            "/get-session-context",
            format!("/get-session-context?session_id={}&context_key={}", t.session, t.context_key),
        ),
        ("GET", "/voice-tools/tools", "/voice-tools/tools".to_owned()),
        ("GET", "/voice-tools/tools/:name/executions", "/voice-tools/tools/send_email/executions".to_owned()),
        ("GET", "/voice-tools/tools/:name/stats", "/voice-tools/tools/send_email/stats".to_owned()),
        ("GET", "/voice-tools/calls", format!("/voice-tools/calls?session_id={}", t.session)),
        ("GET", "/voice-tools/calls/:id/callbacks", format!("/voice-tools/calls/{pending}/callbacks")),
        ("POST", "/voice-tools/sweep", "/voice-tools/sweep".to_owned()),
        ("GET", "/health", "/health".to_owned()),
    ] {
        specs.push((format!("body {method} {pattern}"), bodies(method, target, Expect::Refused, no_body())));
    }

    // Paths, on every route pattern. Reads may find something; anything else must be refused,
    // and carries a body that could not act even if the path were right.
    let ids = t.ids();
    let broken = || not_an_object_body(&json!({"action": "proceed"}));
    let patterns: Vec<(&'static str, &'static str, Expect, Option<Vec<u8>>)> = vec![
        ("GET", "/voice-tools/status/:id", Expect::Read, None),
        ("GET", "/voice-tools/context/:session", Expect::Read, None),
        ("GET", "/voice-tools/tools/:name/executions", Expect::Read, None),
        ("GET", "/voice-tools/tools/:name/stats", Expect::Read, None),
        ("GET", "/voice-tools/tools", Expect::Read, None),
        ("GET", "/voice-tools/calls", Expect::Read, None),
        ("GET", "/voice-tools/calls/:id/callbacks", Expect::Read, None),
        ("GET", "/get-session-context", Expect::Read, None),
        ("GET", "/health", Expect::Read, None),
        ("POST", "/voice-tools/confirm/:id", Expect::Refused, None),
        ("DELETE", "/voice-tools/cancel/:id", Expect::Refused, None),
        (
            "PATCH",
            "/voice-tools/modify/:id",
            Expect::Refused,
            Some(json!({"parameters": {"subject": "x"}}).to_string().into_bytes()),
        ),
        ("POST", "/resume-execution/:id", Expect::Refused, Some(br#"{"action": "proceed"}"#.to_vec())),
        ("POST", "/voice-tools/pending", Expect::Refused, Some(Vec::new())),
        ("POST", "/voice-tools/sweep", Expect::Refused, Some(Vec::new())),
        ("POST", "/execute-gmail", Expect::Refused, Some(Vec::new())),
        ("POST", "/query-vector-db", Expect::Refused, Some(Vec::new())),
        (
            "POST",
            "/mcp",
            Expect::Read,
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string().into_bytes()),
        ),
    ];
    for (method, pattern, expect, body) in patterns {
        let real = ids.clone();
        let paths = fuzz_path(pattern, ids.clone())
            .prop_filter("never a real call's id", move |target| !names_a_real_call(target, &real));
        // Routes without a parameter that act get a body that cannot act.
        let strategy = match body {
            Some(body) if body.is_empty() => {
                (paths, broken()).prop_map(move |(target, body)| request_with(method, target, body, expect)).boxed()
            }
            body => {
                let body = body.unwrap_or_default();
                paths.prop_map(move |target| request_with(method, target, body.clone(), expect)).boxed()
            }
        };
        specs.push((format!("path {method} {pattern}"), strategy));
    }

    // Query strings.
    let session_values = vec![t.session.clone(), t.context_key.clone(), t.session.replace('-', "%2D"), "x".into()];
    let query_families: Vec<(&str, &str, Vec<&'static str>, Vec<String>)> = vec![
        ("query GET /get-session-context", "/get-session-context", vec!["session_id", "context_key"], session_values),
        (
            "query GET /voice-tools/tools/:name/executions",
            "/voice-tools/tools/send_email/executions",
            vec!["limit", "outcome", "since", "cursor"],
            [
                "0",
                "-1",
                "101",
                "1e3",
                "50",
                "ok",
                "OK",
                "error",
                "2026-13-01",
                "2024-01-01T00:00:00Z",
                "abc",
                "%zz",
                "0000-01-01T00:00:00Z",
                "-5_3",
                "9223372036854775807_9223372036854775807",
                "-9223372036854775808_1",
                "99999999999999999999",
                "%00",
                "2026-01-01T00%3A00%3A00.1111111111111111111111111111111111111111Z",
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
        (
            "query GET /voice-tools/calls",
            "/voice-tools/calls",
            vec!["limit", "status", "session_id", "function_name", "cursor"],
            [
                "0",
                "101",
                "25",
                "PENDING",
                "pending",
                "MODIFIED",
                "",
                "x",
                "%zz",
                "1_tc_000000000000",
                "tc_0",
                "%00",
                "9223372036854775807_tc_000000000000",
                "-1_tc_000000000000",
                "18446744073709551616",
                "a%00b",
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
        (
            "query GET /voice-tools/tools/:name/stats",
            "/voice-tools/tools/send_email/stats",
            vec!["window"],
            ["1w", "0s", "367d", "24h", "-5m", "15m", "7d", "%32%34h", "24+h", "24%20h"].map(str::to_owned).to_vec(),
        ),
    ];
    for (name, path, keys, values) in query_families {
        let strategy = fuzz_query(keys, values)
            .prop_map(move |query| request_with("GET", format!("{path}{query}"), Vec::new(), Expect::Read))
            .boxed();
        specs.push((name.to_owned(), strategy));
    }

    specs.push(("headers".into(), header_cases(t)));
    // An Idempotency-Key that is not text, on a create that would otherwise go through: refused,
    // not ignored. Odd bytes in headers the routes read as hints, on requests that cannot act.
    let create = create_body(t).to_string().into_bytes();
    // High bytes with one that UTF-8 never holds (0xFF), so the value is never text.
    let not_text = (vec(128u8..=255, 0..16), 0usize..16).prop_map(|(mut bytes, at)| {
        bytes.insert(at.min(bytes.len()), 0xFF);
        bytes
    });
    specs.push((
        "odd bytes in Idempotency-Key".into(),
        (not_text.clone(), "[a-z]{0,8}")
            .prop_map(move |(odd, prefix)| {
                let mut key = prefix.into_bytes();
                key.extend(odd);
                let request = authed("POST", "/voice-tools/pending").header_bytes("Idempotency-Key", &key);
                Case { request: request.json_bytes(create.clone()), expect: Expect::Refused }
            })
            .boxed(),
    ));
    let hinted = vec![format!("/voice-tools/confirm/{pending}"), format!("/resume-execution/{prepared}")];
    specs.push((
        "odd bytes in hint headers".into(),
        (select(hinted), select(vec!["Prefer", "traceparent", "Idempotency-Key", "Content-Type"]), not_text)
            .prop_map(|(target, name, odd)| {
                let request = authed("POST", &target).header_bytes(name, &odd).body(b"[]".to_vec());
                Case { request, expect: Expect::Refused }
            })
            .boxed(),
    ));

    specs
        .into_iter()
        .enumerate()
        .map(|(index, (name, strategy))| {
            let mut seed = SEED;
            seed[30] ^= (index >> 8) as u8;
            seed[31] ^= index as u8;
            let config = Config { failure_persistence: None, ..Config::default() };
            let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
            let cases = (0..CASES)
                .map(|_| strategy.new_tree(&mut runner).map(|tree| tree.current()).map_err(|e| anyhow!("{name}: {e}")))
                .collect::<Result<Vec<_>>>()?;
            Ok(Family { name, cases })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Checking
// ---------------------------------------------------------------------------------------------

/// Invariants (a) and (b) for one answer.
fn check(expect: Expect, answer: &RawResponse) -> Result<(), String> {
    let status = answer.status;
    if status >= 500 {
        return Err(format!("a {status}"));
    }
    let body = answer.json();
    let flat_code = body.as_ref().is_some_and(|b| b["code"].is_string());
    let refusal = (400..500).contains(&status) && flat_code;
    let ok = match expect {
        Expect::Refused => refusal,
        Expect::Read => refusal || ((200..300).contains(&status) && body.is_some()),
        Expect::Mcp => {
            let notification = status == 202 && answer.body.is_empty();
            let rpc_error = body
                .as_ref()
                .is_some_and(|b| b["jsonrpc"] == "2.0" && b["error"]["code"].is_i64() && b.get("result").is_none());
            let tool_error = status == 200
                && body.as_ref().is_some_and(|b| {
                    b["result"]["isError"] == true && b["result"]["structuredContent"]["code"].is_string()
                });
            notification || rpc_error || tool_error || refusal
        }
    };
    if ok { Ok(()) } else { Err(format!("not an answer a {expect:?} case may get")) }
}

/// Invariant (c): what must not change.
async fn snapshot(db: &tokio_postgres::Client, fake: &FakeGmail) -> Result<String> {
    let calls: Option<String> = db
        .query_one("SELECT md5(string_agg(t::text, ',' ORDER BY t.tool_call_id)) FROM tool_calls t", &[])
        .await?
        .get(0);
    let contexts: Option<String> =
        db.query_one("SELECT md5(string_agg(c::text, ',' ORDER BY c::text)) FROM session_context c", &[]).await?.get(0);
    let sent: Vec<String> = fake.sent().into_iter().map(|m| m.id).collect();
    let drafts: Vec<String> = fake.drafts().into_iter().map(|d| d.id).collect();
    Ok(format!("tool_calls {calls:?}, session_context {contexts:?}, sent {sent:?}, drafts {drafts:?}"))
}

/// The snapshot once it has stopped changing: work a request set off (an executor run, a
/// draft deleted after a cancel) lands in the family that caused it, not the next one. Waits
/// at most a few seconds, and not at all when nothing is moving.
async fn settled(db: &tokio_postgres::Client, fake: &FakeGmail) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = snapshot(db, fake).await?;
    let mut stable_since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = snapshot(db, fake).await?;
        if now != last {
            last = now;
            stable_since = Instant::now();
        } else if stable_since.elapsed() >= Duration::from_millis(200) || Instant::now() > deadline {
            return Ok(last);
        }
    }
}

async fn state_of_calls(db: &tokio_postgres::Client) -> Result<Vec<String>> {
    let rows = db.query("SELECT tool_call_id || ' ' || status FROM tool_calls ORDER BY tool_call_id", &[]).await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Writes a failing request's exact bytes where `nc` can send them again, and says where (and
/// what they are, when short enough to read).
fn save_for_replay(family: usize, case: usize, bytes: &[u8]) -> Result<String> {
    let folder = gatehouse_tests::workspace_root().join("target/properties-failures");
    std::fs::create_dir_all(&folder)?;
    let file = folder.join(format!("family{family:02}-case{case:03}.http"));
    std::fs::write(&file, bytes)?;
    let shown = if bytes.len() <= 2048 {
        format!("exact bytes: b\"{}\"\n  ", bytes.escape_ascii())
    } else {
        format!("{} bytes, ", bytes.len())
    };
    Ok(format!("{shown}saved in {} (replay: nc <host> <port> < that file)", file.display()))
}

fn seed_hex() -> String {
    SEED.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn malformed_input_is_refused_with_json_and_changes_nothing() -> Result<()> {
    let _ = std::fs::remove_dir_all(gatehouse_tests::workspace_root().join("target/properties-failures"));
    // A database of its own, so the snapshots see only this test's application.
    let scratch = ScratchDatabase::create("properties").await?;
    let fake = start_fake().await?;
    let app = App::start(scratch.serve(gmail_options(&fake, &[], &["--sweep-interval", "0"]))).await?;
    let relay = Relay::start().await?;
    let db = app.db().await?;

    // The real targets.
    let session = "prop-session".to_owned();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let body = json!({"session_id": session, "function_name": "send_email", "parameters": email(),
            "callback_url": relay.url});
        let created = app.send(Method::POST, "/voice-tools/pending", Some(body)).await?;
        ensure!(created.status == 201, "create answered {}: {}", created.status, created.body);
        ids.push(created.body["tool_call_id"].as_str().context("no id")?.to_owned());
    }
    let (pending, prepared) = (ids[0].clone(), ids[1].clone());
    ensure!(app.confirm(&prepared).await?.status == 202);
    app.wait_for(&prepared, "PREPARED", SETTLE).await?;
    relay.wait_for(&prepared, "checkpoint", SETTLE).await?;
    ensure!(fake.drafts().len() == 1, "the checkpoint made one draft");
    let context_key = "last_query_results".to_owned();
    db.execute(
        "INSERT INTO session_context (session_id, context_key, context_value, expires_at)
         VALUES ($1, $2, '{\"documents\": [{\"id\": \"kb-1\"}]}'::jsonb, now() + interval '1 hour')",
        &[&session, &context_key],
    )
    .await?;
    let targets = Targets { pending, prepared, session, context_key, relay_url: relay.url.clone() };

    let generated = Instant::now();
    let families = families(&targets)?;
    let generation = generated.elapsed();

    let started = Instant::now();
    let base_url = app.runner.base_url.clone();
    let host = raw::host_of(&base_url)?;
    let mut failures: Vec<String> = Vec::new();
    let mut tried: Vec<(String, usize, Duration, String)> = Vec::new();
    let mut moved = false;
    for (family_index, family) in families.iter().enumerate() {
        let before = snapshot(&db, &fake).await?;
        let calls_before = state_of_calls(&db).await?;
        let family_started = Instant::now();
        let answers: Vec<(usize, &Case, Result<RawResponse>)> = futures::stream::iter(family.cases.iter().enumerate())
            .map(|(index, case)| {
                let base_url = base_url.clone();
                let start_at = tokio::time::Instant::from_std(family_started) + PACE * index as u32;
                async move {
                    tokio::time::sleep_until(start_at).await;
                    (index, case, raw::send(&base_url, &case.request).await)
                }
            })
            .buffered(CONCURRENCY)
            .collect()
            .await;
        let mut statuses: std::collections::BTreeMap<u16, usize> = std::collections::BTreeMap::new();
        for (_, _, answer) in &answers {
            if let Ok(answer) = answer {
                *statuses.entry(answer.status).or_default() += 1;
            }
        }
        for (index, case, answer) in answers {
            let problem = match &answer {
                Err(error) => Some(format!("no answer: {error:#}")),
                Ok(answer) => check(case.expect, answer)
                    .err()
                    .map(|why| format!("{why}: answered {} {:?} {:?}", answer.status, answer.headers, answer.text())),
            };
            if let Some(problem) = problem {
                let replay = save_for_replay(family_index, index, &case.request.to_bytes(&host))?;
                failures.push(format!(
                    "seed {} | {} | case {index} | {problem}\n  request: {}\n  {replay}",
                    seed_hex(),
                    family.name,
                    case.request.describe(),
                ));
            }
        }
        let after = settled(&db, &fake).await?;
        if after != before {
            let calls_after = state_of_calls(&db).await?;
            let earlier = if moved { " (state had already moved in an earlier family)" } else { "" };
            failures.push(format!(
                "seed {} | {} | the batch changed state{earlier}:\n  before: {before}\n  after:  {after}\n  calls before: {calls_before:?}\n  calls after:  {calls_after:?}",
                seed_hex(),
                family.name
            ));
            moved = true;
        }
        let statuses: Vec<String> = statuses.iter().map(|(status, n)| format!("{status}×{n}")).collect();
        tried.push((family.name.clone(), family.cases.len(), family_started.elapsed(), statuses.join(" ")));
    }
    let elapsed = started.elapsed();

    println!("property suite: seed {} ({} cases per family)", seed_hex(), CASES);
    for (name, cases, took, statuses) in &tried {
        println!("  {cases:>4} cases  {:>6.2} s  {name:<48} {statuses}", took.as_secs_f64());
    }
    let total: usize = tried.iter().map(|(_, cases, _, _)| cases).sum();
    println!(
        "{total} requests in {} families in {:.1} s (generated in {:.2} s); {} failures",
        tried.len(),
        elapsed.as_secs_f64(),
        generation.as_secs_f64(),
        failures.len()
    );
    let failed_families: BTreeSet<&str> = failures.iter().filter_map(|f| f.split(" | ").nth(1)).collect();
    ensure!(
        failures.is_empty(),
        "{} failures in {} families ({:?}):\n\n{}",
        failures.len(),
        failed_families.len(),
        failed_families,
        failures.iter().take(40).cloned().collect::<Vec<_>>().join("\n\n")
    );
    Ok(())
}
