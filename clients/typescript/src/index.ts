export * from "./types.js";
export * from "./errors.js";
export { Gatehouse, OPERATIONS, isToolCall } from "./client.js";
export type { Answer, CreateOptions, GatehouseOptions, RequestOptions, WaitOptions } from "./client.js";
export { CALLBACK_KIND_HEADER, SIGNATURE_HEADER, signCallback, verifyCallback } from "./signature.js";
export { createCallbackHandler } from "./receiver.js";
export type { CallbackHandlerOptions } from "./receiver.js";
export { VoiceSession, SESSION_FUNCTIONS, CONFIRM, CHANGE, CANCEL, PENDING, UNREACHABLE, news, parseArguments, sentenceFor } from "./voice.js";
export type { Proposal, VoiceFunction, VoiceSessionOptions } from "./voice.js";
