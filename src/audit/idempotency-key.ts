/**
 * Does a tool's input schema let the caller pass an idempotency key? Read precisely: a field counts when
 * its name says so (`idempotency_key`, `idempotencyKey`, `charge_idempotency_key`, AWS's `ClientToken`,
 * SQS's `MessageDeduplicationId`), or when a generic name (`request_id`, `operation_id`) comes with a
 * description that says the server dedupes on it. A generic name alone is reported, not counted.
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { maxArgumentDepth } from "../core/option-checks.js";
import type { JsonSchema } from "./tool-definition.js";

/** The key field a tool exposes. */
export interface KeyField {
  /** Its path in the arguments: `idempotency_key`, or `options.idempotencyKey` when nested. */
  readonly field: string;
  /** Whether the schema requires it (at every level of the path). A model may leave an optional key out. */
  readonly required: boolean;
}

/** What {@link findIdempotencyKey} found. */
export interface KeySearch {
  readonly key: KeyField | undefined;
  /** Fields whose name could be a key but whose description does not say the server dedupes on it. */
  readonly lookalikes: readonly string[];
}

/** Names that only ever mean "dedupe on me" (compared lowercased, without separators). */
const dedupNames = new Set([
  "dedupkey",
  "dedupid",
  "dedupekey",
  "dedupeid",
  "deduplicationkey",
  "deduplicationid",
  "messagededuplicationid",
  "clienttoken",
  "clientrequesttoken",
]);

/**
 * Generic identifiers that are keys only when described as one. Slack's `client_msg_id` is here on
 * purpose: Slack accepts it but does not enforce uniqueness.
 */
const genericNames = new Set([
  "requestid",
  "requesttoken",
  "clientrequestid",
  "operationid",
  "uniquekey",
  "uniqueid",
  "nonce",
  "clientmsgid",
  "clientreferenceid",
  "externalid",
]);

const describedAsKey = /idempoten|de-?dup|duplicate|retr(y|ies)|at most once|exactly once|same key/i;
const maxDepth = 3;

/**
 * Find the idempotency key in a tool's input schema, following nested objects, `allOf` and local `$ref`s.
 * @example
 * findIdempotencyKey({
 *   type: "object",
 *   properties: { to: { type: "string" }, idempotency_key: { type: "string" } },
 *   required: ["to", "idempotency_key"],
 * }).key; // { field: "idempotency_key", required: true }
 */
export function findIdempotencyKey(schema: JsonSchema | undefined): KeySearch {
  const lookalikes: string[] = [];
  const found: KeyField[] = [];
  if (schema) visit(schema, schema, "", true, 0, found, lookalikes, new Set());
  // Prefer a required key, then the shallowest.
  found.sort(
    (a, b) =>
      Number(b.required) - Number(a.required) || a.field.split(".").length - b.field.split(".").length,
  );
  return { key: found[0], lookalikes };
}

function visit(
  root: JsonSchema,
  schema: JsonSchema,
  prefix: string,
  requiredSoFar: boolean,
  depth: number,
  found: KeyField[],
  lookalikes: string[],
  seen: Set<JsonSchema>,
): void {
  if (depth > maxDepth || seen.has(schema)) return;
  seen.add(schema);
  const { properties, required } = flatten(root, schema, new Set());
  for (const [name, raw] of Object.entries(properties)) {
    const property = resolve(root, raw);
    const field = prefix ? `${prefix}.${name}` : name;
    const isRequired = requiredSoFar && required.has(name);
    const verdict = judgeName(name, property);
    if (verdict === "key") found.push({ field, required: isRequired });
    else if (verdict === "lookalike") lookalikes.push(field);
    if (property.properties || property.allOf || property.$ref) {
      visit(root, property, field, isRequired, depth + 1, found, lookalikes, seen);
    }
  }
  seen.delete(schema);
}

function judgeName(name: string, property: JsonSchema): "key" | "lookalike" | undefined {
  const normal = name.toLowerCase().replace(/[^a-z0-9]/g, "");
  const description = typeof property.description === "string" ? property.description : "";
  if (normal.includes("idempoten")) return "key";
  if (dedupNames.has(normal)) return "key";
  if (/idempoten/i.test(description)) return "key";
  if (genericNames.has(normal)) return describedAsKey.test(description) ? "key" : "lookalike";
  return undefined;
}

/** The properties and required names of a schema, merged over its `allOf` members and `$ref`. */
function flatten(
  root: JsonSchema,
  schema: JsonSchema,
  seen: Set<JsonSchema>,
  depth = 0,
): { properties: Record<string, JsonSchema>; required: Set<string> } {
  const properties: Record<string, JsonSchema> = {};
  const required = new Set<string>();
  if (seen.has(schema)) return { properties, required };
  if (depth >= maxArgumentDepth) {
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `Cannot read the tool definitions: an input schema nests allOf or $ref more than ${maxArgumentDepth} levels deep.`,
    );
  }
  seen.add(schema);
  // A schema is the caller's data: an allOf that is no array, or holds no objects, adds nothing.
  const allOf: readonly JsonSchema[] = Array.isArray(schema.allOf)
    ? schema.allOf.filter(
        (part: JsonSchema | null): part is JsonSchema => typeof part === "object" && part !== null,
      )
    : [];
  const parts = [schema, ...(schema.$ref ? [resolve(root, schema)] : []), ...allOf];
  for (const part of parts) {
    if (part !== schema && (part.properties || part.allOf || part.$ref)) {
      const inner = flatten(root, part, seen, depth + 1);
      Object.assign(properties, inner.properties);
      for (const name of inner.required) required.add(name);
      continue;
    }
    if (typeof part.properties === "object" && part.properties !== null) {
      for (const [name, value] of Object.entries(part.properties)) {
        if (typeof value === "object" && value !== null) properties[name] = value;
      }
    }
    if (Array.isArray(part.required)) {
      for (const name of part.required) if (typeof name === "string") required.add(name);
    }
  }
  return { properties, required };
}

/** Follow a local `$ref` (`#/$defs/X`, `#/definitions/X`); anything else stays as it is. */
function resolve(root: JsonSchema, schema: JsonSchema): JsonSchema {
  const ref = schema.$ref;
  if (typeof ref !== "string" || !ref.startsWith("#/")) return schema;
  let target: unknown = root;
  for (const segment of ref.slice(2).split("/")) {
    const name = segment.replace(/~1/g, "/").replace(/~0/g, "~");
    target =
      typeof target === "object" && target !== null ? (target as Record<string, unknown>)[name] : undefined;
  }
  return typeof target === "object" && target !== null && target !== schema ? (target as JsonSchema) : schema;
}
