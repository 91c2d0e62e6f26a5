// The request and answer shapes of openapi/gatehouse.yaml (components/schemas), by hand.
// test/openapi.test.mjs fails when the operations or the error codes drift from the file.

export type ToolCallId = string;
export type Status = "PENDING" | "EXECUTING" | "PREPARED" | "COMPLETED" | "FAILED" | "CANCELLED" | "EXPIRED";
export type OpenStatus = "PENDING" | "EXECUTING" | "PREPARED";
export type SettledStatus = "COMPLETED" | "FAILED" | "CANCELLED" | "EXPIRED";
export type Parameters = Record<string, unknown>;

export const ERROR_CODES = [
  "unauthorized",
  "forbidden",
  "not_found",
  "method_not_allowed",
  "invalid_state",
  "expired",
  "invalid_input",
  "validation_failed",
  "payload_too_large",
  "unsupported_media_type",
  "database_unavailable",
  "internal",
  "unknown_function",
  "idempotency_key_reused",
  "callback_not_allowed",
  "side_effect_started",
  "tool_unavailable",
  "deadline_exceeded",
  "callback_url_conflict",
  "too_many_open_calls",
  "request_timeout",
  "rate_limited",
  "signature_missing",
  "signature_stale",
  "signature_mismatch",
  "signature_replayed",
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

export interface FieldProblem {
  field: string;
  problem: string;
}

/** The API's one error shape. `error` is a sentence the agent can say. */
export interface ErrorBody {
  error: string;
  code: ErrorCode | string;
  status?: Status;
  tool_call_id?: ToolCallId;
  fields?: FieldProblem[];
  /** Why the tool could not be used, on a `tool_unavailable`. */
  cause?: ToolFault;
  /** On a 403 `forbidden` for a key, the scope the key lacks. */
  required_scope?: Scope;
}
/** What an API key may do (docs/keys.md). */
export type Scope = "calls:write" | "calls:read" | "tools:read" | "admin";

export interface Health {
  status: "ok";
  database: "ok";
}
export interface HealthDegraded {
  status: "degraded";
  database: "unavailable";
}

export interface CreateRequest {
  session_id: string;
  function_name?: string | null;
  /** The seed's spelling of `function_name`. */
  function?: string | null;
  parameters: Parameters;
  connection_id?: string | null;
  intent_id?: string | null;
  callback_url?: string | null;
}
export interface CreateResponse {
  tool_call_id: ToolCallId;
  status: "PENDING";
  function_name: string;
  parameters: Parameters;
  /** The sentence the agent speaks to confirm. */
  message: string;
  actions_available: ["confirm", "modify", "cancel"];
  expires_at: string;
}

export interface ModifyRequest {
  /** A JSON merge patch (RFC 7396): `null` removes a field. */
  parameters: Parameters;
  reason?: string | null;
}
export interface FieldChange {
  field: string;
  old: unknown;
  new: unknown;
}
export interface ModifyResponse {
  tool_call_id: ToolCallId;
  status: "PENDING";
  updated_parameters: Parameters;
  message: string;
  modification_applied: FieldChange | null;
  modifications_applied?: FieldChange[];
}

export interface ConfirmRequest {
  callback_url?: string | null;
}
export interface ResumeRequest {
  action: "proceed" | "cancel";
  reason?: string | null;
}
export interface CancelRequest {
  reason?: string | null;
}

export interface Accepted {
  tool_call_id: ToolCallId;
  status: "EXECUTING";
  message: string;
}
export interface CancelResponse {
  tool_call_id: ToolCallId;
  status: "CANCELLED";
  message: string;
}

/** Who a key is (`GET /voice-tools/key`; docs/keys.md). */
export interface KeyGrant {
  tenant: string;
  /** The key's prefix (`ghk_` and eight hex digits); `null` for the `api_token` variable. */
  key: string | null;
  scopes: Array<"calls:write" | "calls:read" | "tools:read" | "admin">;
}

export interface StatusChange {
  status: Status | "MODIFIED";
  timestamp: string;
  reason?: string;
  actor?: "relay" | "confirm" | "resume" | "executor" | "sweeper";
  /** The key that made the change: its prefix, or `api_token`; absent for Gatehouse's own. */
  key?: string;
}
export interface ParameterChange {
  field: string;
  old_value?: unknown;
  new_value?: unknown;
  timestamp: string;
  reason?: string;
}
export interface Checkpoint {
  message: string;
  state: unknown;
}

/**
 * What a call is waiting on or doing now: `awaiting_confirmation` (PENDING), `awaiting_resume`
 * (PREPARED), and while EXECUTING `prepare` (a tool with a checkpoint preparing its work) or
 * `execute` (the irreversible step is next or under way; a tool without a checkpoint goes
 * straight to it); `null` once it is final.
 */
export type CurrentOperation = "awaiting_confirmation" | "awaiting_resume" | "prepare" | "execute";

/**
 * A call as `GET /voice-tools/calls` lists it (the SQL function `tool_call_summary_json`): what it
 * is, where it stands and since when, what it is doing, and whether it is overdue, without its
 * parameters, histories, checkpoint or result (`getToolCall` answers those).
 */
export interface CallSummary {
  tool_call_id: ToolCallId;
  session_id: string;
  connection_id: string | null;
  intent_id: string | null;
  /** The tool's name (an alias is resolved). */
  function_name: string;
  /** The component that implements the function. */
  tool: string;
  parameters: Parameters;
  /** The effective status: a waiting call past its deadline reads as EXPIRED. */
  status: Status;
  /** When the call entered its status: the time of its last `status_history` entry. */
  status_since: string;
  summary: string | null;
  voice_response: string | null;
  /** The last failure, also while a retry is due. */
  error_message: string | null;
  attempts: number;
  /** How many corrections (modifies that changed something) it took. */
  corrections: number;
  current_operation: CurrentOperation | null;
  /** For an EXECUTING call whose last attempt failed: when it may be tried again. */
  next_retry_at: string | null;
  /**
   * Past the time it should have moved by (an execution whose lease ran out, a waiting call past
   * its deadline) and not yet taken up by the sweeper: the sweeper is behind or not running.
   */
  overdue: boolean;
  expires_at: string | null;
  created_at: string;
  completed_at: string | null;
}

/**
 * A call in full (`getToolCall`, confirm and resume under `Prefer: wait`; the SQL function
 * `tool_call_json`): every field of its `CallSummary`, and its histories,
 * checkpoint and outcome. Written out rather than `extends CallSummary`, so that
 * test/types.test.mjs sees each field.
 */
export interface ToolCall {
  tool_call_id: ToolCallId;
  session_id: string;
  /** The tenant the call belongs to (docs/keys.md). */
  tenant: string;
  connection_id: string | null;
  intent_id: string | null;
  function_name: string;
  tool: string;
  parameters: Parameters;
  parameters_history: ParameterChange[];
  status: Status;
  status_history: StatusChange[];
  /** When the call entered its status (see `CallSummary`). */
  status_since: string;
  summary: string | null;
  checkpoint: Checkpoint | null;
  result: unknown;
  error_message: string | null;
  voice_response: string | null;
  callback_url: string | null;
  expires_at: string | null;
  attempts: number;
  /** How many corrections it took (see `CallSummary`). */
  corrections: number;
  /** What it is waiting on or doing now (see `CallSummary`). */
  current_operation: CurrentOperation | null;
  /** When a failed attempt is tried again (see `CallSummary`). */
  next_retry_at: string | null;
  /** Past the time it should have moved by (see `CallSummary`). */
  overdue: boolean;
  side_effect_started_at: string | null;
  trace_id: string | null;
  created_at: string;
  confirmed_at: string | null;
  prepared_at: string | null;
  executed_at: string | null;
  completed_at: string | null;
  execution_time_ms: number | null;
}

/** A settled call in the context view (`getSessionCalls`'s `recent`). */
export interface RecentCall {
  tool_call_id: ToolCallId;
  function_name: string;
  parameters: Parameters;
  result: unknown;
  status: SettledStatus;
  voice_response: string | null;
  created_at: string;
}
export interface PendingCall {
  tool_call_id: ToolCallId;
  function_name: string;
  parameters: Parameters;
  result: unknown;
  status: OpenStatus;
  voice_response: string | null;
  created_at: string;
  expires_at: string | null;
}
export interface ContextResponse {
  session_id: string;
  pending: PendingCall[];
  pending_total: number;
  recent: RecentCall[];
  recent_total: number;
}
export interface SessionContext {
  context: unknown;
}

export interface SweepReport {
  expired: number;
  failed: number;
  redriven: number;
  reported: number;
  /** Discards of prepared work (a cancelled or expired checkpoint's draft) tried again. */
  discards_retried: number;
  session_context_purged: number;
}

export interface AvailableTool {
  name: string;
  aliases: string[];
  description: string;
  parameters_schema: Record<string, unknown>;
  needs_checkpoint: boolean;
  version: string;
  /** What running the tool does, if the tool says (MCP lists these as its annotations). */
  effects?: ToolEffects;
  component: string;
  available: true;
}
export interface ToolEffects {
  read_only: boolean;
  destructive: boolean;
  idempotent: boolean;
  open_world: boolean;
}
export interface UnavailableTool {
  name: string;
  aliases: string[];
  component: string;
  available: false;
  /** Why its `describe` got no answer. */
  cause: ToolFault;
}
/** Why a tool could not be used; `kind` names the remedy (docs/deploying.md). */
export interface ToolFault {
  kind:
    | "not_allowed"
    | "no_connection"
    | "timed_out"
    | "signature_refused"
    | "error_status"
    | "bad_answer"
    | "misconfigured";
  explanation: string;
}
export interface ToolList {
  tools: Array<AvailableTool | UnavailableTool>;
}

export type ToolOperation = "describe" | "validate" | "summarize" | "prepare" | "execute" | "discard";
export type ExecutionOutcome = "ok" | "rejected" | "failed" | "crashed" | "cancelled";
export interface Execution {
  execution_id: number;
  tool: string;
  component: string;
  component_version: string;
  operation: ToolOperation;
  tool_call_id: ToolCallId | null;
  started_at: string;
  duration_ms: number;
  outcome: ExecutionOutcome;
  error: string | null;
  trace_id: string | null;
}
export interface ExecutionPage {
  tool: string;
  executions: Execution[];
  next_cursor: string | null;
}
export interface CallPage {
  /** Summaries, not whole calls: `getToolCall` reads one in full. */
  calls: CallSummary[];
  next_cursor: string | null;
}
export interface CallQuery {
  session_id?: string;
  function_name?: string;
  status?: Status;
  limit?: number;
  cursor?: string;
}
export interface CallbackAttempt {
  attempt_id: number;
  kind: CallbackKind;
  url: string;
  attempt: number;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  at: string;
}
export interface CallbackAttempts {
  tool_call_id: ToolCallId;
  callbacks: CallbackAttempt[];
}
/** `POST /voice-tools/calls/{id}/outcome-told`: `first` says whether the mark is this request's. */
export interface OutcomeTold {
  tool_call_id: ToolCallId;
  status: "COMPLETED" | "FAILED" | "CANCELLED" | "EXPIRED";
  first: boolean;
}
export interface ExecutionQuery {
  limit?: number;
  outcome?: ExecutionOutcome;
  since?: string;
  cursor?: string;
}
export interface OperationStats {
  executions: number;
  ok: number;
  p50_ms: number;
  p95_ms: number;
}
export interface LastError {
  error: string | null;
  at: string;
  operation: ToolOperation;
  outcome: "failed" | "crashed";
  tool_call_id: ToolCallId | null;
}
export interface ToolStats {
  tool: string;
  window: string;
  executions: number;
  outcomes: Record<ExecutionOutcome, number>;
  success_rate: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
  by_operation: Partial<Record<ToolOperation, OperationStats>>;
  /** The window in 24 equal buckets, oldest first. */
  timeline: Array<{ start: string; executions: number; ok: number; errors: number }>;
  last_error: LastError | null;
}

export type Recipients = string | string[];
export interface ExecuteGmailRequest {
  session_id: string;
  intent_id?: string;
  connection_id?: string;
  callback_url: string;
  to: Recipients;
  cc?: Recipients;
  bcc?: Recipients;
  subject: string;
  body: string;
  reference_context?: string;
}
export type ExecuteGmailAnswer =
  | { success: true; tool_call_id: ToolCallId; status: "COMPLETED"; message_id: string; thread_id: string; message: string }
  | {
      success: false;
      tool_call_id: ToolCallId;
      status: "CANCELLED" | "FAILED" | "EXPIRED" | "EXECUTING";
      message_id: null;
      thread_id: null;
      message: string | null;
    };

export interface StructuredQuery {
  semantic_query?: string;
  filters?: Record<string, string | number | boolean | string[]>;
  top_k?: number;
  aggregate?: string[];
}
export interface QueryVectorDbRequest {
  session_id: string;
  intent_id?: string;
  connection_id?: string;
  callback_url: string;
  user_query: string;
  structured_query?: StructuredQuery;
}
export interface SearchDocument {
  id: string;
  content: string;
  metadata: Record<string, unknown>;
  doc_date: string | null;
  score: number;
}
export interface SearchMetrics {
  returned: number;
  matched: number | null;
  best_score: number | null;
  totals: Record<string, number>;
  counted: Record<string, number>;
  embedding_ms: number;
  /** The planner's estimate of the filters' matches (a filtered search only) and the search statement. */
  search_ms: number;
  /** True when every match was sorted by distance (the exact nearest); false when an index found them. */
  sorted_exactly: boolean;
}
export type QueryVectorDbAnswer =
  | {
      success: true;
      tool_call_id: ToolCallId;
      status: "COMPLETED";
      message: string;
      summary: string;
      metrics: SearchMetrics;
      documents: SearchDocument[];
      context_key: "last_query_results";
    }
  | { success: false; tool_call_id: ToolCallId; status: "CANCELLED" | "FAILED" | "EXECUTING"; message: string | null };

export interface JsonRpcRequest {
  jsonrpc: "2.0";
  id?: string | number;
  method: string;
  params?: Record<string, unknown>;
}
export interface JsonRpcResult {
  jsonrpc: "2.0";
  id: string | number;
  result: Record<string, unknown>;
}
export interface JsonRpcError {
  jsonrpc: "2.0";
  id: string | number | null;
  error: { code: number; message: string };
}
export interface McpToolResult {
  content: Array<{ type: "text"; text: string }>;
  /** Exactly the JSON body the equivalent REST route answers (an `ErrorBody` when `isError`). */
  structuredContent: Record<string, unknown>;
  isError: boolean;
  /** Under 2026-07-28. */
  resultType?: "complete";
  /** Under 2026-07-28: `io.modelcontextprotocol/serverInfo`. */
  _meta?: Record<string, unknown>;
}
export type McpProtocolVersion = "2026-07-28" | "2025-11-25" | "2025-06-18" | "2025-03-26" | "2024-11-05";

// Callbacks (components/callbacks), as a relay receives them.
export type CallbackKind = "progress" | "checkpoint" | "completion";
export interface ProgressCallback {
  tool_call_id: ToolCallId;
  /** The call's tenant: the callback is signed with its own secret (docs/keys.md). */
  tenant: string;
  intent_id: string | null;
  status: "EXECUTING" | "PREPARED";
  progress: string;
  gate: string;
  cancellable: boolean;
  requires_confirmation?: boolean;
  trace_id: string | null;
}
export interface CheckpointCallback {
  tool_call_id: ToolCallId;
  /** The call's tenant: the callback is signed with its own secret (docs/keys.md). */
  tenant: string;
  status: "PREPARED";
  checkpoint: "ready_to_execute";
  message: string;
  resume_webhook: string;
  trace_id: string | null;
}
export interface CompletionCallback {
  tool_call_id: ToolCallId;
  /** The call's tenant: the callback is signed with its own secret (docs/keys.md). */
  tenant: string;
  session_id: string;
  status: SettledStatus;
  result: unknown;
  voice_response: string | null;
  execution_time_ms: number | null;
  context_available?: true;
  context_key?: string;
  trace_id: string | null;
}
export type Callback =
  | { kind: "progress"; body: ProgressCallback }
  | { kind: "checkpoint"; body: CheckpointCallback }
  | { kind: "completion"; body: CompletionCallback };
/** What a relay may answer to a callback. */
export interface RelayAnswer {
  continue?: boolean;
  cancel?: boolean;
  reason?: string;
}
