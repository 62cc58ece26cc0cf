// The lossless wiring of src/client.ts against a stand-in server on 127.0.0.1 (no stack needed):
// what goes on the wire and what comes back. Run by `scripts/typescript-client.sh check` with
// node's test runner (`node --test dist/wiring.test.js`).
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { createApiClient, decimalToString, isLosslessNumber, LosslessNumber, parseJson } from "./client.js";

const BIG = "12345678901234567890";
const ITEM =
  `{"pk":"ORDER#t1","sk":"ORDER#01J","id":"ORDER#t1#ORDER#01J","code":"","name":"","version":2,` +
  `"tenantCode":"t1","type":"ORDER","isDeleted":false,"source":"POST /commands","entity":"order",` +
  `"createdAt":"2024-01-15T10:30:00.000Z","updatedAt":"2024-01-15T10:30:00.000Z",` +
  `"attributes":{"orderId":"01J","userId":"u1","status":"PAID","totalCents":${BIG},"small":1.5}}`;

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}
const seen: Seen[] = [];
let server: http.Server;
let baseUrl: string;

before(async () => {
  server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      if (req.method === "POST" && url.pathname === "/commands") {
        res.writeHead(202, { "content-type": "application/json" });
        res.end(`{"id":"ORDER#t1#ORDER#01J","pk":"ORDER#t1","sk":"ORDER#01J@1","version":1}`);
      } else if (url.pathname === "/query/orders_of_user" && url.searchParams.get("userId") === "chunked") {
        // No Content-Length: a chunked answer (openapi-fetch parses those itself unless wired).
        res.writeHead(200, { "content-type": "application/json" });
        res.write(`{"items":[`);
        res.end(`${ITEM}],"cursor":null}`);
      } else if (url.pathname === "/query/orders_of_user") {
        const text = `{"items":[${ITEM}],"cursor":null}`;
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
        res.end(text);
      } else if (url.pathname.startsWith("/items/")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(ITEM);
      } else {
        res.writeHead(400, { "content-type": "application/problem+json" });
        res.end(`{"type":"urn:cqrs:problem:bad-request","title":"Bad Request","status":400,"detail":"no","requestId":"r1"}`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => new Promise<void>((resolve) => server.close(() => resolve())));

const api = () => createApiClient({ baseUrl, localCaller: { tenantCode: "t1", userId: "u1", roles: "admin" } });

test("a request body carries the 20-digit number as an exact JSON number", async () => {
  const { data, response } = await api().POST("/commands", {
    body: {
      entity: "order",
      version: 0,
      attributes: { userId: "u1", status: "PENDING", totalCents: new LosslessNumber(BIG) },
    },
  });
  assert.equal(response.status, 202);
  assert.equal(data?.version, 1);
  const sent = seen.at(-1)!;
  assert.equal(sent.headers["content-type"], "application/json");
  assert.equal(sent.headers["x-tenant-code"], "t1");
  assert.equal(sent.headers["x-user-id"], "u1");
  assert.equal(sent.headers["x-roles"], "admin");
  assert.ok(sent.body.includes(`"totalCents":${BIG}`), sent.body);
  assert.ok(!sent.body.includes(`"${BIG}"`), "never as a string");
});

for (const userId of ["chunked", "with-length"]) {
  test(`a response reads the 20-digit number back exactly (${userId})`, async () => {
    const { data, error } = await api().GET("/query/orders_of_user", { params: { query: { userId } } });
    assert.equal(error, undefined);
    const item = data!.items[0]!;
    const total = item.attributes.totalCents!;
    assert.ok(isLosslessNumber(total), `got a ${typeof total}`);
    assert.equal(decimalToString(total), BIG);
    assert.equal(item.version, 2, "a safe number stays a plain number");
    assert.equal(item.attributes["small"], 1.5);
    assert.equal(item.attributes.status, "PAID");
  });
}

test("query parameters write an exact number as its digits", async () => {
  const { data } = await api().GET("/items/{pk}/{sk}", {
    params: { path: { pk: "ORDER#t1", sk: "ORDER#01J" }, query: { minVersion: new LosslessNumber("9223372036854775807") } },
  });
  assert.ok(data);
  assert.equal(seen.at(-1)!.url, "/items/ORDER%23t1/ORDER%2301J?minVersion=9223372036854775807");
});

test("a problem document comes back as `error`", async () => {
  const { data, error, response } = await api().GET("/query/products", {});
  assert.equal(data, undefined);
  assert.equal(response.status, 400);
  assert.equal((error as { status?: number } | undefined)?.status, 400);
});

test("plain JSON.parse would have lost the digits (the reason for all this)", () => {
  assert.notEqual(String(JSON.parse(`{"n":${BIG}}`).n), BIG);
  assert.equal(String((parseJson(`{"n":${BIG}}`) as { n: LosslessNumber }).n), BIG);
});
