//! The sweeper: makes expiry permanent, fails executions that ran out of attempts, re-drives
//! executions whose worker is gone, and delivers the reports (checkpoint and completion
//! callbacks) a worker owed the relay and died before sending. Several sweepers (one per
//! runner) can run at once: each statement claims its rows with SKIP LOCKED.

use gatehouse_domain::{ApiError, Status};
use gatehouse_store::{Claim, ExpiredCall, ToolCall};
use serde::Serialize;

use crate::confirm::hand_to_executor;
use crate::context::MAX_ATTEMPTS;
use crate::drive::DriveRequest;
use crate::{Ctx, Outcome, callbacks};

/// Rows handled per statement per sweep; the next sweep takes the rest.
const BATCH: i64 = 100;

#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    pub expired: usize,
    pub failed: usize,
    pub redriven: usize,
    pub reported: usize,
    pub session_context_purged: u64,
}

pub async fn sweep(ctx: &Ctx) -> Result<Outcome<SweepReport>, ApiError> {
    let lease_seconds = ctx.config().lease_seconds()?;
    let db = ctx.db()?;
    let expired = gatehouse_store::expire_stale_calls(&db, BATCH)?;
    let failed = gatehouse_store::fail_exhausted_calls(&db, MAX_ATTEMPTS, BATCH)?;
    let claims = gatehouse_store::claim_stranded_calls(&db, lease_seconds, MAX_ATTEMPTS, BATCH)?;
    // A worker delivers its reports within seconds; one owed for as long as a lease has lost
    // its worker.
    let owed = gatehouse_store::claim_owed_reports(&db, lease_seconds, BATCH)?;
    let purged = gatehouse_store::purge_expired_session_context(&db)?;
    let report = SweepReport {
        expired: expired.len(),
        failed: failed.len(),
        redriven: claims.len(),
        reported: owed.len(),
        session_context_purged: purged,
    };
    let work = Sweep { expired, failed, claims, owed };
    Ok(Outcome::new(report).then(follow_up(ctx.clone(), work, lease_seconds)))
}

/// What a sweep claimed, for the work after its answer.
struct Sweep {
    expired: Vec<ExpiredCall>,
    failed: Vec<ToolCall>,
    claims: Vec<Claim>,
    owed: Vec<ToolCall>,
}

async fn follow_up(ctx: Ctx, Sweep { expired, failed, claims, owed }: Sweep, lease_seconds: f64) {
    ctx.release();
    // Re-drives first and side by side: they are the work a caller is waiting for.
    let drives = claims.into_iter().map(|claim| {
        let drive = DriveRequest { tool_call_id: claim.tool_call_id, lease_owner: claim.lease_owner };
        hand_to_executor(ctx.clone(), drive, claim.trace_id, lease_seconds)
    });
    futures::future::join_all(drives).await;
    for ExpiredCall { call, was_prepared } in expired {
        if was_prepared && let Some(checkpoint) = call.checkpoint.clone() {
            crate::cancel::discard(&ctx, &call, checkpoint).await;
        }
        callbacks::completion(&ctx, &call).await;
    }
    for call in failed {
        callbacks::completion(&ctx, &call).await;
    }
    for call in owed {
        deliver_owed(&ctx, &call).await;
    }
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
