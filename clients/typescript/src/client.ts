import { randomUUID } from "node:crypto";
import { GatehouseConnectionError, errorFromAnswer } from "./errors.js";
import type {
  Accepted,
  CancelRequest,
  CancelResponse,
  ConfirmRequest,
  ContextResponse,
  CreateRequest,
  CreateResponse,
  ExecuteGmailAnswer,
  ExecuteGmailRequest,
  CallPage,
  CallQuery,
  CallbackAttempts,
  OutcomeTold,
  KeyGrant,
  ExecutionPage,
  ExecutionQuery,
  Health,
  HealthDegraded,
  JsonRpcError,
  JsonRpcRequest,
  JsonRpcResult,
  McpProtocolVersion,
  ModifyRequest,
  ModifyResponse,
  QueryVectorDbAnswer,
  QueryVectorDbRequest,
  ResumeRequest,
  SessionContext,
  SweepReport,
  ToolCall,
  ToolList,
  ToolStats,
} from "./types.js";

export interface GatehouseOptions {
  /** e.g. `http://127.0.0.1:3000` */
  baseUrl: string;
  /** The `api_token`; sent as `Authorization: Bearer <token>`. */
  token: string;
  /** How many times a request is sent at most when a retry is safe (default 3). */
  maxAttempts?: number;
  /** The longest `Retry-After` the client waits for, in seconds (default 30); a longer one is raised. */
  maxRetryAfterSeconds?: number;
  /** Wait before retrying after a connection error, in milliseconds (default 200, doubling). */
  retryBackoffMs?: number;
  /** Gives up on an answer after this many milliseconds, on top of any `Prefer: wait` (default 30000). */
  timeoutMs?: number;
  /** A `traceparent` for every request that names none, e.g. the relay's current span. */
  traceparent?: () => string | undefined;
  /** Another fetch (a test double, an instrumented one). */
  fetch?: typeof fetch;
}

/** Options every method takes. */
export interface RequestOptions {
  /** W3C trace context, passed through as `traceparent`. */
  traceparent?: string;
  signal?: AbortSignal;
  /** Overrides the client's `timeoutMs` for this request (the direct flows wait for the relay). */
  timeoutMs?: number;
}
/** Options of the routes that take `Prefer: wait=N`. */
export interface WaitOptions extends RequestOptions {
  /** Seconds (at most 30) to wait for the call to leave EXECUTING, as `Prefer: wait=N`. */
  wait?: number;
}
export interface CreateOptions extends RequestOptions {
  /** Makes a retried create return the first answer; one is generated when not given. */
  idempotencyKey?: string;
}

/**
 * When a request may be sent again:
 * - `idempotent` (reads, the sweep, and a create, which always carries an Idempotency-Key):
 *   after any connection failure, after a 503 `database_unavailable`, once its `Retry-After` has
 *   passed, and
 *   after a 408 `request_timeout` (the body did not arrive in time: the runner answered before
 *   any component ran), after the connection backoff, with the same body;
 * - `conditional` (modify, cancel): after a connection that failed before the request left, and
 *   after a 503 `database_unavailable`: these answer it only when their first connection failed,
 *   before anything was written. A lost answer is not retried (a second modify or cancel would
 *   answer differently), it raises GatehouseConnectionError with `maybeSent: true`;
 * - `once` (confirm, resume, the direct flows, MCP): only after a connection that failed before
 *   the request left. A lost answer raises GatehouseConnectionError (`maybeSent: true`) and a 503
 *   DatabaseUnavailableError (`retryAfter`): under `Prefer: wait` Gatehouse reads the call again
 *   on a new connection after its transition has committed, so its 503 does not prove nothing
 *   happened. The relay reads the call's status (`getToolCall`, which is retried) first.
 * A 408 `request_timeout` on a `conditional` or `once` request is raised (RequestTimeoutError),
 * not retried: only idempotent requests are sent again on it, since a 408 from a proxy in front
 * of Gatehouse proves less than the runner's. The runner's means nothing was done, so the relay
 * may send the request again itself. (After a proxy's, a repeated modify, cancel, confirm or
 * resume that had taken effect is refused with 409 naming the call's state; a direct flow would
 * run again, so read the session's calls first.)
 * Never retried, whatever the policy: a 503 `deadline_exceeded` (the request may have been
 * carried out; every 503 carries `Retry-After`, so the code decides, not the header), 429
 * `too_many_open_calls` (waiting alone does not help, the session's calls must be confirmed or
 * cancelled first), 409
 * `callback_url_conflict` (a repeat gets the same answer), and every other 4xx and 5xx.
 */
type RetryPolicy = "idempotent" | "conditional" | "once";

interface Call {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  retry: RetryPolicy;
  wait?: number;
  options?: RequestOptions;
  /** Statuses answered as results rather than errors (besides 2xx). */
  accept?: number[];
}

export interface Answer<T> {
  status: number;
  headers: Headers;
  body: T;
}

/** Connection errors that mean the request never left this machine. */
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "UND_ERR_CONNECT_TIMEOUT"]);

function causeCode(error: unknown): string | undefined {
  let e: unknown = error;
  for (let depth = 0; depth < 5 && e && typeof e === "object"; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every public route of Gatehouse, one method each (named after its OpenAPI operationId). */
export class Gatehouse {
  readonly baseUrl: string;
  private readonly token: string;
  private readonly maxAttempts: number;
  private readonly maxRetryAfterSeconds: number;
  private readonly retryBackoffMs: number;
  private readonly timeoutMs: number;
  private readonly defaultTraceparent: (() => string | undefined) | undefined;
  private readonly fetchImpl: typeof fetch;

  constructor(options: GatehouseOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.maxAttempts = Math.max(1, options.maxAttempts ?? 3);
    this.maxRetryAfterSeconds = options.maxRetryAfterSeconds ?? 30;
    this.retryBackoffMs = options.retryBackoffMs ?? 200;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.defaultTraceparent = options.traceparent;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
  }

  /** `GET /health` (no token). A 503 is an answer here, not an error. */
  async getHealth(options?: RequestOptions): Promise<Health | HealthDegraded> {
    return (await this.send<Health | HealthDegraded>({ method: "GET", path: "/health", retry: "idempotent", options, accept: [503] })).body;
  }

  /**
   * `POST /voice-tools/pending`: a PENDING call; speak its `message`. A session full of waiting
   * calls is refused with TooManyOpenCallsError (429, not retried): confirm or cancel some first.
   */
  async createToolCall(request: CreateRequest, options?: CreateOptions): Promise<CreateResponse> {
    const idempotencyKey = options?.idempotencyKey ?? `gh-${randomUUID()}`;
    const answer = await this.send<CreateResponse>({
      method: "POST",
      path: "/voice-tools/pending",
      body: request,
      headers: { "Idempotency-Key": idempotencyKey },
      retry: "idempotent",
      options,
    });
    return answer.body;
  }

  /** `PATCH /voice-tools/modify/{id}`: a JSON merge patch on a PENDING call's parameters. */
  async modifyToolCall(id: string, request: ModifyRequest, options?: RequestOptions): Promise<ModifyResponse> {
    return (await this.send<ModifyResponse>({ method: "PATCH", path: `/voice-tools/modify/${enc(id)}`, body: request, retry: "conditional", options })).body;
  }

  /** `DELETE /voice-tools/cancel/{id}`. */
  async cancelToolCall(id: string, request: CancelRequest = {}, options?: RequestOptions): Promise<CancelResponse> {
    return (await this.send<CancelResponse>({ method: "DELETE", path: `/voice-tools/cancel/${enc(id)}`, body: request, retry: "conditional", options })).body;
  }

  /**
   * `POST /voice-tools/confirm/{id}`: 202 `Accepted` at once, or with `wait` the call in full once
   * it leaves EXECUTING (`isToolCall` tells which). Sent again only if it never left; a lost
   * answer or a 503 is raised for the relay to read the call's status first. A `callback_url`
   * other than the one the call was created with is refused with CallbackUrlConflictError (409).
   */
  async confirmToolCall(id: string, request: ConfirmRequest = {}, options?: WaitOptions): Promise<Accepted | ToolCall> {
    return (
      await this.send<Accepted | ToolCall>({ method: "POST", path: `/voice-tools/confirm/${enc(id)}`, body: request, retry: "once", wait: options?.wait, options })
    ).body;
  }

  /** `GET /voice-tools/status/{id}`; with `wait`, a long-poll until the call leaves EXECUTING. */
  async getToolCall(id: string, options?: WaitOptions): Promise<ToolCall> {
    return (await this.send<ToolCall>({ method: "GET", path: `/voice-tools/status/${enc(id)}`, retry: "idempotent", wait: options?.wait, options })).body;
  }

  /** `GET /voice-tools/context/{session}`: the session's open and recent calls. */
  async getSessionCalls(sessionId: string, options?: RequestOptions): Promise<ContextResponse> {
    return (await this.send<ContextResponse>({ method: "GET", path: `/voice-tools/context/${enc(sessionId)}`, retry: "idempotent", options })).body;
  }

  /** `GET /get-session-context`: a value a tool stored for the session (404 when absent or expired). */
  async getSessionContext(sessionId: string, contextKey: string, options?: RequestOptions): Promise<SessionContext> {
    return (
      await this.send<SessionContext>({
        method: "GET",
        path: "/get-session-context",
        query: { session_id: sessionId, context_key: contextKey },
        retry: "idempotent",
        options,
      })
    ).body;
  }

  /**
   * `POST /resume-execution/{id}`: `proceed` (202 `Accepted`, or with `wait` the settled call) or
   * `cancel` (`CancelResponse`). Sent again only if it never left, like confirm.
   */
  async resumeExecution(id: string, request: ResumeRequest, options?: WaitOptions): Promise<Accepted | ToolCall | CancelResponse> {
    return (
      await this.send<Accepted | ToolCall | CancelResponse>({
        method: "POST",
        path: `/resume-execution/${enc(id)}`,
        body: request,
        retry: "once",
        wait: options?.wait,
        options,
      })
    ).body;
  }

  /** `POST /voice-tools/sweep`. */
  async sweep(options?: RequestOptions): Promise<SweepReport> {
    return (await this.send<SweepReport>({ method: "POST", path: "/voice-tools/sweep", body: {}, retry: "idempotent", options })).body;
  }

  /** `GET /voice-tools/tools`. */
  async listTools(options?: RequestOptions): Promise<ToolList> {
    return (await this.send<ToolList>({ method: "GET", path: "/voice-tools/tools", retry: "idempotent", options })).body;
  }

  /** `GET /voice-tools/tools/{name}/executions`: one page, newest first. */
  async listToolExecutions(name: string, query: ExecutionQuery = {}, options?: RequestOptions): Promise<ExecutionPage> {
    return (
      await this.send<ExecutionPage>({ method: "GET", path: `/voice-tools/tools/${enc(name)}/executions`, query: { ...query }, retry: "idempotent", options })
    ).body;
  }

  /**
   * `GET /voice-tools/calls`: one page of every session's calls, newest first, filtered, each as a
   * `CallSummary` (no parameters, histories or result: `getToolCall` reads a call in full).
   */
  async listToolCalls(query: CallQuery = {}, options?: RequestOptions): Promise<CallPage> {
    return (await this.send<CallPage>({ method: "GET", path: "/voice-tools/calls", query: { ...query }, retry: "idempotent", options })).body;
  }

  /**
   * `POST /voice-tools/calls/{id}/outcome-told`: marks, once per call, that the caller was told the
   * settled call's outcome; speak it only when the answer's `first` is true. A key is generated
   * when none is given, so a mark whose answer was lost is sent again and still learns that it is
   * this request's.
   */
  async markOutcomeTold(id: string, options?: CreateOptions): Promise<OutcomeTold> {
    const idempotencyKey = options?.idempotencyKey ?? `gh-${randomUUID()}`;
    return (
      await this.send<OutcomeTold>({
        method: "POST",
        path: `/voice-tools/calls/${enc(id)}/outcome-told`,
        headers: { "Idempotency-Key": idempotencyKey },
        retry: "idempotent",
        options,
      })
    ).body;
  }

  /** `GET /voice-tools/calls/{id}/callbacks`: every attempt to deliver the call's callbacks. */
  async listCallbackAttempts(id: string, options?: RequestOptions): Promise<CallbackAttempts> {
    return (
      await this.send<CallbackAttempts>({ method: "GET", path: `/voice-tools/calls/${enc(id)}/callbacks`, retry: "idempotent", options })
    ).body;
  }

  /** `GET /voice-tools/key`: who this client's key is (its tenant, prefix and scopes). */
  async getKey(options?: RequestOptions): Promise<KeyGrant> {
    return (await this.send<KeyGrant>({ method: "GET", path: "/voice-tools/key", retry: "idempotent", options })).body;
  }

  /** `GET /voice-tools/tools/{name}/stats`. */
  async toolStats(name: string, query: { window?: string } = {}, options?: RequestOptions): Promise<ToolStats> {
    return (await this.send<ToolStats>({ method: "GET", path: `/voice-tools/tools/${enc(name)}/stats`, query: { ...query }, retry: "idempotent", options })).body;
  }

  /** `POST /query-vector-db`: the gated direct flow; answers once it has stopped. */
  async queryVectorDb(request: QueryVectorDbRequest, options?: RequestOptions): Promise<QueryVectorDbAnswer> {
    return (await this.send<QueryVectorDbAnswer>({ method: "POST", path: "/query-vector-db", body: request, retry: "once", options })).body;
  }

  /** `POST /execute-gmail`: the gated direct flow; answers once it has stopped. */
  async executeGmail(request: ExecuteGmailRequest, options?: RequestOptions): Promise<ExecuteGmailAnswer> {
    return (await this.send<ExecuteGmailAnswer>({ method: "POST", path: "/execute-gmail", body: request, retry: "once", options })).body;
  }

  /**
   * `POST /mcp`: one JSON-RPC message. Answers the JSON-RPC result or error, or `null` for a
   * notification (202). HTTP-level refusals (401, 403, ...) are raised as errors.
   */
  async mcp(
    message: JsonRpcRequest,
    options?: RequestOptions & { protocolVersion?: McpProtocolVersion },
  ): Promise<JsonRpcResult | JsonRpcError | null> {
    const headers: Record<string, string> = { Accept: "application/json, text/event-stream" };
    if (options?.protocolVersion) headers["MCP-Protocol-Version"] = options.protocolVersion;
    const answer = await this.send<JsonRpcResult | JsonRpcError | null>({
      method: "POST",
      path: "/mcp",
      body: message,
      headers,
      retry: "once",
      options,
      accept: [400],
    });
    return answer.status === 202 ? null : answer.body;
  }

  /**
   * One request, with the client's token, trace and retry rules; answers any status as a result
   * or raises the typed error. For routes the methods above do not cover, and for tests.
   */
  async request<T = unknown>(call: {
    method: string;
    path: string;
    body?: string | Uint8Array;
    headers?: Record<string, string>;
    traceparent?: string;
  }): Promise<Answer<T>> {
    return this.send<T>({
      method: call.method as Call["method"],
      path: call.path,
      body: call.body === undefined ? undefined : new RawBody(call.body),
      headers: call.headers,
      retry: "once",
      options: { traceparent: call.traceparent },
    });
  }

  private async send<T>(call: Call): Promise<Answer<T>> {
    const url = new URL(this.baseUrl + call.path);
    for (const [key, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    const headers: Record<string, string> = { Accept: "application/json", ...call.headers };
    if (call.path !== "/health") headers.Authorization = `Bearer ${this.token}`;
    const traceparent = call.options?.traceparent ?? this.defaultTraceparent?.();
    if (traceparent) headers.traceparent = traceparent;
    if (call.wait !== undefined) headers.Prefer = `wait=${call.wait}`;
    let body: string | Uint8Array | undefined;
    if (call.body instanceof RawBody) {
      body = call.body.bytes;
    } else if (call.body !== undefined) {
      body = JSON.stringify(call.body);
      headers["Content-Type"] ??= "application/json";
    }
    const timeout = (call.options?.timeoutMs ?? this.timeoutMs) + (call.wait ?? 0) * 1000;

    for (let attempt = 1; ; attempt++) {
      let response: Response;
      let text: string;
      try {
        const signals = [AbortSignal.timeout(timeout)];
        if (call.options?.signal) signals.push(call.options.signal);
        response = await this.fetchImpl(url, { method: call.method, headers, body, signal: AbortSignal.any(signals) });
        // Read inside the try: a connection cut in the middle of the answer is a lost answer too.
        text = await response.text();
      } catch (error) {
        if (call.options?.signal?.aborted) throw error;
        const code = causeCode(error);
        const notSent = code !== undefined && NOT_SENT.has(code);
        const retry = attempt < this.maxAttempts && (notSent || call.retry === "idempotent");
        if (retry) {
          await sleep(this.retryBackoffMs * 2 ** (attempt - 1));
          continue;
        }
        throw new GatehouseConnectionError(
          `${call.method} ${call.path}: no answer from Gatehouse (${code ?? (error as Error).message})` +
            (notSent ? "; the request was not sent" : "; it may have reached Gatehouse"),
          !notSent,
          { cause: error },
        );
      }
      const retryAfter = parseRetryAfter(response.headers.get("retry-after"));
      const retryable = response.status === 503 && errorCode(text) === "database_unavailable";
      if (retryable && retryAfter !== undefined && call.retry !== "once" && !call.accept?.includes(503)) {
        if (attempt < this.maxAttempts && retryAfter <= this.maxRetryAfterSeconds) {
          await sleep(retryAfter * 1000);
          continue;
        }
      }
      // 408 request_timeout: nothing was done, but only an idempotent request is sent again on it
      // (see RetryPolicy); 429 and 409 are never retried.
      if (response.status === 408 && call.retry === "idempotent" && attempt < this.maxAttempts) {
        await sleep(this.retryBackoffMs * 2 ** (attempt - 1));
        continue;
      }
      if (response.ok || call.accept?.includes(response.status)) {
        return { status: response.status, headers: response.headers, body: (text ? JSON.parse(text) : null) as T };
      }
      throw errorFromAnswer(response.status, text, retryAfter);
    }
  }
}

class RawBody {
  constructor(readonly bytes: string | Uint8Array) {}
}

function enc(segment: string): string {
  return encodeURIComponent(segment);
}

/** An error answer's `code`; undefined when the body is not the API's error shape. */
function errorCode(text: string): string | undefined {
  try {
    const body: unknown = JSON.parse(text);
    const code = typeof body === "object" && body !== null ? (body as { code?: unknown }).code : undefined;
    return typeof code === "string" ? code : undefined;
  } catch {
    return undefined;
  }
}

function parseRetryAfter(value: string | null): number | undefined {
  if (value === null) return undefined;
  if (/^\s*[0-9]+\s*$/.test(value)) return Number(value);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

/** Whether a confirm or resume answer is the call in full (`Prefer: wait`) rather than `Accepted`. */
export function isToolCall(answer: Accepted | ToolCall | CancelResponse): answer is ToolCall {
  return "session_id" in answer;
}

/** Each OpenAPI operationId and the method that serves it; test/openapi.test.mjs checks both ways. */
export const OPERATIONS = {
  getHealth: { method: "GET", path: "/health" },
  createToolCall: { method: "POST", path: "/voice-tools/pending" },
  modifyToolCall: { method: "PATCH", path: "/voice-tools/modify/{id}" },
  cancelToolCall: { method: "DELETE", path: "/voice-tools/cancel/{id}" },
  confirmToolCall: { method: "POST", path: "/voice-tools/confirm/{id}" },
  getToolCall: { method: "GET", path: "/voice-tools/status/{id}" },
  getSessionCalls: { method: "GET", path: "/voice-tools/context/{session}" },
  getSessionContext: { method: "GET", path: "/get-session-context" },
  resumeExecution: { method: "POST", path: "/resume-execution/{id}" },
  sweep: { method: "POST", path: "/voice-tools/sweep" },
  listTools: { method: "GET", path: "/voice-tools/tools" },
  listToolExecutions: { method: "GET", path: "/voice-tools/tools/{name}/executions" },
  toolStats: { method: "GET", path: "/voice-tools/tools/{name}/stats" },
  listToolCalls: { method: "GET", path: "/voice-tools/calls" },
  listCallbackAttempts: { method: "GET", path: "/voice-tools/calls/{id}/callbacks" },
  markOutcomeTold: { method: "POST", path: "/voice-tools/calls/{id}/outcome-told" },
  getKey: { method: "GET", path: "/voice-tools/key" },
  queryVectorDb: { method: "POST", path: "/query-vector-db" },
  executeGmail: { method: "POST", path: "/execute-gmail" },
  mcp: { method: "POST", path: "/mcp" },
} as const satisfies Record<string, { method: string; path: string }>;
