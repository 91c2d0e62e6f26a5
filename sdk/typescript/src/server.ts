// The tool contract around a `Tool`, independent of how requests arrive (a Spin component in
// `gatehouse-tool/spin`): one request in, one answer out. It checks the signature and spends its
// nonce, keeps the ordering rules and runs `execute` at most once per call (ledger.ts), and
// answers in the contract's shapes and status codes.
//
// It never writes Gatehouse's execution history: its answers carry no
// `Gatehouse-Execution-Recorded` header, so the lifecycle records each operation it sends, with
// the duration and outcome it saw (docs/architecture.md, "Tools in any language").

import { OPERATIONS, SIGNATURE_HEADER, type Operation } from "./contract.js";
import { decide, release, settle, type CallRequest, type CallStore, type OnCall } from "./ledger.js";
import { check, REFUSAL_SENTENCES } from "./signature.js";
import { InvalidParameters, ToolFailure, type Call, type Tool } from "./tool.js";

/** The largest request body read: Gatehouse's own bound on a call's parameters is 48 KiB. */
export const MAX_BODY_BYTES = 256 * 1024;
const MAX_CLAIM_TRIES = 8;

/** An answer: a status and a JSON body. */
export interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** The contract's error shape: `{"error": ..., "code": ...}`. */
export function error(status: number, code: string, message: string): Reply {
  return { status, body: { error: message, code } };
}

/** The answer to a body past `MAX_BODY_BYTES`, however it arrived. */
export function tooLarge(): Reply {
  return error(413, "payload_too_large", `A request body may be at most ${MAX_BODY_BYTES} bytes.`);
}

/** How a request arrived: its method, its whole target (path and query, signed as such), its
 * headers looked up lower-case, its body, and whether it came from another component of the
 * same Spin application by service chaining (it never crossed a network). */
export interface Incoming {
  method: string;
  path: string;
  headers: { get(name: string): string | null };
  body: Uint8Array;
  chained: boolean;
}

export class ContractServer {
  private readonly secrets: string[];

  /** Serves `tool` for requests signed with one of `secrets` (two while one is rotated).
   * Without a secret (a component inside Gatehouse's application whose `contract_secret` is
   * unset) only requests that came by service chaining are admitted, as the Rust tools do.
   * `clock` gives unix seconds. */
  constructor(
    readonly tool: Tool,
    secrets: readonly (string | null | undefined)[],
    private readonly store: CallStore,
    private readonly clock: () => number = () => Date.now() / 1000,
  ) {
    this.secrets = secrets.filter((one): one is string => Boolean(one));
  }

  async handle(request: Incoming): Promise<Reply> {
    const route = request.path.split("?", 1)[0] ?? "";
    const at = route.lastIndexOf("/tool/");
    const operation = (at >= 0 ? route.slice(at + "/tool/".length) : "") as Operation;
    if (!OPERATIONS.includes(operation)) return error(404, "not_found", "This tool has no such operation.");
    if (operation === "describe") {
      // A describe may come unsigned; a signed one is single-use like every signed request.
      const refused =
        this.secrets.length && request.headers.get(SIGNATURE_HEADER) ? await this.spend(request) : null;
      return refused ?? { status: 200, body: this.tool.describe() };
    }
    if (request.method.toUpperCase() !== "POST") {
      return { status: 405, body: { error: "Only POST.", code: "method_not_allowed" }, headers: { allow: "POST" } };
    }
    if (request.body.length > MAX_BODY_BYTES) return tooLarge();
    if (this.secrets.length) {
      const refused = await this.spend(request);
      if (refused) return refused;
    } else if (!request.chained) {
      return error(401, "unauthorized", "Without a contract_secret this tool answers only its own application.");
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(request.body));
    } catch {
      return error(400, "invalid_input", "The body is not JSON.");
    }
    if (!isObject(parsed) || (parsed.parameters !== undefined && !isObject(parsed.parameters))) {
      return error(400, "invalid_input", "The body is a tool request: an object with `parameters`.");
    }
    const toolRequest: Record<string, unknown> & { parameters: Record<string, unknown> } = {
      ...parsed,
      parameters: (parsed.parameters as Record<string, unknown> | undefined) ?? {},
    };
    if (operation === "validate" || operation === "summarize") return this.stateless(operation, toolRequest.parameters);
    const callId = toolRequest.tool_call_id;
    if (typeof callId !== "string" || !callId || callId.length > 200) {
      return error(400, "invalid_input", `A ${operation} needs the call's tool_call_id.`);
    }
    return this.onCall(operation, callId, { ...toolRequest, tool_call_id: callId } as CallRequest);
  }

  /** Null when the request's signature is good and its nonce was not spent before (it is now);
   * else the 401 that says which part failed. */
  private async spend(request: Incoming): Promise<Reply | null> {
    const { method, path, body, headers } = request;
    const key = headers.get("idempotency-key") ?? "";
    const checked = await check(this.secrets, headers.get(SIGNATURE_HEADER), method, path, body, this.clock(), key);
    if (typeof checked === "string") return error(401, checked, REFUSAL_SENTENCES[checked]);
    if (!(await this.store.spendNonce(checked.nonce, checked.expiresAt))) {
      return error(401, "signature_replayed", REFUSAL_SENTENCES.signature_replayed);
    }
    return null;
  }

  private async stateless(operation: "validate" | "summarize", parameters: Record<string, unknown>): Promise<Reply> {
    try {
      if (operation === "summarize") return { status: 200, body: { summary: await this.tool.summarize(parameters) } };
      const accepted = await this.tool.validate(parameters);
      const summary = await this.tool.summarize(accepted);
      return { status: 200, body: { parameters: accepted, summary, needs_checkpoint: this.tool.needsCheckpoint } };
    } catch (failure) {
      if (failure instanceof InvalidParameters) {
        return { status: 422, body: { error: "Some of the details aren't valid.", fields: failure.problems } };
      }
      if (failure instanceof ToolFailure) return { status: 422, body: { error: failure.message } };
      console.error(`${operation} of ${this.tool.name} crashed:`, failure);
      return error(500, "internal", `The tool's ${operation} crashed.`);
    }
  }

  private async onCall(operation: OnCall, callId: string, request: CallRequest): Promise<Reply> {
    for (let tries = 0; tries < MAX_CLAIM_TRIES; tries++) {
      const [record, version] = await this.store.load(callId);
      const decision = decide(operation, record, request, this.tool.needsCheckpoint);
      if (decision.kind === "answer") return { status: decision.status, body: decision.body };
      if (decision.kind === "refuse") return error(409, "invalid_state", decision.message);
      if (!(await this.store.save(callId, decision.record, version))) continue;
      let reply: Reply;
      try {
        reply = await this.run(operation, decision.call);
      } catch (failure) {
        console.error(`${operation} of ${this.tool.name} for ${callId} crashed:`, failure);
        await this.store.save(callId, release(operation, decision.record), version + 1);
        return error(500, "internal", `The tool's ${operation} crashed; it may be sent again.`);
      }
      // Only this claim's own record is settled: a later attempt that took it over settles its own.
      await this.store.save(callId, settle(operation, decision.record, reply.status, reply.body), version + 1);
      return reply;
    }
    return error(409, "invalid_state", "This call is being changed by another request; try again.");
  }

  private async run(operation: OnCall, call: Call): Promise<Reply> {
    try {
      if (operation === "prepare") {
        const checkpoint = await this.tool.prepare(call);
        // Answering `checkpoint: null` would let the call run without the caller's second yes:
        // the tool's bug is a crash, never "no checkpoint".
        if (checkpoint == null && this.tool.needsCheckpoint) {
          throw new TypeError("prepare answers checkpoint(message, state): the tool declares needsCheckpoint");
        }
        return { status: 200, body: { checkpoint: checkpoint ?? null } };
      }
      if (operation === "execute") {
        const done = await this.tool.execute(call);
        if (!isObject(done) || typeof done.voice_response !== "string") {
          throw new TypeError("execute answers executed(result, voiceResponse)");
        }
        return { status: 200, body: { result: done.result ?? null, voice_response: done.voice_response } };
      }
      await this.tool.discard(call);
      return { status: 200, body: { discarded: true } };
    } catch (failure) {
      if (failure instanceof ToolFailure) {
        const mayHaveActed = failure.mayHaveActed && operation === "execute";
        return { status: 422, body: { error: failure.message, ...(mayHaveActed ? { may_have_acted: true } : {}) } };
      }
      throw failure;
    }
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
