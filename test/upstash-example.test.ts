/**
 * The Upstash example runs as users would run it: examples/upstash-worker.ts runs the Worker in workerd,
 * with its records in Redis behind a local server that speaks Upstash's REST protocol (its URL and token
 * given as a user gives theirs), sends one email twice with one key, checks itself, and exits 0. The Worker's code type-checks against Cloudflare's types.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { reachable, testClient } from "./fixtures/redis-helpers.js";
import { upstashRestServer } from "./fixtures/upstash-rest-server.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

it("runs examples/upstash-worker.ts: a Worker on @upstash/redis/cloudflare replays the repeat, exit 0", async () => {
  const redis = testClient();
  await reachable(redis);
  const server = await upstashRestServer(redis);
  try {
    // execFile rejects on a non-zero exit, so reaching the assertions means the example exited 0.
    const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/upstash-worker.ts"], {
      cwd: root,
      env: { ...process.env, UPSTASH_REDIS_REST_URL: server.url, UPSTASH_REDIS_REST_TOKEN: server.token },
    });
    expect(stdout).toMatch(/call 1: \{"id":"email-1"\}, was_replay false/);
    expect(stdout).toMatch(/call 2 \(a client retry, same key\): \{"id":"email-1"\}, was_replay true/);
    expect(stdout).toContain("OK: 2 calls from a Worker, 1 email.");
  } finally {
    await server.close();
    redis.disconnect();
  }
}, 120_000);

it("type-checks the Worker against Cloudflare's types", async () => {
  const tsc = join(root, "node_modules/typescript/bin/tsc");
  await run(process.execPath, [tsc, "-p", "examples/upstash-worker", "--noEmit"], { cwd: root });
}, 120_000);
