/**
 * `idempotool/dbos` inside a real DBOS runtime (launched in this process, its system database a fresh
 * PostgreSQL database): the key a step derives, a step retried by DBOS after a lost response, and the
 * refusals outside a step. The kill tests (dbos-kill.test.ts) cover recovery after a crash.
 */
import { randomBytes } from "node:crypto";
import { DBOS } from "@dbos-inc/dbos-sdk";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import * as dbosEntry from "../src/dbos/index.js";
import { type DbosContext, stepKey, stepTool } from "../src/dbos/index.js";
import { idempotent, isIdempotencyError, memoryStore } from "../src/index.js";
import { pgUrl, testPool } from "./fixtures/pg-helpers.js";

let admin: pg.Pool;
const database = `dbos_${randomBytes(6).toString("hex")}`;

/** The external API: every call that reaches it is one email. */
const outbox: { to: string; key: string }[] = [];
let loseNextResponse = false;

const store = memoryStore();
const sendEmail = stepTool(
  idempotent(
    async (args: { to: string }, context) => {
      outbox.push({ to: args.to, key: context.key });
      const messageId = `msg-${outbox.length}`;
      if (loseNextResponse) {
        loseNextResponse = false;
        throw new Error("socket hang up"); // The email went out; its response did not come back.
      }
      return { messageId };
    },
    {
      name: "send_email",
      store,
      verify: (_record, { key }) => {
        const index = outbox.findIndex((sent) => sent.key === key);
        return index === -1
          ? { status: "not_executed" }
          : { status: "completed", result: { messageId: `msg-${index + 1}` } };
      },
    },
  ),
  { dbos: DBOS },
);

const keysSeen: string[] = [];
const keyStep = DBOS.registerStep(
  async (part: string) => {
    const key = stepKey(DBOS, part);
    keysSeen.push(key);
    if (keysSeen.length === 1) throw new Error("first attempt fails"); // DBOS retries the step.
    return key;
  },
  { name: "keyStep", retriesAllowed: true, intervalSeconds: 0.01, maxAttempts: 3 },
);
const plainKeyStep = DBOS.registerStep(async (part: string) => stepKey(DBOS, part), { name: "plainKeyStep" });
const keysWorkflow = DBOS.registerWorkflow(
  async () => {
    const retried = await keyStep("send_email");
    const second = await plainKeyStep("send_email");
    const otherPart = await plainKeyStep("send_sms");
    return { retried, second, otherPart };
  },
  { name: "keysWorkflow" },
);

const notify = DBOS.registerStep(async (to: string) => (await sendEmail({ to })).result, {
  name: "notify",
  retriesAllowed: true,
  intervalSeconds: 0.01,
  maxAttempts: 3,
});
const welcome = DBOS.registerWorkflow(async (to: string) => notify(to), { name: "welcome" });

const inWorkflowBody = DBOS.registerWorkflow(
  async () => {
    try {
      await sendEmail({ to: "body@example.com" });
      return "ran";
    } catch (error) {
      return isIdempotencyError(error, "idempotency_key_missing") ? "refused" : String(error);
    }
  },
  { name: "inWorkflowBody" },
);

beforeAll(async () => {
  admin = testPool({ max: 1 });
  const url = new URL(pgUrl);
  url.pathname = `/${database}`;
  DBOS.setConfig({
    name: "idempotool-dbos-keys-test",
    systemDatabaseUrl: url.toString(),
    logLevel: "error",
    runAdminServer: false,
  });
  await DBOS.launch();
}, 60_000);
afterAll(async () => {
  await DBOS.shutdown({ deregister: true });
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
}, 60_000);

const run = async <A extends unknown[], R>(
  workflow: (...args: A) => Promise<R>,
  id: string,
  ...args: A
): Promise<R> => (await DBOS.startWorkflow(workflow, { workflowID: id })(...args)).getResult();

describe("stepKey inside DBOS", () => {
  it("gives a retried step the key of its first attempt, and each other step or part another", async () => {
    const { retried, second, otherPart } = await run(keysWorkflow, "keys-1");
    expect(keysSeen).toEqual([retried, retried]);
    expect(retried).toMatch(/^composite_[0-9a-f]{64}$/);
    expect(new Set([retried, second, otherPart]).size).toBe(3);
  });

  it("gives the same step of another workflow another key", async () => {
    keysSeen.length = 0;
    const first = await run(keysWorkflow, "keys-2");
    keysSeen.length = 0;
    const again = await run(keysWorkflow, "keys-3");
    expect(again.retried).not.toBe(first.retried);
    expect(again.second).not.toBe(first.second);
  });

  it("refuses with idempotency_key_missing outside a workflow", () => {
    expect(() => stepKey(DBOS, "send_email")).toThrow(
      expect.objectContaining({ code: "idempotency_key_missing" }),
    );
  });
});

describe("stepTool inside DBOS", () => {
  it("sends once when DBOS retries a step whose response was lost, and the workflow returns the original message id", async () => {
    outbox.length = 0;
    loseNextResponse = true;
    const result = await run(welcome, "welcome-1", "alice@example.com");
    expect(outbox).toHaveLength(1);
    expect(result).toEqual({ messageId: "msg-1" });
  });

  it("refuses in a workflow's own body, where DBOS records nothing, and sends nothing", async () => {
    outbox.length = 0;
    expect(await run(inWorkflowBody, "body-1")).toBe("refused");
    expect(outbox).toEqual([]);
  });

  it("refuses outside DBOS and sends nothing", async () => {
    outbox.length = 0;
    await expect(sendEmail({ to: "outside@example.com" })).rejects.toMatchObject({
      code: "idempotency_key_missing",
    });
    expect(outbox).toEqual([]);
  });

  it("rejects a tool not made by idempotent() and a missing DBOS at configuration time", () => {
    expect(() => stepTool((async () => 1) as never, { dbos: DBOS })).toThrow(
      expect.objectContaining({ code: "invalid_options" }),
    );
    expect(() => stepTool(sendEmail.tool, {} as never)).toThrow(/option `dbos`/);
  });
});

describe("idempotool/dbos", () => {
  it("exports exactly its documented values, and DBOS fits the shape it reads", () => {
    expect(Object.keys(dbosEntry).sort()).toEqual(["stepKey", "stepTool"]);
    expectTypeOf<typeof DBOS>().toExtend<DbosContext>();
  });
});
