// What the contract server remembers about each call, so that the ordering rules and
// `execute`'s at-most-once hold across requests, instances and restarts
// (openapi/tool-contract.yaml, "Ordering"); and the nonces it has spent.
//
// The rules are here as a pure function of a call's record (`decide`, `settle`, `release`),
// the same rules as the Python SDK's, over the same record, so a tool's records read the same
// whichever SDK wrote them. Where records live is a `CallStore`: `PostgresStore`
// (gatehouse-tool/spin) in a component, `MemoryStore` for tests.

import type { Checkpoint } from "./contract.js";
import type { Call, MaybePromise, Parameters } from "./tool.js";

export type State =
  | "new"
  | "preparing"
  | "prepared"
  | "executing"
  | "executed"
  | "failed"
  | "discarding"
  | "discard_owed"
  | "discarded";

export type OnCall = "prepare" | "execute" | "discard";

/** A call's record, as stored (JSON). */
export interface CallRecord {
  state: State;
  attempt: number;
  parameters: Parameters;
  session_id?: string | null;
  checkpoint: Checkpoint | null;
  execute_claimed: boolean;
  /** Each finished operation's answer: [status, body]. */
  answers: Partial<Record<OnCall, [number, unknown]>>;
}

/** A request's fields the rules read (the contract's ToolRequest). */
export interface CallRequest {
  tool_call_id: string;
  session_id?: string;
  parameters?: Parameters;
  checkpoint?: Checkpoint | null;
  attempt?: unknown;
  side_effect_may_have_started?: boolean;
  trace_id?: string;
}

/** Run the operation on `call`, storing `record` (the claim) first; answer what the call
 * recorded; or refuse with 409 and a sentence. */
export type Decision =
  | { kind: "act"; call: Call; record: CallRecord }
  | { kind: "answer"; status: number; body: unknown }
  | { kind: "refuse"; message: string };

const DISCARDS: readonly State[] = ["discarding", "discard_owed", "discarded"];

/** Whether `op` may act on the call `record` describes (null: never seen), and the claim to
 * store if so. A request with a higher `attempt` than an operation left under way takes it
 * over: that operation crashed or was cut off. */
export function decide(op: OnCall, record: CallRecord | null, request: CallRequest, needsCheckpoint: boolean): Decision {
  const attempt = attemptOf(request);
  const current: CallRecord = record ?? {
    state: "new",
    attempt: 0,
    parameters: request.parameters ?? {},
    session_id: request.session_id ?? null,
    checkpoint: null,
    execute_claimed: false,
    answers: {},
  };
  const state = current.state;
  const takenOver = (state === "preparing" || state === "executing" || state === "discarding") && attempt > current.attempt;
  const answers = current.answers;
  const refuse = (message: string): Decision => ({ kind: "refuse", message });
  const answer = (recorded: [number, unknown]): Decision => ({ kind: "answer", status: recorded[0], body: recorded[1] });
  const claim = (next: State, mayHaveStarted = false, checkpoint?: Checkpoint | null): Decision => {
    const claimed: CallRecord = { ...current, state: next, attempt: Math.max(attempt, current.attempt) };
    if (next === "executing") claimed.execute_claimed = true;
    const call: Call = {
      toolCallId: String(request.tool_call_id),
      parameters: current.parameters,
      checkpoint: checkpoint ?? current.checkpoint,
      attempt,
      sideEffectMayHaveStarted: mayHaveStarted,
    };
    if (current.session_id) call.sessionId = current.session_id;
    if (request.trace_id) call.traceId = request.trace_id;
    return { kind: "act", call, record: claimed };
  };

  if (op === "prepare") {
    if (state === "new" || (state === "preparing" && takenOver)) return claim("preparing");
    if (state === "preparing") return refuse("This call's prepare is already under way.");
    if (DISCARDS.includes(state)) return refuse("This call's preparation was discarded; it will never run.");
    if (answers.prepare) return answer(answers.prepare);
    return refuse("This call was never prepared.");
  }
  if (op === "execute") {
    if (DISCARDS.includes(state)) return refuse("This call's preparation was discarded; it will never run.");
    if (state === "preparing") return refuse("This call is still being prepared.");
    if (state === "executing" && !takenOver) return refuse("This call's execute is already under way.");
    if (answers.execute) return answer(answers.execute);
    if (state === "prepared" || (state === "new" && !needsCheckpoint) || takenOver) {
      return claim("executing", Boolean(request.side_effect_may_have_started) || current.execute_claimed);
    }
    return refuse("This call was never prepared; execute comes after prepare.");
  }
  if (state === "executing" || state === "executed") return refuse("This call was executed; there is nothing to discard.");
  if (state === "discarded" && answers.discard) return answer(answers.discard);
  if (state === "preparing") return refuse("This call's prepare is under way; discard it when that has answered.");
  if (state === "discarding" && !takenOver) return refuse("This call's discard is already under way.");
  return claim("discarding", false, current.checkpoint ?? request.checkpoint ?? null);
}

/** The record once `op` answered `status` (200, or the tool's 422) with `body`. */
export function settle(op: OnCall, claimed: CallRecord, status: number, body: unknown): CallRecord {
  const answers = { ...claimed.answers, [op]: [status, body] as [number, unknown] };
  if (op === "prepare") {
    const checkpoint = (body as { checkpoint?: Checkpoint | null } | null)?.checkpoint ?? null;
    return { ...claimed, state: status === 200 ? "prepared" : "failed", checkpoint, answers };
  }
  if (op === "execute") return { ...claimed, state: status === 200 ? "executed" : "failed", answers };
  return { ...claimed, state: status === 200 ? "discarded" : "discard_owed", answers };
}

/** The record after `op` crashed: it may run again (an `execute` then with
 * `sideEffectMayHaveStarted`, which `execute_claimed` keeps). */
export function release(op: OnCall, claimed: CallRecord): CallRecord {
  if (op === "prepare") return { ...claimed, state: "new" };
  if (op === "execute") return { ...claimed, state: claimed.answers.prepare ? "prepared" : "new" };
  return { ...claimed, state: "discard_owed" };
}

function attemptOf(request: CallRequest): number {
  const attempt = request.attempt ?? 1;
  return typeof attempt === "number" && Number.isInteger(attempt) && attempt >= 1 ? attempt : 1;
}

/** Where records live. `version` 0 means absent; `save` stores `record` only if the call is
 * still at `version` (and then at `version + 1`), and says whether it did. */
export interface CallStore {
  load(callId: string): MaybePromise<[CallRecord | null, number]>;
  save(callId: string, record: CallRecord, version: number): MaybePromise<boolean>;
  /** True the first time `nonce` is spent before `expiresAt`; false for a replay. */
  spendNonce(nonce: string, expiresAt: number): MaybePromise<boolean>;
}

/** Records in this instance's memory: for tests. A component's instance lives for one request,
 * so a tool in a component keeps its calls in PostgreSQL (`PostgresStore`). */
export class MemoryStore implements CallStore {
  private readonly calls = new Map<string, [string, number]>();
  private readonly nonces = new Map<string, number>();

  load(callId: string): [CallRecord | null, number] {
    const found = this.calls.get(callId);
    return found ? [JSON.parse(found[0]) as CallRecord, found[1]] : [null, 0];
  }

  save(callId: string, record: CallRecord, version: number): boolean {
    if ((this.calls.get(callId)?.[1] ?? 0) !== version) return false;
    this.calls.set(callId, [JSON.stringify(record), version + 1]);
    return true;
  }

  spendNonce(nonce: string, expiresAt: number): boolean {
    const now = Date.now() / 1000;
    if ((this.nonces.get(nonce) ?? 0) > now) return false;
    this.nonces.set(nonce, expiresAt);
    return true;
  }
}
