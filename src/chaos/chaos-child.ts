/**
 * The crash source's child process: load the tool as the harness did, on the same SQLite file, and call
 * it once. The probe kills this process right after the effect, before the record is settled; exiting
 * on its own means the tool never called the probe (0) or threw first (3). 2: it could not load.
 * Usage: chaos-child <config-json>
 */
import { sqliteStore } from "../sqlite/index.js";
import { importTarget, instantiate } from "./chaos-module.js";
import { chaosProbeFileEnv, probeFor } from "./chaos-probe.js";
import type { ChildConfig } from "./chaos-sources.js";

const config = JSON.parse(process.argv[2] ?? "{}") as ChildConfig;
const probeFile = process.env[chaosProbeFileEnv];
let call: (() => Promise<unknown>) | undefined;
try {
  if (!probeFile) throw new Error(`${chaosProbeFileEnv} is not set`);
  const target = await importTarget(config.module, config.cwd);
  const store = sqliteStore({ path: config.storePath });
  const tool = await instantiate(
    target,
    { store, probe: probeFor(probeFile), leaseMs: config.leaseMs },
    "tool",
  );
  call = () => tool.call(config.args, { key: config.key, scope: config.scope });
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(2);
}
try {
  await call();
  process.exit(0);
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(3);
}
