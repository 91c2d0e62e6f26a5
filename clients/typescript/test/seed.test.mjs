// The seed's conversation against the running application, every callback checked with the
// client's own verifyCallback.
import { test } from "node:test";
import assert from "node:assert/strict";
import { isToolCall, signCallback, verifyCallback } from "gatehouse-client";
import { client, env, seedEmail, session, startReceiver, traceparent } from "./support.mjs";

test("the seed conversation: create, correct, confirm, checkpoint, proceed, completion", async () => {
  const receiver = await startReceiver();
  try {
    const gh = client();
    const trace = traceparent();
    const traceId = trace.split("-")[1];
    const sessionId = session("seed");

    const created = await gh.createToolCall(
      { session_id: sessionId, function_name: "send_email", callback_url: receiver.url, parameters: seedEmail },
      { traceparent: trace },
    );
    assert.equal(created.status, "PENDING");
    assert.match(created.tool_call_id, /^tc_[0-9a-f]{12}$/);
    assert.match(created.message, /john@gmail\.com/);
    const id = created.tool_call_id;

    const modified = await gh.modifyToolCall(id, { parameters: { to: "john.smith@gmail.com" }, reason: "caller corrected the address" }, { traceparent: trace });
    assert.equal(modified.status, "PENDING");
    assert.deepEqual(modified.modification_applied, { field: "to", old: "john@gmail.com", new: "john.smith@gmail.com" });
    assert.match(modified.message, /john\.smith@gmail\.com/);

    const confirmed = await gh.confirmToolCall(id, {}, { traceparent: trace });
    assert.ok(!isToolCall(confirmed));
    assert.equal(confirmed.status, "EXECUTING");

    const checkpoint = await receiver.next("checkpoint", id);
    assert.equal(checkpoint.body.status, "PREPARED");
    assert.equal(checkpoint.body.resume_webhook, `/resume-execution/${id}`);
    assert.match(checkpoint.body.message, /john\.smith@gmail\.com/);

    const resumed = await gh.resumeExecution(id, { action: "proceed" }, { wait: 10, traceparent: trace });
    assert.ok(isToolCall(resumed));
    assert.equal(resumed.status, "COMPLETED");
    assert.equal(resumed.trace_id, traceId, "the call keeps the relay's trace");
    assert.deepEqual(resumed.parameters_history.map((c) => [c.field, c.old_value, c.new_value]), [["to", "john@gmail.com", "john.smith@gmail.com"]]);

    const completion = await receiver.next("completion", id);
    assert.equal(completion.body.status, "COMPLETED");
    assert.match(completion.body.voice_response, /john\.smith@gmail\.com/);

    const status = await gh.getToolCall(id);
    assert.equal(status.status, "COMPLETED");
    const context = await gh.getSessionCalls(sessionId);
    assert.equal(context.recent_total, 1);
    assert.equal(context.recent[0].tool_call_id, id);
    const listed = await gh.listToolCalls({ session_id: sessionId, status: "COMPLETED" });
    assert.deepEqual(listed.calls.map((c) => c.tool_call_id), [id]);
    assert.equal(listed.next_cursor, null);
    const attempts = await gh.listCallbackAttempts(id);
    assert.deepEqual(attempts.callbacks.map((a) => [a.kind, a.attempt, a.status_code]), [["progress", 1, 200], ["checkpoint", 1, 200], ["completion", 1, 200]]);

    // Every delivery, checked again byte for byte with verifyCallback; nothing was refused.
    const mine = receiver.raw.filter((r) => JSON.parse(r.body).tool_call_id === id);
    assert.deepEqual(mine.map((r) => r.headers["x-gatehouse-callback"]), ["progress", "checkpoint", "completion"]);
    for (const delivery of mine) {
      const header = delivery.headers["x-gatehouse-signature"];
      assert.match(header, /^t=[0-9]+,v1=[0-9a-f]{64},n=[0-9a-f]{32}$/);
      assert.ok(verifyCallback(env.secret, header, "/callbacks", delivery.body), "genuine");
      assert.equal(JSON.parse(delivery.body).trace_id, traceId);
      assert.equal(delivery.headers.traceparent.split("-")[1], traceId);
    }
    assert.deepEqual(receiver.rejected, []);

    // The same real deliveries, altered: a tampered body, a wrong secret, a stale timestamp.
    const { headers, body } = mine.at(-1);
    const header = headers["x-gatehouse-signature"];
    const t = Number(/t=([0-9]+)/.exec(header)[1]);
    const tampered = Buffer.from(body.toString().replace("COMPLETED", "CANCELLED"));
    assert.ok(!verifyCallback(env.secret, header, "/callbacks", tampered), "tampered body");
    assert.ok(!verifyCallback(env.secret, header, "/other-relay", body), "posted to another path");
    assert.ok(!verifyCallback("not-the-secret", header, "/callbacks", body), "wrong secret");
    assert.ok(!verifyCallback(env.secret, header, "/callbacks", body, { nowSeconds: t + 301 }), "stale timestamp");
    const resigned = signCallback(env.secret, "/callbacks", body, t - 3600);
    assert.ok(!verifyCallback(env.secret, resigned, "/callbacks", body), "re-signed an hour ago");
  } finally {
    await receiver.close();
  }
});

test("the receiver answers 401 to a forged, tampered, re-targeted, replayed or stale callback and never passes it on", async () => {
  const receiver = await startReceiver();
  try {
    const body = JSON.stringify({ tool_call_id: "tc_0123456789ab", session_id: "s", status: "COMPLETED", result: null, voice_response: "sent", execution_time_ms: 1, trace_id: null });
    const now = Math.floor(Date.now() / 1000);
    const post = (signature, payload = body) =>
      fetch(receiver.url, { method: "POST", body: payload, headers: { "Content-Type": "application/json", "X-Gatehouse-Callback": "completion", "X-Gatehouse-Signature": signature } });
    const genuine = signCallback(env.secret, "/callbacks", body, now);
    assert.equal((await post(genuine)).status, 200);
    assert.equal((await post(genuine)).status, 401, "replayed: its nonce was spent");
    assert.equal((await post(signCallback(env.secret, "/callbacks", body, now), body.replace("sent", "lost"))).status, 401);
    assert.equal((await post(signCallback(env.secret, "/other-relay", body, now))).status, 401);
    assert.equal((await post(signCallback("wrong", "/callbacks", body, now))).status, 401);
    assert.equal((await post(signCallback(env.secret, "/callbacks", body, now - 600))).status, 401);
    assert.equal(receiver.callbacks.length, 1);
    assert.equal(receiver.rejected.length, 5);
  } finally {
    await receiver.close();
  }
});

test("a progress callback answered with cancel stops the call before anything is prepared", async () => {
  const receiver = await startReceiver((c) => (c.kind === "progress" ? { cancel: true, reason: "caller hung up" } : {}));
  try {
    const gh = client();
    const created = await gh.createToolCall({ session_id: session("cancel"), function_name: "send_email", callback_url: receiver.url, parameters: seedEmail });
    const settled = await gh.confirmToolCall(created.tool_call_id, {}, { wait: 10 });
    assert.ok(isToolCall(settled));
    assert.equal(settled.status, "CANCELLED");
    const completion = await receiver.next("completion", created.tool_call_id);
    assert.equal(completion.body.status, "CANCELLED");
  } finally {
    await receiver.close();
  }
});

// The fields of the SQL functions tool_call_summary_json and tool_call_json (migrations/V13).
const SUMMARY_FIELDS = [
  "tool_call_id", "session_id", "connection_id", "intent_id", "function_name", "tool", "parameters", "status", "status_since",
  "summary",
  "voice_response", "error_message", "attempts", "corrections", "current_operation", "next_retry_at", "overdue", "expires_at",
  "created_at", "completed_at",
];
const FULL_FIELDS = [
  ...SUMMARY_FIELDS, "tenant", "parameters_history", "status_history", "checkpoint", "result", "callback_url",
  "side_effect_started_at", "trace_id", "confirmed_at", "prepared_at", "executed_at", "execution_time_ms",
];

test("the list answers each call as a CallSummary, the status route in full, both saying what the call waits on", async () => {
  const receiver = await startReceiver();
  try {
    const gh = client();
    const sessionId = session("summary");
    const created = await gh.createToolCall({ session_id: sessionId, function_name: "send_email", callback_url: receiver.url, parameters: seedEmail });
    const id = created.tool_call_id;
    await gh.modifyToolCall(id, { parameters: { to: "john.smith@gmail.com" } });

    const [pending] = (await gh.listToolCalls({ session_id: sessionId })).calls;
    assert.deepEqual(Object.keys(pending).sort(), [...SUMMARY_FIELDS].sort(), "a summary: parameters but no histories or result");
    assert.equal(pending.status, "PENDING");
    assert.equal(pending.current_operation, "awaiting_confirmation");
    assert.equal(pending.corrections, 1);
    assert.equal(pending.overdue, false);
    assert.equal(pending.next_retry_at, null);
    const full = await gh.getToolCall(id);
    assert.deepEqual(Object.keys(full).sort(), [...FULL_FIELDS].sort(), "the call in full");
    assert.equal(full.status_since, full.status_history.at(-1).timestamp, "status_since is the last status change");
    for (const field of SUMMARY_FIELDS) assert.deepEqual(full[field], pending[field], field);

    const prepared = await gh.confirmToolCall(id, {}, { wait: 10 });
    assert.ok(isToolCall(prepared));
    assert.deepEqual(Object.keys(prepared).sort(), [...FULL_FIELDS].sort(), "a confirm under Prefer: wait answers the call in full");
    assert.equal(prepared.status, "PREPARED");
    assert.equal(prepared.current_operation, "awaiting_resume");
    const done = await gh.resumeExecution(id, { action: "proceed" }, { wait: 10 });
    assert.ok(isToolCall(done));
    assert.equal(done.status, "COMPLETED");
    assert.equal(done.current_operation, null);
    const [settled] = (await gh.listToolCalls({ session_id: sessionId })).calls;
    assert.equal(settled.status, "COMPLETED");
    assert.equal(settled.current_operation, null);
    assert.equal(settled.voice_response, done.voice_response);
    assert.equal(settled.status_since, done.status_since);
    await receiver.next("completion", id);
  } finally {
    await receiver.close();
  }
});

test("the sweep reports what it did, discards retried included", async () => {
  const report = await client().sweep();
  assert.deepEqual(Object.keys(report).sort(), ["discards_retried", "expired", "failed", "redriven", "reported", "session_context_purged"]);
  for (const value of Object.values(report)) assert.ok(Number.isInteger(value) && value >= 0);
});
