// The voice session's rules for the caller, against the running application: a repeated yes over
// a slow confirm asks the checkpoint's question before anything is sent; a Gatehouse that hangs
// gets a filler and a true line within the deadline; a restarted relay asks the waiting question
// and speaks an outcome once across relays.
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { ASKING, CONFIRM, FILLER, OVERTAKEN, PENDING, UNREACHABLE, UNSURE, VoiceSession, CANCEL } from "gatehouse-client";
import { client, seedEmail, session, sleep } from "./support.mjs";

/** What a session said on its own, in order. */
function spoken() {
  const said = [];
  const speak = (sentence) => void said.push(sentence);
  speak.said = said;
  speak.saying = async (fragment, timeoutMs = 20000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = said.find((line) => line.includes(fragment));
      if (found !== undefined) return found;
      assert.ok(Date.now() < deadline, `${JSON.stringify(fragment)} was not said within ${timeoutMs} ms: ${JSON.stringify(said)}`);
      await sleep(50);
    }
  };
  return speak;
}

const callId = (answer) => /Call id: (\S+?)\.\)/.exec(answer)[1];

/** A fetch whose answer to the first POST under `path` arrives `delayMs` late. */
function slowFetch(path, delayMs) {
  let left = 1;
  return async (input, init) => {
    const answer = await fetch(input, init);
    if ((init?.method ?? "GET") === "POST" && new URL(String(input)).pathname.startsWith(path) && left > 0) {
      left -= 1;
      const body = await answer.arrayBuffer();
      await sleep(delayMs);
      return new Response(body, { status: answer.status, headers: answer.headers });
    }
    return answer;
  };
}

test("a repeated yes over a slow confirm asks the checkpoint's question before anything is sent", async () => {
  const conversation = session("voice-again");
  const speak = spoken();
  const gh = client({ fetch: slowFetch("/voice-tools/confirm", 2500) });
  const relay = new VoiceSession({ client: gh, sessionId: conversation, speak });
  const id = callId(await relay.call("send_email", seedEmail, "fc_1"));
  const firstYes = relay.call(CONFIRM, {}, "fc_2");
  while ((await gh.getToolCall(id)).status !== "PREPARED") await sleep(50);
  assert.equal(await relay.call(CONFIRM, {}, "fc_3"), ASKING);
  const question = await speak.saying("is ready");
  assert.equal((await gh.getToolCall(id)).status, "PREPARED", "nothing was sent on the second yes");
  assert.equal(await firstYes, OVERTAKEN, "the first yes's late answer is not to be spoken");
  await relay.call(CONFIRM, {}, "fc_4");
  const sent = await speak.saying("sent to");
  assert.ok(speak.said.indexOf(question) < speak.said.indexOf(sent), JSON.stringify(speak.said));
  assert.ok(!speak.said.some((line) => line.includes("check with you")), JSON.stringify(speak.said));
  const calls = await gh.getSessionCalls(conversation);
  assert.equal(calls.pending_total, 0);
  assert.deepEqual(calls.recent.map((c) => c.status), ["COMPLETED"]);
  relay.close();
});

test("a hanging Gatehouse gets a filler and a true line within the deadline", async () => {
  // Accepts connections and never answers.
  const hanging = net.createServer(() => {});
  await new Promise((resolve) => hanging.listen(0, "127.0.0.1", resolve));
  const sockets = new Set();
  hanging.on("connection", (socket) => sockets.add(socket));
  try {
    const gh = client({ baseUrl: `http://127.0.0.1:${hanging.address().port}` });
    const speak = spoken();
    const relay = new VoiceSession({ client: gh, sessionId: session("voice-hang"), speak, fillerAfterSeconds: 0.3, deadlineSeconds: 1.5 });
    for (const [name, args, expected] of [["send_email", seedEmail, UNREACHABLE], [PENDING, null, UNREACHABLE], [CONFIRM, {}, UNSURE], [CANCEL, {}, UNSURE]]) {
      speak.said.length = 0;
      const started = Date.now();
      assert.equal(await relay.call(name, args, `fc_${name}`), expected, name);
      const waited = Date.now() - started;
      // The deadline bounds the wait (the client alone would wait 30 s and more); the slack is
      // for a busy machine's event loop.
      assert.ok(waited >= 1450 && waited < 4500, `${name}: ${waited} ms`);
      assert.deepEqual(speak.said, [FILLER], name);
    }
    relay.close();
  } finally {
    for (const socket of sockets) socket.destroy();
    hanging.close();
  }
});

test("a restarted relay asks the waiting question, and an outcome is spoken once across relays", async () => {
  const conversation = session("voice-pickup");
  const gh = client();
  const first = spoken();
  let relay = new VoiceSession({ client: gh, sessionId: conversation, speak: first });
  const id = callId(await relay.call("send_email", seedEmail, "fc_1"));
  await relay.call(CONFIRM, {}, "fc_2");
  await first.saying("is ready");
  relay.close();

  const second = spoken();
  relay = new VoiceSession({ client: gh, sessionId: conversation, speak: second });
  assert.ok((await relay.pickUp()).includes(id));
  await second.saying("is ready");
  await relay.call(CONFIRM, {}, "fc_3");
  relay.close(); // killed while it executes, before the outcome is spoken
  while ((await gh.getToolCall(id)).status !== "COMPLETED") await sleep(50);

  const third = spoken();
  const fourth = spoken();
  const relays = [third, fourth].map((speak) => new VoiceSession({ client: gh, sessionId: conversation, speak }));
  await Promise.all(relays.map((r) => r.pickUp()));
  const deadline = Date.now() + 10000;
  while (third.said.length + fourth.said.length === 0) {
    assert.ok(Date.now() < deadline, "no relay spoke the outcome");
    await sleep(50);
  }
  await sleep(500); // room for a second, wrong, telling
  const told = [...third.said, ...fourth.said];
  assert.equal(told.length, 1, JSON.stringify(told));
  assert.ok(told[0].includes("sent to"), told[0]);
  for (const r of relays) r.close();

  const fifth = spoken();
  relay = new VoiceSession({ client: gh, sessionId: conversation, speak: fifth });
  assert.equal(await relay.pickUp(), "Nothing is waiting.");
  await sleep(500);
  assert.deepEqual(fifth.said, []);
  relay.close();
});

test("the outcome mark is one relay's, and its own retry still finds it first", async () => {
  const gh = client();
  const proposed = await gh.createToolCall({ session_id: session("voice-mark"), function_name: "send_email", parameters: seedEmail });
  const id = proposed.tool_call_id;
  await assert.rejects(gh.markOutcomeTold(id), (e) => e.code === "invalid_state" && e.callStatus === "PENDING");
  await gh.cancelToolCall(id);
  assert.deepEqual(await gh.markOutcomeTold(id, { idempotencyKey: "relay-a" }), { tool_call_id: id, status: "CANCELLED", first: true });
  assert.equal((await gh.markOutcomeTold(id, { idempotencyKey: "relay-a" })).first, true, "its own retry");
  assert.equal((await gh.markOutcomeTold(id, { idempotencyKey: "relay-b" })).first, false);
  assert.equal((await gh.markOutcomeTold(id)).first, false);
});
