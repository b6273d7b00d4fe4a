/**
 * The tools examples/chaos-send-email.ts puts under chaos: one `send_email`, unwrapped and wrapped.
 * Each export is a factory: chaos calls it with the run's throwaway store, its counting probe and a
 * short lease, in this process and again in the child process it SIGKILLs.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { idempotent } from "idempotool";
import type { ChaosContext } from "idempotool/chaos";

export interface Email {
  readonly to: string;
  readonly subject: string;
  readonly body: string;
}

/** A stand-in for SendGrid: the moment it accepts the email is the effect, so the probe goes there. */
async function provider(email: Email, probe: (detail?: unknown) => void): Promise<{ messageId: string }> {
  await sleep(15);
  probe({ to: email.to, subject: email.subject });
  return { messageId: `msg-${Date.now()}` };
}

/** What an agent framework would call if nobody thought about repeats. */
export const naiveSendEmail = ({ probe }: ChaosContext) =>
  async function sendEmail(email: Email) {
    return provider(email, probe);
  };

/** The same tool made safe to call twice: a claim on the caller's key, in a store every process shares. */
export const sendEmail = ({ store, probe, leaseMs }: ChaosContext) =>
  idempotent((email: Email) => provider(email, probe), {
    name: "send_email",
    store,
    leaseMs,
    effect: "irreversible",
  });
