// Write a Gatehouse tool in TypeScript (docs/tools.md, "A tool in any language"): describe it
// and its operations with `defineTool`, and serve it as a Spin component with `serve` from
// `gatehouse-tool/spin`. The package keeps the tool contract (openapi/tool-contract.yaml)
// around your logic: the signature and its replay window, the ordering rules, `execute` at most
// once per call, and the answers' shapes.

export {
  OPERATIONS,
  REPLAY_WINDOW_SECONDS,
  SIGNATURE_HEADER,
  type Checkpoint,
  type Executed,
  type FieldProblem,
  type Operation,
  type ToolDescription,
  type ToolEffects,
  type ToolRequest,
} from "./contract.js";
export { MemoryStore, decide, release, settle, type CallRecord, type CallStore, type Decision } from "./ledger.js";
export { ContractServer, MAX_BODY_BYTES, type Incoming, type Reply } from "./server.js";
export { check, sign, verify, REFUSAL_SENTENCES, type Refusal, type Signed } from "./signature.js";
export {
  InvalidParameters,
  Tool,
  ToolFailure,
  checkpoint,
  defineTool,
  executed,
  type Call,
  type MaybePromise,
  type Parameters,
  type ToolDefinition,
} from "./tool.js";
