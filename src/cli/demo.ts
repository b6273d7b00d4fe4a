/**
 * `idempotool demo`: an agent's `send_email` meets every repeat source of README's "The problem" on a fresh
 * SQLite file, and a table shows calls made against emails actually sent. The MCP, LangGraph and HTTP
 * rows load their frameworks lazily (demo-integrations.ts) and are skipped when one is not installed.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ReplayedFailureError } from "../core/outcomes.js";
import { isIdempotencyError, keys } from "../index.js";
import { sqliteStore } from "../sqlite/index.js";
import { integrations } from "./demo-integrations.js";
import { type Email, readOutbox, sendEmailTool } from "./demo-tool.js";
import { installAdvice, missingPackage } from "./optional-packages.js";

export interface DemoRow {
  readonly source: string;
  readonly calls: number;
  readonly sent: number;
  readonly expected: number;
  /** What each caller got, in order. */
  readonly got: readonly string[];
  readonly holds: boolean;
  /** Set when the row could not run because its framework is not installed: what to install. */
  readonly skipped?: string;
}

export interface DemoOptions {
  /** Where the SQLite file and the outbox go, created if missing. Default: a fresh temporary folder. */
  readonly dir?: string;
  readonly write?: (line: string) => void;
}

const alice: Email = { to: "alice@example.com", subject: "Meeting summary", body: "Notes attached." };
/** Short, so the demo does not wait a minute for a crashed worker's lease to pass. */
const crashLeaseMs = 1_500;

export async function runDemo(
  options: DemoOptions = {},
): Promise<{ rows: DemoRow[]; ok: boolean; dir: string }> {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "idempotool-demo-"));
  mkdirSync(dir, { recursive: true });
  const db = join(dir, "idempotool.db");
  const outbox = join(dir, "outbox.jsonl");
  const store = sqliteStore({ path: db });
  const send = sendEmailTool({ store, outbox });
  const sendVerified = sendEmailTool({ store, outbox, verifyWithProvider: true });

  write(`idempotool demo: an agent's send_email on SQLite at ${db}\n`);
  const rows: DemoRow[] = [];
  const scenario = async (source: string, expected: number, calls: (scope: string) => Promise<string>[]) => {
    const scope = `demo-${rows.length + 1}`;
    const got: string[] = [];
    for (const outcome of calls(scope)) got.push(await outcome);
    const sent = readOutbox(outbox).filter((e) => e.scope === scope).length;
    rows.push({ source, calls: got.length, sent, expected, got, holds: sent === expected });
  };
  const attempt = (promise: Promise<{ was_replay: boolean }>) =>
    promise.then(
      (envelope) => (envelope.was_replay ? "replay" : "sent"),
      (error: unknown) => describe(error),
    );

  try {
    await scenario("transport retry after success", 1, (scope) => {
      // The reply to the first call is lost in a timeout; the client retries with the same key.
      const first = attempt(send(alice, { key: "req-9f2c", scope }));
      return [first, first.then(() => attempt(send(alice, { key: "req-9f2c", scope })))];
    });

    await scenario("framework resume re-runs the node", 1, (scope) => {
      const checkpoint = join(dir, `${scope}-checkpoint.json`);
      const node = () => {
        // The node body re-runs from the top on resume; its key comes from checkpointed state.
        const state = loadState(checkpoint);
        const key = keys.fromState(state, "send_email");
        writeFileSync(checkpoint, JSON.stringify(state));
        return attempt(send(alice, { key, scope }));
      };
      const first = node();
      return [first, first.then(node)];
    });

    await scenario("same call emitted twice in one turn", 1, (scope) => {
      // Concurrent, with different tool-call ids: the key is per intent (turn + recipient + subject).
      const key = keys.intent("turn-41", { to: alice.to, subject: alice.subject });
      return [attempt(send(alice, { key, scope })), attempt(send(alice, { key, scope }))];
    });

    await scenario("user double-clicks send", 1, (scope) => {
      const key = keys.intent("turn-42", { to: alice.to, subject: alice.subject });
      const first = attempt(send(alice, { key, scope }));
      return [first, first.then(() => attempt(send(alice, { key, scope })))];
    });

    await scenario("crash after sending, no verify hook", 1, (scope) => {
      const crashed = crashChild(db, outbox, scope, "crash-1", alice);
      const retry = crashed.then(() => attempt(sendAfterLease(send, alice, "crash-1", scope)));
      return [crashed, retry];
    });

    await scenario("crash after sending, verify asks provider", 1, (scope) => {
      const crashed = crashChild(db, outbox, scope, "crash-2", alice);
      const retry = crashed.then(() => attempt(sendAfterLease(sendVerified, alice, "crash-2", scope)));
      return [crashed, retry];
    });

    await scenario("same key reused with new arguments", 1, (scope) => {
      const first = attempt(send(alice, { key: "req-77", scope }));
      const changed = { ...alice, subject: "Updated summary" };
      return [first, first.then(() => attempt(send(changed, { key: "req-77", scope })))];
    });

    await scenario("genuine re-request in a new turn", 2, (scope) => {
      // A new turn is a new intent, so it sends again (Case 2 in docs/operation-models.md).
      const first = attempt(send(alice, { key: keys.intent("turn-43", { to: alice.to }), scope }));
      const again = () => attempt(send(alice, { key: keys.intent("turn-44", { to: alice.to }), scope }));
      return [first, first.then(again)];
    });

    // The integrations, on the same store and outbox; each framework is an optional peer.
    for (const integration of integrations) {
      const scope = `demo-${rows.length + 1}`;
      let run: Awaited<ReturnType<typeof integration.load>>;
      try {
        run = await integration.load();
      } catch (error) {
        if (missingPackage(error) === undefined) throw error;
        const skipped = `to see this row, ${installAdvice(integration.install)}`;
        rows.push({
          source: integration.source,
          calls: 0,
          sent: 0,
          expected: 1,
          got: [skipped],
          holds: false,
          skipped,
        });
        continue;
      }
      const got = await run({ store, outbox, scope, email: alice }).catch((error: unknown) => [
        describe(error),
      ]);
      const sent = readOutbox(outbox).filter((e) => e.scope === scope).length;
      rows.push({ source: integration.source, calls: got.length, sent, expected: 1, got, holds: sent === 1 });
    }
  } finally {
    await store.close();
  }

  printTable(rows, write);
  const ok = rows.every((row) => row.skipped !== undefined || row.holds);
  const skipped = rows.filter((row) => row.skipped !== undefined).length;
  const skippedNote = skipped === 0 ? "" : ` (${skipped} row${skipped === 1 ? "" : "s"} skipped)`;
  write(
    ok
      ? `\nEvery row holds: ${rows.reduce((n, r) => n + r.calls, 0)} calls, ${rows.reduce((n, r) => n + r.sent, 0)} emails, none twice.${skippedNote}`
      : "\nSome rows do not hold: an email was sent twice or not at all.",
  );
  return { rows, ok, dir };
}

function loadState(path: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  } catch {
    return {};
  }
}

/** Retry once the crashed worker's lease has passed, waiting for it like any in-flight repeat would. */
async function sendAfterLease(
  send: ReturnType<typeof sendEmailTool>,
  email: Email,
  key: string,
  scope: string,
): Promise<{ was_replay: boolean }> {
  await new Promise((resolve) => setTimeout(resolve, crashLeaseMs + 100));
  return send(email, { key, scope });
}

/** Run the send in a child process that is SIGKILLed after the provider accepted the email. */
function crashChild(db: string, outbox: string, scope: string, key: string, email: Email): Promise<string> {
  const here = fileURLToPath(import.meta.url);
  const fromSource = here.endsWith(".ts");
  const child = join(here, "..", fromSource ? "demo-crash-child.ts" : "demo-crash-child.js");
  const argv = [
    ...(fromSource ? ["--import", "tsx"] : []),
    child,
    db,
    outbox,
    scope,
    key,
    String(crashLeaseMs),
  ];
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [...argv, JSON.stringify(email)], {
      stdio: ["ignore", "ignore", "inherit"],
    });
    proc.on("error", reject);
    proc.on("exit", (_code, signal) =>
      resolve(signal === "SIGKILL" ? "killed after sending" : "exited (no crash?)"),
    );
  });
}

function describe(error: unknown): string {
  if (error instanceof ReplayedFailureError) return `replayed failure: ${error.message}`;
  if (isIdempotencyError(error)) return error.code;
  return `error: ${error instanceof Error ? error.message : String(error)}`;
}

function printTable(rows: readonly DemoRow[], write: (line: string) => void): void {
  const header = ["repeat source", "calls", "emails sent", "expected", "what each caller got", "holds"];
  const cells = rows.map((r) => [
    r.source,
    r.skipped !== undefined ? "-" : String(r.calls),
    r.skipped !== undefined ? "-" : String(r.sent),
    r.skipped !== undefined ? "-" : String(r.expected),
    r.got.join(", "),
    r.skipped !== undefined ? "skipped" : r.holds ? "yes" : "NO",
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((row) => row[i]!.length)));
  const line = (row: readonly string[]) => row.map((cell, i) => cell.padEnd(widths[i]!)).join("  ");
  write(line(header));
  write(widths.map((w) => "-".repeat(w)).join("  "));
  for (const row of cells) write(line(row));
}
