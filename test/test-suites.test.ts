/**
 * The split between `npm test` (no server, no process) and `npm run test:all` (everything): the list of
 * files only the second runs names real test files, and the quick suite's guard stops a file that starts a
 * process or opens a connection to a server, saying where it belongs.
 */
import * as childProcess from "node:child_process";
import { existsSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { needsServerOrProcess } from "../vitest.config.js";
import "./fixtures/unit-guard.js";

const root = join(import.meta.dirname, "..");

describe("npm test and npm run test:all", () => {
  it("lists only test files that exist, once each, as files needing a server or a process", () => {
    expect(needsServerOrProcess.length).toBeGreaterThan(0);
    expect(new Set(needsServerOrProcess).size).toBe(needsServerOrProcess.length);
    for (const file of needsServerOrProcess) {
      expect(file, file).toMatch(/\.test\.ts$/);
      expect(existsSync(join(root, file)), file).toBe(true);
    }
  });

  it("stops a quick-suite file that starts a process, naming the list it belongs in", () => {
    expect(() => childProcess.spawn("node", ["--version"])).toThrow(
      /starts no process.*needsServerOrProcess/,
    );
    expect(() => childProcess.execFileSync("node", ["--version"])).toThrow(/starts no process/);
  });

  it("stops a quick-suite file that connects to PostgreSQL, Redis or MariaDB, and lets others connect", () => {
    for (const [port, server] of [
      [5432, "PostgreSQL"],
      [6379, "Redis"],
      [3306, "MariaDB"],
    ] as const) {
      expect(() => net.connect({ host: "127.0.0.1", port }), server).toThrow(
        new RegExp(`needs no server \\(${server}\\).*needsServerOrProcess`),
      );
    }
    // An in-process server on a port of its own is fine: the HTTP and MCP tests use one.
    const socket = net.connect({ host: "127.0.0.1", port: 9 });
    socket.on("error", () => {});
    socket.destroy();
  });
});
