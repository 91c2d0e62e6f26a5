import type { IncomingMessage, ServerResponse } from "node:http";
import { CALLBACK_KIND_HEADER, SIGNATURE_HEADER, SpentNonces, TENANT_HEADER, verifyCallback } from "./signature.js";
import type { Callback, CheckpointCallback, CompletionCallback, ProgressCallback, RelayAnswer } from "./types.js";

type Secret = string | Uint8Array | Array<string | Uint8Array>;

export interface CallbackHandlerOptions {
  /** The tenant's callback secret (`gatehouse tenants callbacks ID --show-secret`), or several
   * while it is rotated; for a relay serving several tenants, each tenant's by its id: the
   * callback's `X-Gatehouse-Tenant` picks one, and the signed payload must name the same tenant. */
  secret: Secret | Record<string, Secret>;
  /** The replay window, in seconds (default 300). */
  toleranceSeconds?: number;
  /** Largest body read, in bytes (default 1 MiB). */
  maxBodyBytes?: number;
  /** Where spent nonces are kept (one `SpentNonces` per handler by default). */
  nonces?: SpentNonces;
  /** The path (and query) Gatehouse posts to, when a proxy in front rewrites it; the request's
   * own path otherwise. The signature binds it. */
  publicPath?: string;
  /**
   * Called with each verified callback. What it returns is the relay's answer: for a progress
   * callback `{cancel: true, reason}` stops the call, and at a direct flow's gate only
   * `{continue: true}` lets it go on. Nothing means `{}`.
   */
  onCallback: (callback: Callback, request: IncomingMessage) => RelayAnswer | void | Promise<RelayAnswer | void>;
  /** Called when a request is refused (bad signature, stale timestamp, not JSON); answered 401 or 400. */
  onRejected?: (reason: string, request: IncomingMessage) => void;
}

/**
 * A request listener for `http.createServer` (or a route of any Node framework that hands over
 * the raw request) that reads the raw body, checks `X-Gatehouse-Signature` with
 * `verifyCallback` over the path it came to, spending its nonce once, and hands each genuine
 * callback to `onCallback`. A forged, tampered, re-targeted or replayed callback is answered 401
 * and never reaches `onCallback`.
 */
export function createCallbackHandler(options: CallbackHandlerOptions): (request: IncomingMessage, response: ServerResponse) => void {
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const nonces = options.nonces ?? new SpentNonces();
  const reply = (response: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    response.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
    response.end(text);
  };
  return (request, response) => {
    if (request.method !== "POST") {
      response.setHeader("Allow", "POST");
      reply(response, 405, { error: "POST only" });
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    request.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBodyBytes) {
        reply(response, 413, { error: "body too large" });
        request.destroy();
        return;
      }
      chunks.push(chunk);
    });
    request.on("end", () => {
      void (async () => {
        const raw = Buffer.concat(chunks);
        const header = request.headers[SIGNATURE_HEADER];
        const signature = Array.isArray(header) ? header.join(",") : header;
        const target = options.publicPath ?? request.url ?? "/";
        const tenantHeader = request.headers[TENANT_HEADER];
        const tenant = Array.isArray(tenantHeader) ? tenantHeader[0] : tenantHeader;
        const byTenant = isSecretsByTenant(options.secret);
        const secret = byTenant ? (tenant !== undefined && Object.hasOwn(byTenant, tenant) ? byTenant[tenant] : undefined) : options.secret;
        if (secret === undefined || !verifyCallback(secret as Secret, signature, target, raw, { toleranceSeconds: options.toleranceSeconds, nonces })) {
          options.onRejected?.("signature", request);
          reply(response, 401, { error: "bad signature" });
          return;
        }
        let body: unknown;
        try {
          body = JSON.parse(raw.toString("utf8"));
        } catch {
          options.onRejected?.("not JSON", request);
          reply(response, 400, { error: "not JSON" });
          return;
        }
        if (byTenant && (body as { tenant?: unknown } | null)?.tenant !== tenant) {
          options.onRejected?.("signature", request);
          reply(response, 401, { error: "bad signature" });
          return;
        }
        const kindHeader = request.headers[CALLBACK_KIND_HEADER];
        const kind = (Array.isArray(kindHeader) ? kindHeader[0] : kindHeader) ?? inferKind(body);
        let callback: Callback;
        if (kind === "progress") callback = { kind, body: body as ProgressCallback };
        else if (kind === "checkpoint") callback = { kind, body: body as CheckpointCallback };
        else callback = { kind: "completion", body: body as CompletionCallback };
        try {
          const answer = (await options.onCallback(callback, request)) ?? {};
          reply(response, 200, answer);
        } catch (error) {
          reply(response, 500, { error: String((error as Error)?.message ?? error) });
        }
      })();
    });
  };
}

function isSecretsByTenant(secret: Secret | Record<string, Secret>): Record<string, Secret> | undefined {
  return typeof secret === "string" || Array.isArray(secret) || secret instanceof Uint8Array ? undefined : secret;
}

function inferKind(body: unknown): string {
  const b = body as Record<string, unknown>;
  if (b && "checkpoint" in b) return "checkpoint";
  if (b && "gate" in b) return "progress";
  return "completion";
}
