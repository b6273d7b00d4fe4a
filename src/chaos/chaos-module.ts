/**
 * The module contract of `chaos()`: a `<module>#<export>` whose export is either a tool already wrapped
 * with `idempotent()`, or a factory `(ctx) => tool` that gets the run's throwaway store and probe and
 * returns a wrapped tool or a plain async function. TypeScript modules load through tsx when it is
 * installed.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { IdempotencyError } from "../core/errors.js";
import type { IdempotencyStore } from "../core/store.js";

/** What a factory receives. */
export interface ChaosContext {
  /** A throwaway SQLite store shared by every process of the run: wrap the tool with it. */
  readonly store: IdempotencyStore;
  /** Call it where the effect happens, once per effect; it counts across processes. */
  readonly probe: (detail?: unknown) => void;
  /** A short lease (ms) so the crash source's retry does not wait out a 60 s one: pass it to `idempotent()`. */
  readonly leaseMs: number;
}

/** How chaos calls a tool: as a wrapped tool is called. A plain function ignores the second argument. */
export type ToolUnderTest = (
  args: never,
  call: { readonly key: string; readonly scope: string; readonly signal?: AbortSignal },
) => unknown;

/** A factory building the tool under test from the run's store and probe. */
export type ChaosFactory = (ctx: ChaosContext) => ToolUnderTest | Promise<ToolUnderTest>;

/** A tool made by `idempotent()`, recognised by its shape (it may come from another copy of idempotool). */
export interface WrappedToolShape {
  (args: never, call?: { key?: string; scope?: string; signal?: AbortSignal }): Promise<unknown>;
  readonly toolName: string;
  readonly effect: string;
}

/** What `chaos()` accepts: a wrapped tool, or a factory. */
export type ChaosTarget = WrappedToolShape | ChaosFactory;

/** The tool under test, made ready to call. */
export interface Instance {
  readonly name: string;
  /** "idempotent" when wrapped by `idempotent()`, "plain" otherwise. */
  readonly kind: "idempotent" | "plain";
  call(args: unknown, call: { key: string; scope: string; signal?: AbortSignal }): Promise<unknown>;
}

export function isWrappedTool(value: unknown): value is WrappedToolShape {
  return (
    typeof value === "function" &&
    typeof (value as { toolName?: unknown }).toolName === "string" &&
    typeof (value as { effect?: unknown }).effect === "string"
  );
}

/** A `<module>#<export>` reference, resolved. */
export interface ModuleRef {
  /** Absolute path of the module. */
  readonly path: string;
  readonly exportName: string;
}

/** Parse `./tools.ts#sendEmail` (or a `file:` URL); no `#` means the default export. */
export function parseModuleRef(spec: string, cwd: string): ModuleRef {
  const at = spec.lastIndexOf("#");
  const location = at === -1 ? spec : spec.slice(0, at);
  const exportName = at === -1 ? "default" : spec.slice(at + 1);
  if (location === "" || exportName === "") {
    unusableModule(`"${spec}" is not <module>#<export> (like ./src/tools.ts#sendEmail)`);
  }
  const path = location.startsWith("file:") ? fileURLToPath(location) : location;
  return { path: isAbsolute(path) ? path : resolve(cwd, path), exportName };
}

const typeScript = /\.(ts|mts|cts|tsx)$/;

/** Import the module and pick the export, checking it against the contract. */
export async function importTarget(ref: ModuleRef, cwd: string): Promise<ChaosTarget> {
  if (!existsSync(ref.path)) unusableModule(`there is no module at ${ref.path}`);
  const url = pathToFileURL(ref.path).href;
  let module: Record<string, unknown>;
  // A TypeScript module loads through tsx where it is installed: it reads what TypeScript reads (a
  // "./x.js" import of ./x.ts, enums, paths), which the type stripping of Node 22.18+ and 24 does not.
  // Without tsx, Node's own stripping is tried; a Node without it needs tsx.
  const viaTsx = typeScript.test(ref.path) && (await registerTypeScript(cwd));
  try {
    module = (await import(url)) as Record<string, unknown>;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "ERR_UNKNOWN_FILE_EXTENSION" && typeScript.test(ref.path)) {
      unusableModule(
        "loading a TypeScript module needs tsx; install tsx beside idempotool: npm install tsx; or point chaos at the compiled JavaScript",
      );
    }
    throw loadError(ref, error, typeScript.test(ref.path) && !viaTsx);
  }
  if (!(ref.exportName in module)) {
    const names = Object.keys(module);
    unusableModule(
      `${ref.path} has no export "${ref.exportName}"${names.length > 0 ? ` (it exports ${names.join(", ")})` : ""}`,
    );
  }
  const target = module[ref.exportName];
  if (typeof target !== "function") {
    unusableModule(
      `${ref.path}#${ref.exportName} is a ${typeof target}, not a wrapped tool or a factory (ctx) => tool`,
    );
  }
  return target as ChaosTarget;
}

/** Make the target callable: call a factory with the context, or take a wrapped tool as it is. */
export async function instantiate(
  target: ChaosTarget,
  ctx: ChaosContext,
  fallbackName: string,
): Promise<Instance> {
  const tool: unknown = isWrappedTool(target) ? target : await (target as ChaosFactory)(ctx);
  if (typeof tool !== "function") {
    unusableModule(
      `the factory returned ${tool === null ? "null" : typeof tool}, not a tool: it must return a tool wrapped with ` +
        "idempotent() or a plain async function",
    );
  }
  const fn = tool as (args: unknown, call: unknown) => unknown;
  const wrapped = isWrappedTool(tool);
  return {
    name: wrapped ? tool.toolName : fn.name || fallbackName,
    kind: wrapped ? "idempotent" : "plain",
    call: async (args, call) => fn(args, call),
  };
}

/** Where tsx lives, for loading TypeScript in this process and in the crash child. */
export interface TypeScriptLoader {
  /** For `node --import <url>`. */
  readonly importUrl: string;
  /** tsx's `register()` API. */
  readonly apiUrl: string;
}

/** Find tsx from the user's folder, else from idempotool's own. */
export function findTypeScriptLoader(cwd: string): TypeScriptLoader | undefined {
  for (const from of [join(cwd, "package.json"), fileURLToPath(import.meta.url)]) {
    try {
      const manifest = createRequire(from).resolve("tsx/package.json");
      const { exports } = JSON.parse(readFileSync(manifest, "utf8")) as { exports?: Record<string, unknown> };
      const main = exports?.["."];
      const api = (exports?.["./esm/api"] as { import?: { default?: unknown } } | undefined)?.import?.default;
      if (typeof main !== "string" || typeof api !== "string") continue;
      const dir = dirname(manifest);
      return { importUrl: pathToFileURL(join(dir, main)).href, apiUrl: pathToFileURL(join(dir, api)).href };
    } catch {
      // Not installed there; try the next place.
    }
  }
  return undefined;
}

let registered = false;

/** Registers tsx for the rest of the process; false when it is not installed. */
async function registerTypeScript(cwd: string): Promise<boolean> {
  if (registered) return true;
  const loader = findTypeScriptLoader(cwd);
  if (!loader) return false;
  const api = (await import(loader.apiUrl)) as { register: () => unknown };
  api.register();
  registered = true;
  return true;
}

function loadError(ref: ModuleRef, error: unknown, strippedByNode = false): IdempotencyError {
  const reason = error instanceof Error ? error.message.split("\n")[0] : String(error);
  // Node's own type stripping resolves imports as written: "./x.js" does not find ./x.ts.
  const hint = strippedByNode
    ? " (Node loaded it without tsx; install tsx beside idempotool to load it as TypeScript does: npm install tsx)"
    : "";
  return new IdempotencyError("invalid_options", `chaos: cannot load ${ref.path}: ${reason}${hint}`, {
    cause: error,
  });
}

/** A module reference the harness cannot use: a bad option as a whole, not one field of it. */
function unusableModule(problem: string): never {
  throw new IdempotencyError("invalid_options", `chaos: ${problem}.`);
}
