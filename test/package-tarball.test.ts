/**
 * The package as npm ships it: the tarball `npm pack` makes from the built package, unpacked and
 * installed into an empty project beside nothing but its own dependencies (no optional peer).
 * One pack and one install serve every test in this file.
 */
import { execFile } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

interface PackResult {
  readonly filename: string;
  readonly files: readonly { readonly path: string }[];
}

let work: string;
let packed: PackResult;
/** The tarball's `package/` folder, unpacked. */
let unpacked: string;
/** An empty project with the tarball installed. */
let app: string;

beforeAll(async () => {
  if (!existsSync(join(root, "dist/index.js")))
    throw new Error("dist/ is missing: run `npm run build` first");
  work = mkdtempSync(join(tmpdir(), "idempotool-tarball-"));
  const { stdout } = await run(npm, ["pack", "--json", "--pack-destination", work], { cwd: root });
  packed = (JSON.parse(stdout) as PackResult[])[0]!;
  const tarball = join(work, packed.filename);

  await run("tar", ["-xzf", tarball, "-C", work]);
  unpacked = join(work, "package");

  app = join(work, "app");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  // The package's own dependencies come from npm's cache when it has them; optional peers are not installed.
  await run(npm, ["install", tarball, "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], {
    cwd: app,
  });
}, 300_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Run an ES module script in the app project; never throws, so a test can read a failure. */
async function runInApp(script: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ["--input-type=module", "-e", script], {
      cwd: app,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? 1, stdout: failed.stdout ?? "", stderr: failed.stderr ?? "" };
  }
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

describe("the packed tarball", () => {
  it("carries the MIT license package.json names", () => {
    expect(packed.files.map((file) => file.path)).toContain("LICENSE");
    const license = readFileSync(join(unpacked, "LICENSE"), "utf8");
    expect(license).toMatch(/^MIT License\n\nCopyright \(c\) 2026 the idempotool authors\n/);
    const manifest = JSON.parse(readFileSync(join(unpacked, "package.json"), "utf8")) as { license: string };
    expect(manifest.license).toBe("MIT");
  });

  it("ships no source map that points at a file the tarball lacks: each carries its sources", () => {
    const maps = filesUnder(unpacked).filter((path) => path.endsWith(".map"));
    expect(maps.length).toBeGreaterThan(0);
    const broken: string[] = [];
    for (const path of maps) {
      const map = JSON.parse(readFileSync(path, "utf8")) as { sources: string[]; sourcesContent?: unknown[] };
      map.sources.forEach((source, i) => {
        const carried = typeof map.sourcesContent?.[i] === "string";
        if (!carried && !existsSync(resolve(dirname(path), source))) broken.push(`${path}: ${source}`);
      });
    }
    expect(broken).toEqual([]);
  });

  it("links, in the README and docs it ships, only to files it ships", () => {
    const shipped = filesUnder(unpacked).filter((path) => path.endsWith(".md"));
    const broken: string[] = [];
    for (const path of shipped) {
      const prose = readFileSync(path, "utf8").replace(/^```[\s\S]*?^```/gm, "");
      for (const [, target] of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target!) || target!.startsWith("#")) continue;
        if (!existsSync(resolve(dirname(path), target!.split("#")[0]!))) {
          broken.push(`${path.slice(unpacked.length + 1)} → ${target}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it("installs into an empty project whose import of idempotool runs a tool once and replays it", async () => {
    const result = await runInApp(`
      import { idempotent, memoryStore } from "idempotool";
      let sent = 0;
      const send = idempotent(async () => ({ n: ++sent }), { name: "send", store: memoryStore() });
      await send({}, { key: "k" });
      const again = await send({}, { key: "k" });
      console.log(JSON.stringify({ sent, wasReplay: again.was_replay }));
    `);
    expect(result.stderr).toBe("");
    expect(JSON.parse(result.stdout)).toEqual({ sent: 1, wasReplay: true });
  });

  it('fails `import "idempotool/otel"` without @opentelemetry/api in one line that names what to install', async () => {
    expect(existsSync(join(app, "node_modules/@opentelemetry/api"))).toBe(false);

    const caught = await runInApp(`
      try { await import("idempotool/otel"); console.log("loaded"); }
      catch (error) { console.log(JSON.stringify(error.message)); }
    `);
    const message = JSON.parse(caught.stdout) as string;
    expect(message).not.toContain("\n");
    expect(message).toContain("npm install @opentelemetry/api");

    // Uncaught, as a user's app meets it: Node prints that line and exits non-zero.
    const uncaught = await runInApp(`import "idempotool/otel";`);
    expect(uncaught.code).not.toBe(0);
    expect(uncaught.stderr).toContain(`Error: ${message}`);
    expect(uncaught.stderr).not.toContain("ERR_MODULE_NOT_FOUND");
  });
});
