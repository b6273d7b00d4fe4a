/**
 * idempotool beside the current stack: an empty project that already holds the latest release of every
 * optional peer installs the packed tarball with a plain `npm install` (no --force, no
 * --legacy-peer-deps), and a counted repeat runs there through the AI SDK, node-redis and @ai-sdk/mcp
 * integrations (test/peers-app/counted-repeats.mjs). Needs the npm registry (or npm's cache) and Redis.
 */
import { execFile } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import semver from "semver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  version: string;
  peerDependencies: Record<string, string>;
};

let work: string;
let app: string;
let installLog: string;

beforeAll(async () => {
  if (!existsSync(join(root, "dist/index.js")))
    throw new Error("dist/ is missing: run `npm run build` first");
  work = mkdtempSync(join(tmpdir(), "idempotool-peers-"));
  const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", work], { cwd: root });
  const tarball = join(work, (JSON.parse(stdout) as { filename: string }[])[0]!.filename);
  app = join(work, "app");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  const quiet = ["--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"];
  // First the user's stack: the latest of every peer (and the MCP SDK the server side needs).
  const peers = Object.keys(pkg.peerDependencies).map((name) => `${name}@latest`);
  await run("npm", ["install", ...peers, ...quiet], { cwd: app, maxBuffer: 16 << 20 });
  // Then idempotool beside it, as a user adds it.
  const added = await run("npm", ["install", tarball, ...quiet], { cwd: app, maxBuffer: 16 << 20 });
  installLog = added.stdout + added.stderr;
  copyFileSync(join(import.meta.dirname, "peers-app/counted-repeats.mjs"), join(app, "counted-repeats.mjs"));
}, 600_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
}, 120_000);

describe("idempotool installed beside the latest release of every peer", () => {
  it("installs with a plain npm install, and every peer installed is inside idempotool's range", () => {
    expect(installLog).not.toMatch(/ERESOLVE|Could not resolve|conflicting peer/i);
    for (const [name, range] of Object.entries(pkg.peerDependencies)) {
      const installed = JSON.parse(readFileSync(join(app, "node_modules", name, "package.json"), "utf8")) as {
        version: string;
      };
      expect(semver.satisfies(installed.version, range), `${name}@${installed.version} in "${range}"`).toBe(
        true,
      );
    }
  });

  it("runs one counted repeat through the AI SDK, node-redis and @ai-sdk/mcp: each effect once", async () => {
    const { stdout } = await run(process.execPath, ["counted-repeats.mjs"], { cwd: app });
    const ran = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
      versions: Record<string, string>;
      sent: number;
      charges: number;
      emails: number;
    };
    expect(ran).toMatchObject({ sent: 1, charges: 1, emails: 1 });
    expect(ran.versions.idempotool).toBe(pkg.version);
    // The project holds the registry's latest majors, which is what this file is for.
    for (const name of ["ai", "redis", "@ai-sdk/mcp"]) {
      const installed = JSON.parse(readFileSync(join(app, "node_modules", name, "package.json"), "utf8")) as {
        version: string;
      };
      expect(ran.versions[name], name).toBe(installed.version);
    }
  });
});
