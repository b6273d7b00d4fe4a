import type { Subject } from "../subject.js";

export const BackendName = {
  memory: "memory",
  sqlite: "sqlite",
  postgres: "postgres",
  redis: "redis",
  tieredSqlite: "tiered-sqlite",
  tieredRedis: "tiered-redis",
} as const;
export type BackendName = (typeof BackendName)[keyof typeof BackendName];
export const backendNames: readonly BackendName[] = Object.values(BackendName);

/** One row group of the table: subjects measured side by side (interleaved) on one backend. */
export interface Backend {
  readonly name: BackendName;
  readonly description: string;
  readonly concurrencies: readonly number[];
  readonly subjects: readonly Subject[];
}

/** Backends that share one connection or file, and how to let go of them. */
export interface BackendSetup {
  readonly backends: readonly Backend[];
  /** Server or library versions worth recording. */
  readonly info: Readonly<Record<string, string>>;
  close(): Promise<void>;
}

/** A backend that could not be set up: its rows are printed as skipped, with the reason. */
export class Skip extends Error {
  override name = "Skip";
}

/** Default concurrencies (issue 7: each workload at 1 and 32). */
export const defaultConcurrencies = [1, 32] as const;
