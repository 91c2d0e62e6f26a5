// The contract as a Spin component built with componentize-js (docs/tools.md, "A tool in any
// language"): `serve(tool)` in the app's entry module is the whole entry point. It reads the
// `contract_secret` and `db_url` variables, keeps its calls in Gatehouse's database
// (`PostgresStore`) and serves the contract on the chained route and on
// `/internal/tools/<component>/...`, like the tools built on crates/tool.
//
// Only usable inside a component: the imports below are the component's (wit/tool.wit), which
// the build (j2w from @spinframework/build-tools) links to the host's.

import { get as spinVariable } from "fermyon:spin/variables@2.0.0";
import { Connection, type DbValue, type ParameterValue } from "spin:postgres/postgres@4.0.0";

import type { CallRecord, CallStore } from "./ledger.js";
import { ContractServer, MAX_BODY_BYTES, error, tooLarge, type Reply } from "./server.js";
import type { Tool } from "./tool.js";

/** The route Spin reports for a request that reached a private component by service chaining. */
const CHAINED_ROUTE = "/...";

function readVariable(name: string): string | null {
  try {
    return spinVariable(name) || null;
  } catch {
    return null;
  }
}

/** The component's Spin variable `name` (its `[component.<id>.variables]`), or null when it has
 * none or it is empty: `variable("backend_url")` is the backend `gatehouse new tool --backend`
 * named. Its origin must be in the component's `allowed_outbound_hosts` for `fetch` to reach it
 * (otherwise the request fails and the component ends with "JS event loop terminated"). */
export function variable(name: string): string | null {
  return readVariable(name);
}

/** A value sent to or read from PostgreSQL. A `number` that is an integer is sent as a
 * `bigint` column would take it (int8); write `$1::integer` for an `integer` column. */
export type Value = string | number | boolean | null;

function parameter(value: Value | bigint): ParameterValue {
  if (value === null) return { tag: "db-null" };
  if (typeof value === "boolean") return { tag: "boolean", val: value };
  if (typeof value === "bigint") return { tag: "int64", val: value };
  if (typeof value === "number") {
    return Number.isSafeInteger(value) ? { tag: "int64", val: BigInt(value) } : { tag: "floating64", val: value };
  }
  return { tag: "str", val: value };
}

function plain(cell: DbValue): Value {
  if (cell.tag === "db-null") return null;
  const value = "val" in cell ? cell.val : null;
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") return value;
  return String(value);
}

/** The tool's way to its own tables (the tool's `migrations/`, applied by `gatehouse migrate`
 * in the schema `tool_<component id>`: docs/tools.md, "A tool's own tables"), over the
 * component's `db_url`. A `query` must return at least one row: Spin 4.0's PostgreSQL host
 * never answers one that returns none. */
export class Database {
  private readonly connection: Connection;

  constructor(address: string) {
    this.connection = Connection.open(address);
  }

  /** Runs a statement that returns no rows; how many rows it changed. */
  execute(statement: string, ...parameters: Value[]): number {
    return Number(this.connection.execute(statement, parameters.map(parameter)));
  }

  /** The rows of a query, each an array of plain values. */
  query(statement: string, ...parameters: Value[]): Value[][] {
    return this.connection.query(statement, parameters.map(parameter)).rows.map((row) => row.map(plain));
  }

  /** The one value a statement returns in its one row. */
  value(statement: string, ...parameters: (Value | bigint)[]): Value {
    const rows = this.connection.query(statement, parameters.map(parameter)).rows;
    const cell = rows.length === 1 && rows[0]?.length === 1 ? rows[0][0] : undefined;
    if (cell === undefined) throw new Error(`expected one value, got ${rows.length} rows`);
    return plain(cell);
  }
}

let shared: Database | null = null;

/** The component's connection to Gatehouse's database, from the `db_url` variable: the same one
 * the SDK keeps its calls on, so a request uses one connection. */
export function database(): Database {
  if (!shared) {
    const address = readVariable("db_url");
    if (!address) throw new Error("the component has no db_url variable");
    shared = new Database(address);
  }
  return shared;
}

/** Calls kept in Gatehouse's database (`tool_sdk_calls`, one row per tool and call; nonces in
 * `service_nonces`, shared with the Rust tools), so every instance and host of the tool agrees.
 * The statements call the functions of migrations/V16__tool_sdk_calls.sql, which every SDK
 * shares; each returns exactly one row (docs/architecture.md, "No query returns zero rows"). */
export class PostgresStore implements CallStore {
  constructor(
    private readonly tool: string,
    private readonly db: Database,
  ) {}

  load(callId: string): [CallRecord | null, number] {
    const found = this.db.value("SELECT tool_sdk_call($1, $2)::text", this.tool, callId);
    if (typeof found !== "string") return [null, 0];
    const loaded = JSON.parse(found) as { record: CallRecord; version: number };
    return [loaded.record, Number(loaded.version)];
  }

  save(callId: string, record: CallRecord, version: number): boolean {
    const statement = "SELECT save_tool_sdk_call($1, $2, ($3::text)::jsonb, $4)";
    return this.db.value(statement, this.tool, callId, JSON.stringify(record), BigInt(version)) === true;
  }

  spendNonce(nonce: string, expiresAt: number): boolean {
    // A signature's expiry is a whole number of seconds, sent as int8 and widened as the function takes it.
    const fresh = this.db.value("SELECT spend_service_nonce($1, $2::int8::float8)", nonce, Math.floor(expiresAt));
    return fresh === true;
  }
}

/** Serves `tool` as this component's HTTP handler. */
export function serve(tool: Tool): void {
  addEventListener("fetch", (event: FetchEvent) => event.respondWith(answer(tool, event.request)));
}

interface FetchEvent extends Event {
  readonly request: Request;
  respondWith(response: Response | Promise<Response>): void;
}

declare function addEventListener(type: "fetch", listener: (event: FetchEvent) => void): void;

async function answer(tool: Tool, request: Request): Promise<Response> {
  let reply: Reply;
  const body = await bounded(request);
  if (body === null) {
    reply = tooLarge();
  } else {
    const address = readVariable("db_url");
    if (!address) {
      reply = error(500, "internal", "The component has no db_url variable.");
    } else {
      try {
        const server = new ContractServer(tool, [readVariable("contract_secret")], new PostgresStore(tool.name, database()));
        const chained = request.headers.get("spin-matched-route") === CHAINED_ROUTE;
        // The target as sent, query included: what the signature covers.
        const url = new URL(request.url);
        reply = await server.handle({
          method: request.method,
          path: url.pathname + url.search,
          headers: request.headers,
          body,
          chained,
        });
      } catch (failure) {
        // The database: a crash Gatehouse retries.
        console.error(`${tool.name}: the database refused:`, failure);
        shared = null;
        reply = error(503, "database_unavailable", "The tool could not reach its calls; try again.");
      }
    }
  }
  return new Response(JSON.stringify(reply.body), {
    status: reply.status,
    headers: { "content-type": "application/json", ...reply.headers },
  });
}

/** The request's body, or null past `MAX_BODY_BYTES` (read no further). */
async function bounded(request: Request): Promise<Uint8Array | null> {
  if (!request.body) return new Uint8Array();
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > MAX_BODY_BYTES) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  const body = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    body.set(chunk, at);
    at += chunk.length;
  }
  return body;
}
