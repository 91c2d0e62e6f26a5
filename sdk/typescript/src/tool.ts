// What a tool written with this package implements: its description and its logic, given to
// `defineTool`. The package serves the contract around it (signatures, ordering, at-most-once
// `execute`); the tool holds only its own logic. Any method may return a Promise.

import type { Checkpoint, Executed, FieldProblem, ToolDescription, ToolEffects } from "./contract.js";
import { checkParameters, compileSchema } from "./schema.js";

export type Parameters = Record<string, unknown>;
export type MaybePromise<T> = T | Promise<T>;

/** The tool's definitive no, answered 422: the call becomes FAILED and the agent speaks
 * `message`. Anything else a tool throws is a crash (500), and Gatehouse tries again later.
 *
 * From `execute`, `{ mayHaveActed: true }` says the tool cannot tell whether it acted (its backend
 * did not answer): the caller is told so and what `prepare` left is kept; without it a failed
 * `execute` means nothing was done, and the preparation is discarded. */
export class ToolFailure extends globalThis.Error {
  readonly mayHaveActed: boolean;

  constructor(message: string, options: { mayHaveActed?: boolean } = {}) {
    super(message.trim() || "The tool couldn't do that.");
    this.name = "ToolFailure";
    this.mayHaveActed = options.mayHaveActed ?? false;
  }
}

/** `validate`'s no: every problem found, each naming its field in words an agent can speak. */
export class InvalidParameters extends globalThis.Error {
  readonly problems: FieldProblem[];
  constructor(problems: FieldProblem[]) {
    super(problems.map((p) => `${p.field} ${p.problem}`).join("; "));
    this.name = "InvalidParameters";
    this.problems = problems;
  }
}

/** The call an operation acts on, as the tool first saw it: the parameters and checkpoint are
 * the ones recorded at its first `prepare` (or `execute`), not a later request's. */
export interface Call {
  toolCallId: string;
  parameters: Parameters;
  sessionId?: string;
  checkpoint?: Checkpoint | null;
  attempt: number;
  /** Set on an `execute` that an earlier attempt may already have run: find out first (by
   * `toolCallId`, or the idempotency key sent to the backend) and answer that outcome. */
  sideEffectMayHaveStarted: boolean;
  traceId?: string;
}

/** A tool: its description (what the agent reads) and its operations. `summarize` and
 * `execute` are required; a tool with a checkpoint (`needsCheckpoint`, the default) has
 * `prepare` and `discard` too. `validate` is given `check`, which applies `parametersSchema`:
 * call it first, then normalize or check more. */
export interface ToolDefinition {
  name: string;
  description: string;
  parametersSchema: Record<string, unknown>;
  needsCheckpoint?: boolean;
  aliases?: string[];
  version?: string;
  effects?: ToolEffects;
  /** The parameters to record, normalized; throw `InvalidParameters` to refuse. */
  validate?(parameters: Parameters, check: (parameters: Parameters) => Parameters): MaybePromise<Parameters>;
  /** The sentence the agent speaks to have the caller confirm: the same parameters always give
   * the same sentence. */
  summarize(parameters: Parameters): MaybePromise<string>;
  /** Everything up to the irreversible step (a hold, a draft, a quote): the checkpoint, or null
   * for nothing to confirm. */
  prepare?(call: Call): MaybePromise<Checkpoint | null>;
  /** The irreversible step, run at most once per call. */
  execute(call: Call): MaybePromise<Executed>;
  /** Undo what `prepare` left, for a call that will never run. */
  discard?(call: Call): MaybePromise<void>;
}

/** A defined tool, as the contract server calls it. */
export class Tool {
  readonly definition: ToolDefinition;

  constructor(definition: ToolDefinition) {
    compileSchema(definition.parametersSchema);
    this.definition = definition;
  }

  get name(): string {
    return this.definition.name;
  }

  get needsCheckpoint(): boolean {
    return this.definition.needsCheckpoint ?? true;
  }

  describe(): ToolDescription {
    const { name, description, parametersSchema, aliases, version, effects } = this.definition;
    const described: ToolDescription = {
      name,
      description,
      parameters_schema: parametersSchema,
      needs_checkpoint: this.needsCheckpoint,
      version: version ?? "0.1.0",
    };
    if (aliases?.length) described.aliases = [...aliases];
    if (effects) described.effects = effects;
    return described;
  }

  /** `parameters` if `parametersSchema` accepts them; else `InvalidParameters` naming each field. */
  check = (parameters: Parameters): Parameters => {
    const problems = checkParameters(this.definition.parametersSchema, parameters);
    if (problems.length) throw new InvalidParameters(problems);
    return parameters;
  };

  async validate(parameters: Parameters): Promise<Parameters> {
    const validate = this.definition.validate;
    return validate ? await validate.call(this.definition, parameters, this.check) : this.check(parameters);
  }

  async summarize(parameters: Parameters): Promise<string> {
    return String(await this.definition.summarize(parameters));
  }

  async prepare(call: Call): Promise<Checkpoint | null> {
    return (await this.definition.prepare?.(call)) ?? null;
  }

  async execute(call: Call): Promise<Executed> {
    const done = await this.definition.execute(call);
    if (typeof done !== "object" || done === null || typeof done.voice_response !== "string") {
      throw new TypeError("execute answers executed(result, voiceResponse)");
    }
    return { result: done.result ?? null, voice_response: done.voice_response };
  }

  async discard(call: Call): Promise<void> {
    await this.definition.discard?.(call);
  }
}

/** A tool from its definition; its parameters schema is compiled now. */
export function defineTool(definition: ToolDefinition): Tool {
  return new Tool(definition);
}

/** An `execute`'s answer. */
export function executed(result: unknown, voiceResponse: string): Executed {
  return { result, voice_response: voiceResponse };
}

/** A `prepare`'s checkpoint: what the agent says before the irreversible step, and the tool's
 * own state, handed back to `execute` and `discard` in `call.checkpoint`. */
export function checkpoint(message: string, state?: unknown): Checkpoint {
  return state === undefined ? { message } : { message, state };
}
