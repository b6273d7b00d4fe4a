/**
 * `idempotool audit` on JSON tool lists in every format, read from a file or standard input, in this process
 * (test/cli-audit-mcp.test.ts audits real MCP servers, which audit starts; test/cli-bin.test.ts spawns the
 * built binary).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuditReport } from "../src/audit/index.js";
import { ansi, cli } from "./fixtures/cli-binary.js";

const fixture = (name: string) => join("test", "fixtures", name);
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "idempotool-cli-audit-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function auditJson(args: readonly string[], input?: string) {
  const result = await cli(["audit", ...args, "--json"], input === undefined ? {} : { input });
  return { ...result, report: JSON.parse(result.stdout) as AuditReport & { source: string } };
}

const byName = (report: AuditReport) => Object.fromEntries(report.tools.map((t) => [t.name, t]));

describe("idempotool audit <file>", () => {
  it("classifies OpenAI Chat tools and fails on the side-effectful one with no key (exit 1)", async () => {
    const { code, report } = await auditJson([fixture("audit-openai-chat.json")]);
    expect(code).toBe(1);
    const tools = byName(report);
    expect(tools.send_email).toMatchObject({
      format: "openai-chat",
      class: "side-effectful",
      key: null,
      verdict: "fail",
    });
    expect(tools.charge_card).toMatchObject({
      key: { field: "idempotency_key", required: true },
      verdict: "ok",
    });
    expect(tools.charge_card?.recommendations[0]?.mechanism).toBe("OP-1");
    expect(tools.createInvoice).toMatchObject({
      key: { field: "idempotencyKey", required: false },
      verdict: "warn",
    });
    expect(tools.get_weather).toMatchObject({ class: "read-only", verdict: "ok" });
    expect(tools.email_lookup).toMatchObject({ class: "read-only" });
  });

  it("reads OpenAI Responses tools, finds a nested described request_id, and does not trust client_msg_id", async () => {
    const { code, report } = await auditJson([fixture("audit-openai-responses.json")]);
    expect(code).toBe(1);
    const tools = byName(report);
    expect(tools.post_slack_message).toMatchObject({
      format: "openai-responses",
      verdict: "fail",
      lookalikeKeys: ["client_msg_id"],
    });
    expect(tools.upload_report).toMatchObject({
      key: { field: "request.request_id", required: true },
      verdict: "ok",
    });
    expect(tools.upload_report?.recommendations.map((r) => r.mechanism)).toEqual(["OP-3"]);
    expect(tools.search_documents?.class).toBe("read-only");
  });

  it("reads Anthropic tools, following $ref and allOf to the key", async () => {
    const { code, report } = await auditJson([fixture("audit-anthropic.json")]);
    expect(code).toBe(1);
    const tools = byName(report);
    expect(tools.transfer_funds).toMatchObject({
      format: "anthropic",
      verdict: "fail",
      effect: "compensatable",
    });
    expect(tools.transfer_funds?.recommendations[0]?.mechanism).toBe("OP-5");
    expect(tools.notify_user).toMatchObject({
      key: { field: "notification_idempotency_key", required: true },
      verdict: "ok",
    });
    expect(tools.get_balance?.class).toBe("read-only");
    expect(tools.order_status).toMatchObject({ class: "unclear", verdict: "warn" });
  });

  it("reads an MCP tools/list response with annotations", async () => {
    const { code, report } = await auditJson([fixture("audit-mcp-tools-list.json")]);
    expect(code).toBe(1);
    const tools = byName(report);
    expect(tools.send_sms).toMatchObject({ format: "mcp", verdict: "ok" });
    expect(tools.refresh_cache).toMatchObject({ class: "read-only" });
    expect(tools.publishPost).toMatchObject({ class: "side-effectful", verdict: "fail" });
    expect(tools.publishPost?.recommendations.map((r) => r.mechanism)).toEqual(["OP-7"]);
    expect(tools.frobnicate).toMatchObject({ class: "unclear", verdict: "warn" });
  });

  it("suggests idempotool proxy for MCP tools without a key, and only for those", async () => {
    const mcpTools = await cli(["audit", fixture("audit-mcp-tools-list.json")]);
    expect(mcpTools.stdout.trimEnd().split("\n").slice(-2)).toEqual([
      "Did not write this server? Run it behind the proxy: it gives the 2 tools without a key a required " +
        "idempotency_key and dedupes on it, with no change to the server (docs/proxy.md):",
      "  $ idempotool proxy -- <the command that starts the server>",
    ]);
    // Function-calling tools are not an MCP server's, and keyed or ignored tools need no proxy.
    for (const args of [
      [fixture("audit-openai-chat.json")],
      [fixture("audit-all-keyed.json")],
      [fixture("audit-mcp-tools-list.json"), "--ignore", "publishPost,frobnicate"],
    ]) {
      expect((await cli(["audit", ...args])).stdout, args.join(" ")).not.toContain("idempotool proxy");
    }
  });

  it("exits 0 when every side-effectful tool takes a required key", async () => {
    const { code, stdout } = await cli(["audit", fixture("audit-all-keyed.json")]);
    expect(code).toBe(0);
    expect(stdout).toContain("Every side-effectful tool takes an idempotency key");
  });

  it("reads standard input with -", async () => {
    const input = JSON.stringify([{ name: "send_email", inputSchema: { type: "object", properties: {} } }]);
    const { code, report } = await auditJson(["-"], input);
    expect(code).toBe(1);
    expect(report.source).toBe("standard input");
    expect(report.tools[0]?.verdict).toBe("fail");
  });

  it("prints a table with the reasons for failing tools, and the tools to fix", async () => {
    const { code, stdout } = await cli(["audit", fixture("audit-openai-chat.json")]);
    expect(code).toBe(1);
    expect(stdout).toMatch(/send_email\s+side-effect\s+none\s+FAIL\s+OP-8/);
    expect(stdout).toMatch(/get_weather\s+read-only\s+-\s+ok\s+-/);
    expect(stdout).toContain("send_email: side-effectful with no idempotency key");
    expect(stdout).toContain('its name starts with "send", a prefix that always marks a side effect');
    expect(stdout).toContain("1 side-effectful tool takes no idempotency key: send_email.");
  });

  it("fails warnings under --strict, and skips what --ignore names", async () => {
    expect((await cli(["audit", fixture("audit-anthropic.json"), "--ignore", "transfer_funds"])).code).toBe(
      0,
    );
    const strict = await cli([
      "audit",
      fixture("audit-anthropic.json"),
      "--ignore",
      "transfer_funds",
      "--strict",
    ]);
    expect(strict.code).toBe(1);
    expect(strict.stdout).toContain("warned under --strict: order_status");
  });

  it("recommends OP-6 under --layer langgraph", async () => {
    const { report } = await auditJson([fixture("audit-openai-chat.json"), "--layer", "langgraph"]);
    expect(byName(report).send_email?.recommendations[0]?.mechanism).toBe("OP-6");
  });

  it("colours only on a TTY: plain through a pipe, coloured with FORCE_COLOR, plain again with NO_COLOR", async () => {
    const piped = await cli(["audit", fixture("audit-openai-chat.json")]);
    expect(piped.stdout).not.toMatch(ansi);
    const forced = await cli(["audit", fixture("audit-openai-chat.json")], {
      env: { FORCE_COLOR: "1" },
    });
    expect(forced.stdout).toMatch(ansi);
    const refused = await cli(["audit", fixture("audit-openai-chat.json")], {
      env: { FORCE_COLOR: "1", NO_COLOR: "1" },
    });
    expect(refused.stdout).not.toMatch(ansi);
  }, 60_000);
});

describe("idempotool audit when it cannot run: one line, exit 2", () => {
  const oneLine = (stderr: string) => {
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(stderr).not.toMatch(/\n\s+at /);
  };

  it("a missing file", async () => {
    const { code, stderr } = await cli(["audit", "no-such-tools.json"]);
    expect(code).toBe(2);
    expect(stderr).toBe("idempotool: cannot read no-such-tools.json: no such file\n");
  });

  it("a URL where a file belongs", async () => {
    const { code, stderr } = await cli(["audit", "https://example.com/tools.json"]);
    expect(code).toBe(2);
    expect(stderr).toContain("not a URL");
    oneLine(stderr);
  });

  it("a file that is not JSON, or not a tool list", async () => {
    writeFileSync(join(dir, "bad.json"), "{ tools: [");
    writeFileSync(join(dir, "weird.json"), JSON.stringify({ hello: "world" }));
    const bad = await cli(["audit", join(dir, "bad.json")]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("is not JSON");
    oneLine(bad.stderr);
    const weird = await cli(["audit", join(dir, "weird.json")]);
    expect(weird.code).toBe(2);
    expect(weird.stderr).toContain("not a tool list");
    oneLine(weird.stderr);
  });

  it("bad usage: no input, both inputs, an unterminated quote, an unknown option", async () => {
    expect((await cli(["audit"])).code).toBe(2);
    expect((await cli(["audit", "x.json", "--mcp", "server"])).code).toBe(2);
    const quote = await cli(["audit", "--mcp", 'node "server.js']);
    expect(quote.code).toBe(2);
    expect(quote.stderr).toContain("unterminated double quote");
    const option = await cli(["audit", "--frobnicate"]);
    expect(option.code).toBe(2);
    expect(option.stderr).toContain("unknown option '--frobnicate'");
  }, 60_000);
});
