/**
 * `idempotool review` and `idempotool resolve` (and the trail in `inspect show`), in this process, on a
 * SQLite file and on the real PostgreSQL, MySQL (MariaDB here) and Redis servers, named by URL as an operator would. Records are
 * made by a real `idempotent()` tool whose first run throws (its outcome is unknown), or claimed through
 * the store with a lease that passed an hour ago; what a resolution did is checked by calling that tool
 * again.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Writable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { type IdempotencyStore, idempotent, isIdempotencyError, ReplayedFailureError } from "../src/index.js";
import { mysqlStore } from "../src/mysql/index.js";
import { postgresStore } from "../src/postgres/index.js";
import { redisStore } from "../src/redis/index.js";
import type { ReviewQueue } from "../src/review/index.js";
import { readTrail } from "../src/review/index.js";
import { sqliteStore } from "../src/sqlite/index.js";
import { type CliResult, cli } from "./fixtures/cli-binary.js";
import { dropMysqlTable, freshMysqlTable, mysqlUrl, testMysqlPool } from "./fixtures/mysql-helpers.js";
import { dropTable, freshTable, pgUrl, testPool } from "./fixtures/pg-helpers.js";
import { dropPrefix, freshPrefix, testClient } from "./fixtures/redis-helpers.js";
// @ts-expect-error: a plain JavaScript module, as an operator writes one.
import { encryption } from "./fixtures/review-hooks.mjs";

const DAY = 86_400_000;
const hooks = join(import.meta.dirname, "fixtures", "review-hooks.mjs");
const pool = testPool({ max: 4 });
const mysql = testMysqlPool({ connectionLimit: 4 });
const redis = testClient();
const tables: string[] = [];
const mysqlTables: string[] = [];
const prefixes: string[] = [];

afterAll(async () => {
  for (const table of tables) await dropTable(pool, table);
  await pool.end();
  for (const table of mysqlTables) await dropMysqlTable(mysql, table);
  await mysql.end();
  for (const prefix of prefixes) await dropPrefix(redis, prefix);
  redis.disconnect();
});

interface Fresh {
  readonly url: string;
  /** The same records, opened by the test as a worker would (judging leases by the request's time). */
  readonly store: IdempotencyStore;
}

const rows: { name: string; fresh(): Promise<Fresh> }[] = [
  {
    name: "SQLite",
    async fresh() {
      const path = join(mkdtempSync(join(tmpdir(), "idempotool-review-")), "records.db");
      const store = sqliteStore({ path });
      store.migrate();
      return { url: `sqlite://${path}`, store };
    },
  },
  {
    name: "PostgreSQL",
    async fresh() {
      const table = freshTable();
      tables.push(table);
      const store = postgresStore({ client: pool, table, clock: "request" });
      await store.migrate();
      return { url: `${pgUrl}?table=${table}`, store };
    },
  },
  {
    name: "MySQL",
    async fresh() {
      const table = freshMysqlTable();
      mysqlTables.push(table);
      const store = mysqlStore({ client: mysql, table, clock: "request" });
      await store.migrate();
      return { url: `${mysqlUrl}?table=${table}`, store };
    },
  },
  {
    name: "Redis",
    async fresh() {
      const prefix = freshPrefix("review");
      prefixes.push(prefix);
      const store = redisStore({ client: redis, prefix, clock: "request" });
      return { url: `redis://127.0.0.1:6379?prefix=${encodeURIComponent(prefix)}`, store };
    },
  },
];

/** send_email (or another name) whose first run of each key throws after the effect may have happened. */
function mailer(store: IdempotencyStore, name = "send_email", extra: Record<string, unknown> = {}) {
  const runs = new Map<string, number>();
  const tool = idempotent(
    async (args: { to: string }, ctx) => {
      const id = `${ctx.scope}/${ctx.key}`;
      const n = (runs.get(id) ?? 0) + 1;
      runs.set(id, n);
      if (n === 1 && !ctx.key.startsWith("ok-")) throw new Error("socket hang up");
      return { sent: args.to };
    },
    { name, store, ...(extra as object) },
  );
  const call = (key: string, scope = "tenant-a") => tool({ to: "ada@example.com" }, { key, scope });
  /** Leave (scope, key) unknown: its first run throws. */
  const unknown = async (key: string, scope = "tenant-a") => {
    const error = await call(key, scope).catch((e: unknown) => e);
    expect(isIdempotencyError(error, "outcome_unknown"), String(error)).toBe(true);
  };
  return { call, unknown, runs: (key: string, scope = "tenant-a") => runs.get(`${scope}/${key}`) ?? 0 };
}

/** An in-progress record whose worker stopped an hour ago, its lease long passed. */
async function stale(store: IdempotencyStore, key: string, tool = "charge_card", scope = "default") {
  await store.claim({
    scope,
    key,
    tool,
    fingerprint: "f".repeat(64),
    token: `token-${key}-0000`,
    leaseMs: 1_000,
    ttlMs: DAY,
    now: Date.now() - 3_600_000,
  });
}

/** A worker takes the record over: it is not the record an operator listed any more. */
async function takenOver(store: IdempotencyStore, scope: string, key: string) {
  const record = await store.get({ scope, key }, Date.now());
  const taken = await store.takeover({
    scope,
    key,
    fromToken: record!.token,
    token: "worker-2-token",
    leaseMs: 600_000,
    ttlMs: DAY,
    now: Date.now(),
  });
  expect(taken?.token).toBe("worker-2-token");
}

async function queueOf(url: string, ...args: string[]): Promise<ReviewQueue> {
  const { stdout, stderr } = await cli(["review", "--store", url, "--json", ...args]);
  expect(stderr).toBe("");
  return JSON.parse(stdout) as ReviewQueue;
}

async function statusOf(store: IdempotencyStore, key: string, scope = "tenant-a") {
  return (await store.get({ scope, key }, Date.now()))?.status;
}

/**
 * Run the command line as on a terminal: standard input is a TTY, and each question on stderr ending in
 * "to confirm: " is answered with what `answer` returns (after it has done what it does meanwhile).
 */
async function onTerminal(
  args: readonly string[],
  answer: (question: string) => Promise<string>,
): Promise<CliResult> {
  const { runCli } = await import("../src/cli/main.js");
  const stdin = Object.assign(new PassThrough(), { isTTY: true });
  let out = "";
  let err = "";
  let answered: Promise<void> = Promise.resolve();
  const sink = (append: (text: string) => void) =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        append(chunk.toString());
        done();
      },
    });
  const stderr = sink((text) => {
    err += text;
    if (text.endsWith("to confirm: ")) {
      answered = answer(text).then((line) => {
        stdin.write(`${line}\n`);
      });
    }
  });
  const code = await runCli(["node", "idempotool", ...args], {
    stdout: sink((text) => {
      out += text;
    }),
    stderr,
    stdin,
  });
  await answered;
  return { code, stdout: out, stderr: err };
}

describe.each(rows)("idempotool review and resolve on $name", (row) => {
  it("lists what needs a person, oldest first, as a table and as JSON, and exits 1 until it is empty", async () => {
    const { url, store } = await row.fresh();
    const m = mailer(store);
    await stale(store, "stale-1");
    await m.unknown("turn-1");
    await m.unknown("turn-2");
    await m.call("ok-1");
    await store.claim({
      scope: "tenant-a",
      key: "live-1",
      tool: "send_email",
      fingerprint: "f".repeat(64),
      token: "live-token",
      leaseMs: 600_000,
      ttlMs: DAY,
      now: Date.now(),
    });

    const table = await cli(["review", "--store", url]);
    expect(table.code, table.stderr).toBe(1);
    const lines = table.stdout.split("\n");
    expect(lines[0]).toBe(
      "3 records need a person (2 send_email, 1 charge_card); the oldest was first tried 1h ago.",
    );
    expect(lines[2]).toMatch(/^age\s+tool\s+scope\s+key\s+why\s+tries\s+holder$/);
    const rowOf = (key: string) => lines.findIndex((line) => / \S+\s+\S+\s+(\S+)\s/.exec(line)?.[1] === key);
    expect(lines[rowOf("stale-1")]).toMatch(
      /^1h\s+charge_card\s+default\s+stale-1\s+lease passed\s+1\s+token-st$/,
    );
    expect(lines[rowOf("turn-1")]).toMatch(
      /^\d+s\s+send_email\s+tenant-a\s+turn-1\s+unknown\s+1\s+[0-9a-f]{8}$/,
    );
    expect(rowOf("stale-1")).toBeLessThan(rowOf("turn-1"));
    expect(rowOf("turn-1")).toBeLessThan(rowOf("turn-2"));
    expect(lines[rowOf("turn-1") + 2]).toBe("    why unknown: Error: socket hang up");
    expect(lines[rowOf("turn-1") + 1]).toMatch(/^ {4}first \S+Z, last \S+Z, version [0-9a-f]{16}$/);
    expect(table.stdout).not.toMatch(/ok-1|live-1/);
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(100);

    const queue = await queueOf(url);
    expect(queue).toMatchObject({ total: 3, byTool: { charge_card: 1, send_email: 2 } });
    expect(queue.items.map((item) => [item.key, item.reason, item.status])).toEqual([
      ["stale-1", "lease_passed", "in_progress"],
      ["turn-1", "unknown", "unknown"],
      ["turn-2", "unknown", "unknown"],
    ]);
    expect(queue.items[0]).toMatchObject({ leaseHolder: "token-st", attempts: 1, sealed: false });
    expect(queue.items[1]?.failure).toEqual({ name: "Error", message: "socket hang up" });
    expect(queue.items[1]?.version).toMatch(/^[0-9a-f]{16}$/);

    const keys = async (...args: string[]) => (await queueOf(url, ...args)).items.map((item) => item.key);
    expect(await keys("--tool", "charge_card")).toEqual(["stale-1"]);
    expect(await keys("--scope", "tenant-a")).toEqual(["turn-1", "turn-2"]);
    expect(await keys("--key-prefix", "turn-2")).toEqual(["turn-2"]);
    expect(await keys("--older-than", "30m")).toEqual(["stale-1"]);
    const limited = await queueOf(url, "--limit", "1");
    expect([limited.items.length, limited.total]).toEqual([1, 3]);

    const empty = await cli(["review", "--store", url, "--tool", "refund"]);
    expect([empty.code, empty.stdout]).toEqual([
      0,
      expect.stringMatching(/^Nothing needs a person: no unknown outcome, no lease passed/),
    ]);
    const bad = await cli(["review", "--store", url, "--older-than", "soon"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--older-than must be a duration like 90s, 10m, 2h or 7d");

    // The longest names are cut in the row, which still fits 100 columns, and given in full below it.
    const long = {
      tool: "send_transactional_email_v2",
      scope: "tenant-with-a-long-name-42",
      key: "k".repeat(60),
    };
    await mailer(store, long.tool).unknown(long.key, long.scope);
    const wide = await cli(["review", "--store", url, "--tool", long.tool]);
    expect(Math.max(...wide.stdout.split("\n").map((line) => line.length))).toBeLessThanOrEqual(100);
    expect(wide.stdout).toContain(`    tool: ${long.tool}\n    scope: ${long.scope}\n    key: ${long.key}\n`);
    expect(wide.stdout).toMatch(/send_transactio…\s+tenant-with-a-l…\s+k{26}…\s+unknown/);
  });

  it("resolves as completed: the tool's next repeat replays the result, marked as an operator's, and the trail says so", async () => {
    const { url, store } = await row.fresh();
    const m = mailer(store);
    await m.unknown("turn-1");
    const { code, stdout, stderr } = await cli([
      "resolve",
      "tenant-a",
      "turn-1",
      "--store",
      url,
      "--as",
      "completed",
      "--result",
      '{"messageId":"m-81"}',
      "--evidence",
      "provider log: m-81 delivered",
      "--by",
      "ops",
    ]);
    expect(code, stderr).toBe(0);
    expect(stdout).toMatch(/^Resolved tenant-a\/turn-1 \(send_email\) as completed: repeats now replay/);
    const replay = await m.call("turn-1");
    expect([replay.was_replay, replay.result, replay.resolved_by_operator?.by]).toEqual([
      true,
      { messageId: "m-81" },
      "ops",
    ]);
    expect(m.runs("turn-1")).toBe(1);

    const show = await cli(["inspect", "show", "tenant-a", "turn-1", "--store", url]);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toMatch(/resolved by\s+ops at \S+: provider log: m-81 delivered/);
    expect(show.stdout).toContain("trail (1 resolution)");
    expect(show.stdout).toMatch(/ {2}\S+Z {2}ops {2}as completed {2}via cli {2}applied\n/);
    expect(show.stdout).toContain("    evidence: provider log: m-81 delivered\n");
    expect(show.stdout).toMatch(/ {4}before: unknown, attempt 1, version [0-9a-f]{16}\n/);
    const json = JSON.parse(
      (await cli(["inspect", "show", "tenant-a", "turn-1", "--store", url, "--json"])).stdout,
    );
    expect(json.trail).toEqual(await readTrail({ store, scope: "tenant-a", key: "turn-1" }));

    const listed = async (...args: string[]) =>
      (
        JSON.parse((await cli(["inspect", "list", "--store", url, "--json", ...args])).stdout) as {
          scope: string;
        }[]
      ).map((r) => r.scope);
    expect(await listed()).toEqual(["tenant-a"]);
    expect((await listed("--include-trail")).sort()).toEqual(["idempotool:trail", "tenant-a"]);
  });

  it("resolves as not-executed only when confirmed: refused without a terminal or --yes, and then the next call runs", async () => {
    const { url, store } = await row.fresh();
    const m = mailer(store);
    await m.unknown("turn-1");
    const args = [
      "resolve",
      "tenant-a",
      "turn-1",
      "--store",
      url,
      "--as",
      "not-executed",
      "--evidence",
      "no such message",
    ];
    const refused = await cli(args);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("runs the tool again");
    expect(refused.stderr).toContain("standard input is not a terminal: nothing was changed");
    expect(refused.stderr).toContain("--yes");
    expect(await statusOf(store, "turn-1")).toBe("unknown");

    const freed = await cli([...args, "--yes"]);
    expect(freed.code, freed.stderr).toBe(0);
    expect(freed.stderr).toBe(
      "Resolving as not-executed frees the key: the next call with it runs send_email again. " +
        "If the effect did happen, it happens twice.\n",
    );
    expect(freed.stdout).toContain("as not-executed: the key is free");
    const run = await m.call("turn-1");
    expect([run.was_replay, run.result, m.runs("turn-1")]).toEqual([false, { sent: "ada@example.com" }, 2]);

    await m.unknown("turn-2");
    const asked: string[] = [];
    const confirmed = await onTerminal(
      [
        "resolve",
        "tenant-a",
        "turn-2",
        "--store",
        url,
        "--as",
        "not-executed",
        "--evidence",
        "not in the log",
      ],
      async (question) => {
        asked.push(question);
        return "yes";
      },
    );
    expect(confirmed.code, confirmed.stderr).toBe(0);
    expect(asked).toEqual(['Free key "turn-2" of send_email in scope "tenant-a"? Type yes to confirm: ']);
    expect(confirmed.stderr.indexOf("it happens twice")).toBeLessThan(confirmed.stderr.indexOf("Free key"));
    expect(await statusOf(store, "turn-2")).toBeUndefined();

    // The freed key's record is gone; its trail is not.
    const show = await cli(["inspect", "show", "tenant-a", "turn-2", "--store", url]);
    expect(show.code).toBe(1);
    expect(show.stdout).toMatch(/as not-executed {2}via cli {2}applied/);
  });

  it("resolves as failed: repeats get the error back, marked as an operator's", async () => {
    const { url, store } = await row.fresh();
    const m = mailer(store);
    await m.unknown("turn-1");
    const { code, stderr } = await cli([
      "resolve",
      "tenant-a",
      "turn-1",
      "--store",
      url,
      "--as",
      "failed",
      "--error",
      "mailbox does not exist",
      "--evidence",
      "bounce in the provider's log",
      "--by",
      "ops",
    ]);
    expect(code, stderr).toBe(0);
    const error = await m.call("turn-1").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ReplayedFailureError);
    expect((error as ReplayedFailureError).message).toContain("mailbox does not exist");
    expect((error as ReplayedFailureError).resolved_by_operator?.by).toBe("ops");
    expect(m.runs("turn-1")).toBe(1);

    // A worker that stopped leaves no note to tell whether its tool encrypts: the command says so.
    await stale(store, "order-42");
    const declined = await cli([
      "resolve",
      "default",
      "order-42",
      "--store",
      url,
      "--as",
      "failed",
      "--error",
      "card declined",
      "--evidence",
      "declined in the card processor's dashboard",
    ]);
    expect(declined.code, declined.stderr).toBe(0);
    expect(declined.stderr).toContain("Without --hooks, the outcome is stored in plaintext");
    expect(await statusOf(store, "order-42", "default")).toBe("failed");
  });

  it("refuses a record that changed since it was listed (--expect-version), or whose owner holds a live lease, and changes nothing", async () => {
    const { url, store } = await row.fresh();
    const m = mailer(store);
    await m.unknown("turn-1");
    const [item] = (await queueOf(url)).items;
    await takenOver(store, "tenant-a", "turn-1");
    const resolve = (key: string, ...more: string[]) =>
      cli([
        "resolve",
        "tenant-a",
        key,
        "--store",
        url,
        "--as",
        "completed",
        "--result",
        "{}",
        "--evidence",
        "log",
        ...more,
      ]);
    const changed = await resolve("turn-1", "--expect-version", item!.version);
    expect(changed.code).toBe(1);
    expect(changed.stderr).toMatch(
      /^idempotool: record_changed: The record for key "turn-1" in scope "tenant-a" changed/,
    );
    expect(changed.stderr).toContain("idempotool review shows it as it is now");
    expect((await store.get({ scope: "tenant-a", key: "turn-1" }, Date.now()))?.token).toBe("worker-2-token");
    expect(await readTrail({ store, scope: "tenant-a", key: "turn-1" })).toEqual([]);

    // Held now by a live lease: its worker may be running the tool.
    const live = await resolve("turn-1");
    expect(live.code).toBe(1);
    expect(live.stderr).toContain("record_not_resolvable");
    expect(live.stderr).toContain("live lease");
    expect(await statusOf(store, "turn-1")).toBe("in_progress");
    // Nor does it ask to free a key it would refuse to free.
    const asked: string[] = [];
    const unasked = await onTerminal(
      ["resolve", "tenant-a", "turn-1", "--store", url, "--as", "not-executed", "--evidence", "log"],
      async (question) => {
        asked.push(question);
        return "yes";
      },
    );
    expect([unasked.code, asked]).toEqual([1, []]);
    expect(unasked.stderr).toContain("record_not_resolvable");

    const none = await resolve("nope");
    expect([none.code, none.stderr]).toEqual([1, expect.stringContaining('no live record for key "nope"')]);
    const bad = await cli([
      "resolve",
      "tenant-a",
      "turn-1",
      "--store",
      url,
      "--as",
      "completed",
      "--result",
      "{oops",
      "--evidence",
      "x",
    ]);
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining("--result must be JSON")]);
    const noEvidence = await cli([
      "resolve",
      "tenant-a",
      "turn-1",
      "--store",
      url,
      "--as",
      "not-executed",
      "--yes",
    ]);
    expect([noEvidence.code, noEvidence.stderr]).toEqual([2, expect.stringContaining("--evidence")]);
  });

  it("frees a record whose lease only just passed only with --worker-gone: its worker may still be running", async () => {
    const { url, store } = await row.fresh();
    await store.claim({
      scope: "default",
      key: "fresh",
      tool: "charge_card",
      fingerprint: "f".repeat(64),
      token: "token-fresh-0000",
      leaseMs: 1_000,
      ttlMs: DAY,
      now: Date.now() - 2_000,
    });
    const args = ["resolve", "default", "fresh", "--store", url, "--as", "not-executed"];
    const early = await cli([...args, "--evidence", "no charge in the gateway", "--yes"]);
    expect(early.code).toBe(1);
    expect(early.stderr).toContain("may still be running");
    expect((await store.get({ scope: "default", key: "fresh" }, Date.now()))?.status).toBe("in_progress");
    const gone = await cli([...args, "--evidence", "its pod was deleted", "--yes", "--worker-gone"]);
    expect(gone.code).toBe(0);
    expect(await store.get({ scope: "default", key: "fresh" }, Date.now())).toBeUndefined();
  });

  it("--verify shows the hook's answer and changes nothing; --apply resolves as it answered, via verify", async () => {
    const { url, store } = await row.fresh();
    const m = mailer(store);
    for (const key of ["sent-1", "never-1", "bounced-1", "unclear-1", "broken-1"]) await m.unknown(key);
    const verify = (key: string, ...more: string[]) =>
      cli(["resolve", "tenant-a", key, "--store", url, "--hooks", hooks, "--verify", "--by", "ops", ...more]);

    const asked = await verify("sent-1");
    expect(asked.code, asked.stderr).toBe(0);
    expect(asked.stdout).toContain("The verify hook of send_email answers completed for tenant-a/sent-1\n");
    expect(asked.stdout).toContain('"messageId": "m-sent-1"');
    expect(asked.stdout).toContain("Nothing changed; --apply resolves it as completed with this result.");
    expect(await statusOf(store, "sent-1")).toBe("unknown");

    expect((await verify("sent-1", "--apply")).code).toBe(0);
    const replay = await m.call("sent-1");
    expect([replay.result, replay.resolved_by_operator?.evidence]).toEqual([
      { messageId: "m-sent-1" },
      "verify hook: completed",
    ]);
    const [entry] = await readTrail({ store, scope: "tenant-a", key: "sent-1" });
    expect(entry).toMatchObject({ via: "verify", by: "ops", as: "completed", state: "applied" });

    const unconfirmed = await verify("never-1", "--apply");
    expect([unconfirmed.code, unconfirmed.stderr]).toEqual([2, expect.stringContaining("not a terminal")]);
    expect(await statusOf(store, "never-1")).toBe("unknown");
    expect((await verify("never-1", "--apply", "--yes")).code).toBe(0);
    expect((await m.call("never-1")).was_replay).toBe(false);

    expect((await verify("bounced-1", "--apply", "--evidence", "bounce seen")).code).toBe(0);
    const bounced = await m.call("bounced-1").catch((e: unknown) => e);
    expect((bounced as ReplayedFailureError).code).toBe("bounced");
    expect((bounced as ReplayedFailureError).resolved_by_operator?.evidence).toBe("bounce seen");

    const unclear = await verify("unclear-1", "--apply");
    expect(unclear.code).toBe(1);
    expect(unclear.stdout).toContain(
      "answers unknown for tenant-a/unclear-1: no such message in the provider's log",
    );
    expect(unclear.stdout).toContain("Nothing to apply: the record still needs a person");
    const broken = await verify("broken-1");
    expect([broken.code, broken.stderr]).toEqual([1, expect.stringContaining("the provider's API is down")]);
    for (const key of ["unclear-1", "broken-1"]) expect(await statusOf(store, key)).toBe("unknown");

    const noHooks = await cli(["resolve", "tenant-a", "unclear-1", "--store", url, "--verify"]);
    expect([noHooks.code, noHooks.stderr]).toEqual([2, expect.stringContaining("--verify needs --hooks")]);
  });

  it("by filter: a dry run lists and counts, --yes resolves each, and other scopes are untouched", async () => {
    const { url, store } = await row.fresh();
    const m = mailer(store);
    for (const key of ["bulk-1", "bulk-2", "bulk-3"]) await m.unknown(key);
    await m.unknown("bulk-1", "tenant-b");
    const bulk = [
      "resolve",
      "--store",
      url,
      "--as",
      "not-executed",
      "--tool",
      "send_email",
      "--scope",
      "tenant-a",
    ];
    const args = [...bulk, "--older-than", "0s", "--evidence", "provider outage: nothing sent"];

    const dry = await cli([...args, "--dry-run"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain(
      "Would resolve 3 of send_email in scope tenant-a as not-executed.\nDry run: nothing changed.\n",
    );
    for (const key of ["bulk-1", "bulk-2", "bulk-3"]) expect(dry.stdout).toContain(key);
    expect(await statusOf(store, "bulk-1")).toBe("unknown");

    const unconfirmed = await cli(args);
    expect([unconfirmed.code, unconfirmed.stderr]).toEqual([2, expect.stringContaining("not a terminal")]);
    const missing = await cli([...bulk, "--evidence", "x", "--yes"]);
    expect([missing.code, missing.stderr]).toEqual([2, expect.stringContaining("missing: --older-than")]);

    const done = await cli([...args, "--yes"]);
    expect(done.code, done.stderr).toBe(0);
    expect(done.stderr).toContain("frees 3 keys: the next call with each runs send_email again");
    expect(done.stdout).toContain("3 resolved, 0 changed since listed (skipped), 0 failed.\n");
    for (const key of ["bulk-1", "bulk-2", "bulk-3"]) expect(await statusOf(store, key)).toBeUndefined();
    expect(await statusOf(store, "bulk-1", "tenant-b")).toBe("unknown");
  });

  it("by filter on a terminal: asks for the count, and skips a record that changed before the answer", async () => {
    const { url, store } = await row.fresh();
    const m = mailer(store);
    for (const key of ["bulk-1", "bulk-2"]) await m.unknown(key);
    const args = [
      "resolve",
      "--store",
      url,
      "--as",
      "completed",
      "--result",
      '{"messageId":"m-batch"}',
      "--tool",
      "send_email",
      "--scope",
      "tenant-a",
      "--older-than",
      "0s",
      "--evidence",
      "batch found in the provider's log",
    ];
    const wrong = await onTerminal(args, async () => "yes");
    expect([wrong.code, wrong.stderr]).toEqual([
      2,
      expect.stringContaining("not confirmed (the answer must be 2)"),
    ]);
    expect(await statusOf(store, "bulk-1")).toBe("unknown");

    const asked: string[] = [];
    const result = await onTerminal(args, async (question) => {
      asked.push(question);
      await takenOver(store, "tenant-a", "bulk-2");
      return "2";
    });
    expect(asked).toEqual([
      "Record 2 keys of send_email in scope tenant-a as completed? Their repeats will replay the result given " +
        "instead of running. Type 2 to confirm: ",
    ]);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain("resolved  tenant-a/bulk-1\n");
    expect(result.stdout).toMatch(/changed {3}tenant-a\/bulk-2: skipped, record_changed: /);
    expect(result.stdout).toContain("1 resolved, 1 changed since listed (skipped), 0 failed.\n");
    expect((await m.call("bulk-1")).result).toEqual({ messageId: "m-batch" });
    expect((await store.get({ scope: "tenant-a", key: "bulk-2" }, Date.now()))?.token).toBe("worker-2-token");

    await m.unknown("free-1");
    const freeArgs = [
      "resolve",
      "--store",
      url,
      "--as",
      "not-executed",
      "--tool",
      "send_email",
      "--scope",
      "tenant-a",
      "--key-prefix",
      "free-",
      "--older-than",
      "0s",
      "--evidence",
      "outage",
    ];
    const freeAsked: string[] = [];
    const freed = await onTerminal(freeArgs, async (question) => {
      freeAsked.push(question);
      return "1";
    });
    expect(freed.code, freed.stderr).toBe(0);
    expect(freeAsked).toEqual([
      "Free 1 key of send_email in scope tenant-a? This runs their effects again if the evidence is wrong. Type 1 to confirm: ",
    ]);
  });

  it("keeps a sealed record sealed: review shows it as sealed, and resolving it needs the tool's encryption from --hooks", async () => {
    const { url, store } = await row.fresh();
    const m = mailer(store, "sealed_email", { encryption });
    await m.unknown("turn-1");
    const closed = await cli(["review", "--store", url]);
    expect(closed.stdout).toContain(
      "sealed: its notes are encrypted; --hooks with the tool's encryption opens them",
    );
    expect(closed.stdout).not.toContain("socket hang up");
    expect((await queueOf(url)).items[0]).toMatchObject({ sealed: true });
    const opened = await cli(["review", "--store", url, "--hooks", hooks]);
    expect(opened.stdout).toContain("why unknown: Error: socket hang up");

    const resolve = (...more: string[]) =>
      cli([
        "resolve",
        "tenant-a",
        "turn-1",
        "--store",
        url,
        "--as",
        "completed",
        "--result",
        '{"messageId":"m-9"}',
        "--evidence",
        "provider log",
        "--by",
        "ops",
        ...more,
      ]);
    const refused = await resolve();
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      'give --hooks <module> whose tools["sealed_email"] has the tool\'s encryption',
    );
    expect(await statusOf(store, "turn-1")).toBe("unknown");

    const sealed = await resolve("--hooks", hooks);
    expect(sealed.code, sealed.stderr).toBe(0);
    const record = await store.get({ scope: "tenant-a", key: "turn-1" }, Date.now());
    expect(record?.result?.startsWith("idempotool:")).toBe(true);
    const replay = await m.call("turn-1");
    expect([replay.result, replay.resolved_by_operator?.by]).toEqual([{ messageId: "m-9" }, "ops"]);
    const show = await cli(["inspect", "show", "tenant-a", "turn-1", "--store", url]);
    expect(show.stdout).toMatch(/resolved by\s+sealed/);
    expect(show.stdout).toMatch(/ops {2}as completed {2}via cli {2}applied/);
  });
});

describe("idempotool review's details", () => {
  it("shows the start of the arguments a tool keeps for review (reviewPreview), and all of them in --json", async () => {
    const { url, store } = await rows[0]!.fresh();
    await mailer(store, "send_email", { reviewPreview: true }).unknown("turn-1");
    const { stdout } = await cli(["review", "--store", url]);
    expect(stdout).toContain('    arguments: {"to":"ada@example.com"}\n');
    expect((await queueOf(url)).items[0]?.preview).toBe('{"to":"ada@example.com"}');
  });
});

describe("idempotool review's progress", () => {
  it("counts the records it looks at on stderr when stderr is a terminal, and says nothing there otherwise", async () => {
    const { url, store } = await rows[0]!.fresh();
    await mailer(store).unknown("turn-1");
    const { runCli } = await import("../src/cli/main.js");
    let out = "";
    let err = "";
    const sink = (append: (text: string) => void) =>
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          append(chunk.toString());
          done();
        },
      });
    const stderr = Object.assign(
      sink((text) => {
        err += text;
      }),
      { isTTY: true },
    );
    const code = await runCli(["node", "idempotool", "review", "--store", url, "--json"], {
      stdout: sink((text) => {
        out += text;
      }),
      stderr,
      stdin: new PassThrough(),
    });
    expect(code).toBe(1);
    expect((JSON.parse(out) as ReviewQueue).total).toBe(1);
    expect(err).toContain("reading the store, records looked at: 1");
    expect((await cli(["review", "--store", url, "--json"])).stderr).toBe("");
  });
});
