/**
 * Gatehouse as the tool backend of an OpenAI Agents SDK realtime session (docs/openai-realtime.md).
 *
 * Each tool Gatehouse lists becomes a function tool with `needsApproval`. When the model calls
 * one, the SDK asks for approval (`tool_approval_requested`) and this package makes the approval
 * a Gatehouse call held as PENDING: its read-back is spoken, a spoken correction (`change_call`)
 * modifies it, `session.approve()` (or the caller's yes, `confirm_call`) confirms it and
 * `session.reject()` (or `cancel_call`) cancels it. The call is kept in Gatehouse, not in this
 * process: after a relay restart, `bind()` puts the conversation's waiting calls into the new
 * conversation, where the caller's yes confirms them (`confirm_call`; an application calls
 * `confirmCall`), since an SDK approval belongs to the model response that asked for it.
 * The checkpoint's question and the outcome are spoken when they arrive.
 */
import type { RunToolApprovalItem } from "@openai/agents-core";
import type { FunctionTool } from "@openai/agents-core";
import { backgroundResult, tool } from "@openai/agents-realtime";
import type { RealtimeItem, RealtimeSession } from "@openai/agents-realtime";
import {
  CANCEL,
  CHANGE,
  CONFIRM,
  GatehouseConnectionError,
  GatehouseError,
  PENDING,
  SESSION_FUNCTIONS,
  VoiceSession,
  parseArguments,
  sentenceFor,
} from "gatehouse-client";
import type { Gatehouse, Proposal, ToolCallId, VoiceFunction } from "gatehouse-client";

/** How a session says a sentence on its own: by default, a response asked of the model. */
export type Speak = (session: RealtimeSession, sentence: string) => void | Promise<void>;

export interface GatehouseRealtimeOptions {
  /** Replaces the default way of speaking (a `response.create` whose instructions carry the sentence). */
  speak?: Speak;
  /** How long a running call is followed for its checkpoint and outcome, in seconds (600). */
  followSeconds?: number;
  /** When the model gets a true sentence whatever Gatehouse does, in seconds (4): see `VoiceSession`. */
  deadlineSeconds?: number;
  /** When a filler line is spoken while a function call waits on Gatehouse, in seconds (never by default). */
  fillerAfterSeconds?: number | null;
}

/** An approval held for a Gatehouse call: the SDK's item, and the call it stands for. */
export interface HeldApproval {
  item: RunToolApprovalItem;
  toolCallId: ToolCallId;
}

/** The instructions of the response that says `sentence`. */
export function speakingInstructions(sentence: string): string {
  return `Say this to the caller, in your own voice and without adding to it: "${sentence}"`;
}

const defaultSpeak: Speak = (session, sentence) => {
  const response = { instructions: speakingInstructions(sentence) };
  if (session.transport.requestResponse) session.transport.requestResponse(response);
  else session.transport.sendEvent({ type: "response.create", response });
};

export class GatehouseRealtime {
  /** The voice session under this one: Gatehouse's calls for the conversation. */
  readonly voice: VoiceSession;
  /** The function tools for the `RealtimeAgent`: Gatehouse's tools, then the session's own. */
  readonly tools: FunctionTool[];
  private readonly toolNames: Set<string>;
  private readonly speak: Speak;
  private session: RealtimeSession | undefined;
  /** By Gatehouse call: the approval that stands for it. */
  private readonly held = new Map<ToolCallId, HeldApproval>();
  /** By the SDK's call id: the proposal its approval request made (or is making). */
  private readonly proposals = new Map<string, Promise<Proposal>>();
  /** The SDK's call ids whose approval this package decided itself (not to be cancelled again). */
  private readonly decided = new Set<string>();
  /** The calls proposed before a relay restart that were still waiting for a yes at `bind`. */
  private restored: ToolCallId[] = [];

  private constructor(voice: VoiceSession, functions: VoiceFunction[], options: GatehouseRealtimeOptions) {
    this.voice = voice;
    this.speak = options.speak ?? defaultSpeak;
    const sessionNames = new Set(SESSION_FUNCTIONS.map((f) => f.name));
    const tools = functions.filter((f) => !sessionNames.has(f.name));
    this.toolNames = new Set(tools.map((f) => f.name));
    this.tools = [
      ...tools.map((f) => this.gatehouseTool(f)),
      ...SESSION_FUNCTIONS.map((f) => this.sessionTool(f)),
    ];
  }

  /**
   * The tools of conversation `sessionId` (Gatehouse's session: the same after a relay restart).
   * Rejects with the client's error if Gatehouse's tool list cannot be read.
   */
  static async attach(client: Gatehouse, sessionId: string, options: GatehouseRealtimeOptions = {}): Promise<GatehouseRealtime> {
    const voice = new VoiceSession({
      client,
      sessionId,
      followSeconds: options.followSeconds,
      deadlineSeconds: options.deadlineSeconds,
      // A realtime model speaks while its tool runs; a filler is the relay's choice here.
      fillerAfterSeconds: options.fillerAfterSeconds ?? null,
    });
    return new GatehouseRealtime(voice, await voice.functions(), options);
  }

  /**
   * Binds to a connected session: its approval requests become Gatehouse calls, what arrives
   * later is spoken through it, and the conversation is picked up (`restore`): the calls still
   * waiting for a yes (proposed before a relay restart) are put into the conversation
   * (`restoredCalls`), and the calls already running are followed again.
   */
  async bind(session: RealtimeSession): Promise<void> {
    this.session = session;
    this.voice.speak = (sentence) => this.speak(session, sentence);
    session.on("tool_approval_requested", (_context, _agent, request) => {
      if (request.type !== "function_approval") return;
      const item = request.approvalItem;
      const raw = item.rawItem;
      if (raw.type !== "function_call" || !this.toolNames.has(raw.name)) return;
      const name = raw.name;
      // Never a rejected promise: a listener's failure would otherwise end the relay's process.
      const proposal = this.propose(session, item).catch((error: unknown): Proposal => {
        console.warn(`gatehouse-openai-realtime: the proposal of ${name} failed: ${String(error)}`);
        return { outcome: "refused", sentence: "That could not be proposed; nothing was done." };
      });
      this.proposals.set(raw.callId, proposal);
    });
    // A rejection never runs the tool: its end without an execute is the SDK's reject().
    session.on("agent_tool_end", (_context, _agent, ended, _result, { toolCall }) => {
      if (toolCall.type !== "function_call" || !this.toolNames.has(ended.name)) return;
      if (this.decided.has(toolCall.callId)) return;
      void this.rejected(toolCall.callId);
    });
    await this.restore(session);
  }

  /** The approvals waiting for a decision, oldest first. */
  get pendingApprovals(): HeldApproval[] {
    return [...this.held.values()];
  }

  /** Stops following the conversation's calls (they go on in Gatehouse). */
  close(): void {
    this.voice.close();
  }

  /** Gatehouse's tool `f`, run once its approval is given. */
  private gatehouseTool(f: VoiceFunction): FunctionTool {
    // The call Gatehouse holds is confirmed, with its parameters as corrected since (Gatehouse's,
    // not the SDK's first arguments).
    return this.functionTool(f, true, CONFIRM, async (_args, callId) => {
      if (callId === undefined) return "That call is not known; nothing was done.";
      this.decided.add(callId);
      const toolCallId = await this.callFor(callId);
      if (toolCallId === undefined) return "There is nothing waiting for that yes; nothing was done.";
      this.held.delete(toolCallId);
      return this.voice.answering(() => this.voice.confirm(toolCallId));
    });
  }

  /**
   * The SDK's function tool for `f` (its JSON Schema as is), running `run` with the parsed
   * arguments and the SDK's call id, within the voice session's deadline, as the function `as`
   * (an approved Gatehouse tool is the caller's yes to its call).
   */
  private functionTool(
    f: VoiceFunction,
    needsApproval: boolean,
    as: string,
    run: (args: Record<string, unknown>, callId: string | undefined) => Promise<string | ReturnType<typeof backgroundResult<string>>>,
  ): FunctionTool {
    return tool({
      name: f.name,
      description: f.description,
      parameters: f.parameters as never,
      strict: false,
      needsApproval,
      execute: async (input, _context, details) => {
        let args;
        try {
          args = parseArguments(input);
        } catch (bad) {
          return `That request was malformed (${(bad as Error).message}); nothing was done.`;
        }
        const callId = details?.toolCall?.callId;
        return this.voice.withinDeadline(as, args, callId ?? as, run(args, callId));
      },
    }) as FunctionTool;
  }

  /** The session's function `f`: the caller's yes, correction or no, or what is waiting. */
  private sessionTool(f: VoiceFunction): FunctionTool {
    return this.functionTool(f, false, f.name, async (args, callId) => {
      const named = typeof args.tool_call_id === "string" && args.tool_call_id ? args.tool_call_id : undefined;
      switch (f.name) {
        case CONFIRM:
          return this.confirm(named);
        case CANCEL:
          return this.cancel(named, args.reason);
        default:
          // Within the deadline already: the tool's execute keeps it.
          return this.voice.answer(f.name, args, callId ?? f.name);
      }
    });
  }

  /** An approval request made a Gatehouse call: held and read back, or decided at once. */
  private async propose(session: RealtimeSession, item: RunToolApprovalItem): Promise<Proposal> {
    const raw = item.rawItem;
    if (raw.type !== "function_call") throw new Error("only function calls are proposed");
    let parameters;
    try {
      parameters = parseArguments(raw.arguments);
    } catch (bad) {
      const sentence = `That request was malformed (${(bad as Error).message}); nothing was done.`;
      await this.decide(session, item, sentence);
      return { outcome: "refused", sentence };
    }
    const proposing = this.voice.propose(raw.name, parameters, raw.callId);
    const answered = await this.voice.withinDeadline(raw.name, parameters, raw.callId, proposing);
    // Past the deadline the caller hears that nothing was done, and the proposal, if it lands, is
    // withdrawn by its key (withinDeadline does that).
    const proposal: Proposal = typeof answered === "string" ? { outcome: "unreachable", sentence: answered } : answered;
    if (proposal.outcome === "proposed" && proposal.toolCallId !== undefined) {
      this.held.set(proposal.toolCallId, { item, toolCallId: proposal.toolCallId });
      await this.speak(session, proposal.message ?? proposal.sentence);
    } else {
      // The same action already waiting, running or done, a refusal, or Gatehouse unreachable:
      // this approval is answered at once with the sentence that says so.
      await this.decide(session, item, proposal.sentence);
    }
    return proposal;
  }

  /** Rejects an approval this package answered itself, with `sentence` as the model's answer. */
  private async decide(session: RealtimeSession, item: RunToolApprovalItem, sentence: string): Promise<void> {
    const raw = item.rawItem;
    if (raw.type === "function_call") this.decided.add(raw.callId);
    await session.reject(item, { message: sentence });
  }

  /** The caller's yes: through the approval when one is held for the call, directly otherwise. */
  private async confirm(named: ToolCallId | undefined): Promise<string | ReturnType<typeof backgroundResult<string>>> {
    const target = await this.target(named);
    const held = target === undefined ? undefined : this.held.get(target);
    if (held !== undefined && this.session !== undefined) {
      // The approved call's own answer goes to the model and starts its response; this one
      // only records that the yes was passed on.
      await this.session.approve(held.item);
      return backgroundResult("The caller's yes was passed on.");
    }
    return this.voice.answering(() => this.voice.confirm(named));
  }

  /** The caller's no: the call is cancelled, and a held approval is rejected with its answer. */
  private async cancel(named: ToolCallId | undefined, reason: unknown): Promise<string | ReturnType<typeof backgroundResult<string>>> {
    const target = await this.target(named);
    const held = target === undefined ? undefined : this.held.get(target);
    const sentence = await this.voice.answering(() => this.voice.cancel(target ?? named, reason));
    if (held !== undefined && this.session !== undefined) {
      this.held.delete(held.toolCallId);
      await this.decide(this.session, held.item, sentence);
      return backgroundResult(sentence);
    }
    return sentence;
  }

  /** A held approval the application rejected (`session.reject`): its call is cancelled. */
  private async rejected(callId: string): Promise<void> {
    const toolCallId = await this.callFor(callId);
    if (toolCallId === undefined) return;
    this.held.delete(toolCallId);
    // Unreachable now, the call expires unconfirmed: a rejected approval never runs either way.
    await this.voice.answering(() => this.voice.cancel(toolCallId, "rejected"));
  }

  /** The Gatehouse call an SDK call id stands for. */
  private async callFor(callId: string): Promise<ToolCallId | undefined> {
    for (const held of this.held.values()) {
      if (held.item.rawItem.type === "function_call" && held.item.rawItem.callId === callId) return held.toolCallId;
    }
    const proposal = await this.proposals.get(callId);
    return proposal?.outcome === "proposed" ? proposal.toolCallId : undefined;
  }

  /** The open call meant: the one named, or the newest. Undefined when none (or unreachable). */
  private async target(named: ToolCallId | undefined): Promise<ToolCallId | undefined> {
    try {
      return (await this.voice.openCall(named))?.tool_call_id;
    } catch (error) {
      // Not read: the voice session's own call says so in words.
      if (error instanceof GatehouseError || error instanceof GatehouseConnectionError) return undefined;
      throw error;
    }
  }

  /**
   * After a restart: the checkpoint's question asked again, a running call followed, an outcome
   * that came while no relay was there spoken (once across relays), and the calls still waiting
   * for the caller's yes put into the new conversation as what the model knows, so the caller's
   * yes (`confirm_call`) or no (`cancel_call`) decides them. The SDK's approvals belong to the
   * model response that asked for them, which ended with the old connection, so none is rebuilt:
   * an application that shows approvals decides these with `confirmCall` and `cancelCall`.
   * Within the deadline, so a Gatehouse that hangs never holds the relay's start.
   */
  private async restore(session: RealtimeSession): Promise<void> {
    const read = this.voice.client.getSessionCalls(this.voice.sessionId);
    let picked;
    try {
      picked = await this.voice.withinDeadline(PENDING, {}, "restore", read);
    } catch (error) {
      console.warn(`gatehouse-openai-realtime: the waiting calls were not read: ${sentenceFor(error)}`);
      return;
    }
    if (typeof picked === "string") {
      console.warn(`gatehouse-openai-realtime: the waiting calls were not read in time: ${picked}`);
      return;
    }
    const described = this.voice.pickUpFrom(picked);
    const waiting = picked.pending
      .filter((call) => call.status === "PENDING" && this.toolNames.has(call.function_name))
      .sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at));
    this.restored = waiting.map((call) => call.tool_call_id);
    if (waiting.length === 0) return;
    const text = `Calls of this conversation from before a restart. ${described} Those PENDING wait for the caller's yes (confirm_call) or no (cancel_call).`;
    session.transport.sendEvent({
      type: "conversation.item.create",
      item: { type: "message", role: "system", content: [{ type: "input_text", text }] },
    });
  }

  /** The calls proposed before a relay restart that still wait for the caller's yes, oldest first. */
  get restoredCalls(): readonly ToolCallId[] {
    return this.restored;
  }

  /** Confirms a call waiting for its yes (a restored one, for an application that shows them). */
  async confirmCall(toolCallId: ToolCallId): Promise<string> {
    return this.voice.withinDeadline(CONFIRM, {}, toolCallId, this.voice.answering(() => this.voice.confirm(toolCallId)));
  }

  /** Cancels a call waiting for its yes (a restored one, for an application that shows them). */
  async cancelCall(toolCallId: ToolCallId, reason?: string): Promise<string> {
    return this.voice.withinDeadline(CANCEL, {}, toolCallId, this.voice.answering(() => this.voice.cancel(toolCallId, reason)));
  }
}

/** The text of everything the assistant said in `history`, in order. */
export function assistantText(history: readonly RealtimeItem[]): string[] {
  const said: string[] = [];
  for (const item of history) {
    if (item.type !== "message" || item.role !== "assistant") continue;
    const text = item.content
      .map((part) => ("text" in part && typeof part.text === "string" ? part.text : "transcript" in part && typeof part.transcript === "string" ? part.transcript : ""))
      .join("");
    if (text) said.push(text);
  }
  return said;
}
