// The contract signature (openapi/tool-contract.yaml, "Signatures"):
// `X-Gatehouse-Contract-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>,n=<nonce>`, the MAC
// keyed with the shared `contract_secret` over `<t>.<nonce> LF <METHOD> SP <path> LF <body>`. A
// signature covers the method and the path, so a captured `prepare` cannot be sent as an
// `execute`; its timestamp bounds a replay to the window, and its nonce is spent once within it.
// WebCrypto does the MAC, in Node and inside a component alike.

import { REPLAY_WINDOW_SECONDS } from "./contract.js";

/** What a valid signature vouches for: this nonce is the request's own, and may be forgotten
 * after `expiresAt` (unix seconds), when the timestamp alone refuses the request. */
export interface Signed {
  nonce: string;
  expiresAt: number;
}

const NONCE = /^[0-9a-f]{16,64}$/;
const HEX = /^(?:[0-9a-fA-F]{2})+$/;
const DIGITS = /^[0-9]{1,12}$/;
const encoder = new TextEncoder();

function content(timestamp: number, nonce: string, method: string, path: string, body: Uint8Array): Uint8Array {
  const head = encoder.encode(`${timestamp}.${nonce}\n${method.toUpperCase()} ${path}\n`);
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
  path: string,
  body: Uint8Array,
): Promise<string> {
  return `t=${unixSeconds},v1=${hex(await mac(secret, content(unixSeconds, nonce, method, path, body)))},n=${nonce}`;
}

/** The nonce to spend if `header` signs this request with one of `secrets` (two while a secret
 * is rotated) and a timestamp within the replay window of `now` (unix seconds); else null. */
export async function verify(
  secrets: readonly string[],
  header: string | null | undefined,
  method: string,
  path: string,
  body: Uint8Array,
  now: number,
): Promise<Signed | null> {
  if (!header || header.length > 1024) return null;
  let timestamp: number | null = null;
  let nonce: string | null = null;
  const macs: Uint8Array[] = [];
  for (const part of header.split(",")) {
    const at = part.indexOf("=");
    if (at < 0) continue;
    const key = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (key === "t" && DIGITS.test(value)) timestamp = Number(value);
    else if (key === "n" && NONCE.test(value)) nonce = value;
    else if (key === "v1" && HEX.test(value)) macs.push(Uint8Array.from(value.match(/../g) ?? [], (h) => parseInt(h, 16)));
  }
  if (timestamp === null || nonce === null || !macs.length || Math.abs(now - timestamp) > REPLAY_WINDOW_SECONDS) {
    return null;
  }
  const signed = content(timestamp, nonce, method, path, body);
  for (const secret of secrets) {
    const expected = await mac(secret, signed);
    if (macs.some((candidate) => equal(expected, candidate))) {
      return { nonce, expiresAt: timestamp + REPLAY_WINDOW_SECONDS };
    }
  }
  return null;
}
