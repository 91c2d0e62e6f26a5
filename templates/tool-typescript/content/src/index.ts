// {{project-name | snake_case}}: {{project-description}}
//
// A Gatehouse tool (docs/tools.md in the Gatehouse repository, "A tool in any language").
// Gatehouse holds each call until the caller confirms it, lets the caller correct it, stops at
// the checkpoint that prepare answers, and sends execute once; gatehouse-tool keeps the contract
// around this code. Replace the bodies of prepare, execute and discard with requests to your
// backend, keyed by call.toolCallId so a retry can never act twice.

import { ToolFailure, checkpoint, defineTool, executed, type Call } from "gatehouse-tool";
import { database, serve, variable } from "gatehouse-tool/spin";

// The tool's own tables (migrations/), in its own schema.
const QUOTES = "tool_{{project-name | snake_case}}.quotes";

interface Order {
  item: string;
  quantity: number;
}

function order(call: Call): Order {
  return call.parameters as unknown as Order;
}

async function short(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return Array.from(digest.slice(0, 4), (b) => b.toString(16).padStart(2, "0")).join("").toUpperCase();
}

const tool = defineTool({
  name: "{{project-name | snake_case}}",
  description: "{{project-description}}",
  parametersSchema: {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    required: ["item", "quantity"],
    additionalProperties: false,
    properties: {
      item: { type: "string", minLength: 1, maxLength: 100, description: "what to order" },
      quantity: { type: "integer", minimum: 1, maximum: 100 },
    },
    examples: [{ item: "printer paper", quantity: 3 }],
  },
  effects: { read_only: false, destructive: false, idempotent: false, open_world: true },

  summarize(parameters) {
    return `I'll order ${parameters.quantity} of ${parameters.item}. Shall I?`;
  },

  async prepare(call) {
    // The reversible step: a quote, a hold, a draft. Its state comes back in call.checkpoint.
    const { item, quantity } = order(call);
    database().execute(
      `INSERT INTO ${QUOTES} (tool_call_id, item, quantity) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
      call.toolCallId,
      item,
      quantity,
    );
    const message = `I've got a quote for ${quantity} of ${item}. Shall I place the order?`;
    return checkpoint(message, { quote: `Q-${await short(call.toolCallId)}` });
  },

  async execute(call) {
    // The irreversible step, sent once. With call.sideEffectMayHaveStarted, ask your backend
    // first whether the order keyed by call.toolCallId exists, and answer that.
    database().execute(`UPDATE ${QUOTES} SET ordered = true WHERE tool_call_id = $1`, call.toolCallId);
    let number = `O-${await short(call.toolCallId)}`;
    // The backend gatehouse new tool --backend named (the component may reach it): the order is
    // placed there, keyed by the call, so a repeat places nothing twice.
    const backend = variable("backend_url");
    if (backend) {
      const { item, quantity } = order(call);
      const answer = await fetch(`${backend}/orders`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": `${call.toolCallId}-order` },
        body: JSON.stringify({ item, quantity }),
      });
      if ([400, 409, 422].includes(answer.status)) throw new ToolFailure("The supplier refused the order.");
      // Anything else but 200 is a crash: Gatehouse retries.
      if (answer.status !== 200) throw new Error(`the backend answered ${answer.status}`);
      number = String(((await answer.json()) as { order: string }).order);
    }
    return executed({ order: number }, `Ordered. The order number is ${number}.`);
  },

  discard(call) {
    // Undo what prepare left (release the hold, drop the quote) for a call that will never run.
    database().execute(`DELETE FROM ${QUOTES} WHERE tool_call_id = $1 AND NOT ordered`, call.toolCallId);
  },
});

serve(tool);
