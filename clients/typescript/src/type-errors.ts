// Deliberate type errors. Every `@ts-expect-error TSxxxx `fragment`` line must stay an error, so
// `tsc --noEmit` fails when the generated types stop catching it (an unused @ts-expect-error is an
// error itself). scripts/typescript-client.sh also type-checks a copy with these comments removed and
// requires exactly these errors: the code, on the line below the comment, with the fragment in the
// diagnostic's text, so a comment can never hide some other error.
import { createApiClient, LosslessNumber, type Decimal, type Events, type Schemas } from "./client.js";

const api = createApiClient({ baseUrl: "http://127.0.0.1:9000" });

// The right shapes compile.
export const good: Schemas["order.Create"] = {
  entity: "order",
  version: 0,
  attributes: { userId: "u1", status: "PENDING", totalCents: new LosslessNumber("12345678901234567890") },
};
export const goodPatch: Schemas["order.Patch"] = {
  entity: "order",
  version: 1,
  attributes: { orderId: "01J0000000000000000000000", status: "PAID" },
};

// Through the client (POST /commands takes a oneOf of every entity's create and the command by
// key, so tsc reports at `body`).
export async function wrongStatus(): Promise<void> {
  await api.POST("/commands", {
    // @ts-expect-error TS2322 `Type '"SHIPPING"' is not assignable` "SHIPPING" is no status of the model
    body: {
      entity: "order",
      version: 0,
      attributes: { userId: "u1", status: "SHIPPING" },
    },
  });
}

export async function missingUserId(): Promise<void> {
  await api.POST("/commands", {
    // @ts-expect-error TS2322 `Property 'userId' is missing` userId is a required attribute of an order
    body: {
      entity: "order",
      version: 0,
      attributes: { status: "PENDING" },
    },
  });
}

export async function wrongPatchStatus(): Promise<void> {
  await api.PATCH("/commands", {
    // @ts-expect-error TS2322 `Type '"paid"' is not assignable` statuses are upper case
    body: { entity: "order", version: 1, attributes: { orderId: "01J0000000000000000000000", status: "paid" } },
  });
}

// The named schemas report at the attribute itself.
export const wrongEnum: Schemas["order.Create"] = {
  entity: "order",
  version: 0,
  attributes: {
    userId: "u1",
    // @ts-expect-error TS2322 `Type '"SHIPPING"' is not assignable` not a status of the model
    status: "SHIPPING",
  },
};

export const noUserId: Schemas["order.Create"] = {
  entity: "order",
  version: 0,
  // @ts-expect-error TS2322 `Property 'userId' is missing` userId is required
  attributes: { status: "PENDING" },
};

// A number in a string is refused by the API: the types want a number.
export const numberAsString: Schemas["order.Create"] = {
  entity: "order",
  version: 0,
  attributes: {
    userId: "u1",
    status: "PENDING",
    // @ts-expect-error TS2322 `Type 'string' is not assignable` totalCents is a number, never a string
    totalCents: "12345678901234567890",
  },
};

// What comes back may be an ExactNumber: it is not usable as a plain number.
export function readBack(item: Schemas["order.Item"]): number {
  const total: Decimal | null | undefined = item.attributes.totalCents;
  // @ts-expect-error TS2322 `is not assignable to type 'number'` a Decimal is not a number
  const cents: number = total ?? 0;
  return cents;
}

export async function unknownPattern(): Promise<void> {
  // @ts-expect-error TS2345 `"/query/orders_of_nobody"` no such access pattern
  await api.GET("/query/orders_of_nobody", {});
}

export async function patternNeedsUserId(): Promise<void> {
  // @ts-expect-error TS2741 `Property 'userId' is missing` orders_of_user needs userId
  await api.GET("/query/orders_of_user", { params: { query: { order: "desc" } } });
}

// A change event (events.asyncapi.yaml): its type names one of its entity's three changes.
export const orderUpdated: Events["order.Event"]["type"] = "order.updated";
// @ts-expect-error TS2322 `Type '"order.shipped"' is not assignable` no such change of an order
export const orderShipped: Events["order.Event"]["type"] = "order.shipped";
