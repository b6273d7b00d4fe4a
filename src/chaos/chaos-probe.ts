/**
 * The counting probe of `chaos()`: the tool under test calls it where its effect happens, and every
 * call appends one line to a file, so effects are counted across processes (the crash source kills a
 * child right after its probe, before the record is settled).
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";

/** The probe file's path, set by the harness for the tool's process. */
export const chaosProbeFileEnv = "IDEMPOTOOL_CHAOS_PROBE";
/** Set in the crash child: the probe kills its process right after recording the effect. */
export const chaosKillEnv = "IDEMPOTOOL_CHAOS_KILL_AFTER_EFFECT";

type Listener = () => void;
// Kept on globalThis so two copies of this module (built and source) notify the same harness.
const listenersKey = Symbol.for("idempotool.chaos.probeListeners");
const globals = globalThis as { [listenersKey]?: Set<Listener> };

/**
 * Count one effect of the tool under test. Call it exactly where the effect happens (the email left,
 * the row was written), once per effect; for a downstream that dedupes by key (OP-1), behind its dedupe.
 * Outside a `chaos()` run it does nothing, so it may stay in the tool.
 * @example
 * import { chaosProbe } from "idempotool/chaos";
 *
 * async function sendEmail(args: { to: string }) {
 *   const id = await mailer.send(args); // the effect
 *   chaosProbe({ to: args.to });
 *   return id;
 * }
 */
export function chaosProbe(detail?: unknown): void {
  const file = process.env[chaosProbeFileEnv];
  if (file) recordEffect(file, detail);
}

/** A probe bound to one file, for the factory's `ctx.probe`. */
export function probeFor(file: string): (detail?: unknown) => void {
  return (detail?: unknown) => recordEffect(file, detail);
}

function recordEffect(file: string, detail: unknown): void {
  appendFileSync(file, `${JSON.stringify({ pid: process.pid, at: Date.now(), detail: jsonable(detail) })}\n`);
  for (const listener of globals[listenersKey] ?? []) listener();
  if (process.env[chaosKillEnv] === "1") process.kill(process.pid, "SIGKILL");
}

function jsonable(detail: unknown): unknown {
  try {
    JSON.stringify(detail);
    return detail;
  } catch {
    return String(detail);
  }
}

/** How many effects the probe file holds. */
export function countEffects(file: string): number {
  if (!existsSync(file)) return 0;
  return readFileSync(file, "utf8").split("\n").filter(Boolean).length;
}

/** Run `listener` after every effect recorded in this process, until the returned function is called. */
export function onEffect(listener: Listener): () => void {
  globals[listenersKey] ??= new Set();
  const listeners = globals[listenersKey];
  listeners.add(listener);
  return () => listeners.delete(listener);
}
