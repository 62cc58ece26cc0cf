// Generates the TypeScript types of the cqrs-dynamo HTTP API from openapi.yaml with openapi-typescript's
// Node API (its `transform` option is not available on the CLI).
//
//   node scripts/generate.mjs [OPENAPI_YAML] [OUT_D_TS] [EVENTS_YAML] [EVENTS_D_TS]
//       (defaults: ../../openapi.yaml src/generated/api.d.ts ../../events.asyncapi.yaml src/generated/events.d.ts)
//
// The change events' types come from events.asyncapi.yaml (`cqrs model events`): its schemas are JSON
// Schema, which an OpenAPI 3.1 document's components hold as they are, so openapi-typescript types them
// as it types the API's: `components["schemas"]["order.Event"]`, numbers `Decimal` (from api.d.ts).
//
// Numbers: the API keeps 38 significant digits, more than a JavaScript number holds. src/client.ts
// parses every response with lossless-json, which gives a plain `number` where the digits survive a
// float64 round trip and a `LosslessNumber` (the exact digits) where they do not. So every schema the
// document marks `format: decimal` (model attributes) or `format: int64` becomes `Decimal`
// (= number | ExactNumber, the data of a LosslessNumber) instead of `number`, and the types say what
// the runtime gives.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import ts from "typescript";
import openapiTS, { astToString } from "openapi-typescript";
// openapi-typescript's own YAML reader (its dependency, pinned in package-lock.json).
import { parseYaml } from "@redocly/openapi-core";

const [
  input = "../../openapi.yaml",
  output = "src/generated/api.d.ts",
  eventsInput = "../../events.asyncapi.yaml",
  eventsOutput = "src/generated/events.d.ts",
] = process.argv.slice(2);

const DECIMAL_FORMATS = new Set(["decimal", "int64"]);
const NULL = ts.factory.createLiteralTypeNode(ts.factory.createNull());
let decimals = 0;

function isDecimal(schema) {
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  return (
    types.some((t) => t === "number" || t === "integer") &&
    typeof schema.format === "string" &&
    DECIMAL_FORMATS.has(schema.format)
  );
}

// Flattens nested unions and drops repeated `null`s: openapi-typescript adds `| null` for `nullable`
// after a transform that (for properties, where it must) already did.
function flattenUnion(node) {
  if (!ts.isUnionTypeNode(node)) return node;
  const members = [];
  const seen = new Set();
  const visit = (n) => {
    if (ts.isUnionTypeNode(n)) return n.types.forEach(visit);
    const key = ts.isLiteralTypeNode(n) && n.literal.kind === ts.SyntaxKind.NullKeyword ? "null" : undefined;
    if (key && seen.has(key)) return;
    if (key) seen.add(key);
    members.push(n);
  };
  visit(node);
  return members.length === node.types.length ? node : ts.factory.createUnionTypeNode(members);
}

const options = {
  inject: [
    "/** A number the API answered with more digits than a float64 keeps: at run time a LosslessNumber of",
    " *  lossless-json (src/client.ts). Only its data is declared here, because openapi-fetch's response",
    " *  typing (Readable<T>) maps a class's methods away; `isLosslessNumber(x)` or `x instanceof",
    " *  LosslessNumber` narrows to the class. Requests take `new LosslessNumber(digits)`. */",
    "export interface ExactNumber {",
    "    /** the exact decimal digits, as the API wrote them */",
    "    readonly value: string;",
    "}",
    "/** A number of the API as src/client.ts parses it: a plain number when its digits survive a float64",
    " *  round trip, else an ExactNumber (up to the API's 38 significant digits). Both are written as exact",
    " *  JSON numbers in request bodies. */",
    "export type Decimal = number | ExactNumber;",
  ].join("\n"),
  transform(schema) {
    if (!isDecimal(schema)) return undefined;
    decimals++;
    const decimal = ts.factory.createTypeReferenceNode("Decimal");
    const nullable = schema.nullable === true || (Array.isArray(schema.type) && schema.type.includes("null"));
    return nullable ? ts.factory.createUnionTypeNode([decimal, NULL]) : decimal;
  },
  postTransform(type) {
    return flattenUnion(type);
  },
};
const ast = await openapiTS(pathToFileURL(path.resolve(input)), options);

fs.mkdirSync(path.dirname(output), { recursive: true });
fs.writeFileSync(output, astToString(ast));
console.log(`generated ${output} from ${input} (${decimals} decimal number schemas typed Decimal)`);

const events = parseYaml(fs.readFileSync(eventsInput, "utf8"));
const before = decimals;
const eventsAst = await openapiTS(
  { openapi: "3.1.0", info: events.info, paths: {}, components: { schemas: events.components.schemas } },
  { ...options, inject: 'import type { Decimal } from "./api.js";' },
);
fs.writeFileSync(eventsOutput, astToString(eventsAst));
console.log(`generated ${eventsOutput} from ${eventsInput} (${decimals - before} decimal number schemas typed Decimal)`);
