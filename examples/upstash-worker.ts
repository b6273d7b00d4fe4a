/**
 * Runs examples/upstash-worker/worker.ts in workerd, Cloudflare's runtime (through miniflare, as
 * `wrangler dev` would), against Upstash Redis over HTTPS, and sends one email with one key twice: the
 * email provider gets one request, and the second answer is a replay of the first.
 *
 * The records go to the Upstash database named by UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN (the
 * tests give it a local server that speaks Upstash's REST protocol in front of Redis); the example deletes
 * the one record it made.
 *
 * Run: UPSTASH_REDIS_REST_URL=… UPSTASH_REDIS_REST_TOKEN=… node --import tsx examples/upstash-worker.ts
 * (checks itself; exits non-zero on failure)
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { builtinModules } from "node:module";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Redis } from "@upstash/redis";
import { build } from "esbuild";
import type { Envelope } from "idempotool";
import { Miniflare } from "miniflare";

const here = join(import.meta.dirname, "upstash-worker");

// The email provider: it counts what it is asked to send.
const sent: unknown[] = [];
const mailer = createServer((request, response) => {
  let body = "";
  request.on("data", (chunk: Buffer) => {
    body += chunk.toString("utf8");
  });
  request.on("end", () => {
    sent.push(JSON.parse(body));
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify({ id: `email-${sent.length}` }));
  });
});
await new Promise<void>((resolve) => mailer.listen(0, "127.0.0.1", resolve));
const mailerUrl = `http://127.0.0.1:${(mailer.address() as AddressInfo).port}/v1/send`;

const url = process.env.UPSTASH_REDIS_REST_URL;
const token = process.env.UPSTASH_REDIS_REST_TOKEN;
if (!url || !token) {
  console.error(
    "Set UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN (your database's REST URL and token).",
  );
  process.exit(2);
}

// Bundle as wrangler does: ESM for workerd, its own and Node's built-in modules left to the runtime.
const bundle = await build({
  entryPoints: [join(here, "worker.ts")],
  bundle: true,
  write: false,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  conditions: ["workerd", "worker", "browser", "import"],
  mainFields: ["module", "main"],
  external: ["cloudflare:*", "node:*", ...builtinModules],
  tsconfig: join(here, "tsconfig.json"),
  logLevel: "warning",
});

const mf = new Miniflare({
  modules: true,
  script: bundle.outputFiles[0]!.text,
  compatibilityDate: "2026-05-03",
  compatibilityFlags: ["nodejs_compat"],
  bindings: {
    UPSTASH_REDIS_REST_URL: url,
    UPSTASH_REDIS_REST_TOKEN: token,
    MAILER_URL: mailerUrl,
    UPSTASH_DISABLE_TELEMETRY: "1",
  },
});

const key = `welcome-${randomUUID()}`;
const send = async () => {
  const response = await mf.dispatchFetch("http://example.com/", {
    method: "POST",
    headers: { "Idempotency-Key": key, "content-type": "application/json" },
    body: JSON.stringify({ to: "alice@example.com", subject: "Welcome" }),
  });
  const body = (await response.json()) as Envelope<{ id: string }>;
  assert.equal(response.status, 200, JSON.stringify(body));
  return body;
};

try {
  const first = await send();
  console.log(`call 1: ${JSON.stringify(first.result)}, was_replay ${first.was_replay}`);
  assert.equal(first.was_replay, false);

  const second = await send();
  console.log(
    `call 2 (a client retry, same key): ${JSON.stringify(second.result)}, was_replay ${second.was_replay}`,
  );
  assert.equal(second.was_replay, true, "the second call is a replay");
  assert.deepEqual(second.result, first.result);

  assert.deepEqual(sent, [{ to: "alice@example.com", subject: "Welcome" }]);
  console.log(`OK: 2 calls from a Worker, ${sent.length} email.`);
} finally {
  await mf.dispose();
  mailer.close();
  // The example's record, and any tokens released on it.
  const redis = new Redis({ url, token, enableTelemetry: false });
  const [, names] = await redis.scan(0, { match: `worker:idem:default:${key}*`, count: 1000 });
  if (names.length > 0) await redis.del(...names);
}
