/**
 * What users read: README.md, docs/, the JSDoc of src/ (every editor shows it) and the examples they
 * copy. It speaks only of what users get, and it agrees with the package and the code.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { ErrorCode, IdempotencyError } from "../src/core/errors.js";
import { keys } from "../src/core/keys.js";

const root = join(import.meta.dirname, "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  exports: Record<string, unknown>;
  peerDependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const readme = readFileSync(join(root, "README.md"), "utf8");

function filesUnder(dir: string, extension: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(extension))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

const markdown = ["README.md", ...filesUnder("docs", ".md")];
const userText = [...markdown, ...filesUnder("src", ".ts"), ...filesUnder("examples", ".ts")];

/** Documents users never get, by the ways the sources have cited them. */
const unshippedReference = [
  /\bseed\b[^\n]*(\bOP-?\d|\bCases? \d|\bSteps? \d|§|\bactivation\b)/i,
  /\b(the seed|seed's)\b/i,
  /\bDESIGN\b\s*§|DESIGN\.md|STYLE\.md/,
];

/** Markdown prose without its fenced code blocks, whose `[a](b)` may be code. */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, "");
}

/** The cells of a Markdown table row (a `\|` inside a cell is a literal bar). */
function cells(row: string): string[] {
  return row
    .trim()
    .replace(/^\||\|$/g, "")
    .split(/(?<!\\)\|/)
    .map((cell) => cell.trim().replaceAll("\\|", "|"));
}

/** The body rows of the first table whose header row contains `header`. */
function tableAfter(text: string, header: string): string[][] {
  const lines = text.split("\n");
  const start = lines.findIndex((line) => line.startsWith("|") && line.includes(header));
  expect(start, `a table with "${header}"`).toBeGreaterThanOrEqual(0);
  const rows: string[][] = [];
  for (let i = start + 2; i < lines.length && lines[i]!.startsWith("|"); i++) rows.push(cells(lines[i]!));
  return rows;
}

const codeSpans = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1]!);
const specifierOf = (subpath: string) => (subpath === "." ? "idempotool" : `idempotool${subpath.slice(1)}`);
const subpaths = Object.keys(pkg.exports).filter((subpath) => subpath !== "./package.json");

describe("what users read", () => {
  it("cites no document users do not get (no seed, no DESIGN §n, no STYLE.md)", () => {
    const found: string[] = [];
    for (const file of userText) {
      readFileSync(join(root, file), "utf8")
        .split("\n")
        .forEach((line, i) => {
          if (unshippedReference.some((pattern) => pattern.test(line)))
            found.push(`${file}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(found).toEqual([]);
  });

  it("links only to files that exist, in the Markdown and in the JSDoc's docs/*.md", () => {
    const broken: string[] = [];
    for (const file of markdown) {
      for (const [, target] of prose(readFileSync(join(root, file), "utf8")).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target!) || target!.startsWith("#")) continue;
        const path = resolve(root, dirname(file), target!.split("#")[0]!);
        if (!existsSync(path)) broken.push(`${file} → ${target}`);
      }
    }
    for (const file of filesUnder("src", ".ts")) {
      for (const [doc] of readFileSync(join(root, file), "utf8").matchAll(/\bdocs\/[\w/.-]+\.md\b/g)) {
        if (!existsSync(join(root, doc))) broken.push(`${file} → ${doc}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("lists every error code in README's table, with the HTTP status the error carries", () => {
    const table = tableAfter(readme, "| code ").map(([code, status]) => [
      code!.replaceAll("`", ""),
      Number(status),
    ]);
    const expected = Object.values(ErrorCode).map((code) => [
      code,
      new IdempotencyError(code, "").httpStatus,
    ]);
    expect(new Map(table as [string, number][])).toEqual(new Map(expected as [string, number][]));
  });

  it("gives in docs/keys.md the prefix each key helper really derives", () => {
    const doc = readFileSync(join(root, "docs/keys.md"), "utf8");
    const derived = [
      keys.composite("thread-1", "send_email"),
      keys.intent("turn-7", { to: "a" }),
      keys.content("x"),
    ];
    for (const key of derived) {
      const prefix = /^[a-z]+_/.exec(key)![0];
      expect(doc, `docs/keys.md names ${prefix}`).toContain(`\`${prefix}\``);
    }
  });
});

describe("the stores' JSDoc examples", () => {
  /** The `@example` of the JSDoc just above `export function name(`. */
  function exampleOf(file: string, name: string): string {
    const text = readFileSync(join(root, file), "utf8");
    // The declaration, generic or not.
    const at = text.search(new RegExp(`export function ${name}[<(]`));
    const doc = text.slice(text.lastIndexOf("/**", at), at);
    return doc.slice(doc.indexOf("@example"));
  }

  for (const [file, name] of [
    ["src/core/memory-store.ts", "memoryStore"],
    ["src/sqlite/sqlite-store.ts", "sqliteStore"],
  ] as const) {
    it(`shows ${name}() given to idempotent(), not driven by hand through claim()`, () => {
      const example = exampleOf(file, name);
      expect(example).toContain("idempotent(");
      expect(example).not.toMatch(/\.(claim|settle|release)\(/);
    });
  }
});

describe("README's install table", () => {
  const table = () => tableAfter(readme, "install beside it");
  const isPackageName = (span: string) => /^(@[a-z0-9-]+\/)?[a-z0-9][a-z0-9._-]*$/.test(span);

  it("has a row for every subpath export", () => {
    const listed = new Set(table().flatMap(([imports]) => codeSpans(imports!)));
    for (const subpath of subpaths) expect(listed, specifierOf(subpath)).toContain(specifierOf(subpath));
  });

  it("names as what to install only optional peer dependencies, and names each of them", () => {
    const named = table().flatMap(([, install]) => codeSpans(install!).filter(isPackageName));
    for (const name of named) expect(Object.keys(pkg.peerDependencies), `${name} is a peer`).toContain(name);
    expect(new Set(named)).toEqual(new Set(Object.keys(pkg.peerDependencies)));
  });

  // The versions of a package the devDependencies install: under its own name, or an npm alias of it
  // ("redis5": "npm:redis@5.9.0"), which tests a second major beside the first.
  const versionsTested = (name: string): string[] =>
    Object.entries(pkg.devDependencies).flatMap(([dependency, spec]) => {
      if (dependency === name) return [spec];
      return spec.startsWith(`npm:${name}@`) ? [spec.slice(`npm:${name}@`.length)] : [];
    });

  it("gives for each peer the versions tested (devDependencies) and the range supported (peerDependencies)", () => {
    const given = new Map<string, { versions: string[]; range?: string }>();
    for (const [, , versions] of table()) {
      for (const match of versions!.matchAll(/(@?[a-z0-9][\w./-]*) (\d[\w.-]*)(?: \(`([^`]+)`\))?/g)) {
        const [, name, version, range] = match;
        expect(versionsTested(name!), `${name} tested`).toContain(version);
        if (range !== undefined) expect(range, `${name} supported`).toBe(pkg.peerDependencies[name!]);
        const seen = given.get(name!) ?? { versions: [] };
        // A package several rows name (the MCP SDK) gives its versions once.
        const all = [...new Set([...seen.versions, version!])];
        given.set(name!, { ...seen, versions: all, ...(range && { range }) });
      }
    }
    for (const [peer, range] of Object.entries(pkg.peerDependencies)) {
      const stated = given.get(peer);
      expect(stated && { ...stated, versions: [...stated.versions].sort() }, `${peer}'s versions`).toEqual({
        versions: versionsTested(peer).sort(),
        range,
      });
    }
  });
});

describe("the examples", () => {
  const examples = filesUnder("examples", ".ts");

  it("import idempotool by its name and exported subpaths, as a user's copy does, never ../src", () => {
    const exported = new Set(subpaths.map(specifierOf));
    const wrong: string[] = [];
    for (const file of examples) {
      const text = readFileSync(join(root, file), "utf8");
      for (const [, specifier] of text.matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)) {
        const ours = specifier!.startsWith("idempotool") && exported.has(specifier!);
        const local = /^\.\/[\w.-]+\.js$/.test(specifier!); // a sibling example
        const other = !specifier!.startsWith(".") && !specifier!.startsWith("idempotool");
        if (!ours && !local && !other) wrong.push(`${file}: ${specifier}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it("type-check against src/ through tsconfig paths that mirror the subpath exports", () => {
    const tsconfig = readFileSync(join(root, "tsconfig.json"), "utf8");
    const paths = JSON.parse(/"paths":\s*(\{[^}]*\})/.exec(tsconfig)![1]!.replace(/,\s*\}/, "}")) as Record<
      string,
      string[]
    >;
    const expected = Object.fromEntries(
      subpaths.map((subpath) => {
        const types = (pkg.exports[subpath] as { types: string }).types;
        return [specifierOf(subpath), [types.replace(/^\.\/dist\//, "./src/").replace(/\.d\.ts$/, ".ts")]];
      }),
    );
    expect(paths).toEqual(expected);
  });
});
