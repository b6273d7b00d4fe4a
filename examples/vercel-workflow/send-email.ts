/**
 * The workflows of examples/vercel-workflow-send-email.ts: each sends a welcome email per recipient, one
 * step per email, through an "external API" (a JSON-lines outbox file) whose response is lost on the first
 * attempt of every step, so the Workflow runtime retries each step.
 * `welcome` runs the email through idempotool, keyed by the step's `stepId`; `welcomePlain` does not.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { idempotent, memoryStore } from "idempotool";
import { stepTool } from "idempotool/vercel-workflow";
import { getStepMetadata } from "workflow";

interface Sent {
  readonly to: string;
  readonly key: string | null;
  readonly messageId: string;
}

/** The external API: every call is one email, one line in the outbox. */
function send(outbox: string, to: string, key: string | null): Sent {
  const messageId = `msg-${existsSync(outbox) ? readFileSync(outbox, "utf8").split("\n").length : 1}`;
  const sent = { to, key, messageId };
  appendFileSync(outbox, `${JSON.stringify(sent)}\n`);
  return sent;
}

/** Asks the external API what it sent under a key: how a retry learns the outcome of a lost response. */
function lookUp(outbox: string, key: string): Sent | undefined {
  if (!existsSync(outbox)) return undefined;
  return readFileSync(outbox, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Sent)
    .find((sent) => sent.key === key);
}

// One process runs every attempt here; in production use a store your steps share (idempotool/postgres).
const sendEmail = stepTool(
  idempotent(
    async (args: { outbox: string; to: string }, { key }) => {
      const sent = send(args.outbox, args.to, key);
      if (getStepMetadata().attempt === 1) throw new Error("socket hang up"); // sent; the response was lost
      return { messageId: sent.messageId, key };
    },
    {
      name: "send_email",
      store: memoryStore(),
      effect: "irreversible",
      verify: (_record, { args, key }) => {
        const sent = lookUp(args.outbox, key);
        return sent
          ? { status: "completed", result: { messageId: sent.messageId, key } }
          : { status: "not_executed" };
      },
    },
  ),
  { getStepMetadata },
);

async function notify(outbox: string, to: string) {
  "use step";
  return (await sendEmail({ outbox, to })).result;
}

async function notifyPlain(outbox: string, to: string) {
  "use step";
  const sent = send(outbox, to, null);
  if (getStepMetadata().attempt === 1) throw new Error("socket hang up");
  return { messageId: sent.messageId, key: null };
}

export async function welcome(outbox: string, recipients: string[]) {
  "use workflow";
  const sent = [];
  for (const to of recipients) sent.push(await notify(outbox, to));
  return sent;
}

export async function welcomePlain(outbox: string, recipients: string[]) {
  "use workflow";
  const sent = [];
  for (const to of recipients) sent.push(await notifyPlain(outbox, to));
  return sent;
}
