/**
 * The demo's `send_email` tool: an "email provider" that appends each email it sends to an outbox
 * file, wrapped with `idempotent()`. The crash child and the demo build it the same way.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import type { IdempotencyStore } from "../core/store.js";
import { idempotent, type VerifyHook } from "../index.js";

export interface Email {
  readonly to: string;
  readonly subject: string;
  readonly body: string;
}

export interface SentEmail extends Email {
  readonly scope: string;
  readonly key: string;
  readonly messageId: string;
}

export interface DemoToolOptions {
  readonly store: IdempotencyStore;
  readonly outbox: string;
  /** Ask the provider whether an email went out when a crash left the outcome unknown. */
  readonly verifyWithProvider?: boolean;
  readonly leaseMs?: number;
  /** Called after the provider accepted the email, before the record is settled (the crash child dies here). */
  readonly afterSend?: () => void;
}

export function readOutbox(outbox: string): SentEmail[] {
  if (!existsSync(outbox)) return [];
  return readFileSync(outbox, "utf8")
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as SentEmail);
}

export function sendEmailTool(options: DemoToolOptions) {
  // The provider can be asked by our key whether it sent an email (as SendGrid's and SES's logs can be searched).
  const verify: VerifyHook<Email, { messageId: string }> = (record) => {
    const found = readOutbox(options.outbox).find((e) => e.scope === record.scope && e.key === record.key);
    return found
      ? { status: "completed", result: { messageId: found.messageId } }
      : { status: "not_executed" };
  };
  return idempotent(
    async (email: Email, context) => {
      const messageId = `msg-${readOutbox(options.outbox).length + 1}`;
      const sent: SentEmail = { ...email, scope: context.scope, key: context.key, messageId };
      appendFileSync(options.outbox, `${JSON.stringify(sent)}\n`);
      options.afterSend?.();
      return { messageId };
    },
    {
      name: "send_email",
      store: options.store,
      effect: "irreversible",
      leaseMs: options.leaseMs ?? 60_000,
      ...(options.verifyWithProvider ? { verify } : {}),
    },
  );
}
