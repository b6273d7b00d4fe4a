/**
 * The middleware when a server is killed in the middle of a handler: a real Express server in a child
 * process (test/fixtures/http-email-server.ts) sends an email and is SIGKILLed before it answers; a
 * restarted server, its clock past the lease, gets the client's retry with the same key.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { idempotentFetch, isIdempotentFetchError } from "../src/http/index.js";
import { jsonLines, startWorker, type WorkerProcess } from "./fixtures/worker-process.js";

let dir: string;
let db: string;
let outbox: string;
const started: WorkerProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "idempotool-http-crash-"));
  db = join(dir, "idempotency.db");
  outbox = join(dir, "outbox.jsonl");
});
afterEach(async () => {
  for (const worker of started.splice(0)) {
    if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill();
    await worker.exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

/** Starts the email server and resolves to its base URL once it listens. */
async function emailServer(mode: "crash" | "serve", effect: string, clockOffsetMs: number) {
  const worker = startWorker("http-email-server.ts", [db, outbox, mode, effect, String(clockOffsetMs)]);
  started.push(worker);
  let stdout = "";
  worker.child.stdout.on("data", (chunk: string) => {
    stdout += chunk;
  });
  await worker.waitFor("listening");
  const port = /^port (\d+)$/m.exec(stdout)?.[1];
  return { worker, base: `http://127.0.0.1:${port}` };
}

const sendEmail = (base: string) =>
  fetch(`${base}/emails`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: "Bearer alice",
      "idempotency-key": "welcome-alice",
    },
    body: JSON.stringify({ to: "alice@example.com" }),
  });

/** The first server sends the email and dies before it answers: the client sees the connection drop. */
async function crashAfterTheEmail(effect: string): Promise<void> {
  const { worker, base } = await emailServer("crash", effect, 0);
  await expect(sendEmail(base)).rejects.toThrow();
  expect((await worker.exited).signal).toBe("SIGKILL");
  expect(jsonLines(outbox)).toHaveLength(1);
}

// Each test starts two Node processes, a few seconds each on a busy machine: hence their timeouts.
describe("a server killed after a handler's effect, before it answered", () => {
  it("by default, never runs the handler again: the retry after the lease gets 409 outcome_unknown", async () => {
    await crashAfterTheEmail("default");
    const { base } = await emailServer("serve", "default", 10_000);

    const retry = await sendEmail(base);
    expect(retry.status).toBe(409);
    expect(retry.headers.get("content-type")).toBe("application/problem+json");
    expect(await retry.json()).toMatchObject({ status: 409, code: "outcome_unknown" });

    // What idempotentFetch makes of it: an error at once, never a retry under a new key.
    const error = await idempotentFetch(`${base}/emails`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer alice" },
      body: JSON.stringify({ to: "alice@example.com" }),
      idempotencyKey: "welcome-alice",
    }).catch((e: unknown) => e);
    expect(isIdempotentFetchError(error, "outcome_unknown")).toBe(true);
    expect(error).toMatchObject({ attempts: 1, status: 409 });

    expect(jsonLines(outbox)).toHaveLength(1);
  }, 60_000);

  it('under effect: "owned-store", runs the handler again once the lease passed: the email goes out twice', async () => {
    await crashAfterTheEmail("owned-store");
    const { base } = await emailServer("serve", "owned-store", 10_000);

    const retry = await sendEmail(base);
    expect(retry.status).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    // Right for a handler whose writes are one transaction (a crash rolls them back); wrong for an email.
    expect(jsonLines(outbox)).toHaveLength(2);
  }, 60_000);
});
