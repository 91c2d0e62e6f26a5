//! `gatehouse demo`: replays the seed's conversation against a running application ("wrong
//! email, corrected, confirmed, checkpoint, sent"), with a built-in relay that receives the
//! callbacks and verifies their signatures, printing each step, what the agent would say, and
//! how long Gatehouse took.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use serde_json::{Value, json};

use super::{DEV_CALLBACK_SECRET, DEV_TOKEN};
use gatehouse_bench::Relay;

#[derive(Args)]
pub(super) struct DemoArgs {
    /// The running application.
    #[arg(long, default_value = "http://127.0.0.1:3000", env = "GATEHOUSE_URL")]
    pub(crate) url: String,
    /// Its API token.
    #[arg(long, env = "SPIN_VARIABLE_API_TOKEN", default_value = DEV_TOKEN)]
    pub(crate) token: String,
    /// The key its callbacks are signed with; the demo's relay refuses anything else.
    #[arg(long, env = "SPIN_VARIABLE_CALLBACK_SECRET", default_value = DEV_CALLBACK_SECRET)]
    pub(crate) callback_secret: String,
    /// Play the conversation this many times and print the latency percentiles, quietly.
    #[arg(long, default_value_t = 1)]
    pub(crate) rounds: usize,
    /// Where the demo's relay listens for callbacks; the application must allow it
    /// (`callback_allowed_hosts`), as `gatehouse up` allows this default when none is set.
    #[arg(long, default_value_t = gatehouse_bench::LOCAL_RELAY)]
    pub(crate) relay_listen: std::net::SocketAddr,
}

const WAIT: Duration = Duration::from_secs(30);

/// One conversation's timings: each request, and the background work the relay waited for.
struct Timings {
    requests: Vec<(&'static str, Duration)>,
    to_checkpoint: Duration,
    to_completed: Duration,
}

impl Timings {
    fn gatehouse_time(&self) -> Duration {
        self.requests.iter().map(|(_, d)| *d).sum::<Duration>() + self.to_checkpoint + self.to_completed
    }
}

pub(super) async fn run(args: DemoArgs) -> Result<()> {
    let demo = Demo::new(&args).await?;
    if args.rounds <= 1 {
        let timings = demo.conversation(true).await?;
        println!("\nGatehouse time for the whole conversation: {}", ms(timings.gatehouse_time()));
        return Ok(());
    }
    let mut totals = Vec::with_capacity(args.rounds);
    let started = Instant::now();
    for _ in 0..args.rounds {
        totals.push(demo.conversation(false).await?.gatehouse_time());
    }
    let elapsed = started.elapsed();
    totals.sort_unstable();
    let at = |q: f64| totals[((totals.len() - 1) as f64 * q).round() as usize];
    println!(
        "{} conversations: p50 {} p95 {} p99 {} max {}; {:.1} conversations/s",
        totals.len(),
        ms(at(0.50)),
        ms(at(0.95)),
        ms(at(0.99)),
        ms(at(1.0)),
        totals.len() as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}

struct Demo {
    client: reqwest::Client,
    base: String,
    token: String,
    relay: Relay,
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

impl Demo {
    async fn new(args: &DemoArgs) -> Result<Demo> {
        let relay = Relay::start(&args.callback_secret, args.relay_listen).await?;
        let demo = Demo {
            client: reqwest::Client::new(),
            base: args.url.trim_end_matches('/').to_owned(),
            token: args.token.clone(),
            relay,
        };
        let tools = demo.call(reqwest::Method::GET, "/voice-tools/tools", None, &[]).await?;
        let names = tools.1.to_string();
        ensure!(names.contains("send_email"), "the application at {} has no send_email tool: {names}", demo.base);
        Ok(demo)
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Result<(u16, Value, Duration)> {
        let mut request = self.client.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let started = Instant::now();
        let response = request.send().await.with_context(|| format!("is Gatehouse running at {}?", self.base))?;
        let status = response.status().as_u16();
        let body = response.json::<Value>().await.unwrap_or(Value::Null);
        Ok((status, body, started.elapsed()))
    }

    async fn step(
        &self,
        name: &'static str,
        expected: u16,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(Value, Duration)> {
        let (status, answer, took) = self.call(method, path, body, &[]).await?;
        if status != expected {
            bail!("{name}: Gatehouse answered {status}, expected {expected}: {answer}");
        }
        Ok((answer, took))
    }

    async fn conversation(&self, loud: bool) -> Result<Timings> {
        let say = |who: &str, text: &str| {
            if loud {
                println!("  {who:>7}: {text}");
            }
        };
        let heading = |text: String| {
            if loud {
                println!("\n{text}");
            }
        };
        let session = format!("demo-{}", std::process::id());
        let mut requests = Vec::new();

        heading("1. The caller asks for an email; the agent records it as PENDING and reads it back".into());
        say("caller", "Send an email to john@gmail.com about the meeting tomorrow.");
        let parameters = json!({"to": "john@gmail.com", "subject": "Meeting Tomorrow",
            "body": "Hi John,\n\nLet's meet tomorrow at 10:00 to go through the Q3 numbers.\n\nThanks"});
        let body = json!({"session_id": session, "function_name": "send_email", "parameters": parameters,
            "intent_id": "intent_demo", "callback_url": self.relay.url});
        let (created, took) =
            self.step("create", 201, reqwest::Method::POST, "/voice-tools/pending", Some(body)).await?;
        requests.push(("create", took));
        let id = created["tool_call_id"].as_str().context("no tool_call_id")?.to_owned();
        say("agent", created["message"].as_str().unwrap_or_default());
        say("", &format!("[{id} PENDING, {}]", ms(took)));

        heading("2. The caller corrects the address; the call is modified, not recreated".into());
        say("caller", "No, it's john.smith@gmail.com.");
        let patch = json!({"parameters": {"to": "john.smith@gmail.com"}, "reason": "the caller corrected the address"});
        let (modified, took) =
            self.step("modify", 200, reqwest::Method::PATCH, &format!("/voice-tools/modify/{id}"), Some(patch)).await?;
        requests.push(("modify", took));
        say("agent", modified["message"].as_str().unwrap_or_default());
        say(
            "",
            &format!(
                "[to: {} -> {}, {}]",
                modified["modification_applied"]["old"],
                modified["modification_applied"]["new"],
                ms(took)
            ),
        );

        heading("3. The caller confirms; Gatehouse answers at once and prepares the draft in the background".into());
        say("caller", "Yes, send it.");
        let confirm_at = Instant::now();
        let (confirmed, took) =
            self.step("confirm", 202, reqwest::Method::POST, &format!("/voice-tools/confirm/{id}"), None).await?;
        requests.push(("confirm", took));
        say("agent", confirmed["message"].as_str().unwrap_or_default());
        let checkpoint = self.relay.wait_for(&id, "checkpoint", WAIT).await?;
        ensure!(checkpoint.signature_valid, "the checkpoint callback's signature did not verify");
        let to_checkpoint = checkpoint.at.saturating_duration_since(confirm_at + took);
        say(
            "relay",
            &format!("checkpoint callback received, signature verified ({} after the answer)", ms(to_checkpoint)),
        );
        say("agent", checkpoint.body["message"].as_str().unwrap_or_default());

        heading("4. The caller says go; the draft is sent, exactly once".into());
        say("caller", "Go ahead.");
        let resume_at = Instant::now();
        let (resumed, took) = self
            .step(
                "resume",
                202,
                reqwest::Method::POST,
                &format!("/resume-execution/{id}"),
                Some(json!({"action": "proceed"})),
            )
            .await?;
        requests.push(("resume", took));
        let _ = resumed;
        let completion = self.relay.wait_for(&id, "completion", WAIT).await?;
        ensure!(completion.signature_valid, "the completion callback's signature did not verify");
        ensure!(
            completion.body["status"] == "COMPLETED",
            "the call ended {}: {}",
            completion.body["status"],
            completion.body
        );
        let to_completed = completion.at.saturating_duration_since(resume_at + took);
        say(
            "relay",
            &format!("completion callback received, signature verified ({} after the answer)", ms(to_completed)),
        );
        say("agent", completion.body["voice_response"].as_str().unwrap_or_default());
        say("", &format!("[Gmail message id {}]", completion.body["result"]["message_id"]));

        let (_, call, _) = self.call(reqwest::Method::GET, &format!("/voice-tools/status/{id}"), None, &[]).await?;
        let history: Vec<&str> =
            call["status_history"].as_array().into_iter().flatten().filter_map(|e| e["status"].as_str()).collect();
        say("", &format!("[status history: {}]", history.join(" -> ")));
        if loud {
            println!("\nLatency of each request (what the relay waits for):");
            for (name, took) in &requests {
                println!("  {name:<8} {}", ms(*took));
            }
        }
        Ok(Timings { requests, to_checkpoint, to_completed })
    }
}
