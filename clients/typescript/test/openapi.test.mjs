// The client against openapi/gatehouse.yaml: fails when the two drift apart.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { ERROR_CLASSES, ERROR_CODES, Gatehouse, GatehouseError, OPERATIONS } from "gatehouse-client";
import { env } from "./support.mjs";

const spec = parse(readFileSync(env.openapi, "utf8"));
const METHODS = ["get", "post", "put", "patch", "delete"];
const operations = {};
for (const [path, item] of Object.entries(spec.paths)) {
  for (const method of METHODS) {
    if (item[method]) operations[item[method].operationId] = { method: method.toUpperCase(), path };
  }
}

test("every operationId in the OpenAPI file has a client method, and every method an operationId", () => {
  const methods = Object.getOwnPropertyNames(Gatehouse.prototype).filter((m) => m !== "constructor" && m !== "request" && m !== "send");
  assert.deepEqual([...methods].sort(), Object.keys(operations).sort());
  assert.deepEqual(Object.keys(OPERATIONS).sort(), Object.keys(operations).sort());
});

test("each method calls its operation's method and path", () => {
  for (const [id, operation] of Object.entries(operations)) {
    assert.deepEqual({ ...OPERATIONS[id] }, operation, id);
  }
});

test("the error codes are the OpenAPI ErrorCode enum, each with its own exception class", () => {
  const codes = spec.components.schemas.ErrorCode.enum;
  assert.deepEqual([...ERROR_CODES].sort(), [...codes].sort());
  assert.deepEqual(Object.keys(ERROR_CLASSES).sort(), [...codes].sort());
  const classes = new Set(Object.values(ERROR_CLASSES));
  assert.equal(classes.size, codes.length, "one class per code");
  for (const Class of classes) assert.ok(Class.prototype instanceof GatehouseError);
});

test("every error code any route documents is in the enum", () => {
  const documented = new Set();
  const walk = (node) => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (!node || typeof node !== "object") return;
    const code = node.properties?.code;
    if (code?.const && typeof code.const === "string") documented.add(code.const);
    if (Array.isArray(code?.enum)) code.enum.filter((c) => typeof c === "string").forEach((c) => documented.add(c));
    Object.values(node).forEach(walk);
  };
  walk(spec.paths);
  walk(spec.components.responses);
  for (const code of documented) assert.ok(ERROR_CODES.includes(code), code);
});
