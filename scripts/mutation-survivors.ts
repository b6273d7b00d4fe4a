/**
 * The last step of `npm run mutate`: reads StrykerJS's reports, prints the mutation score of each file, and
 * checks them against the targets and the committed list of surviving mutants (test/mutation-survivors.json),
 * in which each survivor says why it is equivalent or harmless. Exits 1 when a file misses its target, when
 * a mutant survives that the list does not name, when the list names one that the tests now kill, or when a
 * listed survivor has no reason. A listed survivor whose tests ran out of time stays listed: a timeout
 * follows the machine's load.
 *
 * `--write` rewrites the list from the reports instead, keeping the reasons of survivors already listed;
 * a new survivor gets an empty reason for you to write (or a test that kills it).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const reports = ["reports/mutation/decide.json", "reports/mutation/mutation.json"];
const listPath = "test/mutation-survivors.json";

/** Every file must reach this score; these files must reach their own. */
const target = 90;
const targets: Readonly<Record<string, number>> = { "src/core/decide.ts": 100 };

interface ReportMutant {
  readonly mutatorName: string;
  readonly replacement?: string;
  readonly status: string;
  readonly location: {
    readonly start: { line: number; column: number };
    readonly end: { line: number; column: number };
  };
}

interface ReportFile {
  readonly source: string;
  readonly mutants: readonly ReportMutant[];
}

/** One surviving mutant, named by what it changes rather than where: line numbers move with every edit. */
export interface Survivor {
  readonly file: string;
  readonly mutator: string;
  readonly original: string;
  readonly replacement: string;
  /** Where it was when the list was last written, for the reader. */
  readonly line: number;
  readonly reason: string;
}

const detected = new Set(["Killed", "Timeout"]);
const undetected = new Set(["Survived", "NoCoverage"]);

/** Code as one line with its runs of white space collapsed, so reformatting does not rename a mutant. */
function oneLine(code: string): string {
  return code.replace(/\s+/g, " ").trim();
}

function sourceAt(source: string, { start, end }: ReportMutant["location"]): string {
  const lines = source.split("\n").slice(start.line - 1, end.line);
  if (lines.length === 1) return lines[0]!.slice(start.column - 1, end.column - 1);
  lines[0] = lines[0]!.slice(start.column - 1);
  lines[lines.length - 1] = lines[lines.length - 1]!.slice(0, end.column - 1);
  return lines.join("\n");
}

const identity = (s: Pick<Survivor, "file" | "mutator" | "original" | "replacement">) =>
  JSON.stringify([s.file, s.mutator, s.original, s.replacement]);

function readReports(): Map<string, ReportFile> {
  const files = new Map<string, ReportFile>();
  for (const report of reports) {
    const at = `${root}${report}`;
    if (!existsSync(at)) throw new Error(`${report} is missing: run \`npm run mutate\` first`);
    const parsed = JSON.parse(readFileSync(at, "utf8")) as { files: Record<string, ReportFile> };
    for (const [file, data] of Object.entries(parsed.files)) files.set(file, data);
  }
  return files;
}

function main(): void {
  const files = readReports();
  const fresh: Survivor[] = [];
  // Mutants whose tests ran out of time: caught, but on a quieter machine a listed survivor may be one.
  const timedOut = new Map<string, number>();
  const rows: string[] = [];
  let belowTarget = false;
  for (const [file, { source, mutants }] of [...files].sort(([a], [b]) => a.localeCompare(b))) {
    const count = (statuses: Set<string>) => mutants.filter((m) => statuses.has(m.status)).length;
    const caught = count(detected);
    const missed = count(undetected);
    const score = (100 * caught) / (caught + missed);
    const wanted = targets[file] ?? target;
    if (score < wanted) belowTarget = true;
    const others = mutants.length - caught - missed;
    rows.push(
      `${file.padEnd(28)} ${score.toFixed(2).padStart(6)}%  (target ${wanted}%)  ${caught} caught, ${missed} survived` +
        (others > 0 ? `, ${others} not counted (errors)` : ""),
    );
    for (const mutant of mutants) {
      const named = {
        file,
        mutator: mutant.mutatorName,
        original: oneLine(sourceAt(source, mutant.location)),
        replacement: oneLine(mutant.replacement ?? ""),
        line: mutant.location.start.line,
        reason: "",
      };
      if (mutant.status === "Timeout")
        timedOut.set(identity(named), (timedOut.get(identity(named)) ?? 0) + 1);
      if (undetected.has(mutant.status)) fresh.push(named);
    }
  }
  console.log(rows.join("\n"));

  const listed: Survivor[] = existsSync(`${root}${listPath}`)
    ? (JSON.parse(readFileSync(`${root}${listPath}`, "utf8")) as Survivor[])
    : [];
  const reasons = new Map(listed.map((s) => [identity(s), s.reason]));

  if (process.argv.includes("--write")) {
    const written = fresh.map((s) => ({ ...s, reason: reasons.get(identity(s)) ?? "" }));
    writeFileSync(`${root}${listPath}`, `${JSON.stringify(written, null, 2)}\n`);
    const unexplained = written.filter((s) => s.reason === "").length;
    console.log(`\nwrote ${written.length} survivors to ${listPath}; ${unexplained} need a reason`);
    return;
  }

  const problems: string[] = [];
  if (belowTarget) problems.push("a file is below its target score");
  const unmatched = new Map<string, number>();
  for (const s of listed) unmatched.set(identity(s), (unmatched.get(identity(s)) ?? 0) + 1);
  for (const s of fresh) {
    const left = unmatched.get(identity(s)) ?? 0;
    if (left === 0)
      problems.push(`survives but is not listed: ${s.file}:${s.line} ${s.mutator} ${s.replacement}`);
    else unmatched.set(identity(s), left - 1);
  }
  for (const s of listed) {
    const left = unmatched.get(identity(s)) ?? 0;
    if (left > 0) {
      unmatched.set(identity(s), left - 1);
      const slow = timedOut.get(identity(s)) ?? 0;
      // A listed survivor whose tests timed out this time (a loaded machine) stays listed.
      if (slow > 0) timedOut.set(identity(s), slow - 1);
      else
        problems.push(`listed but now killed (remove it): ${s.file}:${s.line} ${s.mutator} ${s.replacement}`);
    }
    if (s.reason.trim() === "") problems.push(`listed without a reason: ${s.file}:${s.line} ${s.mutator}`);
  }
  if (problems.length > 0) {
    console.error(`\n${problems.join("\n")}`);
    process.exitCode = 1;
    return;
  }
  console.log(`\nevery file meets its target; the ${fresh.length} survivors are the ${listPath} list`);
}

main();
