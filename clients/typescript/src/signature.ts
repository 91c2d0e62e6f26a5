import { createHmac, timingSafeEqual } from "node:crypto";

/** The header Gatehouse signs callbacks with. */
export const SIGNATURE_HEADER = "x-gatehouse-signature";
/** The header naming the callback's kind: progress, checkpoint or completion. */
export const CALLBACK_KIND_HEADER = "x-gatehouse-callback";

type Bytes = string | Uint8Array;

function bytes(value: Bytes): Buffer {
  return typeof value === "string" ? Buffer.from(value, "utf8") : Buffer.from(value);
}

function mac(secret: Bytes, timestamp: string, body: Bytes): Buffer {
  return createHmac("sha256", bytes(secret)).update(`${timestamp}.`).update(bytes(body)).digest();
}

/** `t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`, as Gatehouse sends it. For tests. */
export function signCallback(secret: Bytes, body: Bytes, unixSeconds = Math.floor(Date.now() / 1000)): string {
  return `t=${unixSeconds},v1=${mac(secret, String(unixSeconds), body).toString("hex")}`;
}

/**
 * Checks an `X-Gatehouse-Signature` header against the raw body, as the Rust
 * `gatehouse_domain::callback::verify` does: some `v1=` value (there may be several, while a
 * secret is rotated) must be the HMAC-SHA256 of `t + "." + body`, compared in constant time, and
 * `t` must be within `toleranceSeconds` of now, so a captured callback cannot be replayed later.
 *
 * `secret` may be a list: the header then passes if it is signed with any of them (the receiving
 * side of a rotation). `rawBody` must be the bytes as received, before any JSON parsing.
 */
export function verifyCallback(
  secret: Bytes | Bytes[],
  header: string | null | undefined,
  rawBody: Bytes,
  toleranceSeconds = 300,
  nowSeconds = Math.floor(Date.now() / 1000),
): boolean {
  if (!header) return false;
  let timestamp: string | undefined;
  const signatures: Buffer[] = [];
  for (const part of header.split(",")) {
    const trimmed = part.trim();
    const eq = trimmed.indexOf("=");
    if (eq < 0) continue;
    const key = trimmed.slice(0, eq);
    const value = trimmed.slice(eq + 1);
    if (key === "t") {
      timestamp = /^[0-9]+$/.test(value) ? value : undefined;
    } else if (key === "v1" && /^([0-9a-fA-F]{2})+$/.test(value)) {
      signatures.push(Buffer.from(value, "hex"));
    }
  }
  if (timestamp === undefined || signatures.length === 0) return false;
  const t = Number(timestamp);
  if (!Number.isSafeInteger(t) || Math.abs(nowSeconds - t) > toleranceSeconds) return false;
  const secrets = Array.isArray(secret) ? secret : [secret];
  let ok = false;
  // Every candidate is compared, whatever matched before, so the time taken does not say which.
  for (const s of secrets) {
    const expected = mac(s, timestamp, rawBody);
    for (const signature of signatures) {
      if (signature.length === expected.length && timingSafeEqual(signature, expected)) ok = true;
    }
  }
  return ok;
}
