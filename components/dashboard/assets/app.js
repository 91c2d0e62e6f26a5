// The Gatehouse dashboard: a few views over the public API, drawn with the DOM (no framework,
// no HTML built from strings, so nothing a call holds can become markup).
//
// The API token lives in sessionStorage only (gone when the tab closes), travels in the
// Authorization header of each request and never in a URL; nothing here logs it.
"use strict";

(() => {
  const TOKEN_KEY = "gatehouse-dashboard-token";
  const POLL_MS = 3000;
  const FINAL = new Set(["COMPLETED", "FAILED", "CANCELLED", "EXPIRED"]);
  const STATUSES = ["PENDING", "EXECUTING", "PREPARED", "COMPLETED", "FAILED", "CANCELLED", "EXPIRED"];

  const $ = (id) => document.getElementById(id);
  const view = () => $("view");

  // What the current view left running (a poll, a countdown), stopped when the view changes.
  let timers = [];
  let generation = 0;
  const stopTimers = () => { timers.forEach((t) => clearInterval(t)); timers = []; };

  // --- Elements ----------------------------------------------------------------------------

  /** An element with attributes and children (strings become text, never markup). */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : String(value));
    }
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  const SVG = "http://www.w3.org/2000/svg";
  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, String(value));
    for (const child of children) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    return el;
  }

  const badge = (status, prefix = "s") => h("span", { class: `badge ${prefix}-${status}` }, status);
  const json = (value) => h("pre", {}, JSON.stringify(value, null, 2));
  const table = (caption, headers, rows) =>
    h("div", { class: "table-wrap" },
      h("table", {},
        h("caption", { class: "muted" }, caption),
        h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col", class: x.cls }, x.label ?? x)))),
        h("tbody", {}, rows)));
  const card = (label, value, id) => h("div", { class: "card", id }, h("div", { class: "value" }, value), h("div", { class: "label" }, label));
  const callLink = (id) => h("a", { href: `#/call/${encodeURIComponent(id)}` }, h("code", {}, id));

  // --- Time --------------------------------------------------------------------------------

  const time = (iso) => (iso ? new Date(iso).toLocaleString() : "—");
  function span(ms) {
    if (ms === null || ms === undefined || Number.isNaN(ms)) return "—";
    if (ms < 1000) return `${Math.round(ms)} ms`;
    const sec = ms / 1000;
    if (sec < 60) return `${sec.toFixed(1)} s`;
    const min = Math.floor(sec / 60);
    if (min < 60) return `${min} min ${Math.round(sec % 60)} s`;
    return `${Math.floor(min / 60)} h ${min % 60} min`;
  }
  const ms = (value) => (value === null || value === undefined ? "—" : `${Number(value).toFixed(1)} ms`);

  // --- The API -----------------------------------------------------------------------------

  const token = () => sessionStorage.getItem(TOKEN_KEY);
  const WHO_KEY = "gatehouse-dashboard-key";
  /** The signed-in key as `GET /voice-tools/key` answered it: {tenant, key, scopes}. */
  const who = () => { try { return JSON.parse(sessionStorage.getItem(WHO_KEY)) || null; } catch { return null; } };
  /** Whether the key may act on calls (cancel): `calls:write` or `admin` (docs/keys.md). */
  const mayAct = () => { const w = who(); return !!w && w.scopes.some((s) => s === "calls:write" || s === "admin"); };

  class ApiError extends Error {
    constructor(status, body) {
      super((body && body.error) || `The server answered ${status}.`);
      this.status = status;
      this.body = body;
    }
  }

  /** A request to the API with the token; the parsed JSON answer, or an ApiError. */
  async function api(path, options = {}) {
    const headers = { Authorization: `Bearer ${token()}` };
    const init = { method: options.method || "GET", headers, cache: "no-store", credentials: "omit" };
    if (options.json !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(options.json);
    }
    const response = await fetch(path, init);
    let body = null;
    try { body = await response.json(); } catch { body = null; }
    if (response.status === 401) {
      signOut("That key was not accepted (revoked?). Sign in again.");
      throw new ApiError(401, body);
    }
    if (!response.ok && !options.anyStatus) throw new ApiError(response.status, body);
    return options.anyStatus ? { status: response.status, body } : body;
  }

  const query = (params) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
    const text = q.toString();
    return text ? `?${text}` : "";
  };

  // --- Sign-in -----------------------------------------------------------------------------

  function showSignedIn(signedIn) {
    $("sign-in").hidden = signedIn;
    $("nav").hidden = !signedIn;
    view().hidden = !signedIn;
    const w = signedIn ? who() : null;
    $("whoami").textContent = w
      ? `${w.tenant} · ${w.key || "api_token"} · ${w.scopes.join(", ")}${mayAct() ? "" : " (read-only)"}`
      : "";
  }

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(WHO_KEY);
    stopTimers();
    generation += 1;
    view().replaceChildren();
    showSignedIn(false);
    const error = $("sign-in-error");
    error.textContent = message || "";
    error.hidden = !message;
    $("token").value = "";
    $("token").focus();
  }

  async function signIn(event) {
    event.preventDefault();
    const candidate = $("token").value.trim();
    const error = $("sign-in-error");
    error.hidden = true;
    try {
      // Who the key is: its tenant, prefix and scopes. A wrong key is a 401 and nothing is shown.
      const response = await fetch("/voice-tools/key", {
        headers: { Authorization: `Bearer ${candidate}` }, cache: "no-store", credentials: "omit",
      });
      if (response.status === 401) {
        error.textContent = "That key was not accepted.";
        error.hidden = false;
        $("token").select();
        return;
      }
      if (!response.ok) throw new Error(`The server answered ${response.status}.`);
      sessionStorage.setItem(WHO_KEY, JSON.stringify(await response.json()));
    } catch (e) {
      error.textContent = `Could not sign in: ${e.message}`;
      error.hidden = false;
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, candidate);
    $("token").value = "";
    showSignedIn(true);
    route();
  }

  // --- Routing -----------------------------------------------------------------------------

  function route() {
    if (!token()) { showSignedIn(false); return; }
    showSignedIn(true);
    stopTimers();
    generation += 1;
    const parts = (location.hash.replace(/^#\/?/, "") || "calls").split("/").map(decodeURIComponent);
    const section = parts[0];
    for (const link of document.querySelectorAll("nav a")) {
      if (link.dataset.section === (section === "call" ? "calls" : section)) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    const pages = {
      calls: callsPage,
      call: (gen) => callPage(parts[1], gen),
      tools: (gen) => (parts[1] ? toolPage(parts[1], gen) : toolsPage(gen)),
      health: healthPage,
    };
    (pages[section] || callsPage)(generation);
  }

  /** Draws a page's content, unless the user has moved on since it was asked for. */
  function render(gen, ...children) {
    if (gen !== generation) return false;
    view().replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
    return true;
  }

  function failure(gen, e) {
    if (e instanceof ApiError && e.status === 401) return;
    render(gen, h("p", { class: "error", role: "alert" }, `Could not load this page: ${e.message}`));
  }

  // --- Calls -------------------------------------------------------------------------------

  const filters = { session_id: "", function_name: "", status: "" };

  /** What a call is doing or waiting on, and when it is tried again if its last try failed. */
  const OPERATIONS = {
    awaiting_confirmation: "waiting for confirmation", awaiting_resume: "waiting at the checkpoint",
    prepare: "preparing", execute: "executing",
  };
  function doing(call) {
    const now = call.current_operation ? OPERATIONS[call.current_operation] || call.current_operation : "—";
    const retry = call.next_retry_at ? h("div", { class: "muted next-retry" }, "next try ", time(call.next_retry_at)) : null;
    const late = call.overdue ? h("div", { class: "error overdue" }, "overdue") : null;
    return [now, retry, late];
  }

  /** How long a call has been in its status; a final status is not counted. */
  function inState(call) {
    if (FINAL.has(call.status) || !call.status_since) return "—";
    return span(Date.now() - Date.parse(call.status_since));
  }

  function callRow(call) {
    const message = call.error_message || call.voice_response || call.summary || "";
    return h("tr", { "data-call": call.tool_call_id },
      h("td", { "data-label": "Created" }, time(call.created_at)),
      h("td", { "data-label": "Call" }, callLink(call.tool_call_id)),
      h("td", { "data-label": "Session", class: "hide-narrow" }, call.session_id),
      h("td", { "data-label": "Function" }, call.function_name),
      h("td", { "data-label": "Status" }, badge(call.status)),
      h("td", { "data-label": "In state", class: "in-state" }, inState(call)),
      h("td", { "data-label": "Now", class: "doing" }, doing(call)),
      h("td", { "data-label": "Message" }, message));
  }

  async function callsPage(gen) {
    const functions = h("input", { id: "f-function", name: "function_name", value: filters.function_name, list: "f-functions" });
    const form = h("form", { class: "filters", role: "search", "aria-label": "Filter calls" },
      h("label", { for: "f-session" }, "Session", h("input", { id: "f-session", name: "session_id", value: filters.session_id })),
      h("label", { for: "f-function" }, "Function", functions),
      h("datalist", { id: "f-functions" }),
      h("label", { for: "f-status" }, "Status",
        h("select", { id: "f-status", name: "status" }, h("option", { value: "" }, "any"),
          STATUSES.map((st) => h("option", { value: st, selected: st === filters.status }, st)))),
      h("button", { type: "submit" }, "Filter"));
    const body = h("tbody", { id: "calls-body" });
    const status = h("p", { class: "muted", id: "calls-updated", role: "status" }, "Loading…");
    const more = h("button", { type: "button", class: "secondary", id: "calls-more", hidden: true }, "Older calls");
    render(gen, h("h2", {}, "Calls"), form, status,
      h("div", { class: "table-wrap" }, h("table", { class: "stack" },
        h("caption", { class: "muted" }, "The newest calls first. The list refreshes every few seconds."),
        h("thead", {}, h("tr", {}, ["Created", "Call", "Session", "Function", "Status", "In state", "Now", "Message"].map((x, i) =>
          h("th", { scope: "col", class: i === 2 ? "hide-narrow" : null }, x)))),
        body)),
      h("p", {}, more));

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const data = new FormData(form);
      for (const key of Object.keys(filters)) filters[key] = String(data.get(key) || "").trim();
      route();
    });
    api("/voice-tools/tools").then((list) => {
      const names = list.tools.flatMap((t) => [t.name, ...(t.aliases || [])]);
      $("f-functions")?.replaceChildren(...names.map((n) => h("option", { value: n })));
    }).catch(() => {});

    // The first page is read again on each poll; older pages, once asked for, stay as they are.
    let older = [];
    let cursor = null;
    let shown = null; // what is drawn, so a poll that finds nothing new leaves the rows alone
    const draw = (page) => {
      if (gen !== generation) return;
      const key = JSON.stringify([page, older.length]);
      status.textContent = `Updated ${new Date().toLocaleTimeString()}`;
      if (key === shown) return;
      shown = key;
      body.replaceChildren(...[...page.calls, ...older].map(callRow));
      if (!page.calls.length) body.append(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No calls match.")));
      if (!older.length) cursor = page.next_cursor;
      more.hidden = !cursor;
    };
    let first = null;
    const load = async () => {
      try {
        first = await api(`/voice-tools/calls${query({ ...filters, limit: 25 })}`);
        draw(first);
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 401)) status.textContent = `Could not load the calls: ${e.message}`;
      }
    };
    more.addEventListener("click", async () => {
      try {
        const page = await api(`/voice-tools/calls${query({ ...filters, limit: 25, cursor })}`);
        older = older.concat(page.calls);
        cursor = page.next_cursor;
        if (first) draw(first);
      } catch (e) { status.textContent = `Could not load older calls: ${e.message}`; }
    });
    await load();
    if (gen === generation) timers.push(setInterval(load, POLL_MS));
  }

  // --- One call ----------------------------------------------------------------------------

  /** The status history with the time spent in each state (the last, if open, until now). */
  function timeline(call) {
    const entries = call.status_history || [];
    return h("ol", { class: "timeline", id: "timeline" }, entries.map((entry, i) => {
      const start = Date.parse(entry.timestamp);
      const next = entries[i + 1];
      const end = next ? Date.parse(next.timestamp) : (FINAL.has(entry.status) ? null : Date.now());
      const spent = end === null ? "final" : `${next ? "" : "so far "}${span(end - start)}`;
      return h("li", { "data-status": entry.status },
        badge(entry.status), " ", time(entry.timestamp), " · ", h("strong", {}, spent),
        entry.reason ? h("div", { class: "muted" }, entry.reason) : null,
        entry.actor ? h("div", { class: "muted" }, `by ${entry.actor}${entry.key ? ` with ${entry.key}` : ""}`) : null);
    }));
  }

  function corrections(call) {
    const history = call.parameters_history || [];
    if (!history.length) return h("p", { class: "muted", id: "corrections" }, "No corrections.");
    return h("div", { id: "corrections" }, table("Every correction, oldest first.",
      ["When", "Field", "Old → new", "Reason"],
      history.map((c) => h("tr", { class: "correction" },
        h("td", {}, time(c.timestamp)), h("td", {}, h("code", {}, c.field)),
        h("td", {}, h("code", {}, JSON.stringify(c.old_value)), " → ", h("code", {}, JSON.stringify(c.new_value))),
        h("td", {}, c.reason || "—")))));
  }

  function callbacksTable(attempts) {
    if (!attempts.length) return h("p", { class: "muted", id: "callbacks" }, "No callback was sent.");
    return h("div", { id: "callbacks" }, table("Every attempt to deliver a callback, oldest first.",
      ["When", "Kind", "Attempt", "Answer", { label: "Took", cls: "num" }],
      attempts.map((a) => h("tr", {},
        h("td", {}, time(a.at)), h("td", {}, a.kind), h("td", { class: "num" }, a.attempt),
        h("td", {}, a.status_code ? `HTTP ${a.status_code}` : "no answer", a.error ? h("div", { class: "error" }, a.error) : null),
        h("td", { class: "num" }, ms(a.duration_ms))))));
  }

  const cancellable = (call) =>
    call.status === "PENDING" || call.status === "PREPARED" || (call.status === "EXECUTING" && !call.side_effect_started_at);

  async function callPage(id, gen = generation) {
    let answer = null; // the cancel's answer stays on the page while the call refreshes
    let shown = null; // what is drawn, so a poll that finds nothing new leaves the page alone
    const load = async () => {
      const [call, attempts] = await Promise.all([
        api(`/voice-tools/status/${encodeURIComponent(id)}`),
        api(`/voice-tools/calls/${encodeURIComponent(id)}/callbacks`),
      ]);
      const key = JSON.stringify([call, attempts, answer !== null]);
      if (key === shown && gen === generation) return true;
      shown = key;
      // A key that may only read sees the button disabled; the route would refuse it with 403.
      const cancel = mayAct()
        ? h("button", { type: "button", class: "danger", id: "cancel-call" }, "Cancel this call")
        : h("button", { type: "button", class: "danger", id: "cancel-call", disabled: "",
            title: "This key can only read calls: cancelling needs calls:write." }, "Cancel this call");
      cancel.addEventListener("click", async () => {
        cancel.disabled = true;
        try {
          const { status, body } = await api(`/voice-tools/cancel/${encodeURIComponent(id)}`, {
            method: "DELETE", anyStatus: true, json: { reason: "cancelled from the dashboard" },
          });
          answer = h("div", { class: "answer", id: "cancel-answer", role: "status" },
            h("strong", {}, status < 300 ? `Cancelled (HTTP ${status}). ` : `Not cancelled (HTTP ${status}${body && body.code ? `, ${body.code}` : ""}). `),
            (body && (body.message || body.error || body.voice_response)) || "");
        } catch (e) {
          answer = h("div", { class: "answer error", id: "cancel-answer", role: "alert" }, `The cancel failed: ${e.message}`);
        }
        await draw();
      });
      return render(gen,
        h("p", {}, h("a", { href: "#/calls" }, "← All calls")),
        h("h2", {}, "Call ", h("code", {}, call.tool_call_id), " ", h("span", { id: "call-status" }, badge(call.status))),
        h("div", { class: "row" }, cancellable(call) ? cancel : null), answer,
        h("dl", { class: "facts" },
          h("dt", {}, "Function"), h("dd", {}, `${call.function_name} (${call.tool})`),
          h("dt", {}, "Session"), h("dd", {}, h("a", { href: "#/calls", onclick: () => { filters.session_id = call.session_id; } }, call.session_id)),
          h("dt", {}, "Said"), h("dd", {}, call.voice_response || call.summary || "—"),
          h("dt", {}, "Trace id"), h("dd", { id: "trace-id" }, h("code", {}, call.trace_id || "—")),
          h("dt", {}, "Created"), h("dd", {}, time(call.created_at)),
          h("dt", {}, "In this state"), h("dd", { id: "in-state" }, inState(call)),
          h("dt", {}, "Now"), h("dd", { id: "doing" }, doing(call)),
          h("dt", {}, "Expires"), h("dd", {}, time(call.expires_at)),
          h("dt", {}, "Attempts"), h("dd", {}, String(call.attempts)),
          h("dt", {}, "Took"), h("dd", {}, call.execution_time_ms === null ? "—" : span(call.execution_time_ms))),
        h("h3", {}, "Timeline"), timeline(call),
        h("h3", {}, "Parameters"), json(call.parameters),
        h("h3", {}, "Corrections"), corrections(call),
        h("h3", {}, "Checkpoint"), call.checkpoint ? json(call.checkpoint) : h("p", { class: "muted" }, "None."),
        h("h3", {}, "Callbacks"), callbacksTable(attempts.callbacks),
        h("h3", {}, call.error_message ? "Error" : "Result"),
        call.error_message ? h("p", { class: "error", id: "call-error" }, call.error_message)
          : call.result ? json(call.result) : h("p", { class: "muted" }, "Nothing yet."));
    };
    const draw = async () => {
      try { await load(); } catch (e) { failure(gen, e); }
    };
    view().replaceChildren(h("p", { class: "muted" }, "Loading…"));
    await draw();
    if (gen === generation) timers.push(setInterval(draw, POLL_MS));
  }

  // --- Tools -------------------------------------------------------------------------------

  async function toolsPage(gen) {
    try {
      const list = await api("/voice-tools/tools");
      const stats = await Promise.all(list.tools.map((t) =>
        api(`/voice-tools/tools/${encodeURIComponent(t.name)}/stats`).catch(() => null)));
      render(gen, h("h2", {}, "Tools"), table("Each registered tool over the last 24 hours.",
        ["Tool", "Component", "Checkpoint", { label: "Executions", cls: "num" }, { label: "Success", cls: "num" }, { label: "p95", cls: "num" }],
        list.tools.map((t, i) => h("tr", { "data-tool": t.name },
          h("td", {}, h("a", { href: `#/tools/${encodeURIComponent(t.name)}` }, t.name)),
          h("td", {}, t.component, t.available ? "" : h("span", { class: "unreachable", title: t.cause ? t.cause.explanation : "" },
            ` (unreachable: ${t.cause ? t.cause.kind.replaceAll("_", " ") : "no answer"})`)),
          h("td", { class: "checkpoint" }, t.needs_checkpoint === undefined ? "—" : t.needs_checkpoint ? "yes" : "no"),
          h("td", { class: "num" }, stats[i] ? stats[i].executions : "—"),
          h("td", { class: "num" }, stats[i] && stats[i].success_rate !== null ? `${(stats[i].success_rate * 100).toFixed(1)} %` : "—"),
          h("td", { class: "num" }, stats[i] ? ms(stats[i].p95_ms) : "—")))));
    } catch (e) { failure(gen, e); }
  }

  /** Executions over the window as stacked bars: ok, errors, the rest (rejected, cancelled). */
  function chart(timeline) {
    const width = 960, height = 240, pad = 28;
    const max = Math.max(1, ...timeline.map((b) => b.executions));
    const bar = (width - pad * 2) / timeline.length;
    const y = (n) => ((height - pad * 2) * n) / max;
    const svg = s("svg", { class: "chart", id: "tool-chart", viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": `Executions over the window: ${timeline.reduce((a, b) => a + b.executions, 0)} in all, at most ${max} in one bucket` });
    svg.append(s("line", { class: "axis", x1: pad, y1: height - pad, x2: width - pad, y2: height - pad }));
    svg.append(s("text", { x: 2, y: pad }, String(max)), s("text", { x: 2, y: height - pad }, "0"));
    timeline.forEach((b, i) => {
      const x = pad + i * bar + 1;
      let base = height - pad;
      for (const [n, cls] of [[b.ok, "bar-ok"], [b.errors, "bar-err"], [b.executions - b.ok - b.errors, "bar-other"]]) {
        if (n <= 0) continue;
        base -= y(n);
        svg.append(s("rect", { class: cls, x, y: base, width: Math.max(1, bar - 2), height: y(n) },
          s("title", {}, `${time(b.start)}: ${b.executions} executions, ${b.ok} ok, ${b.errors} errors`)));
      }
      if (i % 6 === 0) svg.append(s("text", { x, y: height - 8 }, new Date(b.start).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })));
    });
    return svg;
  }

  function executionRow(e) {
    return h("tr", { class: "execution" },
      h("td", {}, time(e.started_at)), h("td", {}, e.operation), h("td", {}, badge(e.outcome, "o")),
      h("td", { class: "num" }, ms(e.duration_ms)), h("td", {}, h("code", {}, e.component_version)),
      h("td", {}, e.tool_call_id ? callLink(e.tool_call_id) : "—"), h("td", {}, e.error || ""));
  }

  async function toolPage(name, gen = generation) {
    const base = `/voice-tools/tools/${encodeURIComponent(name)}`;
    try {
      const [stats, failed, crashed, page] = await Promise.all([
        api(`${base}/stats`), api(`${base}/executions?outcome=failed&limit=5`),
        api(`${base}/executions?outcome=crashed&limit=5`), api(`${base}/executions?limit=20`),
      ]);
      const errors = [...failed.executions, ...crashed.executions]
        .sort((a, b) => (a.started_at < b.started_at ? 1 : -1)).slice(0, 5);
      const rows = h("tbody", { id: "executions-body" }, page.executions.map(executionRow));
      let cursor = page.next_cursor;
      const more = h("button", { type: "button", class: "secondary", id: "executions-more", hidden: !cursor }, "Older executions");
      more.addEventListener("click", async () => {
        try {
          const next = await api(`${base}/executions?limit=20&cursor=${encodeURIComponent(cursor)}`);
          rows.append(...next.executions.map(executionRow));
          cursor = next.next_cursor;
          more.hidden = !cursor;
        } catch (e) { more.replaceWith(h("p", { class: "error" }, e.message)); }
      });
      const o = stats.outcomes;
      render(gen,
        h("p", {}, h("a", { href: "#/tools" }, "← All tools")),
        h("h2", {}, "Tool ", h("code", {}, stats.tool)),
        h("p", { class: "muted" }, `The last ${stats.window}.`),
        h("div", { class: "cards", id: "tool-counts" },
          card("executions", stats.executions, "count-executions"), card("ok", o.ok, "count-ok"),
          card("failed", o.failed, "count-failed"), card("crashed", o.crashed, "count-crashed"),
          card("rejected", o.rejected, "count-rejected"), card("cancelled", o.cancelled, "count-cancelled"),
          card("success rate", stats.success_rate === null ? "—" : `${(stats.success_rate * 100).toFixed(1)} %`, "success-rate"),
          card("p50 / p95", `${ms(stats.p50_ms)} / ${ms(stats.p95_ms)}`, "latency")),
        h("h3", {}, "Executions over time"), chart(stats.timeline),
        h("h3", {}, "Per operation"), table("Durations per operation in the window.",
          ["Operation", { label: "Executions", cls: "num" }, { label: "ok", cls: "num" }, { label: "p50", cls: "num" }, { label: "p95", cls: "num" }],
          Object.entries(stats.by_operation).map(([op, x]) => h("tr", { "data-operation": op },
            h("td", {}, op), h("td", { class: "num" }, x.executions), h("td", { class: "num" }, x.ok),
            h("td", { class: "num" }, ms(x.p50_ms)), h("td", { class: "num" }, ms(x.p95_ms))))),
        h("h3", {}, "Last errors"), errors.length ? table("The newest failed or crashed executions.",
          ["When", "Operation", "Outcome", "Error", "Call"],
          errors.map((e) => h("tr", { class: "last-error" }, h("td", {}, time(e.started_at)), h("td", {}, e.operation),
            h("td", {}, badge(e.outcome, "o")), h("td", {}, e.error || ""), h("td", {}, e.tool_call_id ? callLink(e.tool_call_id) : "—"))))
          : h("p", { class: "muted" }, "No errors."),
        h("h3", {}, "Executions"),
        h("div", { class: "table-wrap" }, h("table", {},
          h("caption", { class: "muted" }, "Newest first, with the component version that ran each."),
          h("thead", {}, h("tr", {}, ["Started", "Operation", "Outcome", "Took", "Version", "Call", "Error"].map((x) => h("th", { scope: "col" }, x)))),
          rows)),
        h("p", {}, more));
    } catch (e) { failure(gen, e); }
  }

  // --- Health ------------------------------------------------------------------------------

  async function healthPage(gen) {
    try {
      const health = await fetch("/health", { cache: "no-store", credentials: "omit" }).then((r) => r.json()).catch(() => ({ database: "unreachable" }));
      const [prepared, pending, swept, executing] = await Promise.all([
        api("/voice-tools/calls?status=PREPARED&limit=100"),
        api("/voice-tools/calls?status=PENDING&limit=100"),
        api("/voice-tools/calls?status=EXPIRED&limit=1"),
        api("/voice-tools/calls?status=EXECUTING&limit=100"),
      ]);
      // Past the time they should have moved by: their worker's lease ran out and nobody took
      // them over (see `overdue` in the API).
      const overdue = executing.calls.filter((c) => c.overdue);
      const waiting = (calls, caption, id) => calls.length
        ? h("div", { id }, table(caption, ["Call", "Function", "Session", "Expires in"], calls.map((c) => h("tr", {},
          h("td", {}, callLink(c.tool_call_id)), h("td", {}, c.function_name), h("td", {}, c.session_id),
          h("td", { class: "countdown", "data-expires": c.expires_at }, "")))))
        : h("p", { class: "muted", id }, "None.");
      // The sweeper keeps no log of its runs. What can be shown is the newest expired call: when
      // the sweeper expired it (its status changed then), or that it has not yet (a call past
      // its deadline reads as EXPIRED before the sweeper rewrites it: it is overdue), which
      // says the sweeper is behind or not running.
      const newest = swept.calls[0];
      const sweeper = !newest ? "No call has expired yet."
        : !newest.overdue ? ["The newest expired call, ", callLink(newest.tool_call_id), ", was expired at ", time(newest.status_since), "."]
          : ["The newest expired call, ", callLink(newest.tool_call_id), ", passed its deadline at ", time(newest.expires_at),
            " and has not been swept yet: is the sweeper running?"];
      const late = overdue.length
        ? h("div", { id: "health-overdue-list" }, table("EXECUTING calls whose worker's lease ran out, not yet taken over.",
          ["Call", "Function", "In state", "Now", "Attempts", "Last problem"], overdue.map((c) => h("tr", {},
            h("td", {}, callLink(c.tool_call_id)), h("td", {}, c.function_name), h("td", {}, inState(c)),
            h("td", {}, doing(c)), h("td", { class: "num" }, String(c.attempts)), h("td", {}, c.error_message || "—")))))
        : h("p", { class: "muted", id: "health-overdue-list" }, "None.");
      render(gen, h("h2", {}, "Health"),
        h("div", { class: "cards" },
          card("database", health.database || "unknown", "health-database"),
          card("waiting at a checkpoint", prepared.calls.length + (prepared.next_cursor ? "+" : ""), "health-prepared"),
          card("waiting for confirmation", pending.calls.length + (pending.next_cursor ? "+" : ""), "health-pending"),
          card("overdue", overdue.length + (executing.next_cursor ? "+" : ""), "health-overdue")),
        h("h3", {}, "Calls past their expected time"), late,
        h("h3", {}, "The sweeper"),
        h("p", { id: "health-sweeper" }, sweeper),
        h("p", { class: "muted" }, "The sweeper keeps no record of its runs, so a run that found nothing to do leaves nothing to show."),
        h("h3", {}, "Calls waiting at a checkpoint"), waiting(prepared.calls, "PREPARED calls and the time until they expire.", "health-prepared-list"),
        h("h3", {}, "Calls waiting for confirmation"), waiting(pending.calls, "PENDING calls and the time until they expire.", "health-pending-list"));
      const tick = () => {
        for (const cell of document.querySelectorAll("td.countdown")) {
          const left = Date.parse(cell.dataset.expires) - Date.now();
          cell.textContent = left > 0 ? span(left) : "expired";
        }
      };
      tick();
      timers.push(setInterval(tick, 1000));
    } catch (e) { failure(gen, e); }
  }

  // --- Start -------------------------------------------------------------------------------

  document.addEventListener("DOMContentLoaded", () => {
    $("sign-in-form").addEventListener("submit", signIn);
    $("sign-out").addEventListener("click", () => signOut(""));
    window.addEventListener("hashchange", route);
    if (token()) route();
    else showSignedIn(false);
  });
})();
