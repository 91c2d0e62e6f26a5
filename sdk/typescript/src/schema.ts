// Parameters checked against the tool's JSON Schema (2020-12), each problem naming its field.
// @cfworker/json-schema interprets the schema without generating code, so it runs inside a
// component as it does in Node.

import { Validator, type OutputUnit } from "@cfworker/json-schema";
import type { FieldProblem } from "./contract.js";
import { KEYWORDS, OTHERWISE, TYPES } from "./schema-problems.js";

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
    const problem = describe(unit, known, schema);
    if (problem && !problems.some((p) => p.field === problem.field && p.problem === problem.problem)) {
      problems.push(problem);
    }
  }
  return problems.length ? problems : [{ field: "parameters", problem: OTHERWISE }];
}

/** The sentence for a refusal by `keyword` (sdk/schema-problems.json, the one source every
 * language's sentences come from), its `{name}`s filled from `values`. */
export function says(keyword: string, values: Record<string, string> = {}): string {
  const template = KEYWORDS[keyword];
  if (template === undefined) return OTHERWISE;
  return Object.entries(values).reduce((said, [name, value]) => said.split(`{${name}}`).join(value), template);
}

function words(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The value at `location` (`#/properties/quantity/minimum`) in `schema`. */
function stated(schema: unknown, location: string): unknown {
  let at: unknown = schema;
  for (const part of location.replace(/^#\/?/, "").split("/").filter(Boolean)) {
    const key = decodeURIComponent(part).replace(/~1/g, "/").replace(/~0/g, "~");
    at = at !== null && typeof at === "object" ? (at as Record<string, unknown>)[key] : undefined;
  }
  return at;
}

function describe(unit: OutputUnit, known: Set<string>, schema: Record<string, unknown>): FieldProblem | null {
  if (SUMMARIES.has(unit.keyword)) return null;
  const path = field(unit.instanceLocation);
  const named = /"(.*)"/.exec(unit.error)?.[1];
  if (unit.keyword === "required" && named !== undefined) {
    return { field: join(path, named), problem: says("required") };
  }
  if (unit.keyword === "additionalProperties" && named !== undefined) {
    // The validator also names a declared property whose own value failed; that failure is
    // reported under its own keyword.
    if (path === "" && known.has(named)) return null;
    return { field: join(path, named), problem: says("additionalProperties") };
  }
  const value = stated(schema, unit.keywordLocation);
  let problem: string;
  if (unit.keyword === "type") {
    const kinds = Array.isArray(value) ? value : [value];
    problem = says("type", { expected: kinds.map((kind) => TYPES[String(kind)] ?? String(kind)).join(" or ") });
  } else if (unit.keyword === "enum") {
    problem = says("enum", { options: (Array.isArray(value) ? value : []).map(words).join(", ") });
  } else if (unit.keyword === "const") {
    problem = says("const", { expected: JSON.stringify(value) });
  } else if (unit.keyword === "format") {
    problem = says("format", { format: String(value) });
  } else {
    problem = says(unit.keyword, { limit: words(value) });
  }
  return { field: path || "parameters", problem };
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
