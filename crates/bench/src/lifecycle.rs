//! The lifecycle scenarios: create, modify, cancel, status and the whole conversation (`flow`),
//! against the test-only fixture tool of tests/fixtures/lifecycle.toml, plus the pgbench
//! scripts for the statements those routes commit.
//!
//! Calls the routes need in a given state (PENDING for modify, cancel and status) are inserted
//! directly, many in one statement, so that setting up does not cost measurement time. Every
//! row the benchmark makes belongs to one of two sessions and is deleted at the start and end.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use gatehouse_domain::keys::{API_TOKEN_NAME, DEFAULT_TENANT};
use serde_json::{Value, json};

use crate::load::{Outcome, WARMUP, Work};
use crate::relay::Relay;
use crate::scenario::{FLOW_STEPS, Scenario, Statement};

/// The fixture tool's tables, shared with the tests (tests/support/lifecycle.rs).
const FIXTURE_TABLES_SQL: &str = include_str!("../../../tests/fixtures/fixture_tool.sql");

/// The statements the routes commit, so the floor is measured on exactly them.
const INSERT_SQL: &str = include_str!("../../store/src/sql/calls/insert.sql");
const MODIFY_SQL: &str = include_str!("../../store/src/sql/calls/modify.sql");
const CANCEL_SQL: &str = include_str!("../../store/src/sql/calls/cancel.sql");
const CONFIRM_SQL: &str = include_str!("../../store/src/sql/calls/confirm.sql");
const GET_SQL: &str = include_str!("../../store/src/sql/calls/get.sql");

/// The session of the calls the routes see, and of the calls pgbench writes. Creates spread
/// over [`CREATE_SESSIONS`] sessions named after it (`bench-lifecycle-17`), as a platform's
/// conversations do: one session holds at most `max_pending_calls_per_session` waiting calls.
const SESSION: &str = "bench-lifecycle";
const FLOOR_SESSION: &str = "bench-floor";
const CREATE_SESSIONS: u64 = 1000;
/// The per-session cap the floor's insert counts against, as the application's default does.
const FLOOR_PENDING_CAP: &str = "50";
pub(crate) const FUNCTION: &str = "fixture_action";
pub(crate) const TOOL: &str = "fixture-tool";
const TO: &str = "bench@example.com";
const OTHER_TO: &str = "bench2@example.com";
const SUBJECT: &str = "Bench";
/// What the fixture says for [`TO`] and [`SUBJECT`], as a created call holds it.
const SUMMARY: &str = "I'll send a message to bench@example.com about 'Bench'. Confirm to proceed.";
const OTHER_SUMMARY: &str = "I'll send a message to bench2@example.com about 'Bench'. Confirm to proceed.";

/// How long confirm and resume may wait for the call to reach the checkpoint or its end.
const PREFER_WAIT: &str = "wait=10";

/// More cancels per second than this box can serve: enough pre-created calls for a run.
const CANCEL_RATE_CAP: f64 = 4000.0;
/// Calls the modify scenario cycles through, so each call's history stays short.
const MODIFY_POOL: usize = 2000;
/// The pgbench rate assumed for sizing a transition's rows when the insert floor did not run.
const FALLBACK_TPS: f64 = 3000.0;

fn parameters() -> Value {
    json!({"to": TO, "subject": SUBJECT})
}

/// An SQL string literal.
pub(crate) fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `sql` with `$1`, `$2`, ... replaced by `args[0]`, `args[1]`, ...; highest first, so `$1` does
/// not take the start of `$13`.
pub(crate) fn bind(sql: &str, args: &[String]) -> String {
    let mut bound = sql.to_owned();
    for (index, arg) in args.iter().enumerate().rev() {
        bound = bound.replace(&format!("${}", index + 1), arg);
    }
    bound
}

/// Ids the benchmark makes itself: `tc_` and twelve decimal digits (valid hex), from a random
/// start so that runs do not collide.
struct Ids {
    next: AtomicU64,
}

impl Ids {
    fn new() -> Ids {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64 ^ d.as_secs())
            .unwrap_or_default();
        Ids { next: AtomicU64::new(100_000_000_000 + (nanos % 400_000) * 1_000_000) }
    }

    /// The first of `count` fresh consecutive numbers.
    fn block(&self, count: u64) -> u64 {
        self.next.fetch_add(count, Ordering::Relaxed)
    }
}

fn id(n: u64) -> String {
    format!("tc_{n:012}")
}

/// Callbacks received so far, counted by kind.
fn callback_counts(relay: &Relay) -> std::collections::BTreeMap<String, u64> {
    let mut counts = std::collections::BTreeMap::new();
    for callback in relay.received() {
        *counts.entry(callback.kind).or_insert(0) += 1;
    }
    counts
}

/// What one conversation needs, shared by the clients.
struct Flow {
    client: reqwest::Client,
    base: String,
    token: String,
    callback_url: String,
    /// Creates made so far: which of the [`CREATE_SESSIONS`] the next one goes to.
    sessions: AtomicU64,
}

impl Flow {
    async fn create(&self, body: Value) -> Result<String> {
        let request =
            self.client.post(format!("{}/voice-tools/pending", self.base)).bearer_auth(&self.token).json(&body);
        let created = expect(request, 201).await?;
        created["tool_call_id"].as_str().map(str::to_owned).context("create answered no tool_call_id")
    }

    async fn modify(&self, id: &str, to: &str) -> Result<Value> {
        let request = self
            .client
            .patch(format!("{}/voice-tools/modify/{id}", self.base))
            .bearer_auth(&self.token)
            .json(&json!({"parameters": {"to": to}}));
        expect(request, 200).await
    }

    async fn confirm(&self, id: &str) -> Result<()> {
        let request = self
            .client
            .post(format!("{}/voice-tools/confirm/{id}", self.base))
            .bearer_auth(&self.token)
            .header("prefer", PREFER_WAIT);
        let call = expect(request, 200).await?;
        match call["status"].as_str() {
            Some("PREPARED") => Ok(()),
            other => bail!("confirm left the call {other:?}, not PREPARED"),
        }
    }

    async fn resume(&self, id: &str) -> Result<()> {
        let request = self
            .client
            .post(format!("{}/resume-execution/{id}", self.base))
            .bearer_auth(&self.token)
            .header("prefer", PREFER_WAIT)
            .json(&json!({"action": "proceed"}));
        let call = expect(request, 200).await?;
        match call["status"].as_str() {
            Some("COMPLETED") => Ok(()),
            other => bail!("resume left the call {other:?}, not COMPLETED"),
        }
    }

    fn create_body(&self) -> Value {
        json!({
            "session_id": SESSION,
            "function_name": FUNCTION,
            "parameters": parameters(),
            "callback_url": self.callback_url,
        })
    }

    /// create → modify → confirm (answered at the checkpoint) → resume proceed (answered
    /// COMPLETED), each step timed.
    async fn conversation(&self) -> Outcome {
        let mut marks = vec![Instant::now()];
        let outcome: Result<()> = async {
            let id = self.create(self.create_body()).await?;
            marks.push(Instant::now());
            self.modify(&id, OTHER_TO).await?;
            marks.push(Instant::now());
            self.confirm(&id).await?;
            marks.push(Instant::now());
            self.resume(&id).await?;
            marks.push(Instant::now());
            Ok(())
        }
        .await;
        let steps = marks.windows(2).map(|pair| pair[1] - pair[0]).collect();
        Outcome::Done { error: outcome.err().map(|e| format!("{e:#}")), steps }
    }
}

/// Sends the request and returns its JSON body if the status is `expected`.
async fn expect(request: reqwest::RequestBuilder, expected: u16) -> Result<Value> {
    let response = request.send().await?;
    let status = response.status().as_u16();
    let bytes = response.bytes().await?;
    if status != expected {
        bail!("HTTP {status} (expected {expected}): {}", String::from_utf8_lossy(&bytes));
    }
    Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// A write transaction takes the next transaction id and a read-only one takes none, so the
/// distance between two readings of the next id counts the commits in between.
const NEXT_XID_SQL: &str = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint";

/// The lifecycle scenarios' database, relay and bookkeeping.
pub(crate) struct Lifecycle {
    db: tokio_postgres::Client,
    flow: Arc<Flow>,
    relay: Relay,
    ids: Ids,
    started: std::time::SystemTime,
}

/// Durable commits of one conversation, by step, as counted in the database.
pub(crate) struct Commits {
    pub per_step: Vec<u64>,
    pub callbacks: std::collections::BTreeMap<String, u64>,
}

impl Commits {
    pub(crate) fn total(&self) -> u64 {
        self.per_step.iter().sum()
    }
}

/// One pgbench script for a write or read statement, and what to check after it ran.
pub(crate) struct FloorScript {
    pub text: String,
    /// For a transition: the last row of each client, which must still be untouched after
    /// the run, or pgbench ran out of rows and counted statements that changed nothing.
    last_rows: Vec<String>,
}

impl Lifecycle {
    /// Starts the relay, checks that the application has the fixture tool, creates the tool's
    /// tables and clears earlier runs' rows.
    pub(crate) async fn prepare(
        database_url: &str,
        client: &reqwest::Client,
        base: &str,
        token: &str,
        callback_secret: &str,
        relay_listen: std::net::SocketAddr,
    ) -> Result<Lifecycle> {
        let started = std::time::SystemTime::now();
        let (db, _driver) = gatehouse_pg_connect::connect(database_url)
            .await
            .context("connecting to the database for the lifecycle scenarios")?;
        let relay = Relay::start(callback_secret, relay_listen).await?;
        let flow = Arc::new(Flow {
            client: client.clone(),
            base: base.to_owned(),
            token: token.to_owned(),
            callback_url: relay.url.clone(),
            sessions: AtomicU64::new(0),
        });
        // Creating a call needs no fixture table, so an application without the tool is told
        // so before anything is written for it.
        if let Err(e) = flow.create(flow.create_body()).await {
            bail!(
                "the lifecycle scenarios need the fixture tool; run them with \
                 --manifest tests/fixtures/lifecycle.toml ({e:#})"
            );
        }
        db.batch_execute(FIXTURE_TABLES_SQL).await.context("creating the fixture tool's tables")?;
        let lifecycle = Lifecycle { db, flow, relay, ids: Ids::new(), started };
        lifecycle.cleanup().await?;
        Ok(lifecycle)
    }

    /// Deletes every row the benchmark made: its calls, and what tools and callbacks recorded
    /// about them.
    pub(crate) async fn cleanup(&self) -> Result<()> {
        let ours = format!("(session_id LIKE '{SESSION}%' OR session_id LIKE '{FLOOR_SESSION}%')");
        let calls = format!("SELECT tool_call_id FROM tool_calls WHERE {ours}");
        self.db
            .batch_execute(&format!(
                "DELETE FROM tool_executions WHERE tool_call_id IN ({calls});
                 DELETE FROM callback_attempts WHERE tool_call_id IN ({calls});
                 DELETE FROM fixture_tool_log WHERE tool_call_id IN ({calls});
                 DELETE FROM fixture_tool_effects WHERE tool_call_id IN ({calls});
                 DELETE FROM tool_calls WHERE {ours};"
            ))
            .await
            .context("deleting the benchmark's rows")?;
        // A create validates before the call has an id, so its record has none: this run's only.
        let since = self.started.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or_default();
        self.db
            .execute(
                "DELETE FROM tool_executions WHERE tool_call_id IS NULL AND component = $1 AND started_at >= to_timestamp($2)",
                &[&TOOL, &since],
            )
            .await?;
        Ok(())
    }

    /// Inserts `count` PENDING calls as create leaves them, in one statement; returns their ids.
    async fn precreate(&self, session: &str, count: u64) -> Result<(u64, Vec<String>)> {
        let first = self.ids.block(count);
        self.db
            .execute(
                "INSERT INTO tool_calls (tool_call_id, session_id, function_name, tool, parameters, summary,
                                         status, status_history, expires_at, trace_id)
                 SELECT 'tc_' || g, $1, $2, $3, $4::jsonb, $5, 'PENDING',
                        jsonb_build_array(status_entry('PENDING', NULL, 'relay')), now() + interval '1 hour',
                        md5(g::text)
                   FROM generate_series($6::bigint, $7::bigint) AS g",
                &[&session, &FUNCTION, &TOOL, &parameters(), &SUMMARY, &(first as i64), &((first + count - 1) as i64)],
            )
            .await
            .context("pre-creating calls")?;
        Ok((first, (first..first + count).map(id).collect()))
    }

    /// What a client does once in `scenario`, with the calls it needs already in place.
    pub(crate) async fn work(&self, scenario: Scenario, concurrency: usize, seconds: f64) -> Result<Work> {
        let flow = self.flow.clone();
        Ok(match scenario {
            Scenario::Create => Arc::new(move |_| {
                let flow = flow.clone();
                Box::pin(async move {
                    let session =
                        format!("{SESSION}-{}", flow.sessions.fetch_add(1, Ordering::Relaxed) % CREATE_SESSIONS);
                    let body = json!({"session_id": session, "function_name": FUNCTION, "parameters": parameters()});
                    Outcome::single(flow.create(body).await.map(drop))
                })
            }),
            Scenario::Status => {
                let (_, ids) = self.precreate(SESSION, concurrency as u64).await?;
                let ids = Arc::new(ids);
                Arc::new(move |worker| {
                    let flow = flow.clone();
                    let url = format!("{}/voice-tools/status/{}", flow.base, ids[worker % ids.len()]);
                    Box::pin(async move {
                        Outcome::single(expect(flow.client.get(url).bearer_auth(&flow.token), 200).await.map(drop))
                    })
                })
            }
            Scenario::Modify => {
                // Each request takes the next call and flips its address, so every request
                // changes a field and commits.
                let (_, ids) = self.precreate(SESSION, MODIFY_POOL.max(64 * concurrency) as u64).await?;
                let flips: Arc<Vec<AtomicU32>> = Arc::new(ids.iter().map(|_| AtomicU32::new(0)).collect());
                let ids = Arc::new(ids);
                let cursor = Arc::new(AtomicUsize::new(0));
                Arc::new(move |_| {
                    let (flow, ids, flips) = (flow.clone(), ids.clone(), flips.clone());
                    let index = cursor.fetch_add(1, Ordering::Relaxed) % ids.len();
                    let to = if flips[index].fetch_add(1, Ordering::Relaxed) % 2 == 0 { OTHER_TO } else { TO };
                    Box::pin(async move { Outcome::single(flow.modify(&ids[index], to).await.map(drop)) })
                })
            }
            Scenario::Cancel => {
                // One call per request; a run that uses them all up stops early and says so.
                let count = ((seconds + WARMUP.as_secs_f64()) * CANCEL_RATE_CAP).ceil() as u64;
                let (_, ids) = self.precreate(SESSION, count).await?;
                let ids = Arc::new(ids);
                let cursor = Arc::new(AtomicUsize::new(0));
                Arc::new(move |_| {
                    let (flow, ids) = (flow.clone(), ids.clone());
                    let index = cursor.fetch_add(1, Ordering::Relaxed);
                    Box::pin(async move {
                        let Some(id) = ids.get(index) else { return Outcome::Exhausted };
                        let request = flow
                            .client
                            .delete(format!("{}/voice-tools/cancel/{id}", flow.base))
                            .bearer_auth(&flow.token);
                        Outcome::single(expect(request, 200).await.map(drop))
                    })
                })
            }
            Scenario::Flow => Arc::new(move |_| {
                let flow = flow.clone();
                Box::pin(async move { flow.conversation().await })
            }),
            _ => {
                bail!("{} is not a lifecycle scenario", scenario.name())
            }
        })
    }

    async fn next_xid(&self) -> Result<i64> {
        Ok(self.db.query_one(NEXT_XID_SQL, &[]).await?.get(0))
    }

    /// Runs conversations one at a time, letting each step's after-answer work (tool records,
    /// callbacks) finish, and counts each step's commits; the least of three runs, so an
    /// autovacuum in between does not count.
    pub(crate) async fn count_commits(&self) -> Result<Commits> {
        let settle = || tokio::time::sleep(Duration::from_millis(300));
        let before = callback_counts(&self.relay);
        let mut least = vec![u64::MAX; FLOW_STEPS.len()];
        for _ in 0..3 {
            let mut counts = Vec::with_capacity(FLOW_STEPS.len());
            let mut mark = self.next_xid().await?;
            let id = self.flow.create(self.flow.create_body()).await?;
            for step in 0..FLOW_STEPS.len() {
                match step {
                    0 => {}
                    1 => {
                        self.flow.modify(&id, OTHER_TO).await?;
                    }
                    2 => self.flow.confirm(&id).await?,
                    _ => self.flow.resume(&id).await?,
                }
                settle().await;
                let now = self.next_xid().await?;
                counts.push((now - mark) as u64);
                mark = now;
            }
            for (least, count) in least.iter_mut().zip(counts) {
                *least = (*least).min(count);
            }
        }
        let after = callback_counts(&self.relay);
        let callbacks = after
            .into_iter()
            .map(|(kind, n)| {
                let earlier = before.get(&kind).copied().unwrap_or(0);
                (kind, (n - earlier) / 3)
            })
            .collect();
        Ok(Commits { per_step: least, callbacks })
    }

    /// The pgbench script that runs `statement` as its route does, at `concurrency` clients for
    /// `seconds`, on rows of its own. `expected_tps` sizes the rows a transition needs.
    pub(crate) async fn floor_script(
        &self,
        statement: Statement,
        concurrency: usize,
        seconds: u64,
        expected_tps: Option<f64>,
    ) -> Result<FloorScript> {
        let params = parameters().to_string();
        let other = json!({"to": OTHER_TO, "subject": SUBJECT}).to_string();
        let changes = json!([{"field": "to", "old_value": TO, "new_value": OTHER_TO}]).to_string();
        // Client c's k-th statement (k from 1) uses the call numbered first + c * per_client + k - 1.
        let call = "('tc_' || :n)".to_owned();
        let (sql, args) = match statement {
            Statement::Insert => (
                INSERT_SQL,
                vec![
                    call,
                    format!("'{FLOOR_SESSION}-' || (:n::int8 % {CREATE_SESSIONS})"),
                    "NULL".into(),
                    "NULL".into(),
                    literal(FUNCTION),
                    literal(TOOL),
                    literal(&params),
                    literal(SUMMARY),
                    "NULL".into(),
                    "NULL".into(),
                    literal(&"0".repeat(64)),
                    literal(&"0".repeat(32)),
                    "600".into(),
                    // needs_checkpoint, as the fixture tool's validate answers
                    "true".into(),
                    // the history row the fixture tool's validate hands over, written with
                    // the call (tool, component, version, operation, call, start, duration,
                    // outcome, error, trace)
                    literal(FUNCTION),
                    literal(TOOL),
                    literal(env!("CARGO_PKG_VERSION")),
                    literal("validate"),
                    "NULL".into(),
                    "extract(epoch from now())".into(),
                    "0.1".into(),
                    literal("ok"),
                    "NULL".into(),
                    literal(&"0".repeat(32)),
                    FLOOR_PENDING_CAP.into(),
                    // the tenant and the key, as a request with `api_token` binds them
                    literal(DEFAULT_TENANT),
                    literal(API_TOKEN_NAME),
                ],
            ),
            Statement::Modify => (
                MODIFY_SQL,
                vec![
                    call,
                    literal(&params),
                    literal(&other),
                    literal(OTHER_SUMMARY),
                    "NULL".into(),
                    literal(&changes),
                    literal(DEFAULT_TENANT),
                    literal(API_TOKEN_NAME),
                ],
            ),
            Statement::Cancel => (
                CANCEL_SQL,
                vec![
                    call,
                    "NULL".into(),
                    literal("relay"),
                    literal("Okay, I've cancelled that. Nothing was done."),
                    literal(DEFAULT_TENANT),
                    literal(API_TOKEN_NAME),
                ],
            ),
            Statement::Confirm => (
                CONFIRM_SQL,
                vec![
                    call,
                    literal(&"0".repeat(32)),
                    "60".into(),
                    "NULL".into(),
                    literal(DEFAULT_TENANT),
                    literal(API_TOKEN_NAME),
                ],
            ),
            Statement::Get => {
                let (_, ids) = self.precreate(FLOOR_SESSION, 1).await?;
                let args = [literal(&ids[0]), literal(DEFAULT_TENANT)];
                return Ok(FloorScript { text: one_line(&bind(GET_SQL, &args)), last_rows: Vec::new() });
            }
            _ => bail!("{} is not a lifecycle statement", statement.name()),
        };
        let clients = concurrency as u64;
        let (first, per_client, last_rows) = if statement == Statement::Insert {
            // Fresh ids only: far apart per client, no rows needed.
            let per_client = 100_000_000;
            (self.ids.block(clients * per_client), per_client, Vec::new())
        } else {
            // Each statement must find an untouched PENDING row, or it changes nothing and
            // costs no commit: twice what the insert rate suggests, per client.
            let tps = expected_tps.unwrap_or(FALLBACK_TPS);
            let per_client = (tps * seconds as f64 * 2.0 / clients as f64).ceil() as u64 + 50;
            let (first, _) = self.precreate(FLOOR_SESSION, clients * per_client).await?;
            let last_rows = (0..clients).map(|c| id(first + c * per_client + per_client - 1)).collect();
            (first, per_client, last_rows)
        };
        let text = format!(
            "\\set k :k + 1\n\\set n {} + :client_id * {per_client} + :k\n{}",
            first as i64 - 1,
            one_line(&bind(sql, &args))
        );
        Ok(FloorScript { text, last_rows })
    }

    /// Whether a transition's run found an untouched row for every statement.
    pub(crate) async fn floor_had_rows(&self, script: &FloorScript) -> Result<bool> {
        if script.last_rows.is_empty() {
            return Ok(true);
        }
        let touched: i64 = self
            .db
            .query_one(
                "SELECT count(*) FROM tool_calls WHERE tool_call_id = ANY($1) AND jsonb_array_length(status_history) > 1",
                &[&script.last_rows],
            )
            .await?
            .get(0);
        Ok(touched == 0)
    }
}

/// pgbench reads one statement per line, so comments go and the rest is joined.
pub(crate) fn one_line(sql: &str) -> String {
    let words: Vec<&str> =
        sql.lines().filter(|line| !line.trim_start().starts_with("--")).flat_map(str::split_whitespace).collect();
    format!("{};\n", words.join(" ").trim_end_matches(';'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_replaces_high_parameters_first() {
        let args: Vec<String> = (1..=11).map(|i| format!("v{i}")).collect();
        assert_eq!(bind("$1, $10, $11::text, $2", &args), "v1, v10, v11::text, v2");
    }

    #[test]
    fn literals_double_their_quotes() {
        assert_eq!(literal("about 'Bench'."), "'about ''Bench''.'");
    }

    #[test]
    fn bench_ids_are_valid_tool_call_ids() {
        let n = Ids::new().block(1);
        assert!(is_tool_call_id(&id(n)), "{}", id(n));
    }

    fn is_tool_call_id(id: &str) -> bool {
        id.strip_prefix("tc_").is_some_and(|hex| hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
    }

    #[test]
    fn statements_become_one_line() {
        assert_eq!(one_line("-- a comment\nSELECT 1\n  FROM t;\n"), "SELECT 1 FROM t;\n");
    }
}
