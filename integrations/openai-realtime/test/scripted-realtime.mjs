// Test support: a scripted model behind a local server speaking the OpenAI Realtime protocol
// over WebSocket (`/v1/realtime`), so that the SDK's own OpenAIRealtimeWebSocket transport and
// RealtimeSession run as they would against the real API, with no network and no model.
//
// Each `response.create` is answered with the next turn of the script: a sentence (an assistant
// message, spoken: a second of audio with the sentence as its transcript, so that the caller can
// talk over it) or function calls `[name, arguments]`. A response asked for with instructions that
// quote a sentence to say (how Gatehouse's package speaks what arrives later) says that sentence
// and takes no turn. Every client event is kept in `received`, across connections: the script
// goes on when a relay restarts and connects again.
import { WebSocketServer } from "ws";

/** One second of 24 kHz 16-bit silence, base64: what a spoken sentence sounds like here. */
const SECOND_OF_SILENCE = Buffer.alloc(48000).toString("base64");

/** The seed's email, as the caller first gives it. */
export const SEED = { to: "john@gmail.com", subject: "Meeting Tomorrow", body: "See you at 10." };

export class ScriptedRealtime {
  constructor(script) {
    this.script = [...script];
    this.received = [];
    this.sockets = [];
    this.counter = 0;
    this.items = new Map();
    /** By call id: when (performance.now()) the model's function call was sent. */
    this.calledAt = new Map();
    this.server = new WebSocketServer({ host: "127.0.0.1", port: 0, path: "/v1/realtime" });
    this.server.on("connection", (socket) => this.#accept(socket));
  }

  async url() {
    if (!this.server.address()) await new Promise((resolve) => this.server.once("listening", resolve));
    return `ws://127.0.0.1:${this.server.address().port}/v1/realtime`;
  }

  /** The caller starts talking over the agent: the server's voice activity detection says so. */
  bargeIn() {
    this.#send(this.sockets.at(-1), { type: "input_audio_buffer.speech_started", audio_start_ms: 0, item_id: this.#id("item") });
  }

  /** What the session sent as function outputs, in order. */
  outputs() {
    return this.received
      .filter((event) => event.type === "conversation.item.create" && event.item?.type === "function_call_output")
      .map((event) => ({ callId: event.item.call_id, output: event.item.output }));
  }

  close() {
    for (const socket of this.sockets) socket.terminate();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  #id(prefix) {
    this.counter += 1;
    return `${prefix}_${this.counter}`;
  }

  #send(socket, event) {
    socket?.send(JSON.stringify({ event_id: this.#id("event"), ...event }));
  }

  #accept(socket) {
    this.sockets.push(socket);
    this.#send(socket, { type: "session.created", session: { type: "realtime", object: "realtime.session", id: this.#id("sess"), model: "scripted" } });
    socket.on("message", (data) => {
      const event = JSON.parse(String(data));
      event.receivedAt = performance.now();
      this.received.push(event);
      if (event.type === "session.update") {
        this.#send(socket, { type: "session.updated", session: { type: "realtime", ...event.session } });
      } else if (event.type === "conversation.item.create") {
        const item = { id: event.item.id ?? this.#id("item"), status: "completed", ...event.item };
        this.#send(socket, { type: "conversation.item.added", previous_item_id: null, item });
        this.#send(socket, { type: "conversation.item.done", previous_item_id: null, item });
      } else if (event.type === "conversation.item.truncate") {
        // The caller talked over the agent: the audio past what was heard is dropped.
        this.#send(socket, { type: "conversation.item.truncated", item_id: event.item_id, content_index: event.content_index, audio_end_ms: event.audio_end_ms });
      } else if (event.type === "conversation.item.retrieve") {
        const item = this.items.get(event.item_id);
        if (item) this.#send(socket, { type: "conversation.item.retrieved", item });
      } else if (event.type === "response.create") {
        this.#respond(socket, event.response ?? {});
      }
    });
  }

  #respond(socket, request) {
    const quoted = typeof request.instructions === "string" ? /"([\s\S]*)"\s*$/.exec(request.instructions) : null;
    const turn = quoted ? quoted[1] : (this.script.shift() ?? "(the script has ended)");
    const response = { id: this.#id("resp"), object: "realtime.response", status: "in_progress", output: [] };
    this.#send(socket, { type: "response.created", response });
    const items =
      typeof turn === "string"
        ? [{ id: this.#id("item"), type: "message", role: "assistant", status: "completed", content: [{ type: "output_audio", transcript: turn }] }]
        : turn.map(([name, args]) => ({
            id: this.#id("item"),
            type: "function_call",
            status: "completed",
            name,
            call_id: this.#id("call"),
            arguments: JSON.stringify(args),
          }));
    items.forEach((item, index) => {
      if (item.type === "function_call") this.calledAt.set(item.call_id, performance.now());
      this.#send(socket, { type: "response.output_item.added", response_id: response.id, output_index: index, item: { ...item, status: "in_progress" } });
      this.#send(socket, { type: "conversation.item.added", previous_item_id: null, item: { ...item, status: "in_progress" } });
      this.items.set(item.id, item);
      if (item.type === "message") {
        const part = { response_id: response.id, item_id: item.id, output_index: index, content_index: 0 };
        this.#send(socket, { type: "response.output_audio.delta", ...part, delta: SECOND_OF_SILENCE });
        this.#send(socket, { type: "response.output_audio_transcript.delta", ...part, delta: item.content[0].transcript });
        this.#send(socket, { type: "response.output_audio.done", ...part });
        this.#send(socket, { type: "response.output_audio_transcript.done", ...part, transcript: item.content[0].transcript });
      }
      this.#send(socket, { type: "response.output_item.done", response_id: response.id, output_index: index, item });
      this.#send(socket, { type: "conversation.item.done", previous_item_id: null, item });
    });
    this.#send(socket, { type: "response.done", response: { ...response, status: "completed", output: items } });
  }
}
