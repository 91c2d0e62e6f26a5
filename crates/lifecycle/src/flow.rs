//! The one walk of a call through its steps (docs/architecture.md, "The lifecycle"): prepare →
//! checkpoint → the irreversible step → completed or failed. The executor and the gated direct
//! flows both walk calls here; a [`Policy`] says what happens between the steps and how the tool is
//! reached.
//!
//! Every step is a conditional transition under the walker's lease, so a cancel, the sweeper
//! or a worker that took over decides the call's fate as soon as one of its statements wins;
//! the walk then stops with the call as the winner left it.

use gatehouse_domain::contract::{Checkpoint, Executed, Operation, ToolRequest, declared_checkpoint};
use gatehouse_domain::{ApiError, Status};
use gatehouse_store::{ToolCall, Transition};
use gatehouse_tool::ToolError;

use crate::Ctx;
use crate::callbacks;
use crate::tool_ops::{cancelled_message, discard, tool_request};

/// What the policy decided at a point where the walk may be stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Continue,
    /// Cancel the call; `operation` is the one that will not run (for the tool's history).
    Cancel {
        reason: String,
        operation: Operation,
    },
    /// Stop here and leave the call PREPARED: the relay resumes it later (the executor).
    Pause,
}

/// What happens between the steps, and how the tool's operations run.
#[allow(async_fn_in_trait)] // components are single-threaded; no Send bound is wanted
pub(crate) trait Policy {
    /// Whether the call stops at a checkpoint: then a `prepare` that answers none broke the
    /// contract, and the call never reaches `execute`.
    fn needs_checkpoint(&self) -> bool;
    /// Before the first operation (`prepare`, or `execute` for a walk without one).
    async fn before_work(&mut self, call: &ToolCall) -> Decision;
    /// With the checkpoint recorded: the call is PREPARED.
    async fn at_checkpoint(&mut self, call: &ToolCall, checkpoint: &Checkpoint) -> Decision;
    async fn prepare(&mut self, request: &ToolRequest) -> Result<Option<Checkpoint>, ToolError>;
    async fn execute(&mut self, request: &ToolRequest) -> Result<Executed, ToolError>;
    /// Writes the tool's history row for an operation a cancel stopped before it ran.
    fn cancelled(&mut self, call: &ToolCall, operation: Operation, reason: &str);
}

/// What is left to do once the new state is committed: the executor does it after its
/// answer, a direct flow before (its last gate).
pub(crate) enum After {
    Completion(ToolCall),
    Checkpoint(ToolCall, String),
    Discard(ToolCall, Checkpoint),
}

impl After {
    pub(crate) async fn run_all(ctx: Ctx, list: Vec<After>) {
        ctx.release();
        for after in list {
            match after {
                After::Completion(call) => callbacks::completion(&ctx, &call).await,
                After::Checkpoint(call, message) => callbacks::checkpoint(&ctx, &call, message).await,
                After::Discard(call, checkpoint) => discard(&ctx, &call, checkpoint).await,
            }
        }
    }
}

/// Where a walk left the call, and what is left to do.
pub(crate) struct Walked {
    pub call: ToolCall,
    pub after: Vec<After>,
}

/// Walks an EXECUTING `call` whose lease `owner` holds as far as it can go: to its checkpoint
/// (when the policy pauses there), or through `execute` to its end.
pub(crate) async fn walk(ctx: &Ctx, call: ToolCall, owner: &str, policy: &mut impl Policy) -> Result<Walked, ApiError> {
    let mut walk = Walker { ctx, owner, walked: Walked { call, after: Vec::new() } };
    walk.run(policy).await?;
    Ok(walk.walked)
}

struct Walker<'a> {
    ctx: &'a Ctx,
    owner: &'a str,
    walked: Walked,
}

/// Whether the walk goes on after a step.
enum Step {
    Next,
    Stop,
}

impl Walker<'_> {
    fn call(&self) -> &ToolCall {
        &self.walked.call
    }

    async fn run(&mut self, policy: &mut impl Policy) -> Result<(), ApiError> {
        if self.call().status != Status::Executing {
            return Ok(());
        }
        let mut checkpoint = self.call().checkpoint.clone();
        // A call past its point of no return prepared all it had to (a tool with no checkpoint
        // answered none): a re-drive goes straight back to `execute`, which reconciles.
        if self.call().prepared_at.is_none() && self.call().side_effect_started_at.is_none() {
            // The connection rule (see `Ctx`): nothing is held while the policy or the tool works.
            self.ctx.release();
            let decision = policy.before_work(self.call()).await;
            if let Step::Stop = self.decided(decision, policy).await? {
                return Ok(());
            }
            self.ctx.release();
            let prepared = policy.prepare(&tool_request(self.call())).await;
            let needs_checkpoint = policy.needs_checkpoint();
            let prepared = prepared.and_then(|checkpoint| {
                declared_checkpoint(needs_checkpoint, checkpoint)
                    .map_err(|breach| ToolError::broke_contract(&self.call().component, &breach))
            });
            checkpoint = match prepared {
                Ok(Some(prepared)) => {
                    if let Step::Stop = self.checkpoint(&prepared, policy).await? {
                        return Ok(());
                    }
                    Some(prepared)
                }
                Ok(None) => None,
                Err(error) => return self.failed(Operation::Prepare, error),
            };
        }
        let Some(may_have_started) = self.begin_side_effect(checkpoint.as_ref(), policy)? else {
            return Ok(());
        };
        let request =
            ToolRequest { checkpoint, side_effect_may_have_started: may_have_started, ..tool_request(self.call()) };
        self.ctx.release();
        match policy.execute(&request).await {
            Ok(executed) => {
                let id = &self.walked.call.tool_call_id;
                let (result, voice) = (&executed.result, &executed.voice_response);
                let completed = gatehouse_store::complete_call(&*self.ctx.db()?, id, self.owner, result, voice)?;
                self.settled(completed)
            }
            Err(error) => self.failed(Operation::Execute, error),
        }
    }

    /// Records the checkpoint `prepare` returned, and asks the policy what now: pause there,
    /// cancel, or go on (the call is resumed under the same lease).
    async fn checkpoint(&mut self, prepared: &Checkpoint, policy: &mut impl Policy) -> Result<Step, ApiError> {
        let ttl = self.ctx.config().checkpoint_ttl_seconds()?;
        let id = self.call().tool_call_id.clone();
        match gatehouse_store::mark_prepared(&*self.ctx.db()?, &id, self.owner, prepared, ttl)? {
            Transition::Applied { after, .. } => self.walked.call = *after,
            refused => {
                // Cancelled (or overtaken) while preparing: undo what prepare did.
                let before = self.walked.call.clone();
                self.walked.after.push(After::Discard(before, prepared.clone()));
                self.follow(refused)?;
                return Ok(Step::Stop);
            }
        }
        self.ctx.release();
        match policy.at_checkpoint(self.call(), prepared).await {
            Decision::Pause => {
                self.walked.after.push(After::Checkpoint(self.walked.call.clone(), prepared.message.clone()));
                Ok(Step::Stop)
            }
            decision @ Decision::Cancel { .. } => self.decided(decision, policy).await,
            Decision::Continue => {
                let lease_seconds = self.ctx.config().lease_seconds()?;
                let resumed =
                    gatehouse_store::resume_call(&*self.ctx.db()?, self.ctx.caller(), &id, self.owner, lease_seconds)?;
                self.follow(resumed)
            }
        }
    }

    /// The point of no return, raced against cancel: exactly one of the two statements wins.
    /// It also renews the lease, so a long prepare does not eat into the time `execute` has.
    /// Whether the side effect may already have started (a re-drive), or `None` if the walk
    /// lost the race.
    fn begin_side_effect(
        &mut self,
        checkpoint: Option<&Checkpoint>,
        policy: &mut impl Policy,
    ) -> Result<Option<bool>, ApiError> {
        let lease_seconds = self.ctx.config().lease_seconds()?;
        let id = self.call().tool_call_id.clone();
        match gatehouse_store::begin_side_effect(&*self.ctx.db()?, &id, self.owner, lease_seconds)? {
            Transition::Applied { before, after } => {
                self.walked.call = *after;
                Ok(Some(before.side_effect_started_at.is_some()))
            }
            refused => {
                if let Transition::Rejected { current } = &refused
                    && current.status == Status::Cancelled
                {
                    policy.cancelled(current, Operation::Execute, "cancelled before the irreversible step");
                }
                if let Some(checkpoint) = checkpoint {
                    self.walked.after.push(After::Discard(self.walked.call.clone(), checkpoint.clone()));
                }
                self.follow(refused)?;
                Ok(None)
            }
        }
    }

    /// Acts on the policy's decision before a step.
    async fn decided(&mut self, decision: Decision, policy: &mut impl Policy) -> Result<Step, ApiError> {
        let (reason, operation) = match decision {
            Decision::Continue => return Ok(Step::Next),
            // The call stays as it is, under the walker's lease; the relay or the sweeper goes on.
            Decision::Pause => return Ok(Step::Stop),
            Decision::Cancel { reason, operation } => (reason, operation),
        };
        let message = cancelled_message(self.call().status);
        let id = self.call().tool_call_id.clone();
        match gatehouse_store::cancel_call(&*self.ctx.db()?, self.ctx.caller(), &id, Some(&reason), "relay", message)? {
            Transition::Applied { before, after } => {
                policy.cancelled(&after, operation, &reason);
                if before.status == Status::Prepared
                    && let Some(checkpoint) = before.checkpoint.clone()
                {
                    self.walked.after.push(After::Discard((*after).clone(), checkpoint));
                }
                self.walked.after.push(After::Completion((*after).clone()));
                self.walked.call = *after;
            }
            refused => {
                self.follow(refused)?;
            }
        }
        Ok(Step::Stop)
    }

    /// A refusal from the tool is final: the call is FAILED with the tool's sentence, and what
    /// `prepare` left is discarded (the tool said no, so nothing was done), unless the tool says
    /// it may have acted. An answer outside
    /// the contract is final too, and says so; after `execute` it may have acted, so nothing is
    /// discarded and the caller hears that it can't be told. A crash gives the lease back, so
    /// the sweeper re-drives the call after a back-off (a tool host that died needs time to
    /// come back), up to the attempt limit.
    fn failed(&mut self, operation: Operation, error: ToolError) -> Result<(), ApiError> {
        let id = self.call().tool_call_id.clone();
        match error {
            ToolError::Refused(refusal) => {
                let reason = format!("{} failed: {}", operation.as_str(), refusal.error);
                let releases_hold = !refusal.may_have_acted;
                let failed = gatehouse_store::fail_call(
                    &*self.ctx.db()?,
                    &id,
                    self.owner,
                    &reason,
                    &refusal.error,
                    releases_hold,
                )?;
                if releases_hold {
                    self.release_hold(&failed);
                }
                self.settled(failed)
            }
            ToolError::BrokeContract(fault) => {
                let reason = format!("the tool broke its contract: {}", fault.explanation);
                gatehouse_platform::log_line("warn", &format!("{id}: {reason}"));
                let (spoken, releases_hold) = match operation {
                    Operation::Execute => (BROKE_CONTRACT_AFTER_EXECUTE, false),
                    _ => (BROKE_CONTRACT_BEFORE_EXECUTE, true),
                };
                let failed =
                    gatehouse_store::fail_call(&*self.ctx.db()?, &id, self.owner, &reason, spoken, releases_hold)?;
                if releases_hold {
                    self.release_hold(&failed);
                }
                self.settled(failed)
            }
            ToolError::Crashed(fault) => {
                let problem = format!("the tool crashed during {}: {fault}", operation.as_str());
                gatehouse_platform::log_line("warn", &format!("{id}: {problem}"));
                let retry = self.ctx.config().retry()?;
                gatehouse_store::release_lease(&*self.ctx.db()?, &id, self.owner, &problem, retry)?;
                Ok(())
            }
        }
    }

    /// Discards what `prepare` left, once the call failed for good before acting.
    fn release_hold(&mut self, transition: &Transition) {
        if let Transition::Applied { after, .. } = transition
            && let Some(checkpoint) = after.checkpoint.clone()
        {
            self.walked.after.push(After::Discard((**after).clone(), checkpoint));
        }
    }

    /// The call reached its end: the relay hears about it.
    fn settled(&mut self, transition: Transition) -> Result<(), ApiError> {
        if let Transition::Applied { after, .. } = &transition {
            self.walked.after.push(After::Completion((**after).clone()));
        }
        self.follow(transition).map(|_| ())
    }

    /// Takes the outcome of one of the walk's own transitions: applied, the walk goes on from
    /// the new state; refused, someone else (a cancel, the sweeper) decided the call's fate.
    fn follow(&mut self, transition: Transition) -> Result<Step, ApiError> {
        match transition {
            Transition::Applied { after, .. } => {
                self.walked.call = *after;
                Ok(Step::Next)
            }
            Transition::Rejected { current } => {
                self.walked.call = *current;
                Ok(Step::Stop)
            }
            Transition::NotFound => {
                Err(ApiError::internal().with_detail(format!("{} vanished while it ran", self.call().tool_call_id)))
            }
        }
    }
}

/// What the caller hears when the tool's answer before the irreversible step broke the contract.
const BROKE_CONTRACT_BEFORE_EXECUTE: &str =
    "Sorry, that tool answered in a way I can't rely on, so I stopped before doing anything.";
/// ... and when its answer to the irreversible step did: it may have acted.
const BROKE_CONTRACT_AFTER_EXECUTE: &str = "Sorry, that tool answered in a way I can't read, so I can't tell whether \
     it went through. Please check before asking me to try again.";

/// A relay's answer, for the tests of the policies' decisions.
#[cfg(test)]
pub(crate) fn answered(status: u16, body: &str) -> Option<gatehouse_platform::OutboundResponse> {
    Some(gatehouse_platform::OutboundResponse { status, headers: Vec::new(), body: body.as_bytes().to_vec() })
}
