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
  /** A key of a tenant allowed one create a second (`rate_limited`), and its tenant. */
  limitedKey: required("GATEHOUSE_LIMITED_KEY"),
  limitedTenant: required("GATEHOUSE_LIMITED_TENANT"),
  /**
   * The loopback ports the tests' relays listen on, `low..high` (both included), which the
   * application allows callbacks to (`callback_allowed_hosts` and `callback_host`): named ports,
   * as a deployment names its relays, never a loopback wildcard.
   */
  relayPorts: parsePorts(required("GATEHOUSE_RELAY_PORTS")),
  /** The runner's `--body-read-timeout`, in seconds (0: unknown). */
  bodyReadTimeout: Number(process.env.GATEHOUSE_BODY_READ_TIMEOUT ?? "0"),
};

function parsePorts(text) {
  const match = /^([0-9]+)\.\.([0-9]+)$/.exec(text.trim());
  if (!match) throw new Error(`GATEHOUSE_RELAY_PORTS is ${text}, not low..high`);
  return { low: Number(match[1]), high: Number(match[2]) };
}

/**
 * Listens on a free port of the relays' range (from a start of this process's own, so parallel
 * runs rarely try the same one first) and answers the callback URL of that port.
 */
export async function listenInRelayRange(server, path = "/callbacks") {
  const { low, high } = env.relayPorts;
  const span = high - low + 1;
  const first = (process.pid * 7919 + Date.now()) % span;
  for (let i = 0; i < span; i++) {
    const port = low + ((first + i) % span);
    const listening = await new Promise((resolve, reject) => {
      const onError = (error) => {
        server.off("listening", onListening);
        if (error.code === "EADDRINUSE" || error.code === "EACCES") resolve(false);
        else reject(error);
      };
      const onListening = () => {
        server.off("error", onError);
        resolve(true);
      };
      server.once("error", onError);
      server.once("listening", onListening);
      server.listen(port, "127.0.0.1");
    });
    if (listening) return `http://127.0.0.1:${port}${path}`;
  }
  throw new Error(`every port of ${low}..${high} is taken`);
}

/** A callback URL in the relays' range that nothing listens at (the port was free a moment ago). */
export async function unusedCallbackUrl(path = "/callbacks") {
  const server = net.createServer();
  const url = await listenInRelayRange(server, path);
  await new Promise((resolve) => server.close(resolve));
  return url;
}

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
  // Answers still being written: a test that has seen a callback closes the receiver at once,
  // and Gatehouse should get its answer (not a cut connection, which it would retry).
  const inFlight = new Set();
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => raw.push({ headers: request.headers, body: Buffer.concat(chunks) }));
    const done = new Promise((resolve) => response.on("close", resolve));
    inFlight.add(done);
    done.then(() => inFlight.delete(done));
    handler(request, response);
  });
  const url = await listenInRelayRange(server);
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
    close: async () => {
      await Promise.race([Promise.all([...inFlight]), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
      await new Promise((resolve) => { server.closeAllConnections?.(); server.close(resolve); });
    },
  };
}

/**
 * A TCP proxy in front of the application. `plan(n)` decides what the n-th connection (from 0)
 * gets: "forward", "drop" (the request goes to the application, then the connection is cut
 * before its answer reaches the client), "truncate" (cut in the middle of the answer), "stall"
 * (the request's head is forwarded and its body never: the application's answer comes back), or
 * { respond: "<raw HTTP answer>" } (answered by the proxy, never forwarded).
 */
export async function startProxy(plan) {
  const target = new URL(env.url);
  const stats = { connections: 0, forwarded: 0, dropped: 0, answered: 0, truncated: 0, stalled: 0 };
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
    if (what === "stall") {
      // The request's head reaches the application, its body never does; the application's
      // answer (its 408 once --body-read-timeout has passed) goes back, then the connection is
      // closed, so the client's next attempt comes on a new one.
      let head = Buffer.alloc(0);
      let sent = false;
      downstream.on("data", (chunk) => {
        if (sent) return; // the body: read and dropped, so closing sends no reset
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf("\r\n\r\n");
        if (end >= 0) {
          sent = true;
          upstream.write(head.subarray(0, end + 4));
        }
      });
      let answer = Buffer.alloc(0);
      const finish = () => {
        if (downstream.writableEnded) return;
        stats.stalled++;
        downstream.end(answer);
        upstream.destroy();
      };
      upstream.on("data", (chunk) => {
        answer = Buffer.concat([answer, chunk]);
        const end = answer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const length = /\r\ncontent-length:\s*([0-9]+)/i.exec(answer.subarray(0, end).toString());
        if (length && answer.length >= end + 4 + Number(length[1])) finish();
      });
      upstream.on("end", finish);
      return;
    }
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
