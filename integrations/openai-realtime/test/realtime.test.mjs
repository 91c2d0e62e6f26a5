// @gatehouse/openai-realtime in the SDK's own RealtimeSession, RealtimeAgent and WebSocket
// transport, talking to a scripted model (scripted-realtime.mjs, a local server speaking the
// Realtime protocol), against the running Gatehouse (integrations/test passes its address).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { RealtimeAgent, RealtimeSession } from "@openai/agents-realtime";
import { ASKING, Gatehouse, OVERTAKEN, UNREACHABLE } from "gatehouse-client";
import { GatehouseRealtime, assistantText } from "@gatehouse/openai-realtime";
import { SEED, ScriptedRealtime } from "./scripted-realtime.mjs";

const URL = process.env.GATEHOUSE_URL;
const TOKEN = process.env.GATEHOUSE_TOKEN;
const DEGRADED_URL = process.env.GATEHOUSE_DEGRADED_URL;
const INSTRUCTIONS = "You are a phone assistant. Propose with a tool, and confirm only after the caller says yes.";

const gatehouse = new Gatehouse({ baseUrl: URL, token: TOKEN });
const conversation = (name) => `realtime-${name}-${randomUUID().slice(0, 12)}`;

/** The scripted model, closed when the test ends however it ends. */
function scripted(t, script) {
  const model = new ScriptedRealtime(script);
  t.after(() => model.close());
  return model;
}

/** A relay: the SDK's session on the SDK's WebSocket transport, to the scripted model. */
async function relay(t, model, client, conversationId, options = {}) {
  const tools = await GatehouseRealtime.attach(client, conversationId, options);
  const agent = new RealtimeAgent({ name: "assistant", instructions: INSTRUCTIONS, tools: tools.tools });
  const session = new RealtimeSession(agent, { transport: "websocket", model: "scripted", config: { outputModalities: ["text"] } });
  session.on("error", (error) => console.error("session error:", error.error));
  await session.connect({ apiKey: "scripted", url: await model.url() });
  await tools.bind(session);
  t.after(() => {
    tools.close();
    session.close();
  });
  return { tools, session, said: () => assistantText(session.history) };
}

async function until(what, check, seconds = 15) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await check();
    if (value) return value;
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const saidSomething = (r, fragment) => until(`the agent to say "${fragment}"`, () => r.said().some((line) => line.includes(fragment)));

async function settled(conversationId) {
  return until("the conversation's calls to settle", async () => {
    const calls = await gatehouse.getSessionCalls(conversationId);
    return calls.pending_total === 0 && calls.recent_total > 0 ? calls : undefined;
  });
}

test("the seed conversation, with a relay restart between the proposal and the yes", async (t) => {
  const id = conversation("seed");
  const model = scripted(t, [
    [["send_email", SEED]],
    [["change_call", { changes: { to: "john.smith@gmail.com" } }]],
    "Got it: john.smith@gmail.com. Shall I send it?",
  ]);
  const first = await relay(t, model, gatehouse, id);
  first.session.sendMessage("Email John about tomorrow's meeting.");
  await saidSomething(first, "john@gmail.com"); // the read-back, spoken while the approval waits
  assert.equal(first.tools.pendingApprovals.length, 1);
  first.session.sendMessage("Actually it's john.smith@gmail.com.");
  await saidSomething(first, "Got it: john.smith@gmail.com");
  const corrected = model.outputs().at(-1);
  assert.match(corrected.output, /john\.smith@gmail\.com/);
  first.tools.close();
  first.session.close();

  // The relay restarts: a new client, agent, session and connection on the same conversation.
  model.script.push([["confirm_call", {}]], "On it.", [["confirm_call", {}]], "Going ahead.");
  const client = new Gatehouse({ baseUrl: URL, token: TOKEN });
  const second = await relay(t, model, client, id);
  // No SDK approval is rebuilt by hand: the waiting call goes into the new conversation, and the
  // caller's yes confirms it in Gatehouse.
  assert.equal(second.tools.pendingApprovals.length, 0);
  assert.equal(second.tools.restoredCalls.length, 1);
  const [waitingId] = second.tools.restoredCalls;
  await until("the waiting call to be put into the new conversation", () =>
    model.received.some((e) => e.type === "conversation.item.create" && e.item.type === "message" && JSON.stringify(e.item).includes(waitingId)),
  );
  second.session.sendMessage("Yes, send it.");
  await saidSomething(second, "is ready"); // the checkpoint's question
  second.session.sendMessage("Go ahead.");
  await saidSomething(second, "sent to john.smith@gmail.com");
  const calls = await settled(id);
  assert.equal(calls.recent_total, 1);
  assert.equal(calls.recent[0].status, "COMPLETED");
  assert.equal(calls.recent[0].parameters.to, "john.smith@gmail.com");
});

test("a barge-in and the same call made again, before and after the yes: exactly one email", async (t) => {
  const id = conversation("again");
  const model = scripted(t, [
    [["send_email", SEED]],
    [["send_email", SEED]], // the caller talked over the read-back; the model proposes again
    "I'll email John about the meeting. Shall I?",
    [["confirm_call", {}]],
    "On it.",
    [["send_email", SEED]], // interrupted while it runs; the model tries once more
    "It is already on its way.",
    [["confirm_call", {}]],
    "Going ahead.",
  ]);
  const r = await relay(t, model, gatehouse, id);
  let interruptions = 0;
  r.session.on("audio_interrupted", () => (interruptions += 1));
  r.session.sendMessage("Email John.");
  await saidSomething(r, "john@gmail.com");
  model.bargeIn();
  await until("the SDK to take the barge-in", () => interruptions === 1);
  await until("the unheard rest of the read-back to be cut", () => model.received.some((e) => e.type === "conversation.item.truncate"));
  r.session.sendMessage("Sorry, what did you say?");
  await saidSomething(r, "Shall I?");
  assert.match(model.outputs().at(-1).output, /already waiting/);
  const waiting = await gatehouse.getSessionCalls(id);
  assert.equal(waiting.pending_total, 1, "one call waits, not two");
  r.session.sendMessage("Yes.");
  await saidSomething(r, "On it.");
  model.bargeIn();
  await until("the SDK to take the second barge-in", () => interruptions === 2);
  r.session.sendMessage("Hello? Did it work?");
  await saidSomething(r, "already on its way");
  assert.match(model.outputs().find((o) => /already under way/.test(o.output))?.output ?? "", /already under way/);
  await saidSomething(r, "is ready");
  r.session.sendMessage("Go ahead.");
  await saidSomething(r, "sent to john@gmail.com");
  const calls = await settled(id);
  assert.equal(calls.recent_total, 1, "one email");
  assert.equal(calls.recent[0].status, "COMPLETED");
});

test("the application's approve() confirms the held call and reject() cancels it", async (t) => {
  const id = conversation("decide");
  const model = scripted(t, [[["send_email", SEED]], "Sent, as you approved.", [["send_email", { ...SEED, subject: "Lunch" }]], "Not sent."]);
  const r = await relay(t, model, gatehouse, id);
  const requested = () => new Promise((resolve) => r.session.once("tool_approval_requested", (_c, _a, request) => resolve(request)));
  let request = requested();
  r.session.sendMessage("Email John.");
  const approved = (await request).approvalItem;
  const proposed = await until("the proposal to be held", () => r.tools.pendingApprovals[0]);
  await r.session.approve(approved);
  await until("the approved call to leave PENDING", async () => (await gatehouse.getToolCall(proposed.toolCallId)).status !== "PENDING");

  request = requested();
  r.session.sendMessage("And one about lunch.");
  const refused = (await request).approvalItem;
  const lunch = await until("the second proposal to be held", () => r.tools.pendingApprovals.find((held) => held.toolCallId !== proposed.toolCallId));
  await r.session.reject(refused);
  await until("the rejected call to be cancelled", async () => (await gatehouse.getToolCall(lunch.toolCallId)).status === "CANCELLED");
});

test("Gatehouse unavailable: the model is told so and nothing is half done", async (t) => {
  const id = conversation("down");
  const model = scripted(t, [[["send_email", SEED]], "I can't do that right now."]);
  const degraded = new Gatehouse({ baseUrl: DEGRADED_URL, token: TOKEN, maxAttempts: 1 });
  const r = await relay(t, model, degraded, id);
  r.session.sendMessage("Email John.");
  await saidSomething(r, "I can't do that right now.");
  assert.equal(model.outputs().at(-1).output, UNREACHABLE);
  assert.equal(r.tools.pendingApprovals.length, 0);
  const calls = await gatehouse.getSessionCalls(id);
  assert.equal(calls.pending_total + calls.recent_total, 0);
});

/** A fetch whose first answer to a confirm arrives 2.5 s late. */
function slowConfirm() {
  let left = 1;
  return async (input, init) => {
    const answer = await fetch(input, init);
    if (new globalThis.URL(String(input)).pathname.startsWith("/voice-tools/confirm") && left > 0) {
      left -= 1;
      const body = await answer.arrayBuffer();
      await new Promise((resolve) => setTimeout(resolve, 2500));
      return new Response(body, { status: answer.status, headers: answer.headers });
    }
    return answer;
  };
}

/** A fetch for a Gatehouse that hangs once the relay has its tools: never answered. */
function hanging() {
  return (input, init) =>
    new globalThis.URL(String(input)).pathname === "/voice-tools/tools" ? fetch(input, init) : new Promise(() => {});
}

test("a repeated yes over a slow confirm asks the checkpoint's question before anything is sent", async (t) => {
  const id = conversation("yes-again");
  const proposed = await gatehouse.createToolCall({ session_id: id, function_name: "send_email", parameters: SEED });
  // Turns in the order the session asks for responses: the two yeses, the answer to the second
  // (the question is being asked), the answer to the first (overtaken), the go-ahead, its answer.
  const model = scripted(t, [[["confirm_call", {}]], [["confirm_call", {}]], "Let me check.", "Okay.", [["confirm_call", {}]], "Sent."]);
  const r = await relay(t, model, new Gatehouse({ baseUrl: URL, token: TOKEN, fetch: slowConfirm() }), id);
  r.session.sendMessage("Yes, send it.");
  await until("the call to wait at its checkpoint", async () => (await gatehouse.getToolCall(proposed.tool_call_id)).status === "PREPARED");
  r.session.sendMessage("Did you send it? Yes, send it.");
  await saidSomething(r, "is ready"); // the question, before anything is sent
  assert.equal((await gatehouse.getToolCall(proposed.tool_call_id)).status, "PREPARED");
  await until("the second yes's answer", () => model.outputs().some((o) => o.output === ASKING));
  await until("the first yes's late answer", () => model.outputs().some((o) => o.output === OVERTAKEN));
  r.session.sendMessage("Yes, go ahead.");
  await saidSomething(r, "sent to john@gmail.com");
  const lines = r.said();
  assert.ok(lines.findIndex((l) => l.includes("is ready")) < lines.findIndex((l) => l.includes("sent to")), JSON.stringify(lines));
  assert.ok(!lines.concat(model.outputs().map((o) => o.output)).some((l) => l.includes("check with you")), JSON.stringify(lines));
  const calls = await settled(id);
  assert.deepEqual(calls.recent.map((c) => c.status), ["COMPLETED"]);
});

test("a hanging Gatehouse: the model gets a true line within the deadline", async (t) => {
  const id = conversation("hang");
  const model = scripted(t, [[["send_email", SEED]], "I can't reach it right now.", [["pending_calls", {}]], "Still nothing."]);
  const r = await relay(t, model, new Gatehouse({ baseUrl: URL, token: TOKEN, fetch: hanging() }), id, { deadlineSeconds: 1.5 });
  const started = Date.now();
  r.session.sendMessage("Email John.");
  await saidSomething(r, "I can't reach it right now.");
  // The deadline bounds the wait (the client alone would wait 30 s and more); the slack is for a
  // busy machine.
  assert.ok(Date.now() - started < 5000, `${Date.now() - started} ms`);
  assert.equal(model.outputs().at(-1).output, UNREACHABLE);
  r.session.sendMessage("Is anything waiting?");
  await saidSomething(r, "Still nothing.");
  assert.equal(model.outputs().at(-1).output, UNREACHABLE);
});

test("a restarted relay asks the waiting question, and an outcome is spoken once across relays", async (t) => {
  const id = conversation("pickup");
  const waiting = await gatehouse.createToolCall({ session_id: id, function_name: "send_email", parameters: SEED });
  assert.equal((await gatehouse.confirmToolCall(waiting.tool_call_id, {}, { wait: 10 })).status, "PREPARED");
  const model = scripted(t, [[["confirm_call", {}]], "Sending it."]);
  const r = await relay(t, model, gatehouse, id);
  await saidSomething(r, "is ready"); // asked again by the new relay
  r.session.sendMessage("Yes, send it.");
  await saidSomething(r, "sent to john@gmail.com");
  r.tools.close();
  r.session.close();

  const finished = conversation("finished");
  const done = await gatehouse.createToolCall({ session_id: finished, function_name: "send_email", parameters: SEED });
  await gatehouse.confirmToolCall(done.tool_call_id, {}, { wait: 10 });
  assert.equal((await gatehouse.resumeExecution(done.tool_call_id, { action: "proceed" }, { wait: 10 })).status, "COMPLETED");
  let told = 0;
  for (let i = 0; i < 2; i += 1) {
    const quiet = scripted(t, []);
    const again = await relay(t, quiet, gatehouse, finished);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    told += again.said().filter((line) => line.includes("sent to")).length;
    again.tools.close();
    again.session.close();
  }
  assert.equal(told, 1);
});

/** The nearest-rank percentile of `samples` (`fraction` 0.5 for p50, 0.99 for p99). */
function percentile(samples, fraction) {
  const ordered = [...samples].sort((a, b) => a - b);
  return ordered[Math.max(0, Math.min(ordered.length - 1, Math.round(fraction * ordered.length + 0.5) - 1))];
}

test("what Gatehouse costs a turn (measured, not asserted)", async (t) => {
  // From each function call (the proposal, the yes, the go-ahead) to what the relay sends for it
  // (the read-back spoken, the approved call's output, the go-ahead's output), over several
  // conversations, beside Gatehouse's own routes (docs/benchmarks.md, "What Gatehouse costs a
  // turn"). What is asserted is that each conversation sent its email.
  const steps = { propose: [], confirm: [], proceed: [] };
  const route = { propose: [], confirm: [], proceed: [] };
  for (let n = 0; n < 8; n += 1) {
    const id = conversation(`cost-${n}`);
    const model = scripted(t, [[["send_email", SEED]], [["confirm_call", {}]], "On it.", [["confirm_call", {}]], "Sending it."]);
    const r = await relay(t, model, gatehouse, id);
    r.session.sendMessage("Email John.");
    await saidSomething(r, "john@gmail.com");
    r.session.sendMessage("Yes.");
    await saidSomething(r, "is ready");
    r.session.sendMessage("Go ahead.");
    await saidSomething(r, "sent to");
    const [proposal, yes, goAhead] = [...model.calledAt.entries()];
    const spokenAfter = (at) => model.received.find((e) => e.type === "response.create" && e.response?.instructions && e.receivedAt > at);
    const outputFor = (callId) => model.received.find((e) => e.type === "conversation.item.create" && e.item?.type === "function_call_output" && e.item.call_id === callId);
    steps.propose.push(spokenAfter(proposal[1]).receivedAt - proposal[1]);
    steps.confirm.push(outputFor(proposal[0]).receivedAt - yes[1]);
    steps.proceed.push(outputFor(goAhead[0]).receivedAt - goAhead[1]);
    const calls = await settled(id);
    assert.deepEqual(calls.recent.map((c) => c.status), ["COMPLETED"]);
    r.tools.close();
    r.session.close();

    const created = await timed(route.propose, () => gatehouse.createToolCall({ session_id: `${id}-direct`, function_name: "send_email", parameters: SEED }));
    await timed(route.confirm, () => gatehouse.confirmToolCall(created.tool_call_id));
    await until("PREPARED", async () => (await gatehouse.getToolCall(created.tool_call_id)).status === "PREPARED");
    await timed(route.proceed, () => gatehouse.resumeExecution(created.tool_call_id, { action: "proceed" }));
  }
  const lines = ["openai-realtime: from the model's function call to what the relay sends for it, beside Gatehouse's own route (ms)"];
  for (const step of ["propose", "confirm", "proceed"]) {
    const [ours, direct] = [steps[step], route[step]];
    lines.push(
      `  ${step.padEnd(8)} n=${String(ours.length).padStart(2)}  p50 ${percentile(ours, 0.5).toFixed(1).padStart(7)}  p99 ${percentile(ours, 0.99).toFixed(1).padStart(7)}` +
        `   route p50 ${percentile(direct, 0.5).toFixed(1).padStart(7)}  p99 ${percentile(direct, 0.99).toFixed(1).padStart(7)}`,
    );
  }
  if (process.env.GATEHOUSE_TURN_COST) {
    const { mkdirSync, writeFileSync } = await import("node:fs");
    mkdirSync(process.env.GATEHOUSE_TURN_COST, { recursive: true });
    writeFileSync(join(process.env.GATEHOUSE_TURN_COST, "openai-realtime.txt"), `${lines.join("\n")}\n`);
  }
});

async function timed(samples, request) {
  const started = performance.now();
  const answer = await request();
  samples.push(performance.now() - started);
  return answer;
}

test("the example relay plays the seed conversation", async (t) => {
  const id = conversation("example");
  const model = scripted(t, [
    [["send_email", SEED]],
    [["change_call", { changes: { to: "john.smith@gmail.com" } }]],
    "Got it: john.smith@gmail.com. Shall I send it?",
    [["confirm_call", {}]],
    "On it.",
    [["confirm_call", {}]],
    "Going ahead.",
  ]);
  const here = dirname(fileURLToPath(import.meta.url));
  const child = spawn(process.execPath, [join(here, "..", "example", "relay.js"), "--session", id, "--pause", "0"], {
    env: { ...process.env, OPENAI_REALTIME_URL: await model.url(), OPENAI_API_KEY: "scripted" },
    stdio: ["pipe", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (chunk) => (out += chunk));
  const lines = () => out.split("\n");
  const sayLine = async (line, waitFor) => {
    child.stdin.write(`${line}\n`);
    await until(`the relay to print "${waitFor}"`, () => lines().some((l) => l.includes(waitFor)));
  };
  await sayLine("Email John about tomorrow's meeting.", "john@gmail.com");
  await sayLine("Actually it's john.smith@gmail.com.", "Got it");
  await sayLine("Yes, send it.", "is ready");
  await sayLine("Go ahead.", "sent to john.smith@gmail.com");
  child.stdin.end();
  const code = await new Promise((resolve) => child.on("exit", resolve));
  assert.equal(code, 0, out);
  assert.ok(lines().some((l) => l.startsWith("caller: Go ahead.")), out);
});
