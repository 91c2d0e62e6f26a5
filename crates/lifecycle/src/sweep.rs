//! The sweeper: makes expiry permanent, fails executions that ran out of attempts, re-drives
//! executions whose worker is gone, delivers the reports (checkpoint and completion callbacks)
//! a worker owed the relay and died before sending, and retries the discards a tool host did
//! not answer. Several sweepers (one per runner) can run at once: each statement claims its
//! rows with SKIP LOCKED.
//!
//! A pass is bounded: each statement takes a batch, repeated while batches come back full and
//! the pass's time for statements lasts; after the answer, deliveries run side by side, up to
//! [`IN_FLIGHT_PER_PARTY`] at once to one relay (or one tool), and none starts once the pass's
//! time for deliveries is over. What a pass leaves stays owed for the next (docs/architecture.md,
//! "The sweeper").

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;

use gatehouse_domain::callback::CallbackKind;
use gatehouse_domain::{ApiError, Status, ToolCallId};
use gatehouse_store::{Claim, Connection, ExpiredCall, Expiry, StoreError, ToolCall};

use crate::confirm::hand_to_executor;
use crate::context::MAX_ATTEMPTS;
use crate::drive::DriveRequest;
use crate::{Ctx, Outcome, SweepReport, callbacks};

/// Rows one statement handles at a time.
const BATCH: i64 = 100;
/// How many batches of one kind a pass takes at most, however far behind it is.
const MAX_BATCHES: usize = 20;
/// How long a pass's statements may go on before it answers with what it has.
const STATEMENT_BUDGET: Duration = Duration::from_secs(2);
/// How long after its answer a pass may start deliveries and discards; what it did not start
/// stays owed.
const DELIVERY_BUDGET: Duration = Duration::from_secs(20);
/// How many of one party's errands (one relay's reports, one tool's discards) a pass has in
/// flight at once: a backlog's reports go out as fast as the relay takes them, and a relay that
/// never answers holds up only its own, at most this many at a time (docs/architecture.md,
/// "The sweeper").
const IN_FLIGHT_PER_PARTY: usize = 16;
/// How many times a discard is tried before the sweeper leaves it (and the log says so).
const MAX_DISCARD_ATTEMPTS: i32 = 5;
/// Executions added to the rollups per statement (about 80 ms on the reference machine); a
/// pass takes up to [`MAX_BATCHES`] of them.
const ROLLUP_BATCH: i64 = 10_000;
/// Final calls forgotten per statement once past their retention.
const CALLS_BATCH: i64 = 1000;
/// Spent nonces, and records of SDK tools' calls, forgotten per pass.
const NONCE_BATCH: i64 = 1000;
/// How long an SDK tool's call record is kept after its last change: far longer than any call
/// stays open (its expiry, the sweeper's re-drives and owed discards are hours at most).
const SDK_CALL_RECORD_SECONDS: i64 = 7 * 24 * 3600;

pub async fn sweep(ctx: &Ctx) -> Result<Outcome<SweepReport>, ApiError> {
    let lease_seconds = ctx.config().lease_seconds()?;
    let db = ctx.db()?;
    let clock = Instant::now();
    let expired = expire(ctx, &db, clock)?;
    let failed = batches(clock, |batch| gatehouse_store::fail_exhausted_calls(&db, MAX_ATTEMPTS, batch))?;
    let claims =
        batches(clock, |batch| gatehouse_store::claim_stranded_calls(&db, lease_seconds, MAX_ATTEMPTS, batch))?;
    // A worker delivers its reports within seconds; one owed for as long as a lease has lost
    // its worker.
    let owed = batches(clock, |batch| gatehouse_store::claim_owed_reports(&db, lease_seconds, batch))?;
    let discards =
        batches(clock, |batch| gatehouse_store::claim_owed_discards(&db, lease_seconds, MAX_DISCARD_ATTEMPTS, batch))?;
    let purged = gatehouse_store::purge_expired_session_context(&db)?;
    forget_bookkeeping(&db);
    roll_up_executions(&db, clock);
    apply_retention(ctx, &db, clock);
    let report = SweepReport {
        expired: expired.len(),
        failed: failed.len(),
        redriven: claims.len(),
        reported: owed.len(),
        discards_retried: discards.len(),
        session_context_purged: purged,
    };
    let work = Sweep { expired, failed, claims, owed, discards };
    Ok(Outcome::new(report).then(follow_up(ctx.clone(), work, lease_seconds)))
}

/// Expires waiting calls past their deadline, batch after batch like [`batches`].
fn expire(ctx: &Ctx, db: &Connection, clock: Instant) -> Result<Expiry, ApiError> {
    let default_url = ctx.config().callback_default_url(gatehouse_domain::keys::DEFAULT_TENANT)?;
    let mut expired = Expiry::default();
    while_full(clock, BATCH, |size| {
        let batch = gatehouse_store::expire_stale_calls(db, size, default_url.as_deref())?;
        let taken = batch.len();
        expired.extend(batch);
        Ok(taken)
    })?;
    Ok(expired)
}

/// Runs a claiming statement batch after batch while each comes back full, up to
/// [`MAX_BATCHES`] and while the pass's [`STATEMENT_BUDGET`] lasts.
fn batches<T>(clock: Instant, mut take: impl FnMut(i64) -> Result<Vec<T>, StoreError>) -> Result<Vec<T>, ApiError> {
    let mut all = Vec::new();
    while_full(clock, BATCH, |size| {
        let batch = take(size)?;
        let taken = batch.len();
        all.extend(batch);
        Ok(taken)
    })?;
    Ok(all)
}

/// Runs `take` with `size` again while it answers that it handled a full batch, up to
/// [`MAX_BATCHES`] and while the pass's [`STATEMENT_BUDGET`] lasts.
fn while_full(
    clock: Instant,
    size: i64,
    mut take: impl FnMut(i64) -> Result<usize, StoreError>,
) -> Result<(), StoreError> {
    for _ in 0..MAX_BATCHES {
        let taken = take(size)?;
        let full = usize::try_from(size).is_ok_and(|size| taken >= size);
        if !full || clock.elapsed() >= STATEMENT_BUDGET {
            break;
        }
    }
    Ok(())
}

/// Adds the executions recorded since the last pass to the rollups (docs/architecture.md,
/// "Tool stats at scale"), batch after batch while they come back full and the pass's time
/// for statements lasts. Bookkeeping: a failure is logged and left to the next pass.
fn roll_up_executions(db: &Connection, clock: Instant) {
    let added =
        |size| gatehouse_store::fold_execution_rollups(db, size).map(|added| usize::try_from(added).unwrap_or(0));
    if let Err(e) = while_full(clock, ROLLUP_BATCH, added) {
        gatehouse_platform::log_line("warn", &format!("adding executions to the rollups: {e}"));
    }
}

/// Keeps the history's week partitions (created ahead, dropped past `history_retention_days`)
/// and forgets final calls past `calls_retention_days`, batch after batch while they come back
/// full and the pass's time for statements lasts (docs/architecture.md, "Retention").
/// Bookkeeping: a failure, a missing setting included, is logged and left to the next pass.
fn apply_retention(ctx: &Ctx, db: &Connection, clock: Instant) {
    let retention = match ctx.config().retention() {
        Ok(retention) => retention,
        Err(e) => return gatehouse_platform::log_line("warn", &format!("retention: {e}")),
    };
    if let Err(e) = gatehouse_store::keep_history_partitions(db, retention.history_days) {
        gatehouse_platform::log_line("warn", &format!("keeping the history's partitions: {e}"));
    }
    if retention.calls_days == 0 {
        return;
    }
    let forgotten = |size| {
        gatehouse_store::forget_final_calls(db, retention.calls_days, size)
            .map(|forgotten| usize::try_from(forgotten).unwrap_or(0))
    };
    if let Err(e) = while_full(clock, CALLS_BATCH, forgotten) {
        gatehouse_platform::log_line("warn", &format!("forgetting final calls past their retention: {e}"));
    }
}

/// Nonces of signed requests whose window has passed, and the records SDK tools keep of calls
/// long settled, are of no use any more. Bookkeeping: a failure is logged and left to the next
/// pass.
fn forget_bookkeeping(db: &Connection) {
    if let Err(e) = gatehouse_store::forget_spent_nonces(db, NONCE_BATCH) {
        gatehouse_platform::log_line("warn", &format!("forgetting spent nonces: {e}"));
    }
    if let Err(e) = gatehouse_store::forget_sdk_call_records(db, NONCE_BATCH, SDK_CALL_RECORD_SECONDS) {
        gatehouse_platform::log_line("warn", &format!("forgetting SDK tools' call records: {e}"));
    }
}

/// What a sweep claimed, for the work after its answer.
struct Sweep {
    expired: Expiry,
    failed: Vec<ToolCall>,
    claims: Vec<Claim>,
    owed: Vec<ToolCall>,
    discards: Vec<ToolCall>,
}

/// One piece of work after a sweep's answer that reaches another party (a relay, a tool).
enum Errand {
    /// An expired call: its prepared work discarded (if it was prepared), then its report.
    Expired(ExpiredCall),
    Completion(ToolCall),
    Owed(ToolCall),
    Discard(ToolCall),
}

impl Errand {
    fn call(&self) -> &ToolCall {
        match self {
            Errand::Expired(ExpiredCall { call, .. })
            | Errand::Completion(call)
            | Errand::Owed(call)
            | Errand::Discard(call) => call,
        }
    }

    /// Who answers it: errands for the same party share [`IN_FLIGHT_PER_PARTY`], so one that
    /// never answers delays only its own.
    fn party(&self, ctx: &Ctx) -> String {
        let call = self.call();
        if let Errand::Discard(call) = self {
            return format!("tool {}", call.component);
        }
        let url = callbacks::destination(ctx, call).ok().flatten();
        url.as_deref().and_then(authority).map_or_else(String::new, |relay| format!("relay {relay}"))
    }

    /// The report this errand is made of when a report is all it sends: one with no relay to go
    /// to is then nothing to do but mark tried, with the pass's others in one statement
    /// (docs/architecture.md, "The sweeper"). `None` for a discard, or an expired call whose
    /// prepared work is discarded first.
    fn report_alone(&self) -> Option<CallbackKind> {
        match self {
            Errand::Expired(ExpiredCall { call, was_prepared }) => {
                (!*was_prepared || call.checkpoint.is_none()).then_some(CallbackKind::Completion)
            }
            Errand::Completion(_) => Some(CallbackKind::Completion),
            Errand::Owed(call) => match (call.status, &call.checkpoint) {
                (Status::Prepared, Some(_)) => Some(CallbackKind::Checkpoint),
                (status, _) if status.is_settled() => Some(CallbackKind::Completion),
                _ => None,
            },
            Errand::Discard(_) => None,
        }
    }

    async fn run(self, ctx: &Ctx) {
        match self {
            Errand::Expired(ExpiredCall { call, was_prepared }) => {
                if was_prepared && let Some(checkpoint) = call.checkpoint.clone() {
                    crate::tool_ops::discard(ctx, &call, checkpoint).await;
                }
                callbacks::completion(ctx, &call).await;
            }
            Errand::Completion(call) => callbacks::completion(ctx, &call).await,
            Errand::Owed(call) => deliver_owed(ctx, &call).await,
            Errand::Discard(call) => match call.checkpoint.clone() {
                Some(checkpoint) => crate::tool_ops::discard(ctx, &call, checkpoint).await,
                None => gatehouse_platform::log_line(
                    "warn",
                    &format!("{}: a discard is owed but no checkpoint was recorded", call.tool_call_id),
                ),
            },
        }
    }
}

/// `host[:port]` of a URL, lowercased.
fn authority(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    Some(host.to_ascii_lowercase())
}

async fn follow_up(ctx: Ctx, Sweep { expired, failed, claims, owed, discards }: Sweep, lease_seconds: f64) {
    ctx.release();
    let started = Instant::now();
    // Re-drives first and side by side: they are the work a caller is waiting for.
    let drives = claims.into_iter().map(|claim| {
        let drive = DriveRequest { tool_call_id: claim.tool_call_id, lease_owner: claim.lease_owner };
        hand_to_executor(ctx.clone(), drive, claim.trace_id, lease_seconds)
    });
    futures::future::join_all(drives).await;

    // A backlog of calls nobody is to be told about (an outage's expiries, say) is one write a
    // kind, not one per call (docs/architecture.md, "The sweeper").
    let mut unaddressed: BTreeMap<CallbackKind, Vec<ToolCallId>> = BTreeMap::new();
    unaddressed.entry(CallbackKind::Completion).or_default().extend(expired.untold);
    let errands = expired
        .to_follow_up
        .into_iter()
        .map(Errand::Expired)
        .chain(failed.into_iter().map(Errand::Completion))
        .chain(owed.into_iter().map(Errand::Owed))
        .chain(discards.into_iter().map(Errand::Discard));
    let mut by_party: BTreeMap<String, Vec<Errand>> = BTreeMap::new();
    for errand in errands {
        match errand.report_alone() {
            Some(kind) if matches!(callbacks::destination(&ctx, errand.call()), Ok(None)) => {
                unaddressed.entry(kind).or_default().push(errand.call().tool_call_id.clone());
            }
            _ => by_party.entry(errand.party(&ctx)).or_default().push(errand),
        }
    }
    for (kind, ids) in &unaddressed {
        callbacks::tried_together(&ctx, ids, *kind);
    }
    let queues = by_party.into_values().map(|queue| {
        let ctx = ctx.clone();
        futures::stream::iter(queue).for_each_concurrent(IN_FLIGHT_PER_PARTY, move |errand| {
            let ctx = ctx.clone();
            async move {
                if started.elapsed() < DELIVERY_BUDGET {
                    errand.run(&ctx).await;
                }
                // Else left owed (the report, the discard): a later pass takes it up.
            }
        })
    });
    futures::future::join_all(queues).await;
}

/// Sends the report a call's status owes: the checkpoint of a PREPARED call, the completion of
/// a settled one.
async fn deliver_owed(ctx: &Ctx, call: &ToolCall) {
    match (call.status, &call.checkpoint) {
        (Status::Prepared, Some(checkpoint)) => callbacks::checkpoint(ctx, call, checkpoint.message.clone()).await,
        (status, _) if status.is_settled() => callbacks::completion(ctx, call).await,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relays_are_told_apart_by_host_and_port() {
        assert_eq!(authority("https://Relay.example.com/cb?x=1").as_deref(), Some("relay.example.com"));
        assert_eq!(authority("http://127.0.0.1:3001/callbacks").as_deref(), Some("127.0.0.1:3001"));
        assert_eq!(authority("http://user@relay:80").as_deref(), Some("relay:80"));
        assert_eq!(authority("not a url"), None);
    }

    #[test]
    fn batches_go_on_while_full_and_stop_at_a_short_one() {
        let mut sizes = vec![100, 100, 7, 100].into_iter();
        let taken = batches(Instant::now(), |_| Ok(vec![(); sizes.next().unwrap_or(0)])).expect("no error");
        assert_eq!(taken.len(), 207);
        let mut calls = 0;
        let capped = batches(Instant::now(), |size| {
            calls += 1;
            Ok(vec![(); usize::try_from(size).unwrap_or(0)])
        })
        .expect("no error");
        assert_eq!((calls, capped.len()), (MAX_BATCHES, MAX_BATCHES * 100));
    }
}
