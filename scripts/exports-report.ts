/**
 * The public surface, as users import it: every subpath in package.json "exports", the names each one
 * exports (read from its source entry with the TypeScript compiler), how many there are, and every name
 * that two or more subpaths export.
 *
 *   node --import tsx scripts/exports-report.ts [--json]
 *
 * A name two subpaths export is one of two kinds. Either two subpaths export one declaration (a user
 * can import the same thing from two places, and docs and examples drift between them), or each subpath
 * declares its own thing under a name the other also uses (`idempotentTool` for each agent framework).
 * The first kind is what the package must not have; the second is listed so it stays a choice.
 */
import { readFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";

const root = join(import.meta.dirname, "..");

/** One subpath export and the files behind it. */
export interface SubpathEntry {
  /** As package.json spells it: ".", "./sqlite", "./http/hono". */
  readonly subpath: string;
  /** What a user writes: "idempotool", "idempotool/sqlite". */
  readonly specifier: string;
  /** The built declaration file package.json points at, relative to the package root. */
  readonly types: string;
  /** The built module package.json points at, relative to the package root. */
  readonly module: string;
  /** The TypeScript source the build compiles into `module`, relative to the package root. */
  readonly source: string;
}

/** A name exported from more than one subpath. */
export interface SharedName {
  readonly name: string;
  /** The specifiers that export it, sorted. */
  readonly specifiers: readonly string[];
  /**
   * Whether two of those subpaths export one declaration (re-exported from both), or each has a
   * declaration of its own under this name.
   */
  readonly reExported: boolean;
}

/** What {@link exportsReport} measures. */
export interface ExportsReport {
  readonly entries: readonly (SubpathEntry & { readonly names: readonly string[] })[];
  /** Names summed over subpaths: a name two subpaths export counts twice. */
  readonly exportedNames: number;
  /** Names counted once however many subpaths export them. */
  readonly distinctNames: number;
  /** Every name two or more subpaths export, sorted by name. */
  readonly shared: readonly SharedName[];
}

interface ExportMap {
  readonly [subpath: string]: string | { readonly types: string; readonly default: string };
}

const specifierOf = (subpath: string) => (subpath === "." ? "idempotool" : `idempotool${subpath.slice(1)}`);

/** The subpath exports of package.json (all but "./package.json"), with their built and source files. */
export function subpathEntries(packageRoot = root): SubpathEntry[] {
  const pkg = JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")) as { exports: ExportMap };
  return Object.entries(pkg.exports)
    .filter(([subpath]) => subpath !== "./package.json")
    .map(([subpath, target]) => {
      if (typeof target === "string") throw new Error(`exports["${subpath}"]: expected { types, default }`);
      const module = target.default.replace(/^\.\//, "");
      return {
        subpath,
        specifier: specifierOf(subpath),
        types: target.types.replace(/^\.\//, ""),
        module,
        // The build is `tsc` from src/ to dist/: dist/<path>.js comes from src/<path>.ts.
        source: module.replace(/^dist\//, "src/").replace(/\.js$/, ".ts"),
      };
    });
}

/** Compiler options of the project's tsconfig.json, for reading its sources. */
function projectOptions(packageRoot: string): ts.CompilerOptions {
  const configPath = join(packageRoot, "tsconfig.json");
  const config = ts.readConfigFile(configPath, ts.sys.readFile);
  if (config.error) throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, "\n"));
  return ts.parseJsonConfigFileContent(config.config, ts.sys, packageRoot, { noEmit: true }, configPath)
    .options;
}

/** Measures the public surface of the package at `packageRoot` from its sources. */
export function exportsReport(packageRoot = root): ExportsReport {
  const entries = subpathEntries(packageRoot);
  // Only the package's own files matter for what it exports: leaving out the default library and the
  // dependencies' declarations takes the run from half a minute to a few seconds.
  const options = { ...projectOptions(packageRoot), noLib: true, types: [] };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, ...rest) =>
    fileName.includes("/node_modules/") ? undefined : getSourceFile(fileName, ...rest);
  const program = ts.createProgram(
    entries.map((entry) => join(packageRoot, entry.source)),
    options,
    host,
  );
  const checker = program.getTypeChecker();
  // The declaration behind each (specifier, name): an alias is followed to what it names.
  const declarations = new Map<string, Map<string, ts.Symbol>>();

  const measured = entries.map((entry) => {
    const file = program.getSourceFile(join(packageRoot, entry.source));
    if (file === undefined) throw new Error(`${entry.specifier}: ${entry.source} does not exist`);
    const moduleSymbol = checker.getSymbolAtLocation(file);
    const exported = moduleSymbol === undefined ? [] : checker.getExportsOfModule(moduleSymbol);
    const byName = new Map<string, ts.Symbol>();
    for (const symbol of exported) {
      byName.set(
        symbol.name,
        symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol,
      );
    }
    declarations.set(entry.specifier, byName);
    return { ...entry, names: [...byName.keys()].sort() };
  });

  const specifiersByName = new Map<string, string[]>();
  for (const entry of measured) {
    for (const name of entry.names)
      specifiersByName.set(name, [...(specifiersByName.get(name) ?? []), entry.specifier]);
  }
  const shared = [...specifiersByName]
    .filter(([, specifiers]) => specifiers.length > 1)
    .map(([name, specifiers]) => {
      const symbols = new Set(specifiers.map((specifier) => declarations.get(specifier)!.get(name)));
      return { name, specifiers: [...specifiers].sort(), reExported: symbols.size < specifiers.length };
    })
    .sort((a, b) => a.name.localeCompare(b.name));

  return {
    entries: measured,
    exportedNames: measured.reduce((sum, entry) => sum + entry.names.length, 0),
    distinctNames: specifiersByName.size,
    shared,
  };
}

/** The report as a reader scans it. */
export function formatReport(report: ExportsReport, packageRoot = root): string {
  const lines = [`${report.entries.length} subpaths`, ""];
  for (const entry of report.entries) {
    lines.push(
      `${entry.specifier} (${relative(packageRoot, join(packageRoot, entry.source))}): ${entry.names.length}`,
    );
    lines.push(`  ${entry.names.join(", ")}`);
  }
  const reExported = report.shared.filter((name) => name.reExported);
  const ownEach = report.shared.filter((name) => !name.reExported);
  lines.push(
    "",
    `exported names: ${report.exportedNames} (${report.distinctNames} distinct)`,
    `names exported from 2+ subpaths: ${report.shared.length}`,
    `  one declaration exported from two subpaths: ${reExported.length}`,
    ...reExported.map((name) => `    ${name.name}: ${name.specifiers.join(", ")}`),
    `  a declaration of its own in each: ${ownEach.length}`,
    ...ownEach.map((name) => `    ${name.name}: ${name.specifiers.join(", ")}`),
  );
  return lines.join("\n");
}

if (import.meta.filename === process.argv[1]) {
  const report = exportsReport();
  console.log(process.argv.includes("--json") ? JSON.stringify(report, null, 2) : formatReport(report));
}
