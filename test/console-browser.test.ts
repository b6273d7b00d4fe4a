/**
 * `idempotool console` in a real headless Chromium (Debian's, driven by playwright-core): the queue, a
 * record's story, each resolve action and the race between two operators, on SQLite, PostgreSQL and Redis;
 * then the one-time token as the page meets it and the counts on SQLite, and the command itself as a
 * process. The HTTP guards themselves (Host, Origin, session, body size) are tested without a browser in
 * test/console-server.test.ts. A missing Chromium fails these tests, saying how to install it; they never skip.
 *
 * With IDEMPOTOOL_SCREENSHOTS=1 (`npm run docs:screenshots`), the main views are saved to
 * docs/images/console-*.png.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Redis } from "ioredis";
import type pg from "pg";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConsoleServer, startConsoleServer } from "../src/cli/console/console-server.js";
import { idempotent } from "../src/core/idempotent.js";
import type { IdempotencyStore } from "../src/core/store.js";
import { postgresStore } from "../src/postgres/index.js";
import { redisStore } from "../src/redis/index.js";
import { readTrail } from "../src/review/index.js";
import { sqliteStore } from "../src/sqlite/index.js";
import { dropTable, freshTable, testPool } from "./fixtures/pg-helpers.js";
import { dropPrefix, freshPrefix, reachable, testClient } from "./fixtures/redis-helpers.js";

const chromiumPath = process.env.IDEMPOTOOL_CHROMIUM ?? "/usr/bin/chromium";
const screenshots = process.env.IDEMPOTOOL_SCREENSHOTS === "1";
const imagesDir = join(import.meta.dirname, "..", "docs", "images");
const root = join(import.meta.dirname, "..");

let browser: Browser;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  if (!existsSync(chromiumPath)) {
    throw new Error(
      `Chromium is not at ${chromiumPath}: the console's browser tests need it (they never skip). Install ` +
        "it with `apt-get install chromium` (scripts/provision.sh does), or set IDEMPOTOOL_CHROMIUM.",
    );
  }
  browser = await chromium.launch({
    executablePath: chromiumPath,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}, 60_000);

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  await browser?.close();
});

/** An email tool whose first call per address throws after the send may have happened: outcome unknown. */
function flakyMailer(store: IdempotencyStore) {
  const sent: string[] = [];
  const failedOnce = new Set<string>();
  const tool = idempotent(
    async (args: { to: string }) => {
      if (!failedOnce.has(args.to)) {
        failedOnce.add(args.to);
        throw new Error("socket hang up after the request was sent");
      }
      sent.push(args.to);
      return { messageId: `m-${sent.length}` };
    },
    { name: "send_email", store, effect: "irreversible" },
  );
  const refund = idempotent(
    async (_args: { order: string }) => {
      throw new Error("gateway timeout");
    },
    { name: "refund_order", store, effect: "irreversible" },
  );
  return { tool, refund, sent };
}

interface StoreRow {
  readonly name: string;
  readonly label: string;
  open(): Promise<{ store: IdempotencyStore; close(): Promise<void> }>;
}

const storeRows: StoreRow[] = [
  {
    name: "SQLite",
    label: "sqlite://./console-test.db",
    async open() {
      const dir = mkdtempSync(join(tmpdir(), "idempotool-console-"));
      const store = sqliteStore({ path: join(dir, "records.db") });
      store.migrate();
      return {
        store,
        close: async () => {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
  {
    name: "PostgreSQL",
    label: "postgres://postgres:***@127.0.0.1:5432/test",
    async open() {
      const pool: pg.Pool = testPool();
      const table = freshTable();
      const store = postgresStore({ client: pool, table });
      await store.migrate();
      return {
        store,
        close: async () => {
          await dropTable(pool, table);
          await pool.end();
        },
      };
    },
  },
  {
    name: "Redis",
    label: "redis://127.0.0.1:6379",
    async open() {
      const client: Redis = testClient();
      await reachable(client);
      const prefix = freshPrefix("console");
      const store = redisStore({ client, prefix });
      return {
        store,
        close: async () => {
          await dropPrefix(client, prefix);
          client.disconnect();
        },
      };
    },
  },
];

/** A browser context with its own session: it opens a fresh one-time link. */
async function operator(
  server: ConsoleServer,
  link = server.issueLink(),
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  cleanups.push(() => context.close());
  const page = await context.newPage();
  await page.goto(link);
  await page.locator("body[data-queue='loaded']").waitFor();
  return { context, page };
}

async function openKey(page: Page, key: string): Promise<void> {
  await page.locator(`#queue-rows tr[data-key='${key}'] button`).click();
  await page.locator(`#record[data-key='${key}']`).waitFor();
}

async function resolveIn(
  page: Page,
  as: "completed" | "failed" | "not_executed",
  fill: { result?: string; message?: string; evidence: string; by?: string },
): Promise<void> {
  const button = {
    completed: "#resolve-completed",
    failed: "#resolve-failed",
    not_executed: "#resolve-not-executed",
  };
  await page.locator(button[as]).click();
  await page.locator("#resolve-dialog[open]").waitFor();
  if (fill.result !== undefined) await page.locator("#resolve-result").fill(fill.result);
  if (fill.message !== undefined) await page.locator("#resolve-message").fill(fill.message);
  await page.locator("#resolve-evidence").fill(fill.evidence);
  if (fill.by !== undefined) await page.locator("#resolve-by").fill(fill.by);
  await page.locator("#resolve-submit").click();
}

async function shot(page: Page, name: string, locator?: string): Promise<void> {
  if (!screenshots) return;
  mkdirSync(imagesDir, { recursive: true });
  const path = join(imagesDir, `console-${name}.png`);
  if (locator) await page.locator(locator).screenshot({ path });
  else await page.screenshot({ path });
}

describe.each(storeRows)("the console on $name", (row) => {
  let store: IdempotencyStore;
  let server: ConsoleServer;
  let mailer: ReturnType<typeof flakyMailer>;
  // The docs show one store's pages.
  const snap = (page: Page, name: string) => (row.name === "SQLite" ? shot(page, name) : Promise.resolve());

  beforeAll(async () => {
    const opened = await row.open();
    store = opened.store;
    cleanups.push(opened.close);
    server = await startConsoleServer({ store, storeLabel: row.label });
    cleanups.push(() => server.close());
    mailer = flakyMailer(store);
    for (const to of ["ada", "grace", "edsger", "barbara"]) {
      await mailer.tool({ to: `${to}@example.com` }, { key: `welcome-${to}` }).catch(() => undefined);
    }
    await mailer.refund({ order: "o-17" }, { key: "refund-o-17" }).catch(() => undefined);
  }, 60_000);

  it("lists what needs review, with counts by tool, and filters by tool and key prefix", async () => {
    const { page } = await operator(server);
    expect(page.url()).not.toContain("token=");
    await expect.poll(() => page.locator("#store").textContent()).toBe(row.label);
    expect(await page.locator("#queue-summary").textContent()).toMatch(
      /^5 records need a person · oldest \d+ s$/,
    );
    expect(await page.locator("#by-tool li").allTextContents()).toEqual(["send_email: 4", "refund_order: 1"]);
    expect(await page.locator("#queue-rows tr").count()).toBe(5);
    await snap(page, "queue");

    await page.locator("#filter-tool").fill("refund_order");
    await page.locator("#filters button[type='submit']").click();
    await expect.poll(() => page.locator("#queue-rows tr").count()).toBe(1);
    expect(await page.locator("#queue-rows tr").getAttribute("data-key")).toBe("refund-o-17");

    await page.locator("#filters button[type='reset']").click();
    await expect.poll(() => page.locator("#queue-rows tr").count()).toBe(5);
    await page.locator("#filter-key").fill("welcome-g");
    await page.keyboard.press("Enter");
    await expect.poll(() => page.locator("#queue-rows tr").count()).toBe(1);
    expect(await page.locator("#queue-summary").textContent()).toContain(
      "1 record needs a person (filtered)",
    );
    // The keyboard alone opens a record.
    await page.locator("#queue-rows tr[data-key='welcome-grace'] button").focus();
    await page.keyboard.press("Enter");
    await page.locator("#record[data-key='welcome-grace']").waitFor();
  });

  it("resolves a record as completed; the tool's next repeat replays that result, resolved_by_operator", async () => {
    const { page } = await operator(server);
    await openKey(page, "welcome-ada");
    const fields = await page.locator("#record .fields").textContent();
    expect(fields).toContain("outcome unknown");
    expect(fields).toContain("Error: socket hang up after the request was sent");
    expect(await page.locator("#trail-empty").textContent()).toBe("No one has resolved this key.");
    await snap(page, "record");

    await page.locator("#resolve-completed").click();
    await page.locator("#resolve-dialog[open]").waitFor();
    expect(await page.locator("#resolve-warning").textContent()).toContain(
      "Later repeats get exactly this result",
    );
    await page.locator("#resolve-result").fill('{"messageId": "m-81"');
    await page.locator("#resolve-evidence").fill("provider log: m-81 delivered 10:02 UTC");
    await page.locator("#resolve-by").fill("ada.ops");
    await page.locator("#resolve-submit").click();
    await page.locator("#result-error:not([hidden])").waitFor();
    expect(await page.locator("#result-error").textContent()).toMatch(/^Not valid JSON/);
    await page.locator("#resolve-result").fill('{ "messageId": "m-81" }');
    await snap(page, "resolve");
    await page.locator("#resolve-submit").click();
    await page.locator("#record[data-status='completed'] #resolved-by-operator").waitFor();
    expect(await page.locator("#resolved-by-operator").textContent()).toContain(
      "provider log: m-81 delivered",
    );
    expect(await page.locator("#trail li").allTextContents()).toEqual([
      expect.stringContaining("completed by ada.ops via console"),
    ]);
    await expect.poll(() => page.locator("#queue-rows tr[data-key='welcome-ada']").count()).toBe(0);

    const replay = await mailer.tool({ to: "ada@example.com" }, { key: "welcome-ada" });
    expect(replay).toMatchObject({
      was_replay: true,
      result: { messageId: "m-81" },
      resolved_by_operator: { by: "ada.ops", evidence: "provider log: m-81 delivered 10:02 UTC" },
    });
    expect(mailer.sent).toEqual([]);
  });

  it("resolves a record as not executed: the key is freed and the next call runs the tool", async () => {
    const { page } = await operator(server);
    await openKey(page, "welcome-grace");
    await page.locator("#resolve-not-executed").click();
    expect(await page.locator("#resolve-warning").textContent()).toContain(
      "If the effect did happen, the next call runs it again",
    );
    await page.locator("#resolve-cancel").click();
    // The name given last time is remembered in this browser.
    await page.evaluate(() => localStorage.setItem("idempotool.console.by", "grace.ops"));
    await resolveIn(page, "not_executed", { evidence: "no message for this key in the provider's log" });
    await page.locator("#record[data-status='none'] #trail").waitFor();
    expect(await page.locator("#trail li").allTextContents()).toEqual([
      expect.stringContaining("not executed by grace.ops via console"),
    ]);
    const run = await mailer.tool({ to: "grace@example.com" }, { key: "welcome-grace" });
    expect([run.was_replay, mailer.sent]).toEqual([false, ["grace@example.com"]]);
  });

  it("tells the second of two operators that the record changed, and overwrites nothing", async () => {
    const first = await operator(server);
    const second = await operator(server);
    await openKey(first.page, "welcome-edsger");
    await openKey(second.page, "welcome-edsger");
    await resolveIn(first.page, "failed", {
      message: "mailbox does not exist",
      evidence: "bounce in the provider's log",
      by: "first",
    });
    await first.page.locator("#record[data-status='failed']").waitFor();

    await resolveIn(second.page, "completed", {
      result: '{"messageId": "m-99"}',
      evidence: "I think it went out",
      by: "second",
    });
    await second.page.locator("#record-changed").waitFor();
    expect(await second.page.locator("#record-changed").textContent()).toContain(
      "changed since you opened it",
    );
    // The record shown again is the one the first operator left.
    await second.page.locator("#record[data-status='failed']").waitFor();
    expect(await second.page.locator("#resolve-dialog").getAttribute("open")).toBeNull();
    const trail = await readTrail({ store, scope: "default", key: "welcome-edsger" });
    expect(trail.map((entry) => [entry.by, entry.as])).toEqual([["first", "failed"]]);
    const error = await mailer
      .tool({ to: "edsger@example.com" }, { key: "welcome-edsger" })
      .catch((e: unknown) => e);
    expect((error as Error).message).toContain("mailbox does not exist");
  });

  it("counts what needs review and the resolutions made today, and fits a narrow window", async () => {
    const { page } = await operator(server);
    await openKey(page, "welcome-barbara");
    await page.setViewportSize({ width: 420, height: 800 });
    await snap(page, "narrow");
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.locator("#nav-counts").click();
    await page.locator("body[data-counts='loaded']").waitFor();
    expect([
      await page.locator("#count-unknown").textContent(),
      await page.locator("#count-stale").textContent(),
      await page.locator("tr[data-bucket='under_1h'] td.num").textContent(),
    ]).toEqual(["2", "0", "2"]);
    const [first] = await readTrail({ store, scope: "default", key: "welcome-ada" });
    const today = first!.at.slice(0, 10);
    expect(await page.locator(`#days-table tr[data-day='${today}'] td`).allTextContents()).toEqual([
      "1",
      "1",
      "1",
      "0",
      "3",
    ]);
    await snap(page, "counts");
  });
});

describe("the console's guards", () => {
  let server: ConsoleServer;
  let store: IdempotencyStore;

  beforeAll(async () => {
    const opened = await storeRows[0]!.open();
    store = opened.store;
    cleanups.push(opened.close);
    server = await startConsoleServer({
      store,
      storeLabel: "sqlite://./records.db",
      secrets: ["s3cret-pw"],
    });
    cleanups.push(() => server.close());
    const mailer = flakyMailer(store);
    await mailer.tool({ to: "ada@example.com" }, { key: "welcome-ada" }).catch(() => undefined);
  });

  async function lockedReason(link: string): Promise<string | null> {
    const context = await browser.newContext();
    cleanups.push(() => context.close());
    const page = await context.newPage();
    await page.goto(link);
    await page.locator("body[data-state='locked']").waitFor();
    expect(await page.locator("#view-queue").isHidden()).toBe(true);
    return page.locator("#locked-reason").textContent();
  }

  it("prints a loopback link with a 32-byte base64url token", () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43}$/);
  });

  it("locks the page without a token, with a wrong one, and with one used already", async () => {
    expect(await lockedReason(server.origin)).toContain("no console session");
    expect(await lockedReason(`${server.origin}/?token=${"A".repeat(43)}`)).toContain(
      "not valid or was used",
    );
    const link = server.issueLink();
    await operator(server, link);
    expect(await lockedReason(link)).toContain("not valid or was used");
  });

  it("counts a stale record by its age, and filters the queue by age", async () => {
    const now = Date.now();
    await store.claim({
      scope: "default",
      key: "charge-old",
      tool: "charge_card",
      fingerprint: "f",
      token: "abandoned-worker-token",
      leaseMs: 1000,
      ttlMs: 30 * 24 * 3_600_000,
      now: now - 3 * 24 * 3_600_000,
    });
    const { page } = await operator(server);
    await page.locator("#nav-counts").click();
    await page.locator("body[data-counts='loaded']").waitFor();
    expect(await page.locator("#count-unknown").textContent()).toBe("1");
    expect(await page.locator("#count-stale").textContent()).toBe("1");
    expect(await page.locator("tr[data-bucket='1d_to_7d'] td.num").textContent()).toBe("1");
    expect(await page.locator("tr[data-bucket='under_1h'] td.num").textContent()).toBe("1");
    expect(await page.locator("#view-counts").textContent()).toContain(
      "counted by the OpenTelemetry integration",
    );
    await page.locator("#nav-queue").click();
    await page.locator("#filter-age").selectOption("24h");
    await page.locator("#filters button[type='submit']").click();
    await expect.poll(() => page.locator("#queue-rows tr").count()).toBe(1);
    expect(await page.locator("#queue-rows tr").getAttribute("data-key")).toBe("charge-old");
    await openKey(page, "charge-old");
    expect(await page.locator("#record .fields").textContent()).toContain("worker stopped (lease passed)");
  });
});

describe("idempotool console, as a process", () => {
  it("prints its link, serves the page, and closes on SIGINT", async () => {
    const dir = mkdtempSync(join(tmpdir(), "idempotool-console-cli-"));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, "records.db");
    const seed = sqliteStore({ path });
    seed.migrate();
    await seed.close();
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(root, "src/cli/main.ts"), "console", "--store", `sqlite://${path}`],
      { cwd: root, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const link = await new Promise<string>((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
        const found = /http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]+/.exec(stdout);
        if (found) resolve(found[0]);
      });
      child.once("exit", (code) => reject(new Error(`exited ${code}: ${stderr}`)));
    });
    const { page } = await (async () => {
      const context = await browser.newContext();
      cleanups.push(() => context.close());
      const p = await context.newPage();
      await p.goto(link);
      await p.locator("body[data-queue='loaded']").waitFor();
      return { page: p };
    })();
    expect(await page.locator("#queue-summary").textContent()).toBe("Nothing needs review.");
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    child.kill("SIGINT");
    expect(await exited).toBe(0);
    expect(stdout).toContain("stopped: SIGINT");
    expect(stderr).toBe("");
  });

  it("refuses a host that is not loopback", async () => {
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        join(root, "src/cli/main.ts"),
        "console",
        "--store",
        "sqlite://./nowhere.db",
        "--host",
        "0.0.0.0",
      ],
      { cwd: root, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(2);
    expect(stderr).toContain("--host must be a loopback name");
  });
});
