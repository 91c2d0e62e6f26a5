// The contract server's rules, in-process: signatures, replays, unknown operations, the
// ordering rules and execute's at-most-once, and the field problems of validate. The same rules
// are checked from outside, against the built component, by the conformance kit
// (tests/e2e/tool_sdks.rs).

import assert from "node:assert/strict";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import {
  ContractServer,
  MemoryStore,
  ToolFailure,
  check,
  checkpoint,
  defineTool,
  executed,
  sign,
  verify,
  type Call,
  type Reply,
} from "../src/index.js";

const SECRET = "contract-secret-for-tests";
const BASE = "/internal/tools/count";

/** A tool that counts what it really did. */
function counter() {
  const seen = { done: [] as string[], discarded: [] as string[], mayHaveStarted: [] as boolean[], crashNext: false };
  const tool = defineTool({
    name: "count",
    description: "Counts.",
    parametersSchema: {
      type: "object",
      required: ["n"],
      additionalProperties: false,
      properties: { n: { type: "integer", minimum: 1, maximum: 10 } },
    },
    summarize: (parameters) => `I'll count to ${parameters.n}.`,
    async prepare(call: Call) {
      await Promise.resolve();
      return checkpoint(`Ready to count to ${call.parameters.n}.`, { n: call.parameters.n });
    },
    execute(call: Call) {
      seen.mayHaveStarted.push(call.sideEffectMayHaveStarted);
      if (seen.crashNext) {
        seen.crashNext = false;
        throw new Error("the backend went away");
      }
      if (call.parameters.n === 7) throw new ToolFailure("Seven is unlucky.");
      if (call.parameters.n === 8) throw new ToolFailure("The counter went quiet.", { mayHaveActed: true });
      seen.done.push(call.toolCallId);
      return executed({ counted: call.parameters.n }, `Counted to ${call.parameters.n}.`);
    },
    discard(call: Call) {
      seen.discarded.push(call.toolCallId);
    },
  });
  return { tool, seen };
}

interface Options {
  secret?: string;
  at?: number;
  nonce?: string;
}

async function signed(operation: string, body: unknown, options: Options = {}) {
  const path = `${BASE}/tool/${operation}`;
  const raw = new TextEncoder().encode(JSON.stringify(body));
  const at = Math.floor(options.at ?? Date.now() / 1000);
  const header = await sign(options.secret ?? SECRET, at, options.nonce ?? randomBytes(16).toString("hex"), "POST", path, raw);
  return { path, header, raw };
}

function request(method: string, path: string, body: Uint8Array, header?: string, chained = false) {
  const headers = new Headers(header ? { "x-gatehouse-contract-signature": header } : {});
  return { method, path, headers, body, chained };
}

async function run(server: ContractServer, operation: string, body: unknown, options: Options = {}): Promise<[number, any]> {
  const { path, header, raw } = await signed(operation, body, options);
  const reply: Reply = await server.handle(request("POST", path, raw, header));
  return [reply.status, reply.body];
}

const empty = new Uint8Array();

interface Vector {
  secret: string;
  timestamp: number;
  nonce: string;
  method: string;
  target: string;
  idempotency_key: string;
  body: string;
  header: string;
}

/** A file of the repository, found from wherever the tests were built to. */
function repositoryFile(relative: string): string {
  for (let folder = dirname(fileURLToPath(import.meta.url)); ; folder = dirname(folder)) {
    const candidate = join(folder, relative);
    if (existsSync(candidate)) return readFileSync(candidate, "utf8");
    if (dirname(folder) === folder) throw new Error(`${relative} not found`);
  }
}

/** openapi/signing-test-vector.json: the recipe's worked example. */
function vector(): Vector {
  return JSON.parse(repositoryFile("openapi/signing-test-vector.json")) as Vector;
}

describe("the contract server", () => {
  it("answers describe unsigned, and 404 for an unknown operation", async () => {
    const server = new ContractServer(counter().tool, [SECRET], new MemoryStore());
    const described = await server.handle(request("GET", `${BASE}/tool/describe`, empty));
    assert.equal(described.status, 200);
    assert.deepEqual((described.body as any).name, "count");
    assert.equal((described.body as any).needs_checkpoint, true);
    for (const method of ["GET", "POST", "DELETE"]) {
      const unknown = await server.handle(request(method, `${BASE}/tool/launch`, empty));
      assert.deepEqual([unknown.status, (unknown.body as any).code], [404, "not_found"]);
    }
    const notPost = await server.handle(request("GET", `${BASE}/tool/execute`, empty));
    assert.deepEqual([notPost.status, (notPost.body as any).code], [405, "method_not_allowed"]);
  });

  it("refuses a wrong, stale or missing signature, a changed path, key or body, and a replay, saying which", async () => {
    const server = new ContractServer(counter().tool, [SECRET], new MemoryStore());
    const body = { tool_call_id: "tc_sig", parameters: { n: 2 } };
    const code = (reply: Reply) => [reply.status, (reply.body as any).code];
    assert.equal((await run(server, "prepare", body, { secret: "another-secret" }))[1].code, "signature_mismatch");
    assert.equal((await run(server, "prepare", body, { at: Date.now() / 1000 - 301 }))[1].code, "signature_stale");
    const unsigned = await signed("prepare", body);
    assert.deepEqual(code(await server.handle(request("POST", unsigned.path, unsigned.raw))), [401, "signature_missing"]);
    const asExecute = await signed("prepare", body);
    const retargeted = request("POST", `${BASE}/tool/execute`, asExecute.raw, asExecute.header);
    assert.deepEqual(code(await server.handle(retargeted)), [401, "signature_mismatch"]);
    const changed = await signed("prepare", body);
    const other = new TextEncoder().encode(JSON.stringify({ ...body, parameters: { n: 9 } }));
    assert.deepEqual(code(await server.handle(request("POST", changed.path, other, changed.header))), [401, "signature_mismatch"]);
    // An Idempotency-Key added on the way: the key is signed (empty when there is none).
    const keyed = await signed("prepare", body);
    const withKey = request("POST", keyed.path, keyed.raw, keyed.header);
    withKey.headers.set("idempotency-key", "k");
    assert.deepEqual(code(await server.handle(withKey)), [401, "signature_mismatch"]);

    const nonce = randomBytes(16).toString("hex");
    assert.equal((await run(server, "prepare", body, { nonce }))[0], 200);
    const [status, answer] = await run(server, "prepare", body, { nonce });
    assert.deepEqual([status, answer.code], [401, "signature_replayed"]);
    assert.match(answer.error, /already used/);
  });

  it("spends a signed describe's nonce once, and answers an unsigned one", async () => {
    const server = new ContractServer(counter().tool, [SECRET], new MemoryStore());
    const path = `${BASE}/tool/describe`;
    const header = await sign(SECRET, Math.floor(Date.now() / 1000), randomBytes(16).toString("hex"), "GET", path, empty);
    assert.equal((await server.handle(request("GET", path, empty, header))).status, 200);
    const again = await server.handle(request("GET", path, empty, header));
    assert.deepEqual([again.status, (again.body as any).code], [401, "signature_replayed"]);
    assert.equal((await server.handle(request("GET", path, empty))).status, 200);
  });

  it("runs the docs' JavaScript verification as written: the vector passes, a retarget and a replay do not", () => {
    const docs = repositoryFile("docs/tools.md");
    const section = docs.split("### What your backend receives")[1] ?? "";
    const snippet = (section.split("```js\n")[1] ?? "").split("```")[0] ?? "";
    // The snippet's import is given as arguments instead: a module cannot be evaluated here.
    const code = snippet.replace(/^import .*$/m, "");
    const refusal = new Function("createHmac", "timingSafeEqual", `${code}\nreturn refusal;`)(createHmac, timingSafeEqual);
    const v = vector();
    assert.ok(docs.includes(v.header), "docs/tools.md shows the vector's header");
    const body = new TextEncoder().encode(v.body);
    const key = v.idempotency_key;
    const at = v.timestamp + 5;
    const spent = new Set<string>();
    assert.equal(refusal(v.secret, v.header, v.method, "/holds/H3", key, body, spent, at), "signature_mismatch");
    assert.equal(refusal(v.secret, v.header, v.method, v.target, "", body, spent, at), "signature_mismatch");
    assert.equal(refusal(v.secret, v.header, v.method, v.target, key, body, spent, at + 600), "signature_stale");
    assert.equal(refusal(v.secret, undefined, v.method, v.target, key, body, spent, at), "signature_missing");
    assert.equal(refusal(v.secret, v.header, v.method, v.target, key, body, spent, at), null);
    assert.equal(refusal(v.secret, v.header, v.method, v.target, key, body, spent, at), "signature_replayed");
  });

  it("signs and verifies the published test vector", async () => {
    const v = vector();
    const body = new TextEncoder().encode(v.body);
    const key = v.idempotency_key;
    assert.equal(await sign(v.secret, v.timestamp, v.nonce, v.method, v.target, body, key), v.header);
    const now = v.timestamp + 10;
    assert.deepEqual(await check([v.secret], v.header, v.method, v.target, body, now, key), {
      nonce: v.nonce,
      expiresAt: v.timestamp + 300,
    });
    assert.equal(await check([v.secret], v.header, v.method, "/holds/H3", body, now, key), "signature_mismatch");
    assert.equal(await check([v.secret], v.header, v.method, v.target, body, now), "signature_mismatch");
    assert.equal(await check([v.secret], v.header, v.method, v.target, body, now + 600, key), "signature_stale");
    assert.equal(await verify([v.secret], undefined, v.method, v.target, body, now), null);
  });

  it("validates with each field's problem, and accepts with the sentence", async () => {
    const server = new ContractServer(counter().tool, [SECRET], new MemoryStore());
    assert.deepEqual(await run(server, "validate", { parameters: { n: 2 } }), [
      200,
      { parameters: { n: 2 }, summary: "I'll count to 2.", needs_checkpoint: true },
    ]);
    let [status, answer] = await run(server, "validate", { parameters: {} });
    assert.equal(status, 422);
    assert.deepEqual(answer.fields, [{ field: "n", problem: "is needed" }]);
    [status, answer] = await run(server, "validate", { parameters: { n: 11 } });
    assert.equal(status, 422);
    assert.deepEqual(answer.fields.map((p: any) => p.field), ["n"]);
    [status, answer] = await run(server, "validate", { parameters: { n: 1, m: 2 } });
    assert.deepEqual([status, answer.fields], [422, [{ field: "m", problem: "is not something this tool takes" }]]);
    assert.deepEqual(await run(server, "summarize", { parameters: { n: 3 } }), [200, { summary: "I'll count to 3." }]);
    assert.equal((await run(server, "validate", { parameters: [] }))[0], 400);
  });

  it("runs execute once, and answers a repeat with the first answer", async () => {
    const { tool, seen } = counter();
    const server = new ContractServer(tool, [SECRET], new MemoryStore());
    const call = { tool_call_id: "tc_once", parameters: { n: 3 } };
    const [status, prepared] = await run(server, "prepare", call);
    assert.equal(status, 200);
    assert.deepEqual(prepared.checkpoint.state, { n: 3 });
    assert.deepEqual(await run(server, "prepare", call), [200, prepared]);
    // A later request's parameters are not the call's: the recorded ones are used.
    const first = await run(server, "execute", { ...call, parameters: { n: 9 }, checkpoint: prepared.checkpoint });
    assert.deepEqual(first, [200, { result: { counted: 3 }, voice_response: "Counted to 3." }]);
    assert.deepEqual(await run(server, "execute", call), first);
    assert.deepEqual(seen.done, ["tc_once"]);
    const [refused, answer] = await run(server, "discard", call);
    assert.deepEqual([refused, answer.code], [409, "invalid_state"]);
  });

  it("keeps the ordering rules", async () => {
    const { tool, seen } = counter();
    const server = new ContractServer(tool, [SECRET], new MemoryStore());
    assert.equal((await run(server, "execute", { tool_call_id: "tc_never", parameters: { n: 1 } }))[0], 409);
    const call = { tool_call_id: "tc_discarded", parameters: { n: 1 } };
    assert.equal((await run(server, "prepare", call))[0], 200);
    assert.deepEqual(await run(server, "discard", call), [200, { discarded: true }]);
    assert.deepEqual(await run(server, "discard", call), [200, { discarded: true }]);
    assert.equal((await run(server, "prepare", call))[0], 409);
    assert.equal((await run(server, "execute", call))[0], 409);
    assert.deepEqual([seen.discarded, seen.done], [["tc_discarded"], []]);
    assert.equal((await run(server, "prepare", { parameters: { n: 1 } }))[0], 400);
  });

  it("records a failure as the call's answer, and runs a crashed execute again as may-have-started", async () => {
    const { tool, seen } = counter();
    const server = new ContractServer(tool, [SECRET], new MemoryStore());
    const unlucky = { tool_call_id: "tc_seven", parameters: { n: 7 } };
    await run(server, "prepare", unlucky);
    assert.deepEqual(await run(server, "execute", unlucky), [422, { error: "Seven is unlucky." }]);
    assert.deepEqual(await run(server, "execute", unlucky), [422, { error: "Seven is unlucky." }]);
    const unsure = { tool_call_id: "tc_eight", parameters: { n: 8 } };
    await run(server, "prepare", unsure);
    const said = [422, { error: "The counter went quiet.", may_have_acted: true }];
    assert.deepEqual(await run(server, "execute", unsure), said);
    assert.deepEqual(await run(server, "execute", unsure), said);

    const crashing = { tool_call_id: "tc_crash", parameters: { n: 4 } };
    await run(server, "prepare", crashing);
    seen.crashNext = true;
    const [status, answer] = await run(server, "execute", crashing);
    assert.deepEqual([status, answer.code], [500, "internal"]);
    assert.equal((await run(server, "execute", { ...crashing, attempt: 2 }))[0], 200);
    assert.deepEqual([seen.mayHaveStarted.slice(-2), seen.done], [[false, true], ["tc_crash"]]);
  });

  it("without a secret answers only chained requests", async () => {
    const server = new ContractServer(counter().tool, [null], new MemoryStore());
    const body = new TextEncoder().encode(JSON.stringify({ parameters: { n: 1 } }));
    const outside = await server.handle(request("POST", "/tool/summarize", body));
    assert.deepEqual([outside.status, (outside.body as any).code], [401, "unauthorized"]);
    const chained = await server.handle(request("POST", "/tool/summarize", body, undefined, true));
    assert.deepEqual([chained.status, chained.body], [200, { summary: "I'll count to 1." }]);
  });

  it("accepts either secret while one is rotated", async () => {
    const server = new ContractServer(counter().tool, [SECRET, "the-next-secret"], new MemoryStore());
    assert.equal((await run(server, "summarize", { parameters: { n: 1 } }, { secret: "the-next-secret" }))[0], 200);
    assert.equal((await run(server, "summarize", { parameters: { n: 1 } }))[0], 200);
  });
});

describe("a refusal", () => {
  // The sentences are sdk/schema-problems.json's, which the Rust declared tool and the Python SDK
  // say too (crates/declaration/src/parameters.rs, sdk/python/src/gatehouse_tool/schema.py).
  it("reads as in every language", async () => {
    const { checkParameters } = await import("../src/schema.js");
    const schema = { type: "object", properties: { n: { type: "integer", minimum: 1 }, s: { type: "string" } } };
    assert.deepEqual(checkParameters(schema, { n: 0 }), [{ field: "n", problem: "must be at least 1" }]);
    assert.deepEqual(checkParameters(schema, { s: 3 }), [{ field: "s", problem: "must be text" }]);
  });
});
