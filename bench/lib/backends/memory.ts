import { memoryAnchors } from "../anchors.js";
import type { Library } from "../library.js";
import {
  type Call,
  countedTool,
  type Subject,
  SubjectName,
  singleFlight,
  type ToolArgs,
  wrapperSubject,
} from "../subject.js";
import { BackendName, type BackendSetup, defaultConcurrencies } from "./backend.js";

export function idempotoolSubject(
  lib: Library,
  store: () => Parameters<Library["core"]["idempotent"]>[1]["store"],
  description: string,
  fresh = false,
  name: SubjectName = SubjectName.idempotool,
): Subject {
  const tool = countedTool();
  return wrapperSubject({
    name,
    description: `idempotent(tool, { store: ${description} }) (defaults: irreversible, 24 h, 60 s lease, 10 s wait)`,
    tool,
    build: (): Call => {
      const wrapped = lib.core.idempotent(tool.fn, { name: "send_email", store: store() });
      return async (key, args) => (await wrapped(args, { key })).result;
    },
    fresh,
  });
}

interface FloorRecord {
  readonly fingerprint: string;
  readonly status: "in_progress" | "completed";
  readonly result: string | null;
}

/**
 * The CPU floor of the memory path: what any correct implementation must do per call — the RFC 8785
 * canonical JSON and SHA-256 of the arguments, a Map set (claim) and update (settle), the tool, and the
 * result kept as a string (stores keep strings) and parsed back on a replay.
 */
export function memoryFloor(lib: Library): Subject {
  const tool = countedTool();
  const { canonicalJson, sha256Hex } = lib.core;
  let records = new Map<string, FloorRecord>();
  const first = async (key: string, args: ToolArgs) => {
    const fingerprint = sha256Hex(canonicalJson(args));
    if (records.has(key)) throw new Error(`memory floor: ${key} is already claimed`);
    records.set(key, { fingerprint, status: "in_progress", result: null });
    const result = await tool.fn(args);
    records.set(key, { fingerprint, status: "completed", result: JSON.stringify(result) });
    return result;
  };
  const replay = async (key: string, args: ToolArgs) => {
    const fingerprint = sha256Hex(canonicalJson(args));
    const record = records.get(key);
    if (record?.status !== "completed" || record.fingerprint !== fingerprint || record.result === null) {
      throw new Error(`memory floor: ${key} holds no completed record for these arguments`);
    }
    return JSON.parse(record.result) as unknown;
  };
  return {
    name: SubjectName.floor,
    description:
      "canonicalJson + SHA-256 of the arguments, Map set (claim) + Map set (settle, result as JSON text); " +
      "replay: canonicalJson + SHA-256 + Map get + JSON.parse",
    first,
    replay,
    contended: singleFlight(first, replay),
    validatesPayload: false,
    runs: tool.runs,
    reset() {
      records = new Map();
    },
  };
}

export function memoryBackend(lib: Library, candidate?: Library): BackendSetup {
  return {
    backends: [
      {
        name: BackendName.memory,
        description: "in process; each repetition starts from an empty store",
        concurrencies: defaultConcurrencies,
        subjects: [
          idempotoolSubject(
            lib,
            () => lib.core.memoryStore({ maxRecords: 10_000_000 }),
            "memoryStore()",
            true,
          ),
          memoryFloor(lib),
          ...memoryAnchors(),
          ...(candidate
            ? [
                idempotoolSubject(
                  candidate,
                  () => candidate.core.memoryStore({ maxRecords: 10_000_000 }),
                  `memoryStore() from ${candidate.dir}`,
                  true,
                  SubjectName.candidate,
                ),
              ]
            : []),
        ],
      },
    ],
    info: {},
    async close() {},
  };
}
