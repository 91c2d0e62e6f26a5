// verifyCallback on its own: the published vector and every way a header can be wrong.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { SpentNonces, signCallback, verifyCallback } from "gatehouse-client";
import { env } from "./support.mjs";

// The published vector, beside the OpenAPI document.
const vector = JSON.parse(readFileSync(join(dirname(env.openapi), "signing-test-vector.json"), "utf8")).callback;
const body = '{"tool_call_id":"tc_000000000001"}';
const path = "/callbacks";
const now = 1_700_000_000;
const nonce = "0123456789abcdef0123456789abcdef";
const at = (nowSeconds, extra = {}) => ({ toleranceSeconds: 300, nowSeconds, ...extra });

test("the published callback vector signs and verifies", () => {
  const v = vector;
  assert.equal(signCallback(v.secret, v.target, v.body, v.timestamp, v.nonce), v.header);
  assert.ok(verifyCallback(v.secret, v.header, v.target, v.body, at(v.timestamp)));
});

test("a genuine header verifies; tampering, another path or secret and a stale or future timestamp do not", () => {
  const header = signCallback("whsec", path, body, now, nonce);
  assert.ok(verifyCallback("whsec", header, path, body, at(now + 10)));
  assert.ok(verifyCallback("whsec", header, path, Buffer.from(body), at(now + 10)), "bytes too");
  assert.ok(!verifyCallback("whsec", header, path, body.replace("1", "2"), at(now + 10)), "tampered body");
  assert.ok(!verifyCallback("whsec", header, "/callbacks/other", body, at(now + 10)), "another path");
  assert.ok(!verifyCallback("whsec", header, `${path}?x=1`, body, at(now + 10)), "another query");
  assert.ok(!verifyCallback("other", header, path, body, at(now + 10)), "wrong secret");
  assert.ok(!verifyCallback("whsec", header, path, body, at(now + 301)), "stale");
  assert.ok(!verifyCallback("whsec", header, path, body, at(now - 301)), "from the future");
  assert.ok(verifyCallback("whsec", header, path, body, at(now + 300)), "at the edge of the window");
  const forged = header.replace(`t=${now}`, `t=${now + 100}`);
  assert.ok(!verifyCallback("whsec", forged, path, body, at(now + 100)), "the timestamp is signed");
  assert.ok(!verifyCallback("whsec", header.replace(`n=${nonce}`, `n=${"f".repeat(32)}`), path, body, at(now)), "the nonce is signed");
});

test("a nonce is spent once", () => {
  const nonces = new SpentNonces();
  const header = signCallback("whsec", path, body, now, nonce);
  assert.ok(verifyCallback("whsec", header, path, body, at(now, { nonces })));
  assert.ok(!verifyCallback("whsec", header, path, body, at(now + 1, { nonces })), "replayed");
  assert.ok(verifyCallback("whsec", signCallback("whsec", path, body, now), path, body, at(now, { nonces })), "a fresh nonce");
  const full = new SpentNonces(1);
  assert.ok(full.spend("a".repeat(16), now + 300, now));
  assert.ok(!full.spend("b".repeat(16), now + 300, now), "full of live nonces: refused");
  assert.ok(full.spend("b".repeat(16), now + 900, now + 301), "the expired one is forgotten");
});

test("several v1= values (a secret being rotated) and several secrets", () => {
  const good = signCallback("new", path, body, now, nonce).split(",")[1];
  const old = signCallback("old", path, body, now, nonce).split(",")[1];
  const both = `t=${now},${old},${good},n=${nonce}`;
  assert.ok(verifyCallback("new", both, path, body, at(now)));
  assert.ok(verifyCallback("old", both, path, body, at(now)));
  assert.ok(!verifyCallback("third", both, path, body, at(now)));
  assert.ok(verifyCallback(["third", "new"], `t=${now},${good},n=${nonce}`, path, body, at(now)));
  assert.ok(verifyCallback("new", ` t=${now} , ${good} , n=${nonce} `, path, body, at(now)), "spaces around parts");
});

test("malformed headers are refused, never thrown on", () => {
  for (const header of [undefined, null, "", "v1=00", `t=${now}`, `t=${now},v1=zz,n=${nonce}`, `t=abc,v1=00,n=${nonce}`,
    `t=${now},v1=,n=${nonce}`, `t=${now},v1=0,n=${nonce}`, `t=${now},v1=00`, `t=${now},v1=00,n=short`, "garbage", "t=1,".repeat(400)]) {
    assert.equal(verifyCallback("whsec", header, path, body, at(now)), false, String(header));
  }
  const header = signCallback("whsec", path, body, now, nonce);
  assert.ok(!verifyCallback("whsec", header.slice(0, -2), path, body, at(now)), "a truncated nonce");
});

test("a relay serving several tenants picks the secret by the tenant header", async () => {
  const { createCallbackHandler } = await import("gatehouse-client");
  const { createServer } = await import("node:http");
  const received = [];
  const handler = createCallbackHandler({
    secret: { acme: "acme-secret", globex: ["globex-new", "globex-old"] },
    onCallback: (callback) => void received.push(callback),
  });
  const server = createServer(handler);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}${path}`;
  const deliver = async (tenant, secret, payloadTenant = tenant) => {
    const raw = JSON.stringify({ tool_call_id: "tc_0123456789ab", tenant: payloadTenant });
    const headers = { "Content-Type": "application/json", "X-Gatehouse-Callback": "completion", "X-Gatehouse-Signature": signCallback(secret, path, raw) };
    if (tenant !== undefined) headers["X-Gatehouse-Tenant"] = tenant;
    return (await fetch(url, { method: "POST", body: raw, headers })).status;
  };
  try {
    assert.equal(await deliver("acme", "acme-secret"), 200);
    assert.equal(await deliver("globex", "globex-old"), 200, "either secret of a rotation");
    assert.equal(await deliver("acme", "globex-new"), 401, "another tenant's secret");
    assert.equal(await deliver("globex", "acme-secret"), 401);
    assert.equal(await deliver("initech", "acme-secret"), 401, "a tenant the relay does not serve");
    assert.equal(await deliver("toString", "acme-secret"), 401, "not a property of the object");
    assert.equal(await deliver(undefined, "acme-secret"), 401, "no tenant named");
    assert.equal(await deliver("acme", "acme-secret", "globex"), 401, "the payload names another tenant");
    assert.deepEqual(received.map((c) => c.body.tenant), ["acme", "globex"]);
  } finally {
    server.closeAllConnections?.();
    await new Promise((resolve) => server.close(resolve));
  }
});
