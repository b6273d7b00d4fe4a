/**
 * The demo's HTTP row: a Hono app sends email behind the Idempotency-Key middleware, and the client's
 * idempotentFetch loses the first response (the server already sent the email), then retries with the
 * same key. Loaded by a dynamic `import()`: it needs hono. The app is called in-process (`app.fetch`),
 * so no port is opened.
 * @module
 */
import { Hono } from "hono";
import { honoIdempotency } from "../http/hono.js";
import { type FetchFunction, idempotentFetch } from "../http/index.js";
import { deliverEmail, type IntegrationContext } from "./demo-integrations.js";
import type { Email } from "./demo-tool.js";

export async function runHttpRow({ store, outbox, scope, email }: IntegrationContext): Promise<string[]> {
  const key = "http-turn-8-summary";
  const app = new Hono();
  app.use("/emails", honoIdempotency({ store, scope: () => scope, effect: "irreversible" }));
  app.post("/emails", async (c) => {
    const sent = deliverEmail(outbox, await c.req.json<Email>(), scope, key);
    return c.json(sent, 201);
  });

  const got: string[] = [];
  const network: FetchFunction = async (input, init) => {
    const response = await app.fetch(new Request(input, init));
    if (got.length > 0) return response;
    await response.arrayBuffer(); // the server answered and committed...
    got.push("response lost");
    throw new TypeError("fetch failed", { cause: new Error("connection reset") }); // ...but the answer is lost
  };
  const { replayed } = await idempotentFetch("http://mail.example/emails", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(email),
    idempotencyKey: key,
    retry: { maxAttempts: 3, initialDelayMs: 10 },
    fetch: network,
  });
  got.push(replayed ? "replay" : "sent");
  return got;
}
