/**
 * Reads a V8 .cpuprofile and says where the time went: self time per category (by the file and function a
 * sample landed in) and the functions with the most self time. The categories are what issue 7 asks about.
 */
import { table } from "./report.js";

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
}
export interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  readonly startTime: number;
  readonly endTime: number;
}

/** Which part of the work a frame belongs to. */
export function categoryOf(frame: CallFrame): string {
  const { url, functionName: fn } = frame;
  const file = url.slice(url.lastIndexOf("/") + 1);
  if (fn === "(garbage collector)") return "GC";
  if (fn === "(program)" || fn === "(idle)" || fn === "(root)") return "engine (program, idle)";
  if (file === "canonical-json.js") return "canonical JSON (RFC 8785)";
  if (file === "fingerprint.js" || url === "node:internal/crypto/hash" || fn === "oneShotDigest") {
    return "SHA-256 hashing";
  }
  if (url === "node:internal/crypto/random" || fn === "ownerToken") return "owner token";
  if (file === "serialize.js" || file === "result-codec.js") return "result (de)serialization";
  if (
    file === "lease.js" ||
    url === "node:internal/abort_controller" ||
    url === "node:internal/event_target" ||
    url === "node:internal/per_context/domexception"
  ) {
    return "AbortController / AbortSignal / events (lease, waits)";
  }
  if (url === "node:internal/timers" || url === "node:timers" || file === "clock.js")
    return "clock.now, timers (lease, waits)";
  if (file === "memory-store.js") return "store (memoryStore)";
  if (url.includes("/redis/") && !url.includes("node_modules")) return "store (redisStore)";
  if (url.includes("/node_modules/ioredis/") || url.includes("/node_modules/.pnpm/ioredis")) return "ioredis";
  if (url === "node:net" || url.startsWith("node:internal/stream_base") || url === "node:internal/net")
    return "socket (node:net)";
  if (file === "in-flight.js") return "in-flight registry";
  if (file === "idempotent.js" || file === "call.js" || file === "options.js")
    return "call flow (idempotent, call)";
  if (file === "time.js") return "envelope dates (iso)";
  if (url === "node:internal/process/task_queues" || fn === "runMicrotasks")
    return "microtask queue (promises)";
  if (url.includes("/bench/")) return "bench loop";
  if (url.startsWith("node:") || url === "") return "node/V8 other";
  return `other (${file})`;
}

export function summarizeProfile(profile: CpuProfile, categorize: (frame: CallFrame) => string): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    const delta = profile.timeDeltas[i] ?? 0;
    selfUs.set(id, (selfUs.get(id) ?? 0) + delta);
    total += delta;
  }
  const categories = new Map<string, number>();
  const functions = new Map<string, { us: number; category: string }>();
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)!.callFrame;
    const category = categorize(frame);
    categories.set(category, (categories.get(category) ?? 0) + us);
    const name = `${frame.functionName || "(anonymous)"} ${frame.url.slice(frame.url.lastIndexOf("/") + 1)}${frame.url ? `:${frame.lineNumber + 1}` : ""}`;
    const f = functions.get(name) ?? { us: 0, category };
    f.us += us;
    functions.set(name, f);
  }
  const share = (us: number) => `${((us / total) * 100).toFixed(1)}%`;
  const byCategory = [...categories].sort((a, b) => b[1] - a[1]);
  const top = [...functions].sort((a, b) => b[1].us - a[1].us).slice(0, 15);
  return [
    table(
      ["category (self time)", "share"],
      byCategory.map(([c, us]) => [c, share(us)]),
      [1],
    ),
    "",
    table(
      ["top functions (self time)", "share", "category"],
      top.map(([name, f]) => [name, share(f.us), f.category]),
      [1],
    ),
  ].join("\n");
}
