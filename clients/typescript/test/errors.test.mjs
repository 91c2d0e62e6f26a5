// Every error code of the OpenAPI file raised as its exception class: from the real application
// wherever a request can provoke it (database_unavailable from one whose database is out of
// reach, request_timeout from its runner through a proxy that withholds a body), else (internal,
// tool_unavailable, side_effect_started, deadline_exceeded) from the documented answer played by a
// proxy.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  CallbackNotAllowedError, CallbackUrlConflictError, DatabaseUnavailableError, ERROR_CLASSES, ExpiredError, ForbiddenError, GatehouseError,
  IdempotencyKeyReusedError, InternalError, InvalidInputError, InvalidStateError, MethodNotAllowedError, NotFoundError,
  PayloadTooLargeError, RateLimitedError, RequestTimeoutError, SideEffectStartedError, TooManyOpenCallsError, ToolUnavailableError, DeadlineExceededError, UnauthorizedError, UnknownFunctionError,
  UnsupportedMediaTypeError, ValidationFailedError, isToolCall,
} from "gatehouse-client";
import { client, env, rawAnswer, seedEmail, session, sleep, startProxy, startReceiver } from "./support.mjs";

/** `max_pending_calls_per_session`: clients/test leaves it at its default. */
const MAX_PENDING_CALLS = 50;
const bodyTimeoutKnown = env.bodyReadTimeout > 0 && env.bodyReadTimeout <= 5;

const covered = new Set();
async function expectError(promise, Class, code, status) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof Class, `${code}: got ${e?.constructor?.name}: ${e?.message}`);
    assert.ok(e instanceof GatehouseError);
    assert.equal(e.code, code);
    assert.equal(e.status, status);
    assert.ok(e.message.length > 0, "a sentence to speak");
    return true;
  });
  covered.add(code);
}

const gh = client();
const create = (extra = {}, params = seedEmail) => gh.createToolCall({ session_id: session("err"), function_name: "send_email", parameters: params, ...extra });

test("errors the application answers", async () => {
  await expectError(client({ token: "wrong" }).listTools(), UnauthorizedError, "unauthorized", 401);
  await expectError(gh.request({ method: "POST", path: "/mcp", body: '{"jsonrpc":"2.0","id":1,"method":"ping"}', headers: { Origin: "http://evil.example", "Content-Type": "application/json", Accept: "application/json, text/event-stream" } }), ForbiddenError, "forbidden", 403);
  await expectError(gh.getToolCall("tc_000000000000"), NotFoundError, "not_found", 404);
  await expectError(gh.request({ method: "PUT", path: "/voice-tools/pending", body: "{}" }), MethodNotAllowedError, "method_not_allowed", 405);
  await expectError(gh.listToolExecutions("send_email", { limit: 0 }), InvalidInputError, "invalid_input", 400);
  await expectError(create({}, { ...seedEmail, to: "john@" }), ValidationFailedError, "validation_failed", 422);
  await expectError(create({}, { ...seedEmail, body: "x".repeat(70 * 1024) }), PayloadTooLargeError, "payload_too_large", 413);
  await expectError(gh.request({ method: "POST", path: "/voice-tools/pending", body: "hello", headers: { "Content-Type": "text/plain" } }), UnsupportedMediaTypeError, "unsupported_media_type", 415);
  await expectError(gh.createToolCall({ session_id: session("err"), function_name: "teleport", parameters: {} }), UnknownFunctionError, "unknown_function", 422);
  await expectError(create({ callback_url: "http://relay.example.com/callbacks" }), CallbackNotAllowedError, "callback_not_allowed", 422);

  const sessionId = session("reuse");
  await gh.createToolCall({ session_id: sessionId, function_name: "send_email", parameters: seedEmail }, { idempotencyKey: "k1" });
  await expectError(gh.createToolCall({ session_id: sessionId, function_name: "send_email", parameters: { ...seedEmail, subject: "Other" } }, { idempotencyKey: "k1" }), IdempotencyKeyReusedError, "idempotency_key_reused", 422);

  const cancelled = await create();
  await gh.cancelToolCall(cancelled.tool_call_id, { reason: "caller changed their mind" });
  await assert.rejects(gh.confirmToolCall(cancelled.tool_call_id), (e) => e instanceof InvalidStateError && e.callStatus === "CANCELLED" && e.toolCallId === cancelled.tool_call_id);
  covered.add("invalid_state");
});

test("a checkpoint left waiting past its deadline is 410 expired", { skip: !(env.checkpointTtl > 0 && env.checkpointTtl <= 10) && "needs checkpoint_ttl_seconds of 10 or less" }, async () => {
  const created = await create();
  const prepared = await gh.confirmToolCall(created.tool_call_id, {}, { wait: 10 });
  assert.ok(isToolCall(prepared));
  assert.equal(prepared.status, "PREPARED");
  await sleep(env.checkpointTtl * 1000 + 600);
  await assert.rejects(gh.resumeExecution(created.tool_call_id, { action: "proceed" }), (e) => e instanceof ExpiredError && e.status === 410 && e.callStatus === "EXPIRED");
  covered.add("expired");
});

test("409 callback_url_conflict: a confirm cannot send a call's reports elsewhere, and changes nothing", async () => {
  const receiver = await startReceiver();
  try {
    const created = await create({ callback_url: receiver.url });
    const elsewhere = receiver.url.replace(/\/callbacks$/, "/elsewhere");
    await expectError(gh.confirmToolCall(created.tool_call_id, { callback_url: elsewhere }), CallbackUrlConflictError, "callback_url_conflict", 409);
    await assert.rejects(gh.confirmToolCall(created.tool_call_id, { callback_url: elsewhere }), (e) => e.callStatus === "PENDING" && e.toolCallId === created.tool_call_id);
    const call = await gh.getToolCall(created.tool_call_id);
    assert.equal(call.status, "PENDING");
    assert.equal(call.callback_url, receiver.url);
    // Naming the call's own URL changes nothing and confirms it.
    const prepared = await gh.confirmToolCall(created.tool_call_id, { callback_url: receiver.url }, { wait: 10 });
    assert.ok(isToolCall(prepared));
    assert.equal(prepared.status, "PREPARED");
    await gh.cancelToolCall(created.tool_call_id);
    assert.equal((await receiver.next("completion", created.tool_call_id)).body.status, "CANCELLED");
  } finally {
    await receiver.close();
  }
});

test("429 rate_limited: a tenant allowed one create a second is told when to try again; its key says who it is", async () => {
  const limited = client({ token: env.limitedKey });
  const me = await limited.getKey();
  assert.deepEqual(me, { tenant: env.limitedTenant, key: env.limitedKey.slice(0, 12), scopes: ["calls:write", "tools:read"] });
  const request = { session_id: session("limited"), function_name: "send_email", parameters: seedEmail };
  let refused;
  for (let i = 0; i < 5 && !refused; i++) {
    try {
      await limited.createToolCall(request);
    } catch (e) {
      refused = e;
    }
  }
  assert.ok(refused instanceof RateLimitedError, `got ${refused?.constructor?.name}: ${refused?.message}`);
  assert.equal(refused.code, "rate_limited");
  assert.equal(refused.status, 429);
  assert.equal(refused.retryAfter, 1);
  covered.add("rate_limited");
  await sleep(1100);
  assert.equal((await limited.createToolCall(request)).status, "PENDING", "a second later it may create again");
});

test("429 too_many_open_calls: a session holds 50 waiting calls; a create past that records nothing until one is settled", async () => {
  const sessionId = session("full");
  const request = { session_id: sessionId, function_name: "send_email", parameters: seedEmail };
  const ids = [(await gh.createToolCall(request, { idempotencyKey: "first-of-the-session" })).tool_call_id];
  while (ids.length < MAX_PENDING_CALLS) ids.push((await gh.createToolCall(request)).tool_call_id);
  await expectError(gh.createToolCall(request), TooManyOpenCallsError, "too_many_open_calls", 429);
  const again = await gh.createToolCall(request, { idempotencyKey: "first-of-the-session" });
  assert.equal(again.tool_call_id, ids[0], "a create retried with its key answers the first answer, full session or not");
  await assert.rejects(gh.createToolCall(request), (e) => e instanceof TooManyOpenCallsError && e.retryAfter === 1, "Retry-After: 1, as on every 429, though waiting alone does not help");
  const listed = await gh.listToolCalls({ session_id: sessionId, limit: 100 });
  assert.equal(listed.calls.length, MAX_PENDING_CALLS, "the refused creates recorded nothing");
  await gh.cancelToolCall(ids[0], { reason: "making room" });
  const next = await gh.createToolCall(request);
  assert.equal(next.status, "PENDING", "a settled call makes room for another");
});

test("408 request_timeout: a body that never arrives is answered by the runner, and a confirm is not sent again", { skip: !bodyTimeoutKnown && "needs --body-read-timeout of 5 s or less" }, async () => {
  const created = await create();
  const proxy = await startProxy(() => "stall");
  try {
    const started = Date.now();
    await expectError(client({ baseUrl: proxy.url }).confirmToolCall(created.tool_call_id), RequestTimeoutError, "request_timeout", 408);
    assert.ok(Date.now() - started >= env.bodyReadTimeout * 1000 - 50, "answered after --body-read-timeout");
    assert.equal(proxy.stats.connections, 1, "a confirm is not sent again on a 408");
    assert.equal(proxy.stats.stalled, 1);
  } finally {
    await proxy.close();
  }
  assert.equal((await gh.getToolCall(created.tool_call_id)).status, "PENDING", "nothing was done");
});

test("errors only a failing server gives, played by a proxy from the documented answers", async () => {
  const canned = [
    [500, "Internal Server Error", { error: "Something went wrong on my side.", code: "internal" }, {}, InternalError],
    [502, "Bad Gateway", { error: "The email tool isn't answering right now.", code: "tool_unavailable" }, {}, ToolUnavailableError],
    [503, "Service Unavailable", { error: "The request took longer than the server allows (300 s) and was stopped.", code: "deadline_exceeded" }, { "Retry-After": "1" }, DeadlineExceededError],
    [409, "Conflict", { error: "It's too late to cancel: the email is already being sent.", code: "side_effect_started", status: "EXECUTING", tool_call_id: "tc_0123456789ab" }, {}, SideEffectStartedError],
  ];
  for (const [status, reason, body, headers, Class] of canned) {
    const proxy = await startProxy(() => ({ respond: rawAnswer(status, reason, body, headers) }));
    try {
      await expectError(client({ baseUrl: proxy.url, maxAttempts: 1 }).cancelToolCall("tc_0123456789ab"), Class, body.code, status);
    } finally {
      await proxy.close();
    }
  }
});

test("the application without its database: 503 database_unavailable with Retry-After, waited out on a read, raised at once on a confirm", async () => {
  const degraded = client({ baseUrl: env.degradedUrl, maxAttempts: 2 });
  assert.deepEqual(await degraded.getHealth(), { status: "degraded", database: "unavailable" }, "health answers, it does not raise");
  const started = Date.now();
  await expectError(degraded.getSessionCalls(session("down")), DatabaseUnavailableError, "database_unavailable", 503);
  assert.ok(Date.now() - started >= 1000, "waited Retry-After: 1 once, then tried again");
  const before = Date.now();
  await assert.rejects(degraded.confirmToolCall("tc_0123456789ab"), (e) => e instanceof DatabaseUnavailableError && e.retryAfter === 1);
  assert.ok(Date.now() - before < 1000, "a confirm is not sent again");
});

test("every code of the enum was raised as its class", () => {
  const missing = Object.keys(ERROR_CLASSES).filter((code) => !covered.has(code));
  if (!(env.checkpointTtl > 0 && env.checkpointTtl <= 10)) missing.splice(missing.indexOf("expired"), 1);
  if (!bodyTimeoutKnown) missing.splice(missing.indexOf("request_timeout"), 1);
  // Answered only on the signed routes between Gatehouse's hosts, which no client method
  // reaches; the Rust end-to-end tests raise each (tests/e2e/deployment.rs).
  const hops = new Set(["signature_missing", "signature_stale", "signature_mismatch", "signature_replayed"]);
  assert.deepEqual(missing.filter((code) => !hops.has(code)), []);
});
