/**
 * DBOS: a step sends an email and its response is lost, so DBOS retries the step (the same happens when
 * the process dies before DBOS records the step's output: recovery runs the step again). A plain step
 * sends again on the retry; with the effect keyed by workflow id + step id (`stepTool` from
 * idempotool/dbos), the retry asks the outbox what the first attempt did and replays it: one email, and
 * the workflow returns the original message id.
 *
 * Needs PostgreSQL (DBOS keeps its state there): set DATABASE_URL, default postgres://postgres@127.0.0.1:5432.
 * The example creates its own database and drops it when done.
 * Run: node --import tsx examples/dbos-send-email.ts   (checks itself; exits non-zero on failure)
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { DBOS } from "@dbos-inc/dbos-sdk";
import { idempotent } from "idempotool";
import { stepTool } from "idempotool/dbos";
import { postgresStore } from "idempotool/postgres";
import pg from "pg";

const server = new URL(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
const database = `dbos_example_${randomBytes(4).toString("hex")}`;
const url = new URL(server);
url.pathname = `/${database}`;

/** The external API: every call is one email. Its response is lost once (the email still went out). */
const outbox: { to: string; key: string | null }[] = [];
let responsesToLose = 0;
function send(to: string, key: string | null): { messageId: string } {
  outbox.push({ to, key });
  const messageId = `msg-${outbox.length}`;
  if (responsesToLose > 0) {
    responsesToLose--;
    throw new Error("socket hang up");
  }
  return { messageId };
}

// The store lives in the same database (DBOS creates it at launch; the pool connects on first use).
const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });

const sendEmail = stepTool(
  idempotent(async (args: { to: string }, { key }) => send(args.to, key), {
    name: "send_email",
    store: postgresStore({ client: pool }), // shared by every worker that may recover the workflow
    effect: "irreversible",
    // How a retry learns what an attempt whose response was lost did: ask the API by key.
    verify: (_record, { key }) => {
      const index = outbox.findIndex((sent) => sent.key === key);
      return index === -1
        ? { status: "not_executed" }
        : { status: "completed", result: { messageId: `msg-${index + 1}` } };
    },
  }),
  { dbos: DBOS },
);

const retries = { retriesAllowed: true, intervalSeconds: 0.1, maxAttempts: 3 };
const notify = DBOS.registerStep(async (to: string) => (await sendEmail({ to })).result, {
  name: "notify",
  ...retries,
});
const notifyPlain = DBOS.registerStep(async (to: string) => send(to, null), {
  name: "notifyPlain",
  ...retries,
});
const welcome = DBOS.registerWorkflow(async (to: string) => notify(to), { name: "welcome" });
const welcomePlain = DBOS.registerWorkflow(async (to: string) => notifyPlain(to), { name: "welcomePlain" });

// Functions are registered before launch, so DBOS can recover their workflows.
DBOS.setConfig({
  name: "dbos-send-email",
  systemDatabaseUrl: url.toString(),
  logLevel: "error",
  runAdminServer: false,
});
await DBOS.launch(); // creates the database, then recovers any workflow a dead process left pending

try {
  responsesToLose = 1;
  const plain = await (await DBOS.startWorkflow(welcomePlain)("alice@example.com")).getResult();
  assert.equal(outbox.length, 2);
  console.log(
    `plain step, retried after a lost response: ${outbox.length} emails, workflow returned ${plain.messageId}`,
  );

  outbox.length = 0;
  responsesToLose = 1;
  const once = await (await DBOS.startWorkflow(welcome)("alice@example.com")).getResult();
  assert.equal(outbox.length, 1);
  assert.equal(once.messageId, "msg-1");
  console.log(
    `stepTool step, retried after a lost response: ${outbox.length} email, workflow returned ${once.messageId}`,
  );

  // Another workflow is another intent: its step has another key and sends.
  await (await DBOS.startWorkflow(welcome)("alice@example.com")).getResult();
  assert.equal(outbox.length, 2);
  assert.notEqual(outbox[0]?.key, outbox[1]?.key);
  console.log("a second workflow sends its own email under another key");
  console.log("Every check holds.");
} finally {
  await pool.end();
  await DBOS.shutdown();
  const admin = new pg.Client({ connectionString: server.toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
}
