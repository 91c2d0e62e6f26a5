// Parameters checked against the tool's JSON Schema (2020-12), each problem naming its field.
// @cfworker/json-schema interprets the schema without generating code, so it runs inside a
// component as it does in Node.

import { Validator, type OutputUnit } from "@cfworker/json-schema";
import type { FieldProblem } from "./contract.js";

const compiled = new Map<string, Validator>();

/** Compiles `schema` now (a tool does when it is defined, so a component does it while it is
 * pre-initialized, not on its first request). */
export function compileSchema(schema: Record<string, unknown>): void {
  validator(schema);
}

function validator(schema: Record<string, unknown>): Validator {
  const key = JSON.stringify(schema);
  let found = compiled.get(key);
  if (!found) {
    found = new Validator(schema, "2020-12", false);
    compiled.set(key, found);
  }
  return found;
}

// Keywords whose error only says that one below it failed; the one below names the problem.
const SUMMARIES = new Set(["properties", "items", "prefixItems", "allOf", "$ref", "false", "dependentSchemas"]);

/** Every problem the schema finds with `parameters`, one per field and rule. */
export function checkParameters(schema: Record<string, unknown>, parameters: unknown): FieldProblem[] {
  const { valid, errors } = validator(schema).validate(parameters);
  if (valid) return [];
  const known = new Set(Object.keys((schema.properties as Record<string, unknown> | undefined) ?? {}));
  const problems: FieldProblem[] = [];
  for (const unit of errors) {
    const problem = describe(unit, known);
    if (problem && !problems.some((p) => p.field === problem.field && p.problem === problem.problem)) {
      problems.push(problem);
    }
  }
  return problems.length ? problems : [{ field: "parameters", problem: "are not valid" }];
}

function describe(unit: OutputUnit, known: Set<string>): FieldProblem | null {
  if (SUMMARIES.has(unit.keyword)) return null;
  const path = field(unit.instanceLocation);
  const named = /"(.*)"/.exec(unit.error)?.[1];
  if (unit.keyword === "required" && named !== undefined) {
    return { field: join(path, named), problem: "is required" };
  }
  if (unit.keyword === "additionalProperties" && named !== undefined) {
    // The validator also names a declared property whose own value failed; that failure is
    // reported under its own keyword.
    if (path === "" && known.has(named)) return null;
    return { field: join(path, named), problem: "is not a parameter of this tool" };
  }
  return { field: path || "parameters", problem: unit.error.replace(/\.$/, "") };
}

function field(location: string): string {
  return location
    .replace(/^#\/?/, "")
    .split("/")
    .filter(Boolean)
    .map((part) => decodeURIComponent(part).replace(/~1/g, "/").replace(/~0/g, "~"))
    .join(".");
}

function join(path: string, name: string): string {
  return path ? `${path}.${name}` : name;
}
