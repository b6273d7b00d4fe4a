/** The printed table (Markdown, so a run pastes straight into docs/benchmarks.md). */
import { SqliteDriver, sqliteBackendNames } from "./backends/backend.js";
import { type Cell, summarize } from "./runner.js";
import { p50Ratio, ratio, type TargetResult } from "./targets.js";

export interface SkippedRow {
  readonly backend: string;
  readonly subject: string;
  readonly reason: string;
}

export function formatOps(value: number): string {
  return Number.isFinite(value) ? Math.round(value).toLocaleString("en-US") : "—";
}

export function formatUs(value: number): string {
  if (!Number.isFinite(value)) return "—";
  return value < 100 ? value.toFixed(1) : Math.round(value).toLocaleString("en-US");
}

export function formatRatio(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return "—";
  return value >= 10 ? value.toFixed(1) : value.toFixed(2);
}

export function table(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  right: readonly number[] = [],
): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const pad = (text: string, i: number) =>
    right.includes(i) ? text.padStart(widths[i]!) : text.padEnd(widths[i]!);
  const line = (cells: readonly string[]) => `| ${cells.map((c, i) => pad(c, i)).join(" | ")} |`;
  const rule = `|${widths.map((w, i) => (right.includes(i) ? `${"-".repeat(w + 1)}:` : "-".repeat(w + 2))).join("|")}|`;
  return [line(header), rule, ...rows.map(line)].join("\n");
}

function notes(cell: Cell): string {
  const parts: string[] = [];
  if (cell.error) parts.push(`FAILED: ${cell.error}`);
  if (!cell.dedupOk) parts.push(`DEDUP FAILED: ${cell.dedupDetail ?? ""}`);
  const summary = summarize(cell);
  if (summary.rejectedShare > 0) {
    const reasons: Record<string, number> = {};
    for (const s of cell.samples)
      for (const [r, n] of Object.entries(s.reasons)) reasons[r] = (reasons[r] ?? 0) + n;
    const top = Object.entries(reasons).sort((a, b) => b[1] - a[1])[0]?.[0] ?? "";
    parts.push(`${(summary.rejectedShare * 100).toFixed(0)}% of callers refused (${top})`);
  }
  return parts.join("; ");
}

export function resultsTable(cells: readonly Cell[], skipped: readonly SkippedRow[]): string {
  const rows: string[][] = [];
  for (const cell of cells) {
    const s = summarize(cell);
    const ours = cells.find(
      (c) =>
        c.subject === "idempotool" &&
        c.backend === cell.backend &&
        c.workload === cell.workload &&
        c.concurrency === cell.concurrency,
    );
    const versus =
      cell.subject === "idempotool" || !ours || ours.error || cell.error || ours.samples.length === 0
        ? ""
        : formatRatio(ratio(ours, [cell]));
    rows.push([
      cell.backend,
      cell.workload,
      String(cell.concurrency),
      cell.subject,
      formatOps(s.opsPerSec),
      formatUs(s.p50Us),
      formatUs(s.p99Us),
      formatUs(s.cpuUsPerCall),
      versus,
      notes(cell),
    ]);
  }
  for (const skip of skipped) {
    rows.push([skip.backend, "all", "—", skip.subject, "—", "—", "—", "—", "", `skipped: ${skip.reason}`]);
  }
  return table(
    [
      "store",
      "workload",
      "c",
      "subject",
      "ops/s",
      "p50 µs",
      "p99 µs",
      "CPU µs/call",
      "idempotool ÷ row",
      "notes",
    ],
    rows,
    [2, 4, 5, 6, 7, 8],
  );
}

export function targetsTable(results: readonly TargetResult[]): string {
  return table(
    ["target", "need", "measured (ops/s)", "status", "cross-check: by p50"],
    results.map((t) => [
      t.text,
      formatRatio(t.need),
      formatRatio(t.ratio),
      t.detail ? `${t.status} (${t.detail})` : t.status,
      formatRatio(t.p50Ratio),
    ]),
    [1, 2, 4],
  );
}

/**
 * The same SQLite rows on the two drivers, node:sqlite over better-sqlite3 (above 1: node:sqlite is faster).
 * Both drivers' groups run interleaved (one family), so each ratio is the median of per-repetition ratios,
 * as within a group. Undefined when the run did not measure both.
 */
export function driversTable(cells: readonly Cell[]): string | undefined {
  const node = sqliteBackendNames[SqliteDriver.node];
  const better = sqliteBackendNames[SqliteDriver.betterSqlite3];
  const kinds = [
    ["sqlite", node.store, better.store],
    ["tiered-sqlite", node.tiered, better.tiered],
  ] as const;
  const usable = (cell: Cell | undefined): cell is Cell =>
    cell !== undefined && !cell.error && cell.samples.length > 0;
  const rows: string[][] = [];
  for (const [kind, onNode, onBetter] of kinds) {
    for (const cell of cells.filter((c) => c.backend === onNode)) {
      const other = cells.find(
        (c) =>
          c.backend === onBetter &&
          c.workload === cell.workload &&
          c.concurrency === cell.concurrency &&
          c.subject === cell.subject,
      );
      if (!usable(cell) || !usable(other)) continue;
      const a = summarize(cell);
      const b = summarize(other);
      rows.push([
        kind,
        cell.workload,
        String(cell.concurrency),
        cell.subject,
        formatOps(a.opsPerSec),
        formatOps(b.opsPerSec),
        formatRatio(ratio(cell, [other])),
        formatRatio(p50Ratio(cell, [other])),
        formatRatio(b.cpuUsPerCall / a.cpuUsPerCall),
      ]);
    }
  }
  if (rows.length === 0) return undefined;
  return table(
    [
      "store",
      "workload",
      "c",
      "subject",
      "node:sqlite ops/s",
      "better-sqlite3 ops/s",
      "node:sqlite ÷ better-sqlite3",
      "by p50",
      "by CPU µs/call",
    ],
    rows,
    [2, 4, 5, 6, 7, 8],
  );
}
