import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * Callback signatures, by Gatehouse's one signing recipe (docs/architecture.md, "Signed hops";
 * openapi/signing-test-vector.json is the worked example these functions are tested against):
 * `X-Gatehouse-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>[,v1=<hex>...],n=<nonce>`, the MAC
 * keyed with the tenant's callback secret over `<t> "." <nonce> LF "POST" SP <target> LF LF <body>`:
 * `target` is the path and query the callback was posted to, and the empty line is its
 * `Idempotency-Key` (a callback carries none). So a signature vouches for one callback to one
 * relay path: the time bounds a capture to the tolerance, and the nonce, spent once
 * (`SpentNonces`), makes it single-use within it.
 */

/** The header Gatehouse signs callbacks with. */
export const SIGNATURE_HEADER = "x-gatehouse-signature";
/** The header naming the callback's kind: progress, checkpoint or completion. */
export const CALLBACK_KIND_HEADER = "x-gatehouse-callback";
/** The header naming the tenant a callback is for, as its payload's `tenant` does: a relay
 * serving several tenants picks the secret to verify with by it. */
export const TENANT_HEADER = "x-gatehouse-tenant";

type Bytes = string | Uint8Array;

const MAX_HEADER = 1024;

function bytes(value: Bytes): Buffer {
  return typeof value === "string" ? Buffer.from(value, "utf8") : Buffer.from(value);
}

function mac(secret: Bytes, timestamp: number, nonce: string, target: string, body: Bytes): Buffer {
  return createHmac("sha256", bytes(secret))
    .update(`${timestamp}.${nonce}\nPOST ${target}\n\n`, "utf8")
    .update(bytes(body))
    .digest();
}

/** The header Gatehouse would send for `body` posted to `target`. For tests. */
export function signCallback(
  secret: Bytes,
  target: string,
  body: Bytes,
  unixSeconds = Math.floor(Date.now() / 1000),
  nonce = randomBytes(16).toString("hex"),
): string {
  return `t=${unixSeconds},v1=${mac(secret, unixSeconds, nonce, target, body).toString("hex")},n=${nonce}`;
}

/**
 * The nonces of callbacks this relay accepted, each kept until its signature would be too old
 * anyway, so a callback captured and sent again within the tolerance is refused. In memory, for
 * one process; a relay running several processes shares the set (a table keyed by nonce).
 */
export class SpentNonces {
  private expiry = new Map<string, number>();

  constructor(private readonly limit = 100_000) {}

  /** True the first time `nonce` is spent; false for a replay, or when the set is full of live
   * nonces (refusing is safe: Gatehouse signs its retry afresh). */
  spend(nonce: string, expiresAt: number, now: number): boolean {
    const known = this.expiry.get(nonce);
    if (known !== undefined && known >= now) return false;
    if (this.expiry.size >= this.limit) {
      for (const [spent, at] of this.expiry) if (at < now) this.expiry.delete(spent);
      if (this.expiry.size >= this.limit) return false;
    }
    this.expiry.set(nonce, expiresAt);
    return true;
  }
}

/** How `verifyCallback` checks, beyond the secret, the header and the callback. */
export interface VerifyOptions {
  /** The replay window, in seconds (default 300). */
  toleranceSeconds?: number;
  /** Unix seconds now (for tests). */
  nowSeconds?: number;
  /** Where spent nonces are kept; without it a replay within the window is not refused. */
  nonces?: SpentNonces;
}

/**
 * Checks an `X-Gatehouse-Signature` header against the callback as received: `target` is the
 * path and query it was posted to, `rawBody` its bytes before any JSON parsing. Some `v1=` (there
 * are two while a secret is rotated) must be the MAC of this callback with `secret` (or one of a
 * list), compared in constant time, `t` within the tolerance of now, and, given `nonces`, the
 * nonce not spent before (it is spent now).
 */
export function verifyCallback(
  secret: Bytes | Bytes[],
  header: string | null | undefined,
  target: string,
  rawBody: Bytes,
  options: VerifyOptions = {},
): boolean {
  if (!header || header.length > MAX_HEADER) return false;
  let timestamp: number | undefined;
  let nonce: string | undefined;
  const signatures: Buffer[] = [];
  for (const part of header.split(",")) {
    const trimmed = part.trim();
    const eq = trimmed.indexOf("=");
    const key = eq < 0 ? trimmed : trimmed.slice(0, eq);
    const value = eq < 0 ? "" : trimmed.slice(eq + 1);
    if (key === "t" && timestamp === undefined && /^[0-9]{1,12}$/.test(value)) timestamp = Number(value);
    else if (key === "n" && nonce === undefined && /^[0-9a-f]{16,64}$/.test(value)) nonce = value;
    else if (key === "v1" && /^([0-9a-fA-F]{2})+$/.test(value)) signatures.push(Buffer.from(value, "hex"));
    else return false;
  }
  if (timestamp === undefined || nonce === undefined || signatures.length === 0) return false;
  const tolerance = options.toleranceSeconds ?? 300;
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - timestamp) > tolerance) return false;
  const secrets = Array.isArray(secret) ? secret : [secret];
  let ok = false;
  // Every candidate is compared, whatever matched before, so the time taken does not say which.
  for (const s of secrets) {
    const expected = mac(s, timestamp, nonce, target, rawBody);
    for (const signature of signatures) {
      if (signature.length === expected.length && timingSafeEqual(signature, expected)) ok = true;
    }
  }
  return ok && (options.nonces === undefined || options.nonces.spend(nonce, timestamp + tolerance, now));
}
