//! The tool contract's own bookkeeping, which makes a replayed or duplicated contract request
//! harmless: the nonces of signed requests already spent, and the claim a tool makes on an
//! operation of a call before it acts (docs/architecture.md, "Signed hops").

use gatehouse_domain::ToolCallId;
use spin_sdk::pg4::{Connection, ParameterValue};

use crate::StoreError;
use crate::calls::ToolCall;
use crate::rows::{count, decode, one_row, optional, text};

pub(crate) const SPEND_NONCE: &str = include_str!("sql/contract/spend_nonce.sql");
pub(crate) const FORGET_NONCES: &str = include_str!("sql/contract/forget_nonces.sql");
pub(crate) const CLAIM: &str = include_str!("sql/contract/claim.sql");
pub(crate) const FORGET_SDK_CALLS: &str = include_str!("sql/contract/forget_sdk_calls.sql");

/// Records a signed request's nonce until `expires_at` (unix seconds): true the first time,
/// false when it was spent before (the request is a replay).
pub fn spend_nonce(db: &Connection, nonce: &str, expires_at: u64) -> Result<bool, StoreError> {
    #[allow(clippy::cast_precision_loss)] // seconds since 1970 fit a float exactly for ages
    let expires_at = ParameterValue::Floating64(expires_at as f64);
    Ok(optional(db, SPEND_NONCE, &[text(nonce), expires_at])?.unwrap_or(false))
}

/// Forgets at most `batch` nonces whose window has passed; how many it forgot.
pub fn forget_spent_nonces(db: &Connection, batch: i64) -> Result<i64, StoreError> {
    count(db, FORGET_NONCES, &[ParameterValue::Int64(batch)])
}

/// Forgets at most `batch` records of SDK tools' calls untouched for `older_than_seconds`; how
/// many it forgot.
pub fn forget_sdk_call_records(db: &Connection, batch: i64, older_than_seconds: i64) -> Result<i64, StoreError> {
    let parameters = [ParameterValue::Int64(batch), ParameterValue::Int64(older_than_seconds)];
    count(db, FORGET_SDK_CALLS, &parameters)
}

/// An operation of the contract that a tool claims before acting on a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimedOperation {
    Prepare,
    Execute,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq)]
pub enum OperationClaim {
    /// The tool may act, on the call as it now is. For `execute`: whether an earlier attempt
    /// claimed it, so the side effect may already have happened.
    Claimed {
        call: Box<ToolCall>,
        execute_claimed_before: bool,
    },
    /// Claimed before for this attempt, or the call is not where the operation belongs: the
    /// call as it is, to answer from without acting.
    Refused {
        current: Box<ToolCall>,
    },
    NotFound,
}

/// Claims `operation` of the call for `attempt`, which must be the call's current attempt.
pub fn claim_operation(
    db: &Connection,
    tool_call_id: &ToolCallId,
    operation: ClaimedOperation,
    attempt: u32,
) -> Result<OperationClaim, StoreError> {
    let name = match operation {
        ClaimedOperation::Prepare => "prepare",
        ClaimedOperation::Execute => "execute",
    };
    let attempt = i32::try_from(attempt).unwrap_or(i32::MAX);
    let row = one_row(db, CLAIM, &[text(tool_call_id.as_str()), text(name), ParameterValue::Int32(attempt)])?;
    let before: Option<ToolCall> = row.first().map(decode).transpose()?.flatten();
    let after: Option<ToolCall> = row.get(1).map(decode).transpose()?.flatten();
    let execute_claimed_before: bool = row.get(2).map(decode).transpose()?.flatten().unwrap_or(false);
    Ok(match (before, after) {
        (Some(_), Some(call)) => OperationClaim::Claimed { call: Box::new(call), execute_claimed_before },
        (Some(current), None) => OperationClaim::Refused { current: Box::new(current) },
        (None, _) => OperationClaim::NotFound,
    })
}
