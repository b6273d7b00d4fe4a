/** The machine and the versions a run measured, recorded beside its figures. */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";

const require = createRequire(import.meta.url);

function packageVersion(name: string, from?: string): string {
  const options = from ? { paths: [from] } : undefined;
  let file: string | undefined;
  try {
    file = require.resolve(`${name}/package.json`, options);
  } catch {
    // Its exports map hides package.json: find it above the entry point instead.
    try {
      let dir = path.dirname(require.resolve(name, options));
      while (dir !== path.dirname(dir) && file === undefined) {
        const candidate = path.join(dir, "package.json");
        if (
          existsSync(candidate) &&
          (JSON.parse(readFileSync(candidate, "utf8")) as { name?: string }).name === name
        ) {
          file = candidate;
        }
        dir = path.dirname(dir);
      }
    } catch {
      return "?";
    }
  }
  return file === undefined ? "?" : (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
}

export interface Machine {
  readonly node: string;
  readonly cpu: string;
  readonly cores: number;
  readonly platform: string;
  readonly loadAverage: readonly number[];
  readonly versions: Readonly<Record<string, string>>;
}

export function machine(root: string): Machine {
  let cpu = os.cpus()[0]?.model ?? "?";
  try {
    cpu = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpu;
  } catch {
    // not Linux: os.cpus() it is
  }
  const nodeIdempotencyRedis = path.dirname(
    require.resolve("@node-idempotency/storage-adapter-redis/package.json"),
  );
  return {
    node: process.version,
    cpu,
    cores: os.cpus().length,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    loadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100),
    versions: {
      idempotool: (JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { version: string })
        .version,
      "@aws-lambda-powertools/idempotency": packageVersion("@aws-lambda-powertools/idempotency"),
      "@node-idempotency/core": packageVersion("@node-idempotency/core"),
      "@node-idempotency/storage-adapter-memory": packageVersion("@node-idempotency/storage-adapter-memory"),
      "@node-idempotency/storage-adapter-redis": packageVersion("@node-idempotency/storage-adapter-redis"),
      "redis (node-redis, used by that adapter)": packageVersion("redis", nodeIdempotencyRedis),
      "better-sqlite3": packageVersion("better-sqlite3"),
      pg: packageVersion("pg"),
      ioredis: packageVersion("ioredis"),
    },
  };
}
