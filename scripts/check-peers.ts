/**
 * npm run check:peers: every optional peer dependency's latest release (the registry's `latest` tag) must
 * be inside our peer range, and a devDependency (under the peer's name or an npm alias of it) must test
 * that release's major. A new major of a library our users run shows up here as a failure naming what to do,
 * instead of as an ERESOLVE in their `npm install idempotool`.
 *
 * For 0.x releases the minor is the major (0.20 → 0.21 may break), as npm's caret ranges read them.
 * Exit 0 when all hold, 1 when one does not, 2 when the registry could not be asked.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import semver from "semver";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

interface PackageJson {
  readonly peerDependencies: Record<string, string>;
  readonly devDependencies: Record<string, string>;
}

/** What a check found for one peer. */
export interface PeerVerdict {
  readonly name: string;
  readonly range: string;
  readonly latest: string;
  readonly tested: readonly string[];
  /** Empty when the peer is current; otherwise what is wrong and what to do. */
  readonly problems: readonly string[];
}

/** The breaking-change line of a version: its major, or for 0.x its minor. */
export function lineOf(version: string): string {
  const parsed = semver.parse(version);
  if (!parsed) throw new Error(`not a version: ${version}`);
  return parsed.major === 0 ? `0.${parsed.minor}` : `${parsed.major}`;
}

/** The versions of `name` that the devDependencies install, under its own name or an npm alias. */
export function versionsTested(name: string, devDependencies: Record<string, string>): string[] {
  return Object.entries(devDependencies).flatMap(([dependency, spec]) => {
    const version =
      dependency === name ? spec : spec.startsWith(`npm:${name}@`) ? spec.slice(name.length + 5) : null;
    const exact =
      version === null || semver.validRange(version) === null
        ? null // not a version (a tag, a git URL, a file): it tests no known release
        : (semver.valid(version) ?? semver.minVersion(version)?.version ?? null);
    return exact === null ? [] : [exact];
  });
}

/** Judges one peer against its latest release. */
export function judge(
  name: string,
  range: string,
  latest: string,
  devDependencies: Record<string, string>,
): PeerVerdict {
  const tested = versionsTested(name, devDependencies);
  const problems: string[] = [];
  if (!semver.satisfies(latest, range)) {
    problems.push(
      `its latest release ${latest} is outside our range "${range}": users on it get ERESOLVE. Test ${name}@${latest} (the devDependency, keeping the previous major under an alias), then widen the range.`,
    );
  }
  if (!tested.some((version) => lineOf(version) === lineOf(latest))) {
    problems.push(
      `no devDependency tests its current major (${lineOf(latest)}.x); tested: ${tested.join(", ") || "none"}.`,
    );
  }
  return { name, range, latest, tested, problems };
}

async function latestOf(name: string): Promise<string> {
  const { stdout } = await run("npm", ["view", `${name}@latest`, "version", "--json"], { timeout: 60_000 });
  const version = JSON.parse(stdout) as string | string[];
  return Array.isArray(version) ? version[version.length - 1]! : version;
}

async function main(): Promise<number> {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as PackageJson;
  const peers = Object.entries(pkg.peerDependencies);
  console.error(`check:peers: asking the registry for the latest release of ${peers.length} peers`);
  let latest: string[];
  try {
    latest = await Promise.all(peers.map(([name]) => latestOf(name)));
  } catch (error) {
    console.error(`check:peers: could not ask the registry: ${(error as Error).message}`);
    return 2;
  }
  const verdicts = peers.map(([name, range], i) => judge(name, range, latest[i]!, pkg.devDependencies));
  for (const verdict of verdicts) {
    const state = verdict.problems.length === 0 ? "ok  " : "FAIL";
    console.log(
      `${state} ${verdict.name} ${verdict.range}: latest ${verdict.latest}, tested ${verdict.tested.join(", ")}`,
    );
    for (const problem of verdict.problems) console.log(`     ${problem}`);
  }
  const failed = verdicts.filter((verdict) => verdict.problems.length > 0);
  console.log(
    failed.length === 0
      ? `check:peers: all ${verdicts.length} peers are current`
      : `check:peers: ${failed.length} of ${verdicts.length} peers lag their latest release`,
  );
  return failed.length === 0 ? 0 : 1;
}

if (import.meta.filename === process.argv[1]) process.exitCode = await main();
