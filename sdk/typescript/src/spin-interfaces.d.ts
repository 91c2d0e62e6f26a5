// The parts of the Spin interfaces this package calls, as componentize-js presents them to
// JavaScript (jco's mapping: variants as { tag, val }, s64 as bigint, a resource as a class, an
// error result thrown). The interfaces themselves are the WIT of wit/tool.wit's imports.

declare module "fermyon:spin/variables@2.0.0" {
  export function get(name: string): string;
}

declare module "spin:postgres/postgres@4.0.0" {
  export type ParameterValue =
    | { tag: "boolean"; val: boolean }
    | { tag: "int64"; val: bigint }
    | { tag: "floating64"; val: number }
    | { tag: "str"; val: string }
    | { tag: "db-null" };
  export type DbValue =
    | { tag: "boolean"; val: boolean }
    | { tag: "int8" | "int16" | "int32" | "floating32" | "floating64"; val: number }
    | { tag: "int64" | "timestamp"; val: bigint }
    | { tag: "str" | "uuid" | "decimal"; val: string }
    | { tag: "db-null" }
    | { tag: string; val?: unknown };
  export interface RowSet {
    columns: { name: string }[];
    rows: DbValue[][];
  }
  export class Connection {
    static open(address: string): Connection;
    query(statement: string, params: ParameterValue[]): RowSet;
    execute(statement: string, params: ParameterValue[]): bigint;
  }
}
