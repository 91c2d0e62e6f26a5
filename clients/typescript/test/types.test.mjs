// The typed requests and answers of the installed package (its .d.ts) against the schemas of
// openapi/gatehouse.yaml: the same fields, and optional exactly where the schema does not require.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import ts from "typescript";
import { parse } from "yaml";
import { env } from "./support.mjs";

const schemas = parse(readFileSync(env.openapi, "utf8")).components.schemas;
const dts = new URL("../node_modules/gatehouse-client/dist/types.d.ts", import.meta.url);
const source = ts.createSourceFile("types.d.ts", readFileSync(dts, "utf8"), ts.ScriptTarget.ES2022, true);

const interfaces = {};
for (const statement of source.statements) {
  if (!ts.isInterfaceDeclaration(statement)) continue;
  interfaces[statement.name.text] = Object.fromEntries(
    statement.members.filter(ts.isPropertySignature).map((m) => [m.name.getText(source).replace(/"/g, ""), !m.questionToken]),
  );
}
// The TypeScript name of a schema, where it differs.
const NAMES = { Error: "ErrorBody" };

test("every object schema of the OpenAPI file has an interface with its fields, required where the schema requires", () => {
  const checked = [];
  for (const [name, schema] of Object.entries(schemas)) {
    if (!schema.properties) continue;
    const iface = interfaces[NAMES[name] ?? name];
    assert.ok(iface, `schema ${name} has no interface in types.ts`);
    assert.deepEqual(Object.keys(iface).sort(), Object.keys(schema.properties).sort(), `${name}: fields`);
    const required = new Set(schema.required ?? []);
    for (const [field, isRequired] of Object.entries(iface)) {
      assert.equal(isRequired, required.has(field), `${name}.${field}: required in the schema is ${required.has(field)}`);
    }
    checked.push(name);
  }
  assert.ok(checked.length >= 30, `checked ${checked.length} schemas`);
});
