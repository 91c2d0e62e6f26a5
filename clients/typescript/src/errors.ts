import type { ErrorBody, ErrorCode, FieldProblem, Status, ToolCallId } from "./types.js";

/**
 * An error answer from Gatehouse. `message` is the sentence the agent can speak, `code` the
 * stable code to branch on, `status` the HTTP status, `fields` the culprits of a refused input.
 */
export class GatehouseError extends Error {
  readonly code: string;
  readonly status: number;
  readonly fields: FieldProblem[];
  /** The call's status when the error is about a call's state (409, 410). */
  readonly callStatus: Status | undefined;
  readonly toolCallId: ToolCallId | undefined;
  /** Seconds from `Retry-After`, when the answer had one. */
  readonly retryAfter: number | undefined;
  readonly body: ErrorBody | undefined;

  constructor(init: {
    code: string;
    status: number;
    message: string;
    fields?: FieldProblem[];
    callStatus?: Status;
    toolCallId?: ToolCallId;
    retryAfter?: number;
    body?: ErrorBody;
  }) {
    super(init.message);
    this.name = new.target.name;
    this.code = init.code;
    this.status = init.status;
    this.fields = init.fields ?? [];
    this.callStatus = init.callStatus;
    this.toolCallId = init.toolCallId;
    this.retryAfter = init.retryAfter;
    this.body = init.body;
  }
}

export class UnauthorizedError extends GatehouseError {}
export class ForbiddenError extends GatehouseError {}
export class NotFoundError extends GatehouseError {}
export class MethodNotAllowedError extends GatehouseError {}
/** 409 `invalid_state`: the call is not in a state that allows this; `callStatus` says which it is in. */
export class InvalidStateError extends GatehouseError {}
/** 410 `expired`: the call timed out before anyone acted on it. */
export class ExpiredError extends GatehouseError {}
export class InvalidInputError extends GatehouseError {}
/** 422 `validation_failed`: the tool refused the parameters; `fields` says why. */
export class ValidationFailedError extends GatehouseError {}
export class PayloadTooLargeError extends GatehouseError {}
export class UnsupportedMediaTypeError extends GatehouseError {}
/** 503 `database_unavailable`: nothing was written; retried by the client after `Retry-After`. */
export class DatabaseUnavailableError extends GatehouseError {}
export class InternalError extends GatehouseError {}
export class UnknownFunctionError extends GatehouseError {}
export class IdempotencyKeyReusedError extends GatehouseError {}
export class CallbackNotAllowedError extends GatehouseError {}
/** 409 `side_effect_started`: too late to cancel; the irreversible step has begun. */
export class SideEffectStartedError extends GatehouseError {}
/** 502 `tool_unavailable`: the tool crashed or did not answer in time. */
export class ToolUnavailableError extends GatehouseError {}
/**
 * 503 `deadline_exceeded`: the host stopped a request that outlived its deadline. A request that
 * changes a call may or may not have been carried out: read the call's status before trying again.
 */
export class DeadlineExceededError extends GatehouseError {}
/**
 * 409 `callback_url_conflict`: a confirm named a callback URL other than the one the call was
 * created with (a call's reports go where its creator said). Nothing changed: `callStatus` is
 * PENDING. Never retried, since a repeat gets the same answer: confirm without `callback_url`,
 * or with the call's own.
 */
export class CallbackUrlConflictError extends GatehouseError {}
/**
 * 429 `too_many_open_calls`: the session already holds `max_pending_calls_per_session` (default
 * 50) waiting PENDING calls, so no call was recorded. Never retried: waiting alone does not help
 * (its `retryAfter` of 1, as on every 429, only paces a retry). Confirm or cancel some of the
 * session's calls first.
 */
export class TooManyOpenCallsError extends GatehouseError {}
/**
 * 429 `rate_limited`: the tenant created as many calls in the last second as it may, so no call
 * was recorded. `retryAfter` (1) says when to try again; the client does not retry it itself, so
 * that a relay decides whether the moment has passed.
 */
export class RateLimitedError extends GatehouseError {}
/**
 * 408 `request_timeout`: the request's body did not arrive within the runner's
 * `--body-read-timeout` (30 s by default). The runner answers it before any component runs, so
 * nothing was done. The client sends the request again itself only where that is safe whatever
 * happened (reads, the sweep, a create with its Idempotency-Key); for the others it is raised.
 */
export class RequestTimeoutError extends GatehouseError {}

/**
 * 401 `signature_missing`: a signed request between Gatehouse's hosts (the tool contract, the executor
 * hand-off) carried no signature, or not one of the recipe's shape. A relay's own requests never get it (docs/tools.md, "Signatures").
 */
export class SignatureMissingError extends GatehouseError {}
/**
 * 401 `signature_stale`: a signed request between Gatehouse's hosts (the tool contract, the executor
 * hand-off) carried a signature whose timestamp is outside the receiver's window (a stale request, or the two clocks disagree). A relay's own requests never get it (docs/tools.md, "Signatures").
 */
export class SignatureStaleError extends GatehouseError {}
/**
 * 401 `signature_mismatch`: a signed request between Gatehouse's hosts (the tool contract, the executor
 * hand-off) carried a signature that does not match it (another secret, or a changed request). A relay's own requests never get it (docs/tools.md, "Signatures").
 */
export class SignatureMismatchError extends GatehouseError {}
/**
 * 401 `signature_replayed`: a signed request between Gatehouse's hosts (the tool contract, the executor
 * hand-off) carried a signature whose nonce was already spent (a replay). A relay's own requests never get it (docs/tools.md, "Signatures").
 */
export class SignatureReplayedError extends GatehouseError {}

type ErrorClass = new (init: ConstructorParameters<typeof GatehouseError>[0]) => GatehouseError;

/** Every code of the OpenAPI file's `ErrorCode` enum and the class it is raised as. */
export const ERROR_CLASSES: Record<ErrorCode, ErrorClass> = {
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  invalid_state: InvalidStateError,
  expired: ExpiredError,
  invalid_input: InvalidInputError,
  validation_failed: ValidationFailedError,
  payload_too_large: PayloadTooLargeError,
  unsupported_media_type: UnsupportedMediaTypeError,
  database_unavailable: DatabaseUnavailableError,
  internal: InternalError,
  unknown_function: UnknownFunctionError,
  idempotency_key_reused: IdempotencyKeyReusedError,
  callback_not_allowed: CallbackNotAllowedError,
  side_effect_started: SideEffectStartedError,
  tool_unavailable: ToolUnavailableError,
  deadline_exceeded: DeadlineExceededError,
  callback_url_conflict: CallbackUrlConflictError,
  too_many_open_calls: TooManyOpenCallsError,
  request_timeout: RequestTimeoutError,
  rate_limited: RateLimitedError,
  signature_missing: SignatureMissingError,
  signature_stale: SignatureStaleError,
  signature_mismatch: SignatureMismatchError,
  signature_replayed: SignatureReplayedError,
};

/**
 * The code an answer without a JSON error body (a proxy's, the runner's plain-text 413) gets. A
 * bare 408 is a proxy's "your request did not arrive in time", as `request_timeout` is
 * Gatehouse's; a bare 429 is not mapped: from a proxy it is rate limiting, not a full session.
 */
const CODE_BY_STATUS: Record<number, ErrorCode> = {
  400: "invalid_input",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  408: "request_timeout",
  409: "invalid_state",
  410: "expired",
  413: "payload_too_large",
  415: "unsupported_media_type",
  422: "validation_failed",
  500: "internal",
  502: "tool_unavailable",
  503: "database_unavailable",
};

/** The exception for an error answer. */
export function errorFromAnswer(status: number, text: string, retryAfter?: number): GatehouseError {
  let body: ErrorBody | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object" && typeof (parsed as ErrorBody).code === "string") {
      body = parsed as ErrorBody;
    }
  } catch {
    // Not JSON: fall back on the status.
  }
  const code = body?.code ?? CODE_BY_STATUS[status] ?? "http_error";
  const Class: ErrorClass = (ERROR_CLASSES as Record<string, ErrorClass>)[code] ?? GatehouseError;
  return new Class({
    code,
    status,
    message: body?.error ?? (text.trim() || `Gatehouse answered HTTP ${status}.`),
    fields: body?.fields,
    callStatus: body?.status,
    toolCallId: body?.tool_call_id,
    retryAfter,
    body,
  });
}

/**
 * No answer came. `maybeSent` is false when the connection failed before the request left
 * (safe to send again), true when it may have reached Gatehouse (look at the call's status
 * before acting again; the client retries such a request only when it is idempotent).
 */
export class GatehouseConnectionError extends Error {
  readonly maybeSent: boolean;
  constructor(message: string, maybeSent: boolean, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "GatehouseConnectionError";
    this.maybeSent = maybeSent;
  }
}
