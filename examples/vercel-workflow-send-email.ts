/**
 * Vercel Workflow (the `workflow` package) on its local runtime: a step sends an email and its response is
 * lost, so the runtime retries the step. Without idempotool each retry sends again; with the effect keyed
 * by the step's `stepId` (`stepTool` from idempotool/vercel-workflow), the retry asks the outbox what the
 * first attempt did and replays it: one email per step, and the workflow returns the original message ids.
 *
 * The workflows live in examples/vercel-workflow/send-email.ts. This script compiles them with the SDK's
 * builder (as `workflow build` does), serves the bundles on a local port, and runs them on the local world.
 * Run: node --import tsx examples/vercel-workflow-send-email.ts   (checks itself; exits non-zero on failure)
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { StandaloneBuilder } from "@workflow/builders";

type Handler = (request: Request) => Promise<Response>;
type Sent = { to: string; key: string | null; messageId: string };

const root = join(import.meta.dirname, "..");
// Inside the project: the builder resolves the SDK's own modules from where it writes the bundles.
const dir = mkdtempSync(join(root, ".vercel-workflow-example-"));
process.env.WORKFLOW_LOCAL_DATA_DIR = join(dir, "data");
// The builder also writes its manifest to .well-known/workflow/ in the project: removed below unless it was there.
const manifestDir = join(root, ".well-known", "workflow");
const hadManifest = existsSync(manifestDir);

try {
  // 1. Compile the "use workflow" / "use step" functions into the runtime's two bundles.
  await new StandaloneBuilder({
    buildTarget: "standalone",
    dirs: ["examples/vercel-workflow"],
    workingDir: root,
    stepsBundlePath: join(dir, "steps.cjs"),
    workflowsBundlePath: join(dir, "workflows.cjs"),
    webhookBundlePath: join(dir, "webhook.cjs"),
    suppressCreateWorkflowsBundleLogs: true,
    suppressCreateWebhookBundleLogs: true,
    suppressCreateManifestLogs: true,
  }).build();
  const load = createRequire(import.meta.url);
  const flow = (load(join(dir, "workflows.cjs")) as { POST: Handler }).POST;
  const step = (load(join(dir, "steps.cjs")) as { POST: Handler }).POST;

  // 2. Serve them where the local world's queue delivers (PORT).
  const server = serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (request: Request) => {
      const { pathname } = new URL(request.url);
      if (pathname.endsWith("/flow")) return flow(request);
      if (pathname.endsWith("/step")) return step(request);
      return new Response(null, { status: 404 });
    },
  }) as Server;
  await once(server, "listening");
  process.env.PORT = String((server.address() as AddressInfo).port);
  const { start } = await import("workflow/api");

  const recipients = ["alice@example.com", "bob@example.com"];
  const runWorkflow = async (name: string, outbox: string) => {
    const workflow = { workflowId: `workflow//./examples/vercel-workflow/send-email//${name}` };
    const run = await start(workflow as never, [outbox, recipients]);
    return { runId: run.runId, sent: (await run.returnValue) as { messageId: string; key: string | null }[] };
  };
  const outboxOf = (path: string): Sent[] =>
    existsSync(path)
      ? readFileSync(path, "utf8")
          .split("\n")
          .filter(Boolean)
          .map((line) => JSON.parse(line) as Sent)
      : [];

  // 3. Without idempotool: each retried step sends again.
  const plainOutbox = join(dir, "plain.jsonl");
  await runWorkflow("welcomePlain", plainOutbox);
  assert.equal(outboxOf(plainOutbox).length, 4);
  console.log(`plain steps, each retried once: ${outboxOf(plainOutbox).length} emails for 2 recipients`);

  // 4. With stepTool: each retry replays what its first attempt sent.
  const outbox = join(dir, "outbox.jsonl");
  const first = await runWorkflow("welcome", outbox);
  const emails = outboxOf(outbox);
  assert.deepEqual(
    emails.map((e) => e.to),
    recipients,
  );
  assert.deepEqual(
    first.sent.map((s) => s.messageId),
    emails.map((e) => e.messageId),
  );
  assert.deepEqual(
    first.sent.map((s) => s.key),
    emails.map((e) => e.key),
  );
  assert.notEqual(emails[0]?.key, emails[1]?.key);
  console.log(
    `idempotool steps, each retried once: ${emails.length} emails for 2 recipients, original ids returned`,
  );

  // 5. Another run of the same workflow is another intent: new steps, new keys, new emails.
  const second = await runWorkflow("welcome", outbox);
  assert.equal(outboxOf(outbox).length, 4);
  assert.equal(new Set(outboxOf(outbox).map((e) => e.key)).size, 4);
  assert.notEqual(second.runId, first.runId);
  console.log("a second run sends its own 2 emails under new keys");

  server.closeAllConnections();
  server.close();
  console.log("Every check holds.");
} finally {
  rmSync(dir, { recursive: true, force: true });
  if (!hadManifest) {
    rmSync(manifestDir, { recursive: true, force: true });
    if (readdirSync(join(root, ".well-known")).length === 0) rmdirSync(join(root, ".well-known"));
  }
}
process.exit(0);
