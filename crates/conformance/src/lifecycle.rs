//! Real calls made through a Gatehouse application the tool is registered in, for a tool that
//! keeps its calls in Gatehouse's database: created, confirmed, taken to the checkpoint or the
//! end, cancelled, over the public routes (docs/api.md).

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

/// How long a call may take to reach the state the kit waits for.
const SETTLE: Duration = Duration::from_secs(30);

/// A Gatehouse application, by its base URL and an API token.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    pub base_url: String,
    pub token: String,
    /// The function name the tool is registered under; its described name when `None`.
    pub function: Option<String>,
}

pub(crate) struct Calls<'a> {
    lifecycle: &'a Lifecycle,
    http: reqwest::Client,
    function: String,
}

impl<'a> Calls<'a> {
    pub fn new(lifecycle: &'a Lifecycle, described_name: &str) -> Calls<'a> {
        let function = lifecycle.function.clone().unwrap_or_else(|| described_name.to_owned());
        Calls { lifecycle, http: reqwest::Client::new(), function }
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<(u16, Value), String> {
        let url = format!("{}{path}", self.lifecycle.base_url.trim_end_matches('/'));
        let mut request = self.http.request(method.clone(), &url).bearer_auth(&self.lifecycle.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.timeout(SETTLE).send().await.map_err(|e| format!("{method} {path}: {e}"))?;
        let status = response.status().as_u16();
        Ok((status, response.json().await.unwrap_or(Value::Null)))
    }

    /// A new PENDING call with `parameters`; its id.
    pub async fn create(&self, parameters: &Map<String, Value>) -> Result<String, String> {
        let session = format!("conformance-{}", crate::contract::new_call_id());
        let body = json!({"session_id": session, "function_name": self.function, "parameters": parameters});
        let (status, answer) = self.send(reqwest::Method::POST, "/voice-tools/pending", Some(body)).await?;
        match answer["tool_call_id"].as_str() {
            Some(id) if status == 201 => Ok(id.to_owned()),
            _ => Err(format!("creating a call answered HTTP {status} {answer}")),
        }
    }

    /// Confirms `id` and waits until it stops at the checkpoint or ends: the call's status.
    pub async fn confirm(&self, id: &str) -> Result<Value, String> {
        let (status, answer) = self.send(reqwest::Method::POST, &format!("/voice-tools/confirm/{id}"), None).await?;
        if status != 202 {
            return Err(format!("confirming {id} answered HTTP {status} {answer}"));
        }
        self.settled(id).await
    }

    /// Says "proceed" at the checkpoint and waits for the end: the call's status.
    pub async fn proceed(&self, id: &str) -> Result<Value, String> {
        let body = json!({"action": "proceed"});
        let (status, answer) = self.send(reqwest::Method::POST, &format!("/resume-execution/{id}"), Some(body)).await?;
        if status != 202 {
            return Err(format!("resuming {id} answered HTTP {status} {answer}"));
        }
        self.settled(id).await
    }

    pub async fn cancel(&self, id: &str) -> Result<(), String> {
        let (status, answer) = self.send(reqwest::Method::DELETE, &format!("/voice-tools/cancel/{id}"), None).await?;
        if status == 200 { Ok(()) } else { Err(format!("cancelling {id} answered HTTP {status} {answer}")) }
    }

    /// Polls the call until it is at its checkpoint or final.
    async fn settled(&self, id: &str) -> Result<Value, String> {
        let deadline = Instant::now() + SETTLE;
        loop {
            let (_, call) = self.send(reqwest::Method::GET, &format!("/voice-tools/status/{id}"), None).await?;
            if matches!(call["status"].as_str(), Some("PREPARED" | "COMPLETED" | "FAILED" | "CANCELLED" | "EXPIRED")) {
                return Ok(call);
            }
            if Instant::now() > deadline {
                return Err(format!("{id} did not reach its checkpoint or its end in {} s: {call}", SETTLE.as_secs()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
