/**
 * scripts/node.sh --with-better-sqlite3, on a sandbox copy of the repository whose better-sqlite3 is a tiny
 * native addon of the same name: where the build is kept, and that nothing of it is left behind.
 */
import { execFile } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

const sandboxes: string[] = [];
afterEach(() => {
  for (const dir of sandboxes.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A repository with only scripts/node.sh and a better-sqlite3 that builds in a few seconds. */
function sandbox(): { repo: string; cache: string; temp: string } {
  const dir = mkdtempSync(join(tmpdir(), "idempotool-node-sh-"));
  sandboxes.push(dir);
  const repo = join(dir, "repo");
  const module = join(repo, "node_modules", "better-sqlite3");
  mkdirSync(join(repo, "scripts"), { recursive: true });
  mkdirSync(join(module, "src"), { recursive: true });
  copyFileSync(join(root, "scripts", "node.sh"), join(repo, "scripts", "node.sh"));
  writeFileSync(
    join(module, "package.json"),
    JSON.stringify({ name: "better-sqlite3", version: "0.0.0-node-sh" }),
  );
  writeFileSync(
    join(module, "binding.gyp"),
    JSON.stringify({ targets: [{ target_name: "better_sqlite3", sources: ["src/addon.c"] }] }),
  );
  writeFileSync(
    join(module, "src", "addon.c"),
    "#include <node_api.h>\n" +
      "static napi_value init(napi_env env, napi_value exports) { return exports; }\n" +
      "NAPI_MODULE(NODE_GYP_MODULE_NAME, init)\n",
  );
  const temp = join(dir, "tmp");
  mkdirSync(temp);
  return { repo, cache: join(dir, "cache"), temp };
}

describe("scripts/node.sh --with-better-sqlite3", () => {
  it("builds the addon once per ABI, keeps it where the package's loader looks, and leaves no temporary files", async () => {
    // The Node 24 that node.sh installs (into the real cache, the first time), lent to the sandbox's cache.
    const node = (await run(join(root, "scripts", "node.sh"), ["24", "--path"])).stdout.trim();
    const { repo, cache, temp } = sandbox();
    mkdirSync(cache);
    symlinkSync(dirname(dirname(dirname(dirname(node)))), join(cache, "node24"));
    const env = { ...process.env, IDEMPOTOOL_CACHE_DIR: cache, TMPDIR: temp };
    const script = join(repo, "scripts", "node.sh");

    const abi = (
      await run(script, ["24", "--with-better-sqlite3", "-p", "process.versions.modules"], { env })
    ).stdout.trim();
    const binding = `node-v${abi}-${process.platform}-${process.arch}`;
    const built = join(
      repo,
      "node_modules",
      "better-sqlite3",
      "lib",
      "binding",
      binding,
      "better_sqlite3.node",
    );
    expect(existsSync(built)).toBe(true);
    expect(existsSync(join(cache, "better-sqlite3", "0.0.0-node-sh", binding, "better_sqlite3.node"))).toBe(
      true,
    );
    // The build's working copy (a copy of the whole package, SQLite's sources included) is removed.
    expect(readdirSync(temp)).toEqual([]);

    // It loads in the Node it was built for.
    const loaded = await run(
      script,
      [
        "24",
        "--with-better-sqlite3",
        "-e",
        `process.dlopen({ exports: {} }, ${JSON.stringify(built)}); console.log("loaded")`,
      ],
      { env },
    );
    expect(loaded.stdout.trim()).toBe("loaded");
  }, 120_000);
});
