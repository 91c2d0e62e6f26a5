// verifyCallback on its own: the known vector and every way a header can be wrong.
import { test } from "node:test";
import assert from "node:assert/strict";
import { signCallback, verifyCallback } from "gatehouse-client";

const body = '{"tool_call_id":"tc_000000000001"}';
const now = 1_700_000_000;

test("the signature is hex HMAC-SHA256(secret, t + '.' + body), as the Rust sign and openssl compute it", () => {
  assert.equal(signCallback("key", "{}", 1), "t=1,v1=1ba6b8171186efc613e8bcc0cbdab2748f24984d7c5a84faa2637afa0e40d224");
  assert.ok(verifyCallback("key", "t=1,v1=1ba6b8171186efc613e8bcc0cbdab2748f24984d7c5a84faa2637afa0e40d224", "{}", 300, 1));
});

test("a genuine header verifies; tampering, another secret and a stale or future timestamp do not", () => {
  const header = signCallback("whsec", body, now);
  assert.ok(verifyCallback("whsec", header, body, 300, now + 10));
  assert.ok(verifyCallback("whsec", header, Buffer.from(body), 300, now + 10), "bytes too");
  assert.ok(!verifyCallback("whsec", header, body.replace("1", "2"), 300, now + 10), "tampered body");
  assert.ok(!verifyCallback("other", header, body, 300, now + 10), "wrong secret");
  assert.ok(!verifyCallback("whsec", header, body, 300, now + 301), "stale");
  assert.ok(!verifyCallback("whsec", header, body, 300, now - 301), "from the future");
  assert.ok(verifyCallback("whsec", header, body, 300, now + 300), "at the edge of the window");
  const forged = header.replace(`t=${now}`, `t=${now + 100}`);
  assert.ok(!verifyCallback("whsec", forged, body, 300, now + 100), "the timestamp is signed");
});

test("several v1= values (a secret being rotated) and several secrets", () => {
  const good = signCallback("new", body, now).split(",v1=")[1];
  const old = signCallback("old", body, now).split(",v1=")[1];
  assert.ok(verifyCallback("new", `t=${now},v1=${old},v1=${good}`, body, 300, now));
  assert.ok(verifyCallback("old", `t=${now},v1=${old},v1=${good}`, body, 300, now));
  assert.ok(!verifyCallback("third", `t=${now},v1=${old},v1=${good}`, body, 300, now));
  assert.ok(verifyCallback(["third", "new"], `t=${now},v1=${good}`, body, 300, now));
  assert.ok(verifyCallback("new", ` t=${now} , v1=${good} `, body, 300, now), "spaces around parts");
});

test("malformed headers are refused, never thrown on", () => {
  for (const header of [undefined, null, "", "v1=00", `t=${now}`, `t=${now},v1=zz`, `t=abc,v1=00`, `t=${now},v1=`, `t=${now},v1=0`, "garbage"]) {
    assert.equal(verifyCallback("whsec", header, body, 300, now), false, String(header));
  }
  const header = signCallback("whsec", body, now);
  assert.ok(!verifyCallback("whsec", header.slice(0, -2), body, 300, now), "a truncated MAC");
});
