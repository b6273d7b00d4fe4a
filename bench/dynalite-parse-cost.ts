/**
 * What dynalite's expression parser costs per request for the DynamoDB store's conditions, and for
 * Powertools' on the same calls: dynalite parses every ConditionExpression and UpdateExpression with a PEG
 * parser in the bench's own process, so this is part of the CPU per call `npm run bench -- --store
 * dynamodb` counts. CPU time per parse (user + system), the median of --reps rounds of --parses each,
 * after a round that warms the parser up; robust to other load on the machine, unlike ops/s.
 *
 *   node --import tsx bench/dynalite-parse-cost.ts [--parses 2000] [--reps 7]
 *
 * The strings are the store's, before and after 2026-12-07 (bench/HISTORY.md): the same conditions with
 * and without parentheses (DynamoDB binds AND tighter than OR, so the meaning is the same).
 */
import { createRequire } from "node:module";
import { parseArgs } from "node:util";

const require = createRequire(import.meta.url);
interface Parser {
  parse(text: string, options: { context: object }): unknown;
}
const conditionParser = require("dynalite/db/conditionParser") as Parser;
const updateParser = require("dynalite/db/updateParser") as Parser;
const db = require("dynalite/db") as { compare: unknown };

const { values } = parseArgs({
  options: { parses: { type: "string", default: "2000" }, reps: { type: "string", default: "7" } },
});
const parses = Number(values.parses);
const reps = Number(values.reps);

type Kind = "condition" | "update";
/** [what, kind, expression]: the placeholders are read from the text. */
const expressions: [string, Kind, string][] = [
  [
    "put claim, before",
    "condition",
    "attribute_not_exists(pk) OR (attribute_not_exists(rt) AND attribute_not_exists(released) AND s <> :released AND e <= :now)",
  ],
  [
    "put claim, before the earlier builds' set (M2)",
    "condition",
    "attribute_not_exists(pk) OR (attribute_not_exists(rt) AND s <> :released AND e <= :now)",
  ],
  [
    "put claim, now",
    "condition",
    "attribute_not_exists(pk) OR attribute_not_exists(rt) AND attribute_not_exists(released) AND s <> :released AND e <= :now",
  ],
  ["put claim, key only (dropped)", "condition", "attribute_not_exists(pk)"],
  ["settle, before", "condition", "o = :token AND (s = :inProgress OR s = :unknown)"],
  ["settle, now", "condition", "s IN (:inProgress, :unknown) AND o = :token"],
  [
    "settle's update",
    "update",
    "SET s = :status, u = :at - c, e = :expiresAt, #ttl = :ttl, r = :r REMOVE l, x",
  ],
  [
    "update claim, before",
    "condition",
    "(attribute_not_exists(pk) OR (s = :released AND o <> :token) OR (s <> :released AND e <= :now)) AND NOT contains(rt, :tokenText) AND NOT contains(released, :tokenText)",
  ],
  [
    "update claim, now",
    "condition",
    "attribute_not_exists(pk) OR s = :released AND o <> :token AND NOT contains(rt, :tokenText) AND NOT contains(released, :tokenText) OR s <> :released AND e <= :now AND NOT contains(rt, :tokenText) AND NOT contains(released, :tokenText)",
  ],
  [
    "Powertools' put",
    "condition",
    "attribute_not_exists(#id) OR #expiry < :now OR (attribute_exists(#in_progress_expiry) AND #in_progress_expiry < :now_in_millis AND #status = :inprogress)",
  ],
  [
    "Powertools' update",
    "update",
    "SET #response_data = :response_data, #expiry = :expiry, #status = :status",
  ],
];

/** The context dynalite's validations hand the parser: the request's placeholders, all of them used. */
function context(text: string): object {
  const attrVals = Object.fromEntries((text.match(/:\w+/g) ?? []).map((name) => [name, { S: "x" }]));
  const attrNames = Object.fromEntries((text.match(/#\w+/g) ?? []).map((name) => [name, name.slice(1)]));
  return {
    attrNames,
    attrVals,
    unusedAttrNames: { ...attrNames },
    unusedAttrVals: { ...attrVals },
    isReserved: (name: string) => ["TTL", "STATUS", "KEY", "TOKEN"].includes(name.toUpperCase()),
    compare: db.compare,
  };
}

function cpuPerParse(kind: Kind, text: string): number {
  const parser = kind === "condition" ? conditionParser : updateParser;
  const start = process.cpuUsage();
  for (let i = 0; i < parses; i++) parser.parse(text, { context: context(text) });
  const used = process.cpuUsage(start);
  return (used.user + used.system) / parses;
}

for (const [, kind, text] of expressions) cpuPerParse(kind, text);
const rounds = new Map<string, number[]>();
for (let rep = 0; rep < reps; rep++)
  for (const [what, kind, text] of expressions)
    rounds.set(what, [...(rounds.get(what) ?? []), cpuPerParse(kind, text)]);
console.log(`| expression | µs per parse (median of ${reps} × ${parses}) |`);
console.log("| --- | ---: |");
for (const [what, times] of rounds) {
  const sorted = times.sort((a, b) => a - b);
  console.log(`| ${what} | ${sorted[sorted.length >> 1]!.toFixed(0)} |`);
}
