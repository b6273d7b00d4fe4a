import { createRequire } from "node:module";
import type * as z3 from "zod/v3";
import type * as z4 from "zod/v4/core";
import { IdempotencyError } from "../core/errors.js";
import { invalidOption } from "../core/option-checks.js";

const owner = "registerIdempotentTool()";

/** One zod schema, built with zod 3 or zod 4. */
export type AnySchema = z3.ZodTypeAny | z4.$ZodType;

/** A raw shape: `{ field: z.string() }`, as `registerTool` takes it. */
export type RawShape = Record<string, AnySchema>;

/** A zod object schema (`z.object({ … })`), built with zod 3 or zod 4. */
export type ObjectSchema = z3.AnyZodObject | z4.$ZodObject;

/** What a tool's input or output schema may be: a raw shape or a zod object. */
export type ToolSchema = RawShape | ObjectSchema;

type SchemaOutput<S> = S extends z3.ZodTypeAny ? z3.infer<S> : S extends z4.$ZodType ? z4.output<S> : never;

/** The arguments a tool gets for its input schema. */
export type ArgsOf<S extends ToolSchema> = S extends ObjectSchema
  ? SchemaOutput<S>
  : { [K in keyof S]: SchemaOutput<S[K]> };

/** A string schema under construction; zod 3 and zod 4 (classic) both chain this way. */
export interface ZodStringBuilder {
  min(length: number, message?: string): ZodStringBuilder;
  max(length: number, message?: string): ZodStringBuilder;
  describe(description: string): AnySchema;
  optional(): { describe(description: string): AnySchema };
}

/**
 * The part of a zod namespace we build schemas with. `z` from `"zod"`, `"zod/v3"` or `"zod/v4"` fits;
 * `zod/mini` has no methods to chain, so pass a classic namespace of the same major version instead.
 */
export interface ZodNamespace {
  string(params?: { message?: string }): ZodStringBuilder;
  boolean(): AnySchema;
  object(shape: Record<string, AnySchema>): ZodObjectBuilder;
}

/** An object schema under construction; zod 3 and zod 4 (classic) both chain this way. */
export type ZodObjectBuilder = AnySchema & {
  optional(): { describe(description: string): AnySchema };
};

/** zod 3 schemas keep their definition on `_def`; zod 4 schemas (classic and mini) carry `_zod`. */
export type ZodFlavour = "v3" | "v4";

const entryOf: Record<ZodFlavour, string> = { v3: "zod/v3", v4: "zod/v4" };
const loaded = new Map<ZodFlavour, ZodNamespace>();

/**
 * The flavour of a raw shape's schemas, or undefined for an empty shape. The MCP SDK refuses a shape
 * that mixes flavours ("Mixed Zod versions"), so every schema we add must match the user's.
 */
export function flavourOf(shape: RawShape, option: string): ZodFlavour | undefined {
  let flavour: ZodFlavour | undefined;
  for (const [field, schema] of Object.entries(shape)) {
    const own = schemaFlavour(schema);
    if (own === undefined) {
      invalidOption(
        owner,
        option,
        `must be a raw shape of zod schemas ({ field: z.string() }); \`${field}\` is not a zod schema`,
      );
    }
    if (flavour !== undefined && own !== flavour) {
      invalidOption(
        owner,
        option,
        "mixes zod 3 and zod 4 schemas, which the MCP SDK refuses: build every field with one zod",
      );
    }
    flavour = own;
  }
  return flavour;
}

function schemaFlavour(value: unknown): ZodFlavour | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  if ("_zod" in value) return "v4";
  if ("_def" in value) return "v3";
  return undefined;
}

/**
 * The zod namespace to build our schemas with: the caller's `z` if given (checked against the flavour),
 * else the matching entry of the zod installed beside idempotool (zod 4 for a flavourless, empty shape).
 *
 * Why load it rather than import it: this entry must not import zod at runtime (the root package never
 * needs it, and which flavour is right depends on the user's shape). Why synchronously, through
 * `createRequire`: `registerTool` is synchronous, and so is registering an idempotent tool. zod is a
 * required peer of the SDK (`^3.25 || ^4`), and every such zod ships both `zod/v3` and `zod/v4` with a
 * CommonJS build, so the entry resolves wherever the SDK does. zod 4 keeps descriptions in a registry on
 * `globalThis`, so a schema from the CommonJS build still shows its description when the SDK's ES build
 * lists the tool. Pass `z` where `require` is unavailable (a bundle, an edge runtime).
 */
export function zodNamespace(flavour: ZodFlavour | undefined, given: ZodNamespace | undefined): ZodNamespace {
  if (given !== undefined) {
    if (typeof given !== "object" || given === null || typeof given.string !== "function") {
      invalidOption(owner, "z", 'must be a zod namespace (import { z } from "zod")');
    }
    const built = schemaFlavour(given.string());
    if (flavour !== undefined && built !== flavour) {
      invalidOption(
        owner,
        "z",
        `builds zod ${built === "v4" ? "4" : "3"} schemas but the tool's schemas are zod ${flavour === "v4" ? "4" : "3"}: pass the z your schemas are built with`,
      );
    }
    return given;
  }
  // An empty shape has no flavour; the SDK itself builds such objects with zod 4.
  flavour ??= "v4";
  const cached = loaded.get(flavour);
  if (cached) return cached;
  let namespace: ZodNamespace;
  try {
    const entry = createRequire(import.meta.url)(entryOf[flavour]) as { z?: ZodNamespace } & ZodNamespace;
    namespace = entry.z ?? entry;
  } catch (error) {
    throw new IdempotencyError(
      "invalid_options",
      `registerIdempotentTool(): could not load ${entryOf[flavour]} (${error instanceof Error ? error.message : String(error)}). ` +
        'Pass your zod namespace as the `z` option: import { z } from "zod".',
      { cause: error },
    );
  }
  loaded.set(flavour, namespace);
  return namespace;
}
