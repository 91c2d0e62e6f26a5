/**
 * Gatehouse as a voice agent's tool backend, the part every voice framework shares (README.md,
 * "Voice frameworks"; the same rules as the Python client's `gatehouse_client.voice`): the
 * functions to offer the model, and what each function call does and says.
 *
 * - Each tool Gatehouse lists *proposes* a call: held as PENDING, answered with the sentence to
 *   read to the caller. The create's idempotency key is the session and the framework's call id,
 *   so the same function call made again is the same Gatehouse call; the same action proposed
 *   again with a new id (a model that lost its answer to a barge-in) is found among the
 *   session's open calls, or among those it completed within `repeatWindowSeconds`.
 * - `confirm_call`, `change_call`, `cancel_call`, `pending_calls`: the caller's yes, correction
 *   and no, and what is waiting. Nothing is held in this process: after a relay restart a new
 *   VoiceSession on the same conversation finds every open call in Gatehouse.
 * - What arrives later (the checkpoint's question, the outcome) is said through `speak`.
 *
 * Every answer is a sentence the model can speak. When Gatehouse cannot be reached the sentence
 * says so and that nothing was done.
 *
 * Three rules hold for the caller (docs/architecture.md, "Voice sessions"): a checkpoint is
 * answered only after its question was spoken in this session, and a late answer to a step the
 * call has moved past is not spoken; a function call gets its sentence within `deadlineSeconds`
 * (with a filler line after `fillerAfterSeconds`), whatever Gatehouse does; and `pickUp()`, after
 * a relay restart, asks the waiting checkpoint's question, follows a running call, and speaks
 * the outcome of a call that settled while no relay was there, once across relays.
 */
import { randomBytes } from "node:crypto";
import type { Gatehouse } from "./client.js";
import { GatehouseConnectionError, GatehouseError, NotFoundError, ValidationFailedError } from "./errors.js";
import type { CancelRequest, ContextResponse, ModifyRequest, Parameters, PendingCall, ToolCall, ToolCallId } from "./types.js";

export const CONFIRM = "confirm_call";
export const CHANGE = "change_call";
export const CANCEL = "cancel_call";
export const PENDING = "pending_calls";

/** What the model is told when Gatehouse does not answer: the truth, and that nothing was done. */
export const UNREACHABLE =
  "I can't reach the system that does that right now, so nothing has been done. Please try again in a moment.";

/** What the model is told when a confirmation, correction or cancellation outlives the deadline:
 * it may have arrived, so nothing is claimed either way; the outcome is spoken when it comes. */
export const UNSURE =
  "The system is slow to answer, so I can't tell yet whether that went through. I'll say as soon as I know.";

/** Spoken when a request that outlived the deadline finally failed to reach Gatehouse. */
export const STILL_UNREACHABLE = "I still can't reach the system, so I can't tell whether that went through.";

/** A yes to a call at its checkpoint whose question the caller has not heard: the question comes first. */
export const ASKING =
  "The caller hasn't heard the final question yet; it is being asked now. Wait for their answer before going ahead.";

/** A yes the caller gave before the checkpoint's question was spoken, handled after it was: not an answer to it. */
export const ASKED_SINCE =
  "The caller said that before hearing the final question, which was just asked. Wait for their answer to it.";

/** A late answer to an earlier step of a call that has moved past it: not to be spoken. */
export const OVERTAKEN = "(Already handled: the caller has since heard what happened. Say nothing about this.)";

/** The default filler line, spoken while a function call waits on Gatehouse. */
export const FILLER = "One moment.";

/** What the deadline's timer answers: not a value any work can answer. */
const LATE = Symbol("late");

/** A function to offer the model: its name, what it does, and its parameters (JSON Schema). */
export interface VoiceFunction {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

const CALL_ID = { type: "string", description: "The call's id, when more than one is waiting; the latest otherwise." };

/** The session's own functions, offered beside the tools. */
export const SESSION_FUNCTIONS: readonly VoiceFunction[] = [
  {
    name: CONFIRM,
    description:
      "The caller agreed to the action you read back (or, at a checkpoint, to go ahead). Never call this before the caller has said yes.",
    parameters: { type: "object", properties: { tool_call_id: CALL_ID }, additionalProperties: false },
  },
  {
    name: CHANGE,
    description: "The caller corrected a detail of the action waiting for their yes. Pass only the fields that change.",
    parameters: {
      type: "object",
      required: ["changes"],
      properties: {
        tool_call_id: CALL_ID,
        changes: { type: "object", description: "The corrected parameters, by name." },
        reason: { type: "string", maxLength: 200, description: "What the caller said, briefly." },
      },
      additionalProperties: false,
    },
  },
  {
    name: CANCEL,
    description: "The caller does not want the action waiting for their yes.",
    parameters: { type: "object", properties: { tool_call_id: CALL_ID, reason: { type: "string", maxLength: 200 } }, additionalProperties: false },
  },
  {
    name: PENDING,
    description: "What is waiting for the caller's answer or still running, in this conversation.",
    parameters: { type: "object", properties: {}, additionalProperties: false },
  },
];

/**
 * What a tool's function call came to. `proposed`: a new PENDING call, `sentence` is its
 * read-back. `waiting`, `under_way`, `done`: the same action was already proposed, running or
 * completed (`toolCallId` is that call). `refused`: Gatehouse refused it (the sentence says
 * why), `unreachable`: Gatehouse did not answer. Nothing was made in the last two cases.
 */
export interface Proposal {
  outcome: "proposed" | "waiting" | "under_way" | "done" | "refused" | "unreachable";
  sentence: string;
  toolCallId?: ToolCallId;
  /** For a proposed call, the read-back alone (the sentence also tells the model what to do). */
  message?: string;
}

export interface VoiceSessionOptions {
  client: Gatehouse;
  /** Gatehouse's session: the conversation's id, the same after a relay restart. */
  sessionId: string;
  /** Says what arrives after a function answered: the checkpoint's question and the outcome. */
  speak?: (sentence: string) => void | Promise<void>;
  /** Each long-poll of a running call, in seconds (at most 30). */
  waitSeconds?: number;
  /** How long a call is followed, in seconds. */
  followSeconds?: number;
  /** The same action proposed again this soon after an identical completed one is that one. */
  repeatWindowSeconds?: number;
  /** When the filler line is spoken while a function call waits on Gatehouse (0.8 s; null: never). */
  fillerAfterSeconds?: number | null;
  /** The filler line ("One moment."). */
  filler?: string;
  /** When the model gets its sentence whatever Gatehouse does (4 s): a phone call's deadline,
   * not the client's generic timeouts (docs/openai-realtime.md, "Deadlines"). */
  deadlineSeconds?: number;
}

export class VoiceSession {
  readonly client: Gatehouse;
  readonly sessionId: string;
  speak: ((sentence: string) => void | Promise<void>) | undefined;
  private readonly waitSeconds: number;
  private readonly followMs: number;
  private readonly repeatWindowMs: number;
  private readonly following = new Map<ToolCallId, AbortController>();
  private readonly fillerAfterMs: number | null;
  private readonly filler: string;
  private readonly deadlineMs: number;
  /** Calls whose checkpoint question the caller heard in this session, and when (epoch ms). */
  private readonly asked = new Map<ToolCallId, number>();
  /** By call: how many times this session spoke of it or acted on it, so an answer that comes
   * back after something else happened to the call knows it was overtaken. */
  private readonly moves = new Map<ToolCallId, number>();
  /** This session's own key for outcome marks, so its retry after a lost answer is still first. */
  private readonly teller = randomBytes(8).toString("hex");
  /** Set by `close()`: what is still in flight then is not spoken of. */
  private closed = false;

  constructor(options: VoiceSessionOptions) {
    this.client = options.client;
    this.sessionId = options.sessionId;
    this.speak = options.speak;
    this.waitSeconds = Math.min(options.waitSeconds ?? 25, 30);
    this.followMs = (options.followSeconds ?? 600) * 1000;
    this.repeatWindowMs = (options.repeatWindowSeconds ?? 300) * 1000;
    const fillerAfter = options.fillerAfterSeconds === undefined ? 0.8 : options.fillerAfterSeconds;
    this.fillerAfterMs = fillerAfter === null ? null : fillerAfter * 1000;
    this.filler = options.filler ?? FILLER;
    this.deadlineMs = (options.deadlineSeconds ?? 4) * 1000;
  }

  /** Every available tool Gatehouse lists (its own parameters schema), then the session's functions. */
  async functions(): Promise<VoiceFunction[]> {
    const listed = await this.client.listTools();
    const tools: VoiceFunction[] = [];
    for (const tool of listed.tools) {
      if (tool.available) tools.push({ name: tool.name, description: tool.description, parameters: tool.parameters_schema });
    }
    return [...tools, ...SESSION_FUNCTIONS];
  }

  /**
   * What the function call `name` (the model's `args`, JSON text or an object) does, and the
   * sentence for the model. `callId` is the framework's id of this function call.
   */
  /**
   * `saidAt` (epoch ms) is when the caller said what led to this function call, for a framework
   * that runs it later than that: a yes said before a checkpoint's question is not an answer to it.
   */
  async call(name: string, args: unknown, callId: string, saidAt?: number): Promise<string> {
    let parsed: Parameters;
    try {
      parsed = parseArguments(args);
    } catch (bad) {
      return `That request was malformed (${(bad as Error).message}); nothing was done.`;
    }
    return this.withinDeadline(name, parsed, callId, this.answer(name, parsed, callId, saidAt));
  }

  /**
   * `work`'s sentence, or, when Gatehouse has not answered within the deadline, a true one: a read
   * or a proposal said not done (a proposal that lands later is withdrawn by its key, so no later
   * yes confirms what the caller was told was not done); a confirmation, correction or
   * cancellation said not known yet, and what it finally comes to spoken. A filler line is
   * spoken while the caller waits.
   */
  async withinDeadline<T>(name: string, parsed: Parameters, callId: string, work: Promise<T>): Promise<T | string> {
    let settled = false;
    const fillerTimer =
      this.speak !== undefined && this.fillerAfterMs !== null && this.fillerAfterMs < this.deadlineMs
        ? setTimeout(() => {
            if (!settled && !this.closed) void Promise.resolve(this.speak?.(this.filler)).catch(() => undefined);
          }, this.fillerAfterMs)
        : undefined;
    let deadlineTimer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<typeof LATE>((resolve) => {
      deadlineTimer = setTimeout(() => resolve(LATE), this.deadlineMs);
    });
    try {
      const answer = await Promise.race([work, late]);
      if (answer !== LATE) return answer as T;
    } finally {
      settled = true;
      clearTimeout(fillerTimer);
      clearTimeout(deadlineTimer);
    }
    console.warn(`gatehouse voice: Gatehouse did not answer ${name} within ${this.deadlineMs} ms`);
    // Whatever the work comes to now is handled here or dropped, never an unhandled rejection.
    work.catch((error: unknown) => console.warn(`gatehouse voice: ${name}, past its deadline: ${String(error)}`));
    if (name === PENDING) return UNREACHABLE;
    if (name !== CONFIRM && name !== CHANGE && name !== CANCEL) {
      void work.finally(() => this.withdraw(name, parsed, callId)).catch(() => undefined);
      return UNREACHABLE;
    }
    void work
      .then(async (sentence) => {
        if (this.speak === undefined || this.closed || typeof sentence !== "string") return;
        if (sentence === UNREACHABLE) await this.speak(STILL_UNREACHABLE);
        else if (sentence !== OVERTAKEN && sentence !== ASKING && sentence !== ASKED_SINCE) await this.speak(sentence);
      })
      .catch(() => undefined);
    return UNSURE;
  }

  /**
   * After a relay (re)starts on a conversation: asks the question of each call waiting at its
   * checkpoint, follows each running call to its outcome, and speaks the outcome of each call
   * that settled within `followSeconds` and whose outcome no relay has told (once, across
   * relays). Answers what is waiting, for the framework's conversation state; throws if the
   * session cannot be read.
   */
  async pickUp(): Promise<string> {
    return this.pickUpFrom(await this.client.getSessionCalls(this.sessionId));
  }

  /** `pickUp` on the conversation's calls as already read (`getSessionCalls`). */
  pickUpFrom(context: ContextResponse): string {
    for (const open of context.pending) {
      if (open.status === "PREPARED" || open.status === "EXECUTING") this.follow(open.tool_call_id);
    }
    const now = Date.now();
    for (const settled of context.recent) {
      const recent = now - Date.parse(settled.created_at) <= this.followMs;
      if (recent && (settled.status === "COMPLETED" || settled.status === "FAILED" || settled.status === "EXPIRED")) {
        this.follow(settled.tool_call_id);
      }
    }
    return waiting(context.pending);
  }

  /** What the function call does, and its sentence, with no deadline of its own (`call` adds it). */
  async answer(name: string, parsed: Parameters, callId: string, saidAt?: number): Promise<string> {
    switch (name) {
      case CONFIRM:
        return this.answering(() => this.confirm(stringOrUndefined(parsed.tool_call_id), saidAt));
      case CHANGE:
        return this.answering(() => this.change(stringOrUndefined(parsed.tool_call_id), parsed.changes, parsed.reason));
      case CANCEL:
        return this.answering(() => this.cancel(stringOrUndefined(parsed.tool_call_id), parsed.reason));
      case PENDING:
        return this.answering(() => this.pending());
      default:
        return (await this.propose(name, parsed, callId)).sentence;
    }
  }

  /** Proposes the tool call `name`: a new PENDING call, or the same action already made. */
  async propose(name: string, parameters: Parameters, callId: string): Promise<Proposal> {
    try {
      const context = await this.client.getSessionCalls(this.sessionId);
      for (const open of context.pending) {
        if (open.function_name === name && sameValue(open.parameters, parameters)) {
          const id = open.tool_call_id;
          if (open.status === "PENDING") {
            return { outcome: "waiting", toolCallId: id, sentence: `That is already waiting for the caller's yes. (Call id: ${id}.)` };
          }
          this.follow(id);
          return { outcome: "under_way", toolCallId: id, sentence: `That is already under way; I'll say how it went. (Call id: ${id}.)` };
        }
      }
      const now = Date.now();
      for (const settled of context.recent) {
        if (
          settled.function_name === name &&
          sameValue(settled.parameters, parameters) &&
          settled.status === "COMPLETED" &&
          now - Date.parse(settled.created_at) <= this.repeatWindowMs
        ) {
          const done = settled.voice_response ?? "It was done.";
          const id = settled.tool_call_id;
          return {
            outcome: "done",
            toolCallId: id,
            sentence: `That was already done: ${done} Don't do it again unless the caller asks for another. (Call id: ${id}.)`,
          };
        }
      }
      const created = await this.create(name, parameters, callId);
      return {
        outcome: "proposed",
        toolCallId: created.tool_call_id,
        message: created.message,
        sentence: `${created.message} (Read this to the caller and wait for their answer. Call id: ${created.tool_call_id}.)`,
      };
    } catch (error) {
      const sentence = sentenceFor(error);
      return { outcome: sentence === UNREACHABLE ? "unreachable" : "refused", sentence };
    }
  }

  /**
   * Cancels the proposal the function call `callId` made, if it made one and it is still
   * PENDING: for a call the framework cut off before the caller heard it. A create that was in
   * flight is found by its key (or made and cancelled at once).
   */
  async withdraw(name: string, args: unknown, callId: string): Promise<void> {
    try {
      const created = await this.create(name, parseArguments(args), callId);
      const call = await this.client.getToolCall(created.tool_call_id);
      if (call.status === "PENDING") {
        await this.client.cancelToolCall(created.tool_call_id, { reason: "interrupted before the caller heard it" });
      }
    } catch (error) {
      console.warn(`gatehouse voice: withdrawing the proposal of ${name} (${callId}): ${(error as Error).message}`);
    }
  }

  /**
   * The caller said yes: a PENDING call is confirmed, a call at its checkpoint goes ahead, but
   * only once the checkpoint's question was spoken in this session; before that, the question is
   * asked and nothing goes ahead.
   */
  async confirm(toolCallId?: ToolCallId, saidAt?: number): Promise<string> {
    const target = await this.openCall(toolCallId);
    if (target === undefined) return "There is nothing waiting for the caller's yes.";
    const id = target.tool_call_id;
    const askedAt = this.asked.get(id);
    if (target.status === "PREPARED" && askedAt !== undefined && saidAt !== undefined && saidAt < askedAt) return ASKED_SINCE;
    if (target.status === "PREPARED" && askedAt === undefined) {
      if (this.speak === undefined) {
        const question = questionOf(await this.client.getToolCall(id));
        this.asked.set(id, Date.now());
        return `${question} (Read this to the caller and wait for their answer.)`;
      }
      this.follow(id);
      return ASKING;
    }
    const moves = this.move(id);
    let message: string | undefined;
    if (target.status === "PENDING") {
      message = messageOf(await this.client.confirmToolCall(id));
    } else if (target.status === "PREPARED") {
      message = messageOf(await this.client.resumeExecution(id, { action: "proceed" }));
    } else {
      this.follow(id);
      return "That is already under way; I'll say how it went.";
    }
    this.follow(id);
    if (this.moves.get(id) !== moves) return OVERTAKEN;
    return message ?? "Done; I'll let the caller know how it goes.";
  }

  /** Counts one more thing this session did or said about the call; answers the new count. */
  private move(toolCallId: ToolCallId): number {
    const moves = (this.moves.get(toolCallId) ?? 0) + 1;
    this.moves.set(toolCallId, moves);
    return moves;
  }

  /** The caller corrected a detail: the new read-back. */
  async change(toolCallId: ToolCallId | undefined, changes: unknown, reason?: unknown): Promise<string> {
    if (!isObject(changes) || Object.keys(changes).length === 0) return "Say which details change.";
    const target = await this.openCall(toolCallId);
    if (target === undefined || target.status !== "PENDING") return "There is nothing waiting that can still be changed.";
    const request: ModifyRequest = { parameters: changes };
    if (typeof reason === "string" && reason) request.reason = reason.slice(0, 200);
    const modified = await this.client.modifyToolCall(target.tool_call_id, request);
    return `${modified.message} (Read this back and wait for the caller's answer.)`;
  }

  /** The caller said no. */
  async cancel(toolCallId: ToolCallId | undefined, reason?: unknown): Promise<string> {
    const target = await this.openCall(toolCallId);
    if (target === undefined) return "There is nothing waiting to cancel.";
    const request: CancelRequest = typeof reason === "string" && reason ? { reason: reason.slice(0, 200) } : {};
    this.move(target.tool_call_id);
    return (await this.client.cancelToolCall(target.tool_call_id, request)).message;
  }

  /** What is waiting or running, one call per clause. */
  async pending(): Promise<string> {
    return waiting((await this.client.getSessionCalls(this.sessionId)).pending);
  }

  /** The session's open calls, newest last. */
  async openCalls(): Promise<PendingCall[]> {
    const pending = (await this.client.getSessionCalls(this.sessionId)).pending;
    return [...pending].sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at));
  }

  /** The sentence for what `action` does, or for why Gatehouse did not do it. */
  async answering(action: () => Promise<string>): Promise<string> {
    try {
      return await action();
    } catch (error) {
      return sentenceFor(error);
    }
  }

  /** Stops following the session's calls (they go on in Gatehouse). */
  close(): void {
    this.closed = true;
    for (const stop of this.following.values()) stop.abort();
    this.following.clear();
  }

  /** The proposal of the function call `callId`: made once, whoever asks, by its key. */
  private create(name: string, parameters: Parameters, callId: string) {
    return this.client.createToolCall(
      { session_id: this.sessionId, function_name: name, parameters, intent_id: callId },
      { idempotencyKey: `voice:${this.sessionId}:${callId}` },
    );
  }

  /** The open call meant: the one named, or the newest open one of the session. */
  async openCall(toolCallId: ToolCallId | undefined): Promise<PendingCall | undefined> {
    const open = await this.openCalls();
    if (toolCallId) return open.find((call) => call.tool_call_id === toolCallId);
    return open.at(-1);
  }

  /** Speaks what the call reaches next: its checkpoint's question, or its outcome. */
  follow(toolCallId: ToolCallId): void {
    if (this.speak === undefined || this.following.has(toolCallId)) return;
    const stop = new AbortController();
    this.following.set(toolCallId, stop);
    void this.watch(toolCallId, stop.signal).finally(() => {
      if (this.following.get(toolCallId) === stop) this.following.delete(toolCallId);
    });
  }

  private async watch(toolCallId: ToolCallId, signal: AbortSignal): Promise<void> {
    const deadline = Date.now() + this.followMs;
    while (!signal.aborted && Date.now() < deadline) {
      let call: ToolCall;
      try {
        call = await this.client.getToolCall(toolCallId, { wait: this.waitSeconds, signal });
      } catch (error) {
        if (signal.aborted || error instanceof NotFoundError) return;
        console.warn(`gatehouse voice: following ${toolCallId}: ${(error as Error).message}`);
        await pause(1000);
        continue;
      }
      if (call.status === "PENDING" || call.status === "EXECUTING" || (call.status === "PREPARED" && this.asked.has(toolCallId))) {
        // A long-poll answers EXECUTING when its wait ran out; PENDING is a call that was never
        // confirmed (a lost confirm), PREPARED one whose question was asked: looked at again,
        // not spoken of.
        if (call.status !== "EXECUTING") await pause(1000);
        continue;
      }
      const sentence = news(call);
      if (sentence === undefined || signal.aborted) return;
      if (call.status !== "PREPARED" && !(await this.firstToTell(toolCallId))) return;
      this.move(toolCallId);
      await this.speak?.(sentence);
      if (call.status === "PREPARED" && !this.asked.has(toolCallId)) this.asked.set(toolCallId, Date.now());
      return;
    }
  }

  /**
   * Whether this session is the one to speak a settled call's outcome: Gatehouse keeps one mark
   * per call, so of two relays on the conversation (one restarted) only one speaks it. When the
   * mark cannot be made the outcome is spoken anyway: heard twice is better than never.
   */
  private async firstToTell(toolCallId: ToolCallId): Promise<boolean> {
    try {
      return (await this.client.markOutcomeTold(toolCallId, { idempotencyKey: `voice:${this.teller}:${toolCallId}` })).first;
    } catch (error) {
      console.warn(`gatehouse voice: marking the outcome of ${toolCallId} as told: ${(error as Error).message}`);
      return true;
    }
  }
}

function waiting(pending: PendingCall[]): string {
  if (pending.length === 0) return "Nothing is waiting.";
  const lines = pending.map((call) => `${call.tool_call_id}: ${call.function_name} ${JSON.stringify(call.parameters)} (${call.status})`);
  return `Waiting: ${lines.join("; ")}`;
}

function questionOf(call: ToolCall): string {
  return call.checkpoint?.message ?? call.summary ?? "It's ready. Shall I go ahead?";
}

/** What to tell the caller about a call that left EXECUTING; nothing for a cancelled call. */
export function news(call: ToolCall): string | undefined {
  switch (call.status) {
    case "PREPARED":
      return questionOf(call);
    case "COMPLETED":
      return call.voice_response ?? "Done.";
    case "FAILED":
      return call.error_message ?? "That didn't work, and nothing was done.";
    case "EXPIRED":
      return "That request timed out before it ran; nothing was done.";
    default:
      return undefined;
  }
}

/** The sentence for an error from Gatehouse (or from reaching it). */
export function sentenceFor(error: unknown): string {
  if (error instanceof GatehouseConnectionError) return UNREACHABLE;
  if (error instanceof ValidationFailedError) {
    const problems = error.fields.map((p) => `${p.field} ${p.problem}`).join("; ") || error.message;
    return `That can't be done as asked: ${problems}. Ask the caller for the right details.`;
  }
  if (error instanceof GatehouseError) return error.status >= 500 ? UNREACHABLE : error.message;
  throw error;
}

/** The model's arguments as an object: JSON text, an object, or nothing. */
export function parseArguments(args: unknown): Parameters {
  if (args === undefined || args === null || args === "") return {};
  let parsed: unknown = args;
  if (typeof args === "string") {
    try {
      parsed = JSON.parse(args);
    } catch {
      throw new Error("the arguments are not JSON");
    }
  }
  if (!isObject(parsed)) throw new Error("the arguments are not an object");
  return { ...parsed };
}

function messageOf(answer: unknown): string | undefined {
  return isObject(answer) && typeof answer.message === "string" ? answer.message : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function stringOrUndefined(value: unknown): string | undefined {
  return typeof value === "string" && value ? value : undefined;
}

/** Equal as JSON values (the key order of objects aside). */
function sameValue(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => sameValue(item, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => key in b && sameValue(a[key], b[key]));
  }
  return a === b;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
