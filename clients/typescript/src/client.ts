// A typed client of the cqrs-dynamo HTTP API: openapi-fetch over the types that openapi-typescript
// generates from openapi.yaml (src/generated/api.d.ts, `npm run generate`), wired for exact numbers.
//
// The API keeps numbers to 38 significant digits; JSON.parse keeps 15 to 17. So:
// - responses are parsed with lossless-json: a number comes back as a plain `number` when its digits
//   survive a float64 round trip, else as a `LosslessNumber` holding the exact digits; the generated
//   types say so (`Decimal` = number | ExactNumber, the data of a LosslessNumber, for every schema the
//   document marks `format: decimal` or `int64`);
// - request bodies are written with lossless-json's stringify, which writes a `LosslessNumber` (and a
//   bigint) as its exact digits: an exact JSON number, never a string (the API refuses strings for
//   number attributes);
// - query and path parameters (`minVersion`, `priceCents`, ...) write a LosslessNumber as its digits.
import createClient, {
  createQuerySerializer,
  defaultPathSerializer,
  type Client,
  type ClientOptions,
} from "openapi-fetch";
import { isLosslessNumber, isSafeNumber, LosslessNumber, parse, stringify } from "lossless-json";
import type { components, Decimal, ExactNumber, paths } from "./generated/api.js";

export type { components, Decimal, ExactNumber, paths };
export { isLosslessNumber, LosslessNumber };
/** The document's schemas by name: `Schemas["order.Create"]`, `Schemas["order.Item"]`, ... */
export type Schemas = components["schemas"];
/** The change events' schemas (events.asyncapi.yaml, `cqrs model events`): `Events["order.Event"]`, ... */
export type Events = import("./generated/events.js").components["schemas"];
export type ApiClient = Client<paths>;

/** lossless-json's number parser for this API: exact digits always, a plain number where that is exact. */
export function parseNumber(digits: string): Decimal {
  return isSafeNumber(digits) ? Number(digits) : new LosslessNumber(digits);
}

/** JSON.parse without losing digits. */
export function parseJson(text: string): unknown {
  return parse(text, null, parseNumber);
}

/** JSON.stringify that writes LosslessNumber and bigint values as exact JSON numbers. */
export function stringifyJson(value: unknown): string {
  const text = stringify(value);
  if (text === undefined) throw new TypeError("request body is not serializable to JSON");
  return text;
}

/** The exact decimal digits of a number the API answered. */
export function decimalToString(value: Decimal): string {
  return typeof value === "number" ? String(value) : value.value;
}

/** A parameter value as its exact digits where it is a LosslessNumber or a bigint (else unchanged). */
function exactParam(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(exactParam);
  if (isLosslessNumber(value) || typeof value === "bigint") return value.toString();
  return value;
}

function exactParams<T>(params: T): T {
  if (params === null || typeof params !== "object") return params;
  return Object.fromEntries(Object.entries(params).map(([k, v]) => [k, exactParam(v)])) as T;
}

/** openapi-fetch's default query serializer (form, explode; deepObject), numbers written exactly. */
export const exactQuerySerializer = (() => {
  const serialize = createQuerySerializer();
  return (query: Record<string, unknown>): string => serialize(exactParams(query));
})();

/** openapi-fetch's default path serializer, numbers written exactly. */
export function exactPathSerializer(pathname: string, pathParams: Record<string, unknown>): string {
  return defaultPathSerializer(pathname, exactParams(pathParams));
}

/** A Response whose json() parses with parseJson. */
class LosslessResponse extends Response {
  override async json(): Promise<unknown> {
    return parseJson(await this.text());
  }
}

const NULL_BODY_STATUS = new Set([101, 103, 204, 205, 304]);

function isJson(contentType: string | null): boolean {
  const mime = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  return mime === "application/json" || mime.endsWith("+json");
}

/**
 * A fetch for openapi-fetch's `fetch` option: JSON answers come back as a LosslessResponse. openapi-fetch
 * reads a successful body with `response.json()` when the answer has a Content-Length (without one it
 * calls JSON.parse itself), so the buffered body is given its exact length.
 */
export function losslessFetch(
  baseFetch: (input: Request) => Promise<Response> = (input) => globalThis.fetch(input),
): (input: Request) => Promise<Response> {
  return async (input) => {
    const response = await baseFetch(input);
    if (NULL_BODY_STATUS.has(response.status) || !isJson(response.headers.get("content-type"))) {
      return response;
    }
    const body = new Uint8Array(await response.arrayBuffer());
    const headers = new Headers(response.headers);
    // The body is already decoded: its encoding and framing headers no longer describe it.
    headers.delete("content-encoding");
    headers.delete("transfer-encoding");
    headers.set("content-length", String(body.byteLength));
    const lossless = new LosslessResponse(body, {
      status: response.status,
      statusText: response.statusText,
      headers,
    });
    Object.defineProperty(lossless, "url", { value: response.url });
    return lossless;
  };
}

export interface ApiClientOptions
  extends Omit<ClientOptions, "fetch" | "bodySerializer" | "querySerializer" | "pathSerializer" | "headers"> {
  /** e.g. http://127.0.0.1:9000 (the local stack), or the HTTP API's URL */
  baseUrl: string;
  /** local runs only (CALLER_MODE=local): the caller's tenant, user and roles as headers */
  localCaller?: { tenantCode: string; userId: string; roles?: string };
  /** a JWT for the deployed API (Authorization: Bearer) */
  token?: string;
  /** more headers sent with every request */
  headers?: Record<string, string>;
  /** the fetch underneath (default globalThis.fetch); its JSON answers are re-read losslessly */
  fetch?: (input: Request) => Promise<Response>;
}

/** createClient<paths> with lossless numbers both ways (bodies, query and path parameters). */
export function createApiClient(options: ApiClientOptions): ApiClient {
  const { localCaller, token, fetch, headers, ...rest } = options;
  const merged: Record<string, string> = { ...headers };
  if (localCaller) {
    merged["x-tenant-code"] = localCaller.tenantCode;
    merged["x-user-id"] = localCaller.userId;
    if (localCaller.roles !== undefined) merged["x-roles"] = localCaller.roles;
  }
  if (token !== undefined) merged["authorization"] = `Bearer ${token}`;
  return createClient<paths>({
    ...rest,
    headers: merged,
    fetch: losslessFetch(fetch),
    bodySerializer: stringifyJson,
    querySerializer: exactQuerySerializer,
    pathSerializer: exactPathSerializer,
  });
}
