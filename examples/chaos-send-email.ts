/**
 * Put a `send_email` tool under every repeat source an agent meets (a transport retry, a framework
 * resume, a duplicate emission, a double click, a crash after sending) and count the emails.
 * The naive tool sends twice under each; wrapped with idempotent(), it sends once.
 *
 *   npx tsx examples/chaos-send-email.ts
 *
 * The same check from the command line: `idempotool chaos examples/chaos-send-email-tools.ts#sendEmail`.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { type ChaosReport, chaos } from "idempotool/chaos";
import type { Email } from "./chaos-send-email-tools.js";

const tools = join(import.meta.dirname, "chaos-send-email-tools.ts");
const args: Email = { to: "alice@example.com", subject: "Meeting summary", body: "Notes attached." };

function print(report: ChaosReport): void {
  console.log(`\n${report.tool} (${report.kind}):`);
  for (const source of report.sources) {
    console.log(
      `  ${source.title.padEnd(42)} ${String(source.effects).padStart(2)} email(s)  ${source.verdict}`,
    );
  }
}

const naive = await chaos(`${tools}#naiveSendEmail`, { args });
print(naive);
assert.equal(naive.ok, false);
for (const source of naive.sources) assert.equal(source.verdict, "double_effect", source.title);

const safe = await chaos(`${tools}#sendEmail`, { args });
print(safe);
assert.equal(safe.ok, true);
for (const source of safe.sources) assert.equal(source.effects, 1, source.title);

console.log("\nThe naive tool sent twice under every repeat source; the wrapped one sent once.");
