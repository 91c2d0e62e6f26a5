// Test infrastructure: the running application's address, a callback receiver, and a small TCP
// proxy that misbehaves on purpose in front of the real application.
import http from "node:http";
import net from "node:net";
import { randomBytes } from "node:crypto";
import { Gatehouse, createCallbackHandler } from "gatehouse-client";

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: clients/test sets it to the running Gatehouse`);
  return value;
}

export const env = {
  url: required("GATEHOUSE_URL"),
  token: required("GATEHOUSE_TOKEN"),
  secret: required("GATEHOUSE_CALLBACK_SECRET"),
  openapi: required("GATEHOUSE_OPENAPI"),
  checkpointTtl: Number(process.env.GATEHOUSE_CHECKPOINT_TTL ?? "0"),
  /** The same application with no reachable database: its own 503 database_unavailable answers. */
  degradedUrl: required("GATEHOUSE_DEGRADED_URL"),
};

export function client(options = {}) {
  return new Gatehouse({ baseUrl: env.url, token: env.token, ...options });
}

export function session(label) {
  return `ts-${label}-${randomBytes(4).toString("hex")}`;
}

export function traceparent() {
  return `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01`;
}

export const seedEmail = { to: "john@gmail.com", subject: "Meeting Tomorrow", body: "See you at 10." };

/**
 * A relay's callback endpoint: `createCallbackHandler` on a Node http server, with every raw
 * delivery also kept (headers and bytes) so the tests can check them again.
 */
export async function startReceiver(answer = () => ({})) {
  const callbacks = [];
  const raw = [];
  const rejected = [];
  const waiters = [];
  const handler = createCallbackHandler({
    secret: env.secret,
    onCallback: (callback) => {
      callbacks.push(callback);
      for (const w of [...waiters]) {
        if (w.match(callback)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(callback);
        }
      }
      return answer(callback);
    },
    onRejected: (reason) => rejected.push(reason),
  });
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => raw.push({ headers: request.headers, body: Buffer.concat(chunks) }));
    handler(request, response);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}/callbacks`;
  return {
    url,
    callbacks,
    raw,
    rejected,
    next(kind, toolCallId, timeoutMs = 15000) {
      const match = (c) => c.kind === kind && c.body.tool_call_id === toolCallId;
      const seen = callbacks.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${kind} callback for ${toolCallId} in ${timeoutMs} ms`)), timeoutMs);
        waiters.push({ match, resolve: (c) => (clearTimeout(timer), resolve(c)) });
      });
    },
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(resolve); }),
  };
}

/**
 * A TCP proxy in front of the application. `plan(n)` decides what the n-th connection (from 0)
 * gets: "forward", "drop" (the request goes to the application, then the connection is cut
 * before its answer reaches the client), "truncate" (cut in the middle of the answer), or { respond: "<raw HTTP answer>" } (answered by the
 * proxy, never forwarded).
 */
export async function startProxy(plan) {
  const target = new URL(env.url);
  const stats = { connections: 0, forwarded: 0, dropped: 0, answered: 0, truncated: 0 };
  const sockets = new Set();
  const server = net.createServer((downstream) => {
    sockets.add(downstream);
    downstream.on("close", () => sockets.delete(downstream));
    downstream.on("error", () => {});
    const n = stats.connections++;
    const what = plan(n);
    if (what && typeof what === "object" && what.respond) {
      downstream.once("data", () => {
        stats.answered++;
        downstream.end(what.respond);
      });
      return;
    }
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(upstream);
    upstream.on("close", () => sockets.delete(upstream));
    upstream.on("error", () => downstream.destroy());
    downstream.on("data", (chunk) => upstream.write(chunk));
    downstream.on("end", () => upstream.end());
    if (what === "truncate") {
      // The answer's head and two bytes of its body reach the client, then the connection is cut.
      let seen = Buffer.alloc(0);
      upstream.on("data", (chunk) => {
        seen = Buffer.concat([seen, chunk]);
        const end = seen.indexOf("\r\n\r\n");
        if (end >= 0 && seen.length >= end + 6) {
          stats.truncated++;
          downstream.write(seen.subarray(0, end + 6), () => {
            downstream.destroy();
            upstream.destroy();
          });
        }
      });
    } else if (what === "drop") {
      upstream.once("data", () => {
        // The application has answered: cut the client off before it sees a byte of it.
        stats.dropped++;
        downstream.destroy();
        upstream.destroy();
      });
    } else {
      stats.forwarded++;
      upstream.on("data", (chunk) => downstream.write(chunk));
      upstream.on("end", () => downstream.end());
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    stats,
    close: () => new Promise((resolve) => { for (const s of sockets) s.destroy(); server.close(resolve); }),
  };
}

/** A raw HTTP/1.1 answer with a JSON body, as the proxy sends it. */
export function rawAnswer(status, reason, body, headers = {}) {
  const text = JSON.stringify(body);
  const lines = [`HTTP/1.1 ${status} ${reason}`, "Content-Type: application/json", `Content-Length: ${Buffer.byteLength(text)}`, "Connection: close"];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  return `${lines.join("\r\n")}\r\n\r\n${text}`;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
