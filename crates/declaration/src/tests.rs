use gatehouse_domain::signing::{Refusal, Signed, SignedRequest, verify};
use serde_json::{Map, Value, json};

use super::*;

const BOOK_TABLE: &str = include_str!("../../../tools/book_table.toml");

fn book_table() -> Declared {
    Declared::parse(BOOK_TABLE).unwrap_or_else(|problems| panic!("{problems:?}"))
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn good() -> Map<String, Value> {
    object(json!({"name": "Ada", "party_size": 4, "date": "2026-12-01", "time": "19:30"}))
}

fn problems_of(text: &str) -> Vec<String> {
    match Declared::parse(text) {
        Ok(_) => Vec::new(),
        Err(problems) => problems.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn the_shipped_example_describes_a_checkpointed_tool_and_names_its_variables() {
    let declared = book_table();
    let description = declared.description();
    assert_eq!(description.name, "book_table");
    assert!(description.needs_checkpoint);
    assert_eq!(declared.origin(), &Origin::Variable("reservations_url".into()));
    assert_eq!(declared.variables().into_iter().collect::<Vec<_>>(), ["reservations_api_key", "reservations_url"]);
    assert_eq!(declared.origin().allowed_outbound_host(), "{{ reservations_url }}");
}

#[test]
fn parameters_are_checked_against_the_schema_in_words_an_agent_can_speak() {
    let declared = book_table();
    assert_eq!(declared.validate(good()).ok(), Some(good()));
    let bad = object(json!({"party_size": 0, "date": "tomorrow", "time": "7pm", "pets": true}));
    let problems = declared.validate(bad).err().unwrap_or_default();
    let said: Vec<String> = problems.iter().map(|p| format!("{} {}", p.field, p.problem)).collect();
    for expected in [
        "name is needed",
        "party_size must be at least 1",
        "date must be a valid date",
        "time is not in the form this tool expects",
        "pets is not something this tool takes",
    ] {
        assert!(said.contains(&expected.to_owned()), "{expected:?} not in {said:?}");
    }
    let wrong_type =
        declared.validate(object(json!({"name": "A", "party_size": "four", "date": "2026-12-01", "time": "19:30"})));
    assert_eq!(wrong_type.err().map(|p| p[0].problem.clone()), Some("must be a whole number".to_owned()));
}

#[test]
fn the_confirmation_and_checkpoint_are_spoken_from_the_templates() {
    let declared = book_table();
    assert_eq!(
        declared.summarize(&good()).ok().as_deref(),
        Some("A table for 4 on 2026-12-01 at 19:30 under the name Ada. Shall I book it?")
    );
    let inputs = Inputs {
        prepared: Some(json!({"hold_id": "h1", "time": "19:30", "date": "2026-12-01"})),
        ..Inputs::only_parameters(&good())
    };
    assert_eq!(
        declared.checkpoint_message(&inputs).ok().as_deref(),
        Some("I'm holding a table for 4 at 19:30 on 2026-12-01. Shall I confirm the booking?")
    );
}

fn call_inputs() -> Inputs {
    Inputs {
        tool_call_id: Some("tc_1".into()),
        session_id: Some("s1".into()),
        prepared: Some(json!({"hold_id": "h/1 ?x", "time": "19:30", "date": "2026-12-01"})),
        secrets: object(json!({"reservations_api_key": "sk-live-123"})),
        ..Inputs::only_parameters(&good())
    }
}

#[test]
fn requests_carry_typed_bodies_encoded_paths_a_key_per_operation_and_a_signature() {
    let declared = book_table();
    let inputs = call_inputs();
    let prepare = declared.request(StepKind::Prepare, &inputs).ok().flatten().unwrap_or_else(|| panic!("a prepare"));
    assert_eq!(prepare.method, HttpMethod::Post);
    assert_eq!(prepare.path, "/holds");
    let body: Value = serde_json::from_slice(&prepare.body).unwrap_or_default();
    assert_eq!(body, json!({"party_size": 4, "date": "2026-12-01", "time": "19:30", "name": "Ada"}));
    assert_eq!(prepare.header("authorization"), Some("Bearer sk-live-123"));
    assert_eq!(prepare.header("idempotency-key"), Some("gatehouse-book_table-tc_1-prepare"));
    assert!(!format!("{prepare:?}").contains("sk-live"), "a request's Debug never shows a header value");

    let mut execute =
        declared.request(StepKind::Execute, &inputs).ok().flatten().unwrap_or_else(|| panic!("an execute"));
    assert_eq!(execute.path, "/holds/h%2F1%20%3Fx/confirm", "a value cannot add a path segment or a query");
    assert_eq!(execute.header("idempotency-key"), Some("gatehouse-book_table-tc_1-execute"));
    assert_eq!(serde_json::from_slice::<Value>(&execute.body).unwrap_or_default(), json!({"notes": ""}));
    execute.sign(b"whsec", 1_700_000_000, NONCE);
    let signed = DocsBackend::default().receive(&execute, 1_700_000_010);
    assert_eq!(signed.map(|s| s.nonce), Ok(NONCE.to_owned()));

    let discard = declared.request(StepKind::Discard, &inputs).ok().flatten().unwrap_or_else(|| panic!("a discard"));
    assert_eq!((discard.method, discard.body.is_empty()), (HttpMethod::Delete, true));
}

const NONCE: &str = "00112233445566778899aabbccddeeff";

/// A backend that checks requests as docs/tools.md ("What your backend receives") says: the
/// recipe over the request as it arrived, and each nonce spent once.
#[derive(Default)]
struct DocsBackend {
    spent: std::collections::HashSet<String>,
}

impl DocsBackend {
    fn receive(&mut self, request: &BackendRequest, now: u64) -> Result<Signed, Refusal> {
        let as_sent = SignedRequest {
            method: request.method.as_str(),
            target: &request.path,
            idempotency_key: request.header("idempotency-key").unwrap_or_default(),
            body: &request.body,
        };
        let signed = verify(&[b"whsec"], request.header("x-gatehouse-signature"), &as_sent, now)?;
        if self.spent.insert(signed.nonce.clone()) { Ok(signed) } else { Err(Refusal::Replayed) }
    }
}

/// A captured signed `DELETE /holds/h1` sent again as it was, or to another hold, another
/// operation's key or with another body, is refused by a backend that follows the docs; each
/// try of the same operation is signed afresh, with its own nonce, and accepted.
#[test]
fn a_captured_backend_request_cannot_be_replayed_or_retargeted() {
    let declared = book_table();
    let inputs = Inputs { prepared: Some(json!({"hold_id": "h1"})), ..call_inputs() };
    let mut release =
        declared.request(StepKind::Discard, &inputs).ok().flatten().unwrap_or_else(|| panic!("a discard"));
    assert_eq!(release.path, "/holds/h1");
    release.sign(b"whsec", 1_700_000_000, NONCE);
    let mut backend = DocsBackend::default();
    assert!(backend.receive(&release, 1_700_000_001).is_ok(), "the request as sent");
    assert_eq!(backend.receive(&release, 1_700_000_002).map(drop), Err(Refusal::Replayed), "the same again");

    let mut fresh = DocsBackend::default();
    let elsewhere = BackendRequest { path: "/holds/h2".to_owned(), ..release.clone() };
    assert_eq!(fresh.receive(&elsewhere, 1_700_000_001).map(drop), Err(Refusal::Mismatch), "another hold");
    let query = BackendRequest { path: "/holds/h1?force=true".to_owned(), ..release.clone() };
    assert_eq!(fresh.receive(&query, 1_700_000_001).map(drop), Err(Refusal::Mismatch), "another query");
    let mut rekeyed = release.clone();
    for (name, value) in &mut rekeyed.headers {
        if name == "idempotency-key" {
            *value = "gatehouse-book_table-tc_2-discard".to_owned();
        }
    }
    assert_eq!(fresh.receive(&rekeyed, 1_700_000_001).map(drop), Err(Refusal::Mismatch), "another call's key");
    let as_post = BackendRequest { method: HttpMethod::Post, ..release.clone() };
    assert_eq!(fresh.receive(&as_post, 1_700_000_001).map(drop), Err(Refusal::Mismatch), "another method");
    assert_eq!(fresh.receive(&release, 1_700_000_400).map(drop), Err(Refusal::Stale), "too late");

    let mut retried = declared.request(StepKind::Discard, &inputs).ok().flatten().unwrap_or_else(|| panic!("again"));
    retried.sign(b"whsec", 1_700_000_003, "ffeeddccbbaa99887766554433221100");
    retried.sign(b"whsec", 1_700_000_003, "ffeeddccbbaa99887766554433221101");
    assert_eq!(retried.headers.iter().filter(|(name, _)| name == "x-gatehouse-signature").count(), 1);
    assert!(backend.receive(&retried, 1_700_000_004).is_ok(), "a retry is signed afresh");
}

#[test]
fn the_answer_becomes_the_result_and_the_sentence() {
    let declared = book_table();
    let inputs = Inputs {
        response: Some(json!({"confirmation": "R-77", "time": "19:30", "date": "2026-12-01"})),
        ..call_inputs()
    };
    let executed = declared.answer(&inputs).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        executed.result,
        json!({"confirmation": "R-77", "date": "2026-12-01", "time": "19:30", "party_size": 4})
    );
    assert!(executed.voice_response.ends_with("Your confirmation is R-77."));
    let missing = Inputs { response: Some(json!({"time": "19:30"})), ..call_inputs() };
    assert!(declared.answer(&missing).is_err(), "an answer without the fields the templates read is an error");
}

#[test]
fn a_bad_declaration_is_refused_with_every_field_and_reason() {
    let invalid_schema = BOOK_TABLE.replace("type = \"integer\"", "type = \"integr\"");
    let said = problems_of(&invalid_schema);
    assert!(said.iter().any(|p| p.starts_with("parameters") && p.contains("not a valid JSON Schema")), "{said:?}");

    let unknown_variable = BOOK_TABLE.replace("{{ parameters.time }} under", "{{ parameters.hour }} under");
    let said = problems_of(&unknown_variable);
    assert!(
        said.contains(&"confirm: {{ parameters.hour }}: the parameters schema has no property \"hour\"".to_owned()),
        "{said:?}"
    );

    let wrong_place = BOOK_TABLE.replace("Shall I book it?", "{{ response.confirmation }}");
    let said = problems_of(&wrong_place);
    assert!(said.iter().any(|p| p.starts_with("confirm: {{ response.confirmation }} is not known here")), "{said:?}");

    let inline_secret = BOOK_TABLE.replacen("Bearer {{ secrets.reservations_api_key }}", "Bearer sk-live-123", 1);
    let said = problems_of(&inline_secret);
    assert!(
        said.iter().any(|p| p.starts_with("prepare.headers.authorization: a credential is never written")),
        "{said:?}"
    );

    let secret_in_body =
        BOOK_TABLE.replace("name = \"{{ parameters.name }}\"", "name = \"{{ secrets.reservations_api_key }}\"");
    let said = problems_of(&secret_in_body);
    assert!(
        said.iter().any(|p| p.starts_with("prepare.body.name: {{ secrets.reservations_api_key }} is not known here")),
        "{said:?}"
    );

    let url_with_path =
        BOOK_TABLE.replace("url = \"{{ vars.reservations_url }}\"", "url = \"https://api.example.com/v1\"");
    let said = problems_of(&url_with_path);
    assert!(said.iter().any(|p| p.starts_with("backend.url: must be only a scheme")), "{said:?}");

    let no_discard = BOOK_TABLE.split("[discard]").next().unwrap_or_default().to_owned()
        + "[answer]\nvoice_response = \"Booked.\"\n";
    let said = problems_of(&no_discard);
    assert!(said.contains(&"discard: a tool with a prepare step must say how to undo it".to_owned()), "{said:?}");

    let unknown_field = BOOK_TABLE.replace("[backend]", "[backend]\nretries = 3");
    let said = problems_of(&unknown_field);
    assert!(said.len() == 1 && said[0].starts_with("line ") && said[0].contains("unknown field `retries`"), "{said:?}");
}

#[test]
fn origins_are_a_scheme_a_host_and_a_port() {
    assert_eq!(Origin::parse("https://api.example.com/"), Ok(Origin::Literal("https://api.example.com".into())));
    assert_eq!(Origin::parse("http://127.0.0.1:8080"), Ok(Origin::Literal("http://127.0.0.1:8080".into())));
    assert_eq!(Origin::parse("http://[::1]:8080"), Ok(Origin::Literal("http://[::1]:8080".into())));
    assert!(Origin::parse("ftp://example.com").is_err());
    assert!(Origin::parse("https://user@example.com").is_err());
    assert!(Origin::parse("https://example.com:http").is_err());
    assert!(Origin::parse("{{ vars.a }}/x").is_err());
    assert!(Origin::parse("{{ secrets.a }}").is_err());
}
