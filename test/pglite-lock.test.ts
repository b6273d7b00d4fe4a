/**
 * The lock on a PGlite data directory across processes: a child process holds the directory, and this one is
 * refused, by the store or, before anything is opened, by lockPGliteDirectory.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { afterAll, describe, expect, it } from "vitest";
import { isIdempotencyError } from "../src/index.js";
import { lockPGliteDirectory, postgresStore } from "../src/postgres/index.js";
import { countedTool, rejection } from "./fixtures/tools.js";

const instances: PGlite[] = [];
const directories: string[] = [];
/** A PGlite in `dataDir`; closed after the file. */
function testPGlite(options: ConstructorParameters<typeof PGlite>[0] = {}): PGlite {
  const pglite = new PGlite(options);
  instances.push(pglite);
  return pglite;
}
afterAll(async () => {
  await Promise.all(instances.filter((pglite) => !pglite.closed).map((pglite) => pglite.close()));
  for (const directory of directories) rmSync(directory, { recursive: true, force: true });
});

const sendEmail = (client: PGlite) => countedTool(postgresStore({ client }));

/**
 * A child process that runs `script` (ES module source, given `PGlite`, `idempotent`, `lockPGliteDirectory`,
 * `postgresStore` and `once`) and says "held" once it holds `directory`; resolves once it has said so, and
 * fails if it exits first.
 */
async function holdingChild(script: string): Promise<ChildProcess> {
  const postgres = fileURLToPath(new URL("../src/postgres/index.ts", import.meta.url));
  const core = fileURLToPath(new URL("../src/index.ts", import.meta.url));
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      "--input-type=module",
      "-e",
      `import { once } from "node:events";
       import { PGlite } from "@electric-sql/pglite";
       import { idempotent } from ${JSON.stringify(core)};
       import { lockPGliteDirectory, postgresStore } from ${JSON.stringify(postgres)};
       ${script}`,
    ],
    { stdio: ["pipe", "pipe", "inherit"], cwd: fileURLToPath(new URL("..", import.meta.url)) },
  );
  // Its output, or its exit if it could not hold the directory.
  const answer = await Promise.race([
    once(child.stdout!.setEncoding("utf8"), "data").then(([line]) => line as string),
    once(child, "exit").then(([code]) => `exited with ${String(code)}`),
  ]);
  if (answer !== "held\n") child.kill("SIGKILL");
  expect(answer).toBe("held\n");
  return child;
}

describe("a PGlite data directory another process holds", () => {
  it("refuses an instance while another process holds the directory; once that process is gone, a new one runs", async () => {
    const directory = mkdtempSync(join(tmpdir(), "idempotool-pglite-lock-"));
    directories.push(directory);
    // A process that holds the directory: one call, then it waits until killed.
    const child = await holdingChild(
      `const tool = idempotent(async () => "sent", { name: "send_email", store: postgresStore({ client: new PGlite(${JSON.stringify(directory)}) }) });
       await tool({}, { key: "in-child" });
       process.stdout.write("held\\n");
       setInterval(() => {}, 1_000);`,
    );
    try {
      const refused = sendEmail(testPGlite({ dataDir: directory }));
      const error = await rejection(refused.tool({ n: 1 }, { key: "k" }));
      expect(isIdempotencyError(error, "store_unavailable")).toBe(true);
      expect((error as Error).message).toContain("is open in another process");
      expect(refused.runs()).toBe(0);
    } finally {
      child.kill("SIGKILL");
      await once(child, "exit");
    }
    // The operating system dropped the dead process's lock.
    const after = sendEmail(testPGlite({ dataDir: directory }));
    expect(await after.tool({ n: 2 }, { key: "after" })).toMatchObject({ was_replay: false });
    expect(after.runs()).toBe(1);
  }, 240_000);

  it("refuses, with nothing opened, a directory another process holds; that process loses nothing", async () => {
    const directory = mkdtempSync(join(tmpdir(), "idempotool-pglite-lock-first-"));
    directories.push(directory);
    // Records k1, says so, records k2 once told to, then closes its instance and exits.
    const child = await holdingChild(
      `await lockPGliteDirectory(${JSON.stringify(directory)});
       const pglite = new PGlite(${JSON.stringify(directory)});
       const tool = idempotent(async () => "sent", { name: "send_email", store: postgresStore({ client: pglite }) });
       await tool({}, { key: "k1" });
       process.stdout.write("held\\n");
       await once(process.stdin, "data");
       await tool({}, { key: "k2" });
       await pglite.close();
       process.exit(0);`,
    );
    try {
      await expect(lockPGliteDirectory(directory)).rejects.toThrow(/is open in another process/);
      child.stdin!.write("go\n");
      const [code] = (await once(child, "exit")) as [number | null];
      expect(code).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
    // The child's lock went with it: this process may open the directory now, and finds both records.
    await lockPGliteDirectory(directory);
    const reader = testPGlite({ dataDir: directory });
    const { rows } = await reader.query<{ key: string }>("SELECT key FROM idempotool_records ORDER BY key");
    expect(rows.map((row) => row.key)).toEqual(["k1", "k2"]);
    // The lock this process took passes to the store of the instance it opened.
    const { tool, runs } = countedTool(postgresStore({ client: reader }));
    expect(await tool({ n: 3 }, { key: "k3" })).toMatchObject({ was_replay: false });
    expect(runs()).toBe(1);
  }, 240_000);
});
