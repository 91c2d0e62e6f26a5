// The seed's relay: it turns a realtime speech model's function calls into Gatehouse calls, speaks
// Gatehouse's sentences, and receives Gatehouse's signed callbacks. Here the model is a scripted
// session file (see session.json and ScriptedSession below); README.md says where a real
// realtime session plugs in.
//
//   node dist/relay.js session.json
//   GATEHOUSE_URL=http://127.0.0.1:3000 GATEHOUSE_TOKEN=dev-token GATEHOUSE_CALLBACK_SECRET=dev-callback-secret
import http from "node:http";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { Gatehouse, GatehouseError, createCallbackHandler, isToolCall } from "gatehouse-client";
import type { Callback, RelayAnswer } from "gatehouse-client";

// ---------------------------------------------------------------------------------------------
// The realtime session: what the relay needs from a speech model's connection.

/** The events of a realtime session the relay acts on (the OpenAI Realtime API's names). */
export type RealtimeEvent =
  | { type: "conversation.item.input_audio_transcription.completed"; transcript: string }
  | { type: "response.function_call_arguments.done"; call_id: string; name: string; arguments: string }
  | { type: "relay.wait_for_callback"; kind: "checkpoint" | "completion" };

export interface RealtimeSession {
  /** What the model and the caller do, in order. */
  events(): AsyncIterable<RealtimeEvent>;
  /** The answer to a function call (`conversation.item.create` of type `function_call_output`, then `response.create`). */
  sendFunctionOutput(callId: string, output: Record<string, unknown>): Promise<void>;
  /** Something the agent must say now, unprompted (a callback): a message item, then `response.create`. */
  say(text: string): Promise<void>;
}

/** A session played from a file: prints what a real session would send to the model and speak. */
class ScriptedSession implements RealtimeSession {
  constructor(
    private readonly script: RealtimeEvent[],
    private readonly waitFor: (kind: "checkpoint" | "completion") => Promise<void>,
  ) {}

  async *events(): AsyncIterable<RealtimeEvent> {
    for (const event of this.script) {
      if (event.type === "relay.wait_for_callback") {
        await this.waitFor(event.kind);
        continue;
      }
      if (event.type === "conversation.item.input_audio_transcription.completed") {
        console.log(`caller: ${event.transcript}`);
      }
      yield event;
    }
  }

  async sendFunctionOutput(callId: string, output: Record<string, unknown>): Promise<void> {
    console.log(`  function_call_output ${callId}: ${JSON.stringify(output)}`);
    if (typeof output.message === "string") console.log(`agent: ${output.message}`);
  }

  async say(text: string): Promise<void> {
    console.log(`agent: ${text}`);
  }
}

// ---------------------------------------------------------------------------------------------
// The relay.

const url = process.env.GATEHOUSE_URL ?? "http://127.0.0.1:3000";
const token = process.env.GATEHOUSE_TOKEN ?? "dev-token";
const secret = process.env.GATEHOUSE_CALLBACK_SECRET ?? "dev-callback-secret";
const file = process.argv[2] ?? "session.json";
const script = JSON.parse(readFileSync(file, "utf8")) as { session_id: string; events: RealtimeEvent[] };
const sessionId = process.env.RELAY_SESSION_ID ?? `${script.session_id}-${randomBytes(3).toString("hex")}`;

// One trace for the whole conversation: every Gatehouse call and callback joins it.
const traceId = randomBytes(16).toString("hex");
const traceparent = () => `00-${traceId}-${randomBytes(8).toString("hex")}-01`;
const gatehouse = new Gatehouse({ baseUrl: url, token, traceparent });

// Callbacks are queued as they arrive and spoken in order at the session's wait points, so the
// printed conversation does not depend on which of two near-simultaneous events printed first.
const arrived: Callback[] = [];
let rejected = 0;
let wake: () => void = () => {};
const handler = createCallbackHandler({
  secret,
  onCallback: (callback): RelayAnswer => {
    arrived.push(callback);
    wake();
    // A progress callback could be answered {cancel: true} if the caller had said "stop".
    return {};
  },
  onRejected: (reason) => {
    rejected++;
    console.log(`  callback refused (${reason})`);
  },
});
const server = http.createServer(handler);
// Gatehouse sends callbacks only to the hosts and ports it allows (`callback_allowed_hosts`, and
// `callback_host` for the outbound network). `gatehouse up` without them allows one:
// 127.0.0.1:3001, this relay's default. RELAY_PORT names another port, or a range `low..high`
// (both included) to take the first free port of, as clients/test does with 23000..23999.
const ports = relayPorts(process.env.RELAY_PORT ?? "3001");
await listenOnOneOf(server, ports);
const callbackUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callbacks`;

function relayPorts(text: string): number[] {
  const match = /^\s*([0-9]+)\s*(?:\.\.\s*([0-9]+)\s*)?$/.exec(text);
  const low = Number(match?.[1]);
  const high = match?.[2] === undefined ? low : Number(match[2]);
  if (!match || !(low >= 1 && low <= high && high <= 65535)) throw new Error(`RELAY_PORT is ${text}: expected a port or a range low..high`);
  return Array.from({ length: high - low + 1 }, (_, i) => low + i);
}

async function listenOnOneOf(listener: http.Server, candidates: number[]): Promise<void> {
  for (const port of candidates) {
    const listening = await new Promise<boolean>((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException) => {
        listener.off("listening", onListening);
        if (error.code === "EADDRINUSE" && candidates.length > 1) resolve(false);
        else reject(error);
      };
      const onListening = () => {
        listener.off("error", onError);
        resolve(true);
      };
      listener.once("error", onError);
      listener.once("listening", onListening);
      listener.listen(port, "127.0.0.1");
    });
    if (listening) return;
  }
  throw new Error(`every port of RELAY_PORT ${candidates[0]}..${candidates.at(-1)} is taken`);
}

let spoken = 0;
let finalStatus: string | undefined;
async function waitFor(kind: "checkpoint" | "completion"): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    while (spoken < arrived.length) {
      const callback = arrived[spoken++]!;
      await speak(callback);
      if (callback.kind === kind) return;
    }
    if (Date.now() > deadline) throw new Error(`no ${kind} callback within 30 s`);
    await new Promise<void>((resolve) => {
      wake = resolve;
      setTimeout(resolve, 1000);
    });
  }
}

async function speak(callback: Callback): Promise<void> {
  // The receiver only hands over callbacks whose X-Gatehouse-Signature verified.
  if (callback.kind === "progress") {
    console.log(`  callback progress ${callback.body.gate}: signature verified`);
  } else if (callback.kind === "checkpoint") {
    console.log(`  callback checkpoint ${callback.body.checkpoint}: signature verified`);
    await session.say(callback.body.message);
  } else {
    console.log(`  callback completion ${callback.body.status}: signature verified`);
    finalStatus = callback.body.status;
    if (callback.body.voice_response) await session.say(callback.body.voice_response);
  }
}

const session: RealtimeSession = new ScriptedSession(script.events, waitFor);
let current: string | undefined; // the call the conversation is about

/** One function call from the model, as Gatehouse calls; answers the function_call_output. */
async function run(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const id = (args.tool_call_id as string | undefined) ?? current;
  const need = () => {
    if (!id) throw new Error(`${name} needs a tool_call_id and there is no call yet`);
    return id;
  };
  switch (name) {
    case "request_tool": {
      const created = await gatehouse.createToolCall({
        session_id: sessionId,
        function_name: args.function_name as string,
        parameters: args.parameters as Record<string, unknown>,
        callback_url: callbackUrl,
      });
      current = created.tool_call_id;
      return { status: "pending_confirmation", tool_call_id: created.tool_call_id, message: created.message };
    }
    case "modify_tool": {
      const modified = await gatehouse.modifyToolCall(need(), {
        parameters: args.parameters as Record<string, unknown>,
        reason: (args.reason as string | undefined) ?? null,
      });
      return { status: "pending_confirmation", tool_call_id: modified.tool_call_id, message: modified.message, modification: modified.modification_applied };
    }
    case "confirm_tool": {
      const confirmed = await gatehouse.confirmToolCall(need());
      return { status: confirmed.status, tool_call_id: confirmed.tool_call_id, message: isToolCall(confirmed) ? confirmed.summary : confirmed.message };
    }
    case "resume_tool": {
      const resumed = await gatehouse.resumeExecution(need(), { action: args.action === "cancel" ? "cancel" : "proceed", reason: (args.reason as string | undefined) ?? null });
      return { status: resumed.status, tool_call_id: resumed.tool_call_id, message: isToolCall(resumed) ? resumed.voice_response : resumed.message };
    }
    case "cancel_tool": {
      const cancelled = await gatehouse.cancelToolCall(need(), { reason: (args.reason as string | undefined) ?? null });
      return { status: cancelled.status, tool_call_id: cancelled.tool_call_id, message: cancelled.message };
    }
    case "get_status": {
      const call = await gatehouse.getToolCall(need());
      return { status: call.status, tool_call_id: call.tool_call_id, message: call.voice_response ?? call.summary };
    }
    default:
      return { status: "error", message: `I can't do ${name}.` };
  }
}

let failed = false;
try {
  for await (const event of session.events()) {
    if (event.type !== "response.function_call_arguments.done") continue;
    console.log(`  model calls ${event.name} ${event.arguments}`);
    const started = performance.now();
    let output: Record<string, unknown>;
    try {
      output = await run(event.name, JSON.parse(event.arguments) as Record<string, unknown>);
    } catch (error) {
      if (!(error instanceof GatehouseError)) throw error;
      // Gatehouse's refusals are sentences to speak; the model gets the code to act on.
      output = { status: "error", code: error.code, message: error.message, fields: error.fields };
    }
    console.log(`  gatehouse answered in ${(performance.now() - started).toFixed(0)} ms`);
    await session.sendFunctionOutput(event.call_id, output);
  }
} catch (error) {
  failed = true;
  console.error(`relay failed: ${(error as Error).message}`);
} finally {
  server.closeAllConnections();
  server.close();
}
console.log(`callbacks: ${arrived.length} received and verified, ${rejected} refused; the call ended ${finalStatus ?? "unsettled"}`);
process.exitCode = failed || rejected > 0 || finalStatus !== "COMPLETED" ? 1 : 0;
