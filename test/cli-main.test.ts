/**
 * What every command shares: help with examples, exit codes (0 fine, 1 findings, 2 could not run),
 * one line for an error unless --debug, and runCli() for embedding without a child process. In this
 * process; test/cli-bin.test.ts runs the built binary where the process is the point.
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ExitCode, reportError, UsageError } from "../src/cli/errors.js";
import { runCli } from "../src/cli/main.js";
import { IdempotencyError } from "../src/index.js";
import { capturedIo as captured, cli, root } from "./fixtures/cli-binary.js";
import { seededSqlite } from "./fixtures/reconcile-seed.js";

const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;

describe("the command line", () => {
  it.each([[[]], [["audit"]], [["chaos"]], [["demo"]]])(
    "prints help with examples: idempotool %j --help",
    async (command) => {
      const { code, stdout } = await cli([...command, "--help"]);
      expect(code).toBe(0);
      expect(stdout).toContain("Examples:");
      expect(stdout).toContain("$ idempotool");
    },
  );

  it("documents the global --debug flag and the exit codes", async () => {
    const { stdout } = await cli(["--help"]);
    expect(stdout).toContain("--debug");
    expect(stdout).toMatch(/Exit codes: 0 .*; 1 .*\n2 /);
  });

  it.each([
    [["inspekt"], "unknown command 'inspekt' (Did you mean inspect?)", "idempotool"],
    [["inspect", "lst"], "unknown command 'lst' (Did you mean list?)", "idempotool inspect"],
    [["inspect", "list"], "required option '--store <url>' not specified", "idempotool inspect list"],
    [["audit", "--jsn"], "unknown option '--jsn' (Did you mean --json?)", "idempotool audit"],
    [
      ["inspect", "list", "--store", "sqlite://x.db", "--limit", "abc"],
      '--limit must be a positive whole number, not "abc"',
      "idempotool inspect list",
    ],
    [
      ["purge", "--store", "sqlite://x.db", "--batch", "0"],
      '--batch must be a positive whole number, not "0"',
      "idempotool purge",
    ],
    [
      ["chaos", "x.js", "--timeout", "soon"],
      '--timeout must be a whole number of milliseconds from 1 to 2147483647, not "soon"',
      "idempotool chaos",
    ],
    [
      ["inspect", "list", "--store", "sqlite://x.db", "--older-than", "soon"],
      '--older-than must be a duration like 90s, 10m, 2h or 7d, not "soon"',
      "idempotool inspect list",
    ],
    [
      ["inspect", "list", "--store", "sqlite://x.db", "--status", "done"],
      '--status must be one of in_progress, completed, failed, unknown, not "done"',
      "idempotool inspect list",
    ],
    [
      ["proxy", "--without-key", "60001", "--", "node", "server.js"],
      '--without-key must be a whole number of milliseconds from 1 to 60000, not "60001"',
      "idempotool proxy",
    ],
    [
      ["proxy", "--in-progress", "queue", "--", "node", "server.js"],
      '--in-progress must be one of wait, reject, not "queue"',
      "idempotool proxy",
    ],
    [
      ["proxy", "--in-progress", "reject", "--wait", "5000", "--", "node", "server.js"],
      "--wait has no effect with --in-progress reject, which answers at once",
      "idempotool proxy",
    ],
  ])("answers a usage error with one line and exit 2: %j", async (argv, what, command) => {
    const { code, stdout, stderr } = await cli(argv);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toBe(`idempotool: ${what}; see ${command} --help\n`);
  });

  it("reports a bad --table or --prefix as an option error, before reaching for the store", async () => {
    for (const [argv, what, command] of [
      [
        ["inspect", "list", "--store", "sqlite://./idempotool.db", "--table", "bad-name"],
        "--table must be a plain SQL identifier",
        "inspect list",
      ],
      [
        ["purge", "--store", "postgres://postgres@127.0.0.1:1/test", "--table", "bad-name"],
        "--table must be a plain identifier",
        "purge",
      ],
      [
        ["inspect", "list", "--store", "redis://127.0.0.1:1", "--prefix", "agents"],
        '--prefix must be a string ending in ":", got "agents"',
        "inspect list",
      ],
      [
        ["inspect", "list", "--store", "redis://127.0.0.1:1", "--table", "records"],
        "--table is for SQLite, PostgreSQL and DynamoDB; Redis takes --prefix",
        "inspect list",
      ],
    ] as const) {
      const { code, stderr } = await cli([...argv]);
      expect(code, argv.join(" ")).toBe(2);
      expect(stderr, argv.join(" ")).toMatch(
        new RegExp(
          `^idempotool: ${what.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}.*; see idempotool ${command} --help\n$`,
        ),
      );
      expect(stderr, argv.join(" ")).not.toContain("cannot reach");
    }
  });

  it("exits 2 on no command or an unknown one", async () => {
    expect((await cli([])).code).toBe(2);
    const unknown = await cli(["inspekt"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'inspekt'");
  });
});

describe("idempotool --version", () => {
  it.each(["--version", "-V"])("prints package.json's version for %s and exits 0", async (flag) => {
    expect(await cli([flag])).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
  });

  it("is listed in the help", async () => {
    expect((await cli(["--help"])).stdout).toMatch(/-V, --version\s+print idempotool's version/);
  });
});

describe("a package a command needs and cannot find", () => {
  it("gives that advice only through installAdvice(), so every command words it the same", () => {
    const cliSources = join(root, "src", "cli");
    const elsewhere = readdirSync(cliSources)
      .filter((file) => file.endsWith(".ts") && file !== "optional-packages.ts")
      .filter((file) => /npm install/.test(readFileSync(join(cliSources, file), "utf8")));
    expect(elsewhere).toEqual([]);
  });
});

describe("runCli() in process", () => {
  it("returns the exit code and writes where it is told", async () => {
    const io = captured();
    const code = await runCli(
      ["node", "idempotool", "audit", "test/fixtures/audit-all-keyed.json", "--json"],
      io,
    );
    expect(code).toBe(ExitCode.ok);
    expect(JSON.parse(io.out()).ok).toBe(true);
    expect(io.err()).toBe("");
  });

  it("never throws: a usage error is one line and exit 2", async () => {
    const io = captured();
    expect(await runCli(["node", "idempotool", "audit", "missing.json"], io)).toBe(ExitCode.failure);
    expect(io.err()).toBe("idempotool: cannot read missing.json: no such file\n");
  });
});

describe("cli(), which runs the command line in the tests' own process", () => {
  it("fails a run that writes to the console, which a user of the bin would see and its captured output would not", async () => {
    const hooks = join(mkdtempSync(join(tmpdir(), "idempotool-cli-stray-")), "hooks.mjs");
    writeFileSync(hooks, 'console.error("a line of the hooks module");\nexport const tools = {};\n');
    const { url } = await seededSqlite();
    const { error } = console;
    await expect(cli(["reconcile", "--store", url, "--hooks", hooks])).rejects.toThrow(
      /wrote outside the io it was given:\na line of the hooks module\n$/,
    );
    expect(console.error).toBe(error);
  });

  it("sets the environment it is given for the run only", async () => {
    const before = process.env.FORCE_COLOR;
    const coloured = await cli(["audit", "test/fixtures/audit-all-keyed.json"], {
      env: { FORCE_COLOR: "1" },
    });
    expect(coloured.stdout).toContain("\u001b[");
    expect(process.env.FORCE_COLOR).toBe(before);
  });
});

describe("reportError", () => {
  const report = (error: unknown, debug = false) => {
    let text = "";
    const code = reportError(error, debug, (t) => {
      text += t;
    });
    return { code, text };
  };

  it("prints an IdempotencyError with its code on one line", () => {
    const { code, text } = report(
      new IdempotencyError(
        "store_unavailable",
        "The idempotency store failed during claim.\nThe tool did not run.",
      ),
    );
    expect(code).toBe(2);
    expect(text).toBe(
      "idempotool: store_unavailable: The idempotency store failed during claim. The tool did not run.\n",
    );
  });

  it("prints a usage error without a code, and an unexpected error with a hint at --debug", () => {
    expect(report(new UsageError("no such file")).text).toBe("idempotool: no such file\n");
    expect(report(new TypeError("x is undefined")).text).toBe(
      "idempotool: x is undefined (run with --debug for the stack trace)\n",
    );
  });

  it("prints the stack and the causes under --debug", () => {
    const { text } = report(new UsageError("outer", { cause: new Error("inner") }), true);
    expect(text).toContain("UsageError: outer");
    expect(text).toContain("Caused by:");
    expect(text).toContain("Error: inner");
  });
});
