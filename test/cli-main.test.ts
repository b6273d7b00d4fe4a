/**
 * What every command shares: help with examples, exit codes (0 fine, 1 findings, 2 could not run),
 * one line for an error unless --debug, and runCli() for embedding without a child process.
 */
import { Writable } from "node:stream";
import { beforeAll, describe, expect, it } from "vitest";
import { ExitCode, reportError, UsageError } from "../src/cli/errors.js";
import { type CliIo, runCli } from "../src/cli/main.js";
import { IdempotencyError } from "../src/index.js";
import { ensureBuilt, idempotool } from "./fixtures/cli-binary.js";

function captured(): CliIo & { out: () => string; err: () => string } {
  let out = "";
  let err = "";
  const sink = (append: (text: string) => void) =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        append(chunk.toString());
        done();
      },
    });
  return {
    stdout: sink((text) => {
      out += text;
    }),
    stderr: sink((text) => {
      err += text;
    }),
    out: () => out,
    err: () => err,
  };
}

describe("the built binary", () => {
  beforeAll(ensureBuilt, 180_000);

  it.each([[[]], [["audit"]], [["chaos"]], [["demo"]]])(
    "prints help with examples: idempotool %j --help",
    async (command) => {
      const { code, stdout } = await idempotool([...command, "--help"]);
      expect(code).toBe(0);
      expect(stdout).toContain("Examples:");
      expect(stdout).toContain("$ idempotool");
    },
  );

  it("documents the global --debug flag and the exit codes", async () => {
    const { stdout } = await idempotool(["--help"]);
    expect(stdout).toContain("--debug");
    expect(stdout).toMatch(/Exit codes: 0 .*; 1 .*\n2 /);
  });

  it("exits 2 on no command or an unknown one", async () => {
    expect((await idempotool([])).code).toBe(2);
    const unknown = await idempotool(["inspekt"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'inspekt'");
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
