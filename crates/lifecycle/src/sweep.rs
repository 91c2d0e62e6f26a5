//! The sweeper: makes expiry permanent, fails executions that ran out of attempts, and
//! re-drives executions whose worker is gone. Several sweepers (one per runner) can run at
//! once: each statement claims its rows with SKIP LOCKED.

use gatehouse_domain::ApiError;
use gatehouse_http::Reply;
use gatehouse_store::{Claim, Connection, ExpiredCall, ToolCall};
use serde::Serialize;

use crate::config::MAX_ATTEMPTS;
use crate::confirm::hand_to_executor;
use crate::drive::DriveRequest;
use crate::{Config, callbacks};

/// Rows handled per statement per sweep; the next sweep takes the rest.
const BATCH: i64 = 100;

#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    pub expired: usize,
    pub failed: usize,
    pub redriven: usize,
    pub session_context_purged: u64,
}

pub async fn sweep(db: &Connection) -> Result<Reply, ApiError> {
    let lease_seconds = Config::lease_seconds()?;
    let expired = gatehouse_store::expire_stale_calls(db, BATCH)?;
    let failed = gatehouse_store::fail_exhausted_calls(db, MAX_ATTEMPTS, BATCH)?;
    let claims = gatehouse_store::claim_stranded_calls(db, lease_seconds, MAX_ATTEMPTS, BATCH)?;
    let purged = gatehouse_store::purge_expired_session_context(db)?;
    let report = SweepReport {
        expired: expired.len(),
        failed: failed.len(),
        redriven: claims.len(),
        session_context_purged: purged,
    };
    let work = follow_up(expired, failed, claims, lease_seconds);
    Ok(Reply::from(gatehouse_http::json_response(200, &report)).then(work))
}

async fn follow_up(expired: Vec<ExpiredCall>, failed: Vec<ToolCall>, claims: Vec<Claim>, lease_seconds: f64) {
    // Re-drives first and side by side: they are the work a caller is waiting for.
    let drives = claims.into_iter().map(|claim| {
        let drive = DriveRequest { tool_call_id: claim.tool_call_id, lease_owner: claim.lease_owner };
        hand_to_executor(drive, claim.trace_id, lease_seconds)
    });
    futures::future::join_all(drives).await;
    for ExpiredCall { call, was_prepared } in expired {
        if was_prepared && let Some(checkpoint) = call.checkpoint.clone() {
            crate::cancel::discard(&call, checkpoint).await;
        }
        callbacks::completion(&call).await;
    }
    for call in failed {
        callbacks::completion(&call).await;
    }
}
