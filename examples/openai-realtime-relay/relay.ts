/**
 * An OpenAI Agents SDK realtime relay with Gatehouse as its tool backend, in text: each line on
 * stdin is what the caller says; what the agent says is printed, the checkpoint's question and
 * the outcome included when they arrive (docs/openai-realtime.md). A voice relay gives the same
 * RealtimeSession its audio (WebRTC in a browser, or a phone line through SIP); nothing about
 * Gatehouse changes.
 *
 *     GATEHOUSE_URL=http://127.0.0.1:3000 GATEHOUSE_TOKEN=dev-token OPENAI_API_KEY=sk-... \
 *         node relay.js --session call-42 < conversation.txt
 *
 * OPENAI_REALTIME_URL points it at another server speaking the Realtime protocol.
 */
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { RealtimeAgent, RealtimeSession } from "@openai/agents-realtime";
import { Gatehouse } from "gatehouse-client";
import { GatehouseRealtime } from "@gatehouse/openai-realtime";

const INSTRUCTIONS =
  "You are a phone assistant. Propose an action with its tool and read back what it answers; " +
  "call confirm_call only after the caller says yes, change_call when they correct a detail.";

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

const { values } = parseArgs({
  options: {
    session: { type: "string" },
    model: { type: "string", default: process.env.OPENAI_REALTIME_MODEL ?? "gpt-realtime" },
    pause: { type: "string", default: "2" },
  },
});
if (!values.session) throw new Error("--session names the conversation: its calls are found again after a restart");

const client = new Gatehouse({ baseUrl: required("GATEHOUSE_URL"), token: required("GATEHOUSE_TOKEN") });
const tools = await GatehouseRealtime.attach(client, values.session);
const agent = new RealtimeAgent({ name: "assistant", instructions: INSTRUCTIONS, tools: tools.tools });
const session = new RealtimeSession(agent, { transport: "websocket", model: values.model, config: { outputModalities: ["text"] } });
session.on("agent_end", (_context, _agent, text) => {
  if (text) console.log(`agent: ${text}`);
});
session.on("error", (error) => console.error("session error:", error.error));
await session.connect({ apiKey: required("OPENAI_API_KEY"), ...(process.env.OPENAI_REALTIME_URL ? { url: process.env.OPENAI_REALTIME_URL } : {}) });
await tools.bind(session);

const pauseMs = Number(values.pause) * 1000;
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  console.log(`caller: ${line.trim()}`);
  session.sendMessage(line.trim());
  await new Promise((resolve) => setTimeout(resolve, pauseMs));
}
tools.close();
session.close();
