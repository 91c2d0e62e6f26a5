// The signing recipe (openapi/tool-contract.yaml, "Signatures"; docs/tools.md, "Signatures"):
// `X-Gatehouse-Contract-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>,n=<nonce>`, the MAC
// keyed with the shared `contract_secret` over
// `<t> "." <nonce> LF <METHOD> SP <target> LF <Idempotency-Key> LF <body>`, where the target is
// the path and query as sent and the key is empty when the request has none. A signature covers
// the method, the target and the key, so a captured `prepare` cannot be sent as an `execute` or
// to another call; its timestamp bounds a replay to the window, and its nonce is spent once
// within it. openapi/signing-test-vector.json is the worked example this module is tested
// against. WebCrypto does the MAC, in Node and inside a component alike.

import { REPLAY_WINDOW_SECONDS } from "./contract.js";

/** What a valid signature vouches for: this nonce is the request's own, and may be forgotten
 * after `expiresAt` (unix seconds), when the timestamp alone refuses the request. */
export interface Signed {
  nonce: string;
  expiresAt: number;
}

/** Which part of a signature failed: the code a 401 carries. `signature_replayed` is for the
 * nonce store to say; `check` never returns it. */
export type Refusal = "signature_missing" | "signature_stale" | "signature_mismatch" | "signature_replayed";

/** The sentence a 401 says for each refusal. */
export const REFUSAL_SENTENCES: Readonly<Record<Refusal, string>> = {
  signature_missing: "This request is not signed by Gatehouse.",
  signature_stale: "This request's signature is too old, or the two hosts' clocks disagree.",
  signature_mismatch: "This request's signature does not match it: a different secret or a changed request.",
  signature_replayed: "This signed request was already used; each one is good once.",
};

const NONCE = /^[0-9a-f]{16,64}$/;
const HEX = /^(?:[0-9a-fA-F]{2})+$/;
const DIGITS = /^[0-9]{1,12}$/;
const encoder = new TextEncoder();

/** The bytes the MAC is over: `<t> "." <nonce> LF <METHOD> SP <target> LF <key> LF <body>`. */
export function content(
  timestamp: number,
  nonce: string,
  method: string,
  target: string,
  body: Uint8Array,
  idempotencyKey = "",
): Uint8Array {
  const head = encoder.encode(`${timestamp}.${nonce}\n${method.toUpperCase()} ${target}\n${idempotencyKey}\n`);
  const joined = new Uint8Array(head.length + body.length);
  joined.set(head);
  joined.set(body, head.length);
  return joined;
}

async function mac(secret: string, data: Uint8Array): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, data));
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Compares in time independent of where the first difference is. */
function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return difference === 0;
}

/** The header value Gatehouse sends for this request (for tests and for callers of a tool). */
export async function sign(
  secret: string,
  unixSeconds: number,
  nonce: string,
  method: string,
  target: string,
  body: Uint8Array,
  idempotencyKey = "",
): Promise<string> {
  const signed = content(unixSeconds, nonce, method, target, body, idempotencyKey);
  return `t=${unixSeconds},v1=${hex(await mac(secret, signed))},n=${nonce}`;
}

/** The nonce to spend if `header` signs this request with one of `secrets` (two while a secret
 * is rotated) and a timestamp within the replay window of `now` (unix seconds); else which part
 * failed. */
export async function check(
  secrets: readonly string[],
  header: string | null | undefined,
  method: string,
  target: string,
  body: Uint8Array,
  now: number,
  idempotencyKey = "",
): Promise<Signed | Refusal> {
  if (!header || header.length > 1024) return "signature_missing";
  let timestamp: number | null = null;
  let nonce: string | null = null;
  const macs: Uint8Array[] = [];
  for (const part of header.split(",")) {
    const at = part.indexOf("=");
    if (at < 0) return "signature_missing";
    const key = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (key === "t") {
      // A second t or n is ambiguous.
      if (timestamp !== null || !DIGITS.test(value)) return "signature_missing";
      timestamp = Number(value);
    } else if (key === "n") {
      if (nonce !== null || !NONCE.test(value)) return "signature_missing";
      nonce = value;
    } else if (key === "v1") {
      if (!HEX.test(value)) return "signature_missing";
      macs.push(Uint8Array.from(value.match(/../g) ?? [], (h) => parseInt(h, 16)));
    }
  }
  if (timestamp === null || nonce === null || !macs.length) return "signature_missing";
  if (Math.abs(now - timestamp) > REPLAY_WINDOW_SECONDS) return "signature_stale";
  const signed = content(timestamp, nonce, method, target, body, idempotencyKey);
  for (const secret of secrets) {
    const expected = await mac(secret, signed);
    if (macs.some((candidate) => equal(expected, candidate))) {
      return { nonce, expiresAt: timestamp + REPLAY_WINDOW_SECONDS };
    }
  }
  return "signature_mismatch";
}

/** `check`, with any refusal as null. */
export async function verify(
  secrets: readonly string[],
  header: string | null | undefined,
  method: string,
  target: string,
  body: Uint8Array,
  now: number,
  idempotencyKey = "",
): Promise<Signed | null> {
  const checked = await check(secrets, header, method, target, body, now, idempotencyKey);
  return typeof checked === "string" ? null : checked;
}
