// Retries only where they are safe, through a misbehaving proxy in front of the real application.
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import {
  CallbackUrlConflictError, DatabaseUnavailableError, DeadlineExceededError, GatehouseConnectionError, RequestTimeoutError,
  TooManyOpenCallsError,
} from "gatehouse-client";
import { client, env, rawAnswer, seedEmail, session, startProxy } from "./support.mjs";

const unavailable = (retryAfter) =>
  rawAnswer(503, "Service Unavailable", { error: "I can't reach my records right now. Please try again in a moment.", code: "database_unavailable" }, { "Retry-After": String(retryAfter) });

test("a create whose answer is lost is retried with the same Idempotency-Key and makes one call", async () => {
  const proxy = await startProxy((n) => (n === 0 ? "drop" : "forward"));
  try {
    const gh = client({ baseUrl: proxy.url });
    const sessionId = session("drop");
    const created = await gh.createToolCall({ session_id: sessionId, function_name: "send_email", parameters: seedEmail });
    assert.equal(proxy.stats.dropped, 1, "the first answer was cut off after the application made the call");
    assert.ok(proxy.stats.forwarded >= 1, "the retry reached the application");
    const context = await client().getSessionCalls(sessionId);
    assert.equal(context.pending_total, 1, "one call, not two");
    assert.equal(context.pending[0].tool_call_id, created.tool_call_id);
  } finally {
    await proxy.close();
  }
});

test("a create with the caller's own Idempotency-Key sent twice answers the first call", async () => {
  const gh = client();
  const request = { session_id: session("idem"), function_name: "send_email", parameters: seedEmail };
  const first = await gh.createToolCall(request, { idempotencyKey: "relay-turn-7" });
  const again = await gh.createToolCall(request, { idempotencyKey: "relay-turn-7" });
  assert.equal(again.tool_call_id, first.tool_call_id);
});

test("a confirm whose answer is lost is not sent again: the relay is told it may have gone through", async () => {
  const gh = client();
  const created = await gh.createToolCall({ session_id: session("confirm-drop"), function_name: "send_email", parameters: seedEmail });
  const proxy = await startProxy((n) => (n === 0 ? "drop" : "forward"));
  try {
    const viaProxy = client({ baseUrl: proxy.url });
    await assert.rejects(viaProxy.confirmToolCall(created.tool_call_id), (e) => e instanceof GatehouseConnectionError && e.maybeSent === true);
    assert.equal(proxy.stats.connections, 1, "sent once");
    const status = await gh.getToolCall(created.tool_call_id, { wait: 10 });
    assert.notEqual(status.status, "PENDING", "the confirm did reach the application");
  } finally {
    await proxy.close();
  }
});

test("an answer cut in the middle of its body is a lost answer: a read is retried, a confirm is not", async () => {
  const gh = client();
  const created = await gh.createToolCall({ session_id: session("truncate"), function_name: "send_email", parameters: seedEmail });
  const proxy = await startProxy((n) => (n === 0 ? "truncate" : "forward"));
  const cutting = await startProxy(() => "truncate");
  try {
    const status = await client({ baseUrl: proxy.url }).getToolCall(created.tool_call_id);
    assert.equal(status.status, "PENDING");
    assert.equal(proxy.stats.truncated, 1, "the first answer was cut, the retry read in full");
    await assert.rejects(client({ baseUrl: cutting.url }).confirmToolCall(created.tool_call_id), (e) => e instanceof GatehouseConnectionError && e.maybeSent === true);
    assert.equal(cutting.stats.connections, 1, "sent once");
    assert.notEqual((await gh.getToolCall(created.tool_call_id, { wait: 10 })).status, "PENDING", "the confirm went through");
  } finally {
    await proxy.close();
    await cutting.close();
  }
});

test("a 503 with Retry-After is waited out and retried, and the retry reaches the application", async () => {
  const proxy = await startProxy((n) => (n === 0 ? { respond: unavailable(1) } : "forward"));
  try {
    const gh = client({ baseUrl: proxy.url });
    const sessionId = session("503");
    const started = Date.now();
    const created = await gh.createToolCall({ session_id: sessionId, function_name: "send_email", parameters: seedEmail });
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 1000, `waited ${elapsed} ms for Retry-After: 1`);
    assert.equal(proxy.stats.answered, 1);
    assert.ok(proxy.stats.forwarded >= 1);
    assert.equal(created.status, "PENDING");
    assert.equal((await client().getSessionCalls(sessionId)).pending_total, 1);
  } finally {
    await proxy.close();
  }
});

test("a modify refused with 503 and Retry-After (it wrote nothing) is retried and goes through", async () => {
  const gh = client();
  const created = await gh.createToolCall({ session_id: session("503-modify"), function_name: "send_email", parameters: seedEmail });
  const proxy = await startProxy((n) => (n === 0 ? { respond: unavailable(1) } : "forward"));
  try {
    const modified = await client({ baseUrl: proxy.url }).modifyToolCall(created.tool_call_id, { parameters: { to: "john.smith@gmail.com" } });
    assert.equal(modified.updated_parameters.to, "john.smith@gmail.com");
    assert.equal(proxy.stats.answered, 1);
  } finally {
    await proxy.close();
  }
});

test("a modify stopped at its deadline is not sent again, whatever its Retry-After: the code decides, not the header", async () => {
  const gh = client();
  const created = await gh.createToolCall({ session_id: session("503-deadline"), function_name: "send_email", parameters: seedEmail });
  const stopped = rawAnswer(503, "Service Unavailable", { error: "The request took longer than the server allows (300 s) and was stopped.", code: "deadline_exceeded" }, { "Retry-After": "1" });
  const proxy = await startProxy((n) => (n === 0 ? { respond: stopped } : "forward"));
  try {
    await assert.rejects(client({ baseUrl: proxy.url }).modifyToolCall(created.tool_call_id, { parameters: { to: "john.smith@gmail.com" } }), (e) => e instanceof DeadlineExceededError && e.retryAfter === 1);
    assert.equal(proxy.stats.connections, 1, "sent once: it may have been carried out");
  } finally {
    await proxy.close();
  }
});

test("a confirm answered 503 is not sent again: the relay gets retryAfter and reads the status first", async () => {
  const gh = client();
  const created = await gh.createToolCall({ session_id: session("503-confirm"), function_name: "send_email", parameters: seedEmail });
  const proxy = await startProxy((n) => (n === 0 ? { respond: unavailable(1) } : "forward"));
  try {
    await assert.rejects(client({ baseUrl: proxy.url }).confirmToolCall(created.tool_call_id, {}, { wait: 5 }), (e) => e instanceof DatabaseUnavailableError && e.retryAfter === 1);
    assert.equal(proxy.stats.connections, 1, "sent once");
    assert.equal((await gh.getToolCall(created.tool_call_id)).status, "PENDING");
  } finally {
    await proxy.close();
  }
});

test("503s past the attempts, or a Retry-After longer than allowed, are raised as DatabaseUnavailableError", async () => {
  const proxy = await startProxy(() => ({ respond: unavailable(1) }));
  try {
    const gh = client({ baseUrl: proxy.url, maxAttempts: 2 });
    await assert.rejects(gh.listTools(), (e) => e instanceof DatabaseUnavailableError && e.retryAfter === 1 && e.status === 503);
    assert.equal(proxy.stats.answered, 2);
  } finally {
    await proxy.close();
  }
  const slow = await startProxy(() => ({ respond: unavailable(120) }));
  try {
    await assert.rejects(client({ baseUrl: slow.url }).listTools(), DatabaseUnavailableError);
    assert.equal(slow.stats.answered, 1, "not waited for two minutes");
  } finally {
    await slow.close();
  }
});

test("a connection refused before sending is retried, even for confirm, and then reported as not sent", async () => {
  const closed = net.createServer();
  await new Promise((resolve) => closed.listen(0, "127.0.0.1", resolve));
  const port = closed.address().port;
  await new Promise((resolve) => closed.close(resolve));
  const gh = client({ baseUrl: `http://127.0.0.1:${port}`, retryBackoffMs: 10 });
  await assert.rejects(gh.confirmToolCall("tc_0123456789ab"), (e) => e instanceof GatehouseConnectionError && e.maybeSent === false);
});

test("a create whose body did not arrive (408 request_timeout from the runner) is sent again with the same key and makes one call", { skip: !(env.bodyReadTimeout > 0 && env.bodyReadTimeout <= 5) && "needs --body-read-timeout of 5 s or less" }, async () => {
  const proxy = await startProxy((n) => (n === 0 ? "stall" : "forward"));
  try {
    const sessionId = session("408");
    const created = await client({ baseUrl: proxy.url, retryBackoffMs: 10 }).createToolCall({ session_id: sessionId, function_name: "send_email", parameters: seedEmail });
    assert.equal(proxy.stats.stalled, 1, "the first attempt got the runner's 408");
    assert.ok(proxy.stats.forwarded >= 1, "the retry reached the application");
    const context = await client().getSessionCalls(sessionId);
    assert.equal(context.pending_total, 1);
    assert.equal(context.pending[0].tool_call_id, created.tool_call_id);
  } finally {
    await proxy.close();
  }
});

test("429 too_many_open_calls, 409 callback_url_conflict, and a 408 on a request that is not idempotent are raised at once, never sent again", async () => {
  const answers = [
    ["create", 429, "Too Many Requests", { error: "This conversation already has 50 requests waiting for an answer.", code: "too_many_open_calls" }, TooManyOpenCallsError,
      (gh) => gh.createToolCall({ session_id: session("429"), function_name: "send_email", parameters: seedEmail })],
    ["confirm", 409, "Conflict", { error: "This call already reports to another callback URL.", code: "callback_url_conflict", status: "PENDING", tool_call_id: "tc_0123456789ab" }, CallbackUrlConflictError,
      (gh) => gh.confirmToolCall("tc_0123456789ab", { callback_url: "http://127.0.0.1:23000/elsewhere" })],
    ["modify", 408, "Request Timeout", { error: "The request's body did not arrive within 30 s.", code: "request_timeout" }, RequestTimeoutError,
      (gh) => gh.modifyToolCall("tc_0123456789ab", { parameters: { to: "john.smith@gmail.com" } })],
    ["cancel", 408, "Request Timeout", { error: "The request's body did not arrive within 30 s.", code: "request_timeout" }, RequestTimeoutError,
      (gh) => gh.cancelToolCall("tc_0123456789ab")],
  ];
  for (const [what, status, reason, body, Class, send] of answers) {
    const proxy = await startProxy(() => ({ respond: rawAnswer(status, reason, body) }));
    try {
      await assert.rejects(send(client({ baseUrl: proxy.url, retryBackoffMs: 10 })), (e) => e instanceof Class && e.status === status && e.code === body.code, what);
      assert.equal(proxy.stats.answered, 1, `${what}: sent once`);
    } finally {
      await proxy.close();
    }
  }
  // A 408 on a read is sent again (three attempts by default), then raised.
  const proxy = await startProxy(() => ({ respond: rawAnswer(408, "Request Timeout", { error: "The request's body did not arrive within 30 s.", code: "request_timeout" }) }));
  try {
    await assert.rejects(client({ baseUrl: proxy.url, retryBackoffMs: 10 }).listTools(), RequestTimeoutError);
    assert.equal(proxy.stats.answered, 3);
  } finally {
    await proxy.close();
  }
});
