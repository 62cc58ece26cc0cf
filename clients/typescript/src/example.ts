// The example a front-end team starts from, run against a live API by
// `scripts/typescript-client.sh run BASE_URL` (type-checked on every `make test`):
//   1. create an order by entity (POST /commands) with a 20-digit totalCents, sent as an exact JSON number;
//   2. read it through the access pattern orders_of_user until the projection shows it;
//   3. PATCH it by entity to status PAID;
//   4. read it through orders_of_user until the PATCHed version shows, and check that the status is
//      PAID and the number came back with every digit.
// Exits non-zero on any mismatch.
//
//   node dist/example.js BASE_URL        (or API_BASE_URL=...; TENANT_CODE, ROLES: default t1, admin)
import {
  createApiClient,
  decimalToString,
  isLosslessNumber,
  LosslessNumber,
  type ApiClient,
  type Schemas,
} from "./client.js";

type OrderItem = Schemas["order.Item"];

/** 20 significant digits: more than a float64 keeps (12345678901234567890 reads 12345678901234567000). */
const TOTAL_CENTS = "12345678901234567890";

class Mismatch extends Error {}

function expect(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Mismatch(message);
}

/** Problem documents come back as `error`; anything but the expected status is a failure. */
function describe(what: string, response: Response, error: unknown): string {
  return `${what}: HTTP ${response.status} ${JSON.stringify(error)}`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The projection lags the command: poll the access pattern with a bounded retry (backoff from 100 ms
 * to 1 s, 30 s at most) until `ready` holds for the user's order.
 */
async function pollOrdersOfUser(
  api: ApiClient,
  userId: string,
  ready: (item: OrderItem) => boolean,
  what: string,
): Promise<OrderItem> {
  const deadline = Date.now() + 30_000;
  let delay = 100;
  for (let attempt = 1; ; attempt++) {
    const { data, error, response } = await api.GET("/query/orders_of_user", {
      params: { query: { userId, order: "desc", limit: 10 } },
    });
    if (!data) throw new Mismatch(describe(`GET /query/orders_of_user (${what})`, response, error));
    const item = data.items.find(ready);
    if (item) {
      console.log(`orders_of_user shows ${what} after ${attempt} read(s)`);
      return item;
    }
    if (Date.now() + delay > deadline) {
      throw new Mismatch(
        `orders_of_user did not show ${what} within 30 s (${attempt} reads; last page: ${data.items.length} item(s))`,
      );
    }
    await sleep(delay);
    delay = Math.min(delay * 2, 1_000);
  }
}

function checkTotal(item: OrderItem, when: string): void {
  const total = item.attributes.totalCents;
  expect(total !== undefined && total !== null, `${when}: totalCents is missing`);
  // A LosslessNumber: a plain number could not hold 20 digits.
  expect(isLosslessNumber(total), `${when}: totalCents came back as a ${typeof total}, not exact`);
  expect(
    decimalToString(total) === TOTAL_CENTS,
    `${when}: totalCents is ${decimalToString(total)}, sent ${TOTAL_CENTS}`,
  );
}

async function main(): Promise<void> {
  const baseUrl = process.argv[2] ?? process.env["API_BASE_URL"];
  if (!baseUrl) throw new Error("usage: node dist/example.js BASE_URL (or API_BASE_URL=...)");
  const tenantCode = process.env["TENANT_CODE"] ?? "t1";
  // A user of its own per run: the pattern's page holds just this run's order.
  const userId = `ts-client-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const api = createApiClient({
    baseUrl,
    localCaller: { tenantCode, userId, roles: process.env["ROLES"] ?? "admin" },
  });

  // 1. Create by entity: the server builds pk/sk and fills orderId with a ULID.
  const create: Schemas["order.Create"] = {
    entity: "order",
    version: 0,
    attributes: {
      userId,
      status: "PENDING",
      totalCents: new LosslessNumber(TOTAL_CENTS),
    },
  };
  const created = await api.POST("/commands", { body: create });
  if (!created.data) throw new Mismatch(describe("POST /commands", created.response, created.error));
  expect(created.response.status === 202, `POST /commands answered ${created.response.status}, not 202`);
  expect(created.data.version === 1, `the create wrote version ${created.data.version}, not 1`);
  console.log(`created ${created.data.id} (version ${created.data.version})`);

  // 2. Read it through the pattern: it gives the orderId the server chose.
  const first = await pollOrdersOfUser(api, userId, (item) => item.version >= 1, "the new order");
  checkTotal(first, "after the create");
  const orderId = first.attributes.orderId;
  expect(typeof orderId === "string" && orderId.length > 0, "the order has no orderId");

  // 3. PATCH by entity: the key attribute names the item; the rest is merged (JSON Merge Patch).
  const patch: Schemas["order.Patch"] = {
    entity: "order",
    version: first.version,
    attributes: { orderId, status: "PAID" },
  };
  const patched = await api.PATCH("/commands", { body: patch });
  if (!patched.data) throw new Mismatch(describe("PATCH /commands", patched.response, patched.error));
  const patchedVersion = patched.data.version;
  expect(patchedVersion === first.version + 1, `the PATCH wrote version ${patchedVersion}`);
  console.log(`patched ${patched.data.id} to version ${patchedVersion}`);

  // 4. Read it again until the PATCHed version shows.
  const paid = await pollOrdersOfUser(
    api,
    userId,
    (item) => item.attributes.orderId === orderId && item.version >= patchedVersion,
    `version ${patchedVersion}`,
  );
  expect(paid.version === patchedVersion, `read version ${paid.version}, wrote ${patchedVersion}`);
  expect(paid.attributes.status === "PAID", `status is ${paid.attributes.status}, not PAID`);
  expect(paid.attributes.userId === userId, `userId is ${paid.attributes.userId}`);
  checkTotal(paid, "after the PATCH");
  console.log(
    `ok: order ${orderId} is PAID at version ${paid.version}, totalCents ${decimalToString(paid.attributes.totalCents!)} exact`,
  );
}

main().catch((err: unknown) => {
  console.error(err instanceof Mismatch ? `MISMATCH: ${err.message}` : err);
  process.exitCode = 1;
});
