/**
 * The crash in the demo: this process sends the email, then is SIGKILLed before it can record it.
 * Usage: demo-crash-child <db> <outbox> <scope> <key> <leaseMs> <email-json>
 */
import { sqliteStore } from "../sqlite/index.js";
import { sendEmailTool } from "./demo-tool.js";

const [db, outbox, scope, key, leaseMs, email] = process.argv.slice(2);
if (!db || !outbox || !scope || !key || !leaseMs || !email) {
  console.error("usage: demo-crash-child <db> <outbox> <scope> <key> <leaseMs> <email-json>");
  process.exit(2);
}
const store = sqliteStore({ path: db });
const send = sendEmailTool({
  store,
  outbox,
  leaseMs: Number(leaseMs),
  afterSend: () => process.kill(process.pid, "SIGKILL"),
});
await send(JSON.parse(email), { key, scope });
console.error("the crash child was meant to die before this line");
process.exit(1);
