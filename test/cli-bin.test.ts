/**
 * The built binary, spawned as users run it, where the process is the point: the bin's entry and its exit
 * codes, --version read from dist/, standard input and output through pipes, a Node hook that hides a
 * package from the whole process. One smoke test per command; every other case runs in process, through
 * cli() (test/cli-<command>.test.ts). The proxy, whose stdio is the MCP connection, is spawned in
 * test/cli-proxy*.test.ts; the demo, whose crash row needs a process, in test/demo-integrations.test.ts.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import type { AuditReport } from "../src/audit/index.js";
import { installAdvice, needsPackages } from "../src/cli/optional-packages.js";
import { ansi, ensureBuilt, idempotool, root } from "./fixtures/cli-binary.js";
import { seededSqlite } from "./fixtures/reconcile-seed.js";

const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;
const hooks = join(import.meta.dirname, "fixtures", "reconcile-hooks.mjs");
const chaosTools = "test/fixtures/chaos-send-email.ts";
const chaosArgs = ["--args", JSON.stringify({ to: "alice@example.com", subject: "Minutes" })];

beforeAll(ensureBuilt, 180_000);

describe("the built binary", () => {
  it("prints package.json's version for -V, read from the built dist/ as from the sources", async () => {
    const { code, stdout, stderr } = await idempotool(["-V"]);
    expect({ code, stdout, stderr }).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
  });

  it("exits 2 on no command or an unknown one", async () => {
    expect((await idempotool([])).code).toBe(2);
    const unknown = await idempotool(["inspekt"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'inspekt'");
  });
});

describe("idempotool audit, spawned", () => {
  it("reads standard input with -", async () => {
    const input = JSON.stringify([{ name: "send_email", inputSchema: { type: "object", properties: {} } }]);
    const { code, stdout } = await idempotool(["audit", "-", "--json"], { input });
    const report = JSON.parse(stdout) as AuditReport & { source: string };
    expect(code).toBe(1);
    expect(report.source).toBe("standard input");
    expect(report.tools[0]?.verdict).toBe("fail");
  });
});

describe("idempotool chaos, spawned (TypeScript through tsx, a SIGKILLed child)", () => {
  it("finds double effects in a plain send_email under every source and exits 1", async () => {
    const { code, stdout, stderr } = await idempotool([
      "chaos",
      `${chaosTools}#unsafeSendEmail`,
      ...chaosArgs,
    ]);
    expect(code, stderr).toBe(1);
    expect(stdout).toContain("idempotool chaos: sendEmail (a plain function)");
    for (const title of [
      "transport retry after success",
      "framework resume with the same key",
      "duplicate emission, two concurrent calls",
      "user retry while the first call runs",
      "SIGKILL after the effect, then a retry",
    ]) {
      expect(stdout).toMatch(new RegExp(`${title}\\s+2\\s+DOUBLE EFFECT`));
    }
    expect(stdout).toContain("5 of 5 repeat sources produced a double effect");
    expect(stdout).toContain("Wrap the tool with idempotent()");
    // Progress per source goes to stderr, one line each when not on a TTY.
    expect(stderr).toContain("[1/5] transport retry after success …");
    expect(stderr).toContain("[5/5] SIGKILL after the effect, then a retry …");
  }, 90_000);
});

describe("idempotool inspect, spawned", () => {
  it("lists every record as a plain table without colour when piped", async () => {
    const { url } = await seededSqlite();
    const { code, stdout } = await idempotool(["inspect", "list", "--store", url]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^scope\s+key\s+tool\s+status/);
    expect(stdout).toContain("turn-4-stale");
    expect(stdout).toContain("stale: lease passed");
    expect(stdout).toContain("7 records");
    expect(stdout).not.toMatch(ansi);
  });
});

describe("idempotool purge, spawned", () => {
  it("removes the expired records in batches, with a line per batch when piped, and keeps the live ones", async () => {
    const { url } = await seededSqlite({ expired: 25 });
    const { code, stdout, stderr } = await idempotool(["purge", "--store", url, "--batch", "10"]);
    expect(code).toBe(0);
    expect(stdout).toContain("25 expired records removed in 4 batches");
    expect(stderr.trim().split("\n")).toEqual([
      "purge: batch 1 removed 10 (10 in all)",
      "purge: batch 2 removed 10 (20 in all)",
      "purge: batch 3 removed 5 (25 in all)",
      "purge: batch 4 removed 0 (25 in all)",
    ]);
    const left = await idempotool(["inspect", "list", "--store", url, "--json"]);
    expect(JSON.parse(left.stdout)).toHaveLength(7);
    const again = await idempotool(["purge", "--store", url, "--json"]);
    expect(JSON.parse(again.stdout)).toEqual({ deleted: 0, batches: 1 });
  });
});

describe("idempotool reconcile, spawned", () => {
  it("exits 1 when records need review", async () => {
    const { url } = await seededSqlite();
    const { code, stdout } = await idempotool([
      "reconcile",
      "--store",
      url,
      "--hooks",
      hooks,
      "--tool",
      "charge_card",
    ]);
    expect(code).toBe(0);
    expect(stdout).toContain("0 examined");
    const other = await seededSqlite();
    const flagged = await idempotool([
      "reconcile",
      "--store",
      other.url,
      "--hooks",
      join(import.meta.dirname, "fixtures", "reconcile-hooks-unsure.mjs"),
    ]);
    expect(flagged.code).toBe(1);
    expect(flagged.stdout).toContain("2 need review");
  });
});

describe("idempotool review and resolve, spawned", () => {
  it("exits 1 while records need a person, and refuses to free a key with no terminal to confirm on", async () => {
    const { url } = await seededSqlite();
    const review = await idempotool(["review", "--store", url, "--json"]);
    expect(review.code, review.stderr).toBe(1);
    expect((JSON.parse(review.stdout) as { items: { key: string }[] }).items.map((item) => item.key)).toEqual(
      ["turn-4-stale", "turn-3-carol"],
    );
    const args = [
      "resolve",
      "default",
      "turn-3-carol",
      "--store",
      url,
      "--as",
      "not-executed",
      "--evidence",
      "not sent",
    ];
    const refused = await idempotool(args);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("standard input is not a terminal: nothing was changed");
    const freed = await idempotool([...args, "--yes", "--by", "ops"]);
    expect(freed.code, freed.stderr).toBe(0);
    expect(freed.stdout).toContain("Resolved default/turn-3-carol (send_email) as not-executed");
    const after = await idempotool(["review", "--store", url, "--json"]);
    expect((JSON.parse(after.stdout) as { total: number }).total).toBe(1);
  });
});

describe("a package a command needs and cannot find", () => {
  let dir: string;
  let hook: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "idempotool-cli-missing-"));
    // Each package named in IDEMPOTOOL_HIDE_PACKAGES is looked up from a folder with no node_modules, so
    // Node's own "Cannot find package" error is what the command sees, as where it is not installed.
    const resolveHook = join(dir, "hide-packages.mjs");
    writeFileSync(
      resolveHook,
      [
        'const hidden = (process.env.IDEMPOTOOL_HIDE_PACKAGES ?? "").split(",");',
        "export async function resolve(specifier, context, next) {",
        '  if (hidden.some((name) => specifier === name || specifier.startsWith(name + "/"))) {',
        `    return next(specifier, { ...context, parentURL: ${JSON.stringify(pathToFileURL(join(dir, "x.js")).href)} });`,
        "  }",
        "  return next(specifier, context);",
        "}",
      ].join("\n"),
    );
    hook = join(dir, "register.mjs");
    writeFileSync(
      hook,
      `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(resolveHook).href)});\n`,
    );
  });

  const without = (packages: string, args: readonly string[], env: Record<string, string> = {}) =>
    idempotool(args, {
      nodeArgs: ["--import", pathToFileURL(hook).href],
      env: { IDEMPOTOOL_HIDE_PACKAGES: packages, ...env },
    });

  it.each([
    [
      "@modelcontextprotocol/sdk",
      ["audit", "--mcp", "node server.js"],
      "idempotool audit --mcp needs @modelcontextprotocol/sdk; install @modelcontextprotocol/sdk beside idempotool: npm install @modelcontextprotocol/sdk",
    ],
    [
      "pg",
      ["inspect", "list", "--store", "postgres://postgres@127.0.0.1:1/test"],
      "a postgres:// store needs pg; install pg beside idempotool: npm install pg",
    ],
    [
      "ioredis",
      ["inspect", "list", "--store", "redis://127.0.0.1:1"],
      "a redis:// store needs ioredis; install ioredis beside idempotool: npm install ioredis",
    ],
    [
      "@aws-sdk/client-dynamodb",
      ["inspect", "list", "--store", "dynamodb://records?region=us-east-1"],
      "a dynamodb:// store needs @aws-sdk/client-dynamodb; install @aws-sdk/client-dynamodb beside idempotool: npm install @aws-sdk/client-dynamodb",
    ],
  ] as const)("says how to install %s in one wording: %j", async (packages, args, message) => {
    const { code, stdout, stderr } = await without(packages, args);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toBe(`idempotool: ${message}\n`);
    expect(message).toContain(installAdvice([packages]));
  });

  it("makes nothing before: a proxy without @modelcontextprotocol/sdk leaves no SQLite file or folder", async () => {
    const state = join(dir, "state");
    const { code, stderr } = await without(
      "@modelcontextprotocol/sdk",
      ["proxy", "--", "node", "server.js"],
      {
        XDG_STATE_HOME: state,
      },
    );
    expect(code).toBe(2);
    expect(stderr).toBe(`idempotool: ${needsPackages("idempotool proxy", ["@modelcontextprotocol/sdk"])}\n`);
    expect(
      existsSync(state),
      `${state} holds ${existsSync(state) ? readdirSync(state, { recursive: true }) : ""}`,
    ).toBe(false);
  });
});

describe("the command line on SQLite, as docs/cli.md says", () => {
  // This Node's node:sqlite is what every command opens SQLite with: better-sqlite3 made unloadable
  // (as where it is not installed) changes nothing. npm run test:all runs this on each Node the package claims.
  it("needs no better-sqlite3: the record commands run with it unloadable", async () => {
    const { url } = await seededSqlite({ expired: 2 });
    const hidden = {
      nodeArgs: ["--require", join(root, "test", "fixtures", "without-sqlite-drivers.cjs")],
      env: { IDEMPOTOOL_HIDE_SQLITE_DRIVERS: "better-sqlite3" },
    };
    const list = await idempotool(["inspect", "list", "--store", url, "--json"], hidden);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toHaveLength(9);
    const purge = await idempotool(["purge", "--store", url, "--json"], hidden);
    expect(purge.code, purge.stderr).toBe(0);
    expect(JSON.parse(purge.stdout)).toMatchObject({ deleted: 2 });
    // The hiding works: with node:sqlite hidden too, there is no driver left.
    const neither = await idempotool(["inspect", "list", "--store", url], {
      ...hidden,
      env: { IDEMPOTOOL_HIDE_SQLITE_DRIVERS: "better-sqlite3,node:sqlite" },
    });
    expect(neither.code).toBe(2);
    expect(neither.stderr).toContain("needs a SQLite driver");
  });
});
