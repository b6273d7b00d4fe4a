/**
 * What a call costs on DynamoDB, counted rather than timed: requests, capacity units and the settled item's
 * size, for each subject of the DynamoDB row group. Deterministic, so it reads the same on a loaded machine.
 *
 * - requests: every command the subject's client sends, by name (dynalite sends no item back with a refused
 *   write, so a replay reads the item after it: one request more than on DynamoDB, for both libraries);
 * - units: what DynamoDB bills, 1 write unit per KB of the larger of the item before and after a write, a
 *   refused conditional write included (billed at the item it was refused by), 1 read unit per 4 KB of a
 *   strongly consistent read. dynalite reports the units of the requests it applies
 *   (`ReturnConsumedCapacity`); a refused write's are counted here from the item's size;
 * - item bytes: the settled item's size as DynamoDB counts it (below).
 */

import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { ScanCommand } from "@aws-sdk/client-dynamodb";
import { median } from "../measure.js";
import { type Subject, toolArgs } from "../subject.js";

type Value = Record<string, unknown>;

/**
 * An item's size as DynamoDB counts it against its 400 KB limit and bills it: each attribute's name (UTF-8
 * bytes) plus its value: a string's UTF-8 bytes, a binary's bytes, a number's 1 byte per two significant
 * digits plus 1, 1 byte for a boolean or null, a set the sum of its members, a list or map 3 bytes plus
 * 1 byte and the value of each element (and a map's element names).
 */
export function dynamoItemBytes(item: Value): number {
  let total = 0;
  for (const [name, value] of Object.entries(item))
    total += Buffer.byteLength(name) + valueBytes(value as Value);
  return total;
}

function valueBytes(value: Value): number {
  const [type, inner] = Object.entries(value)[0] ?? [];
  switch (type) {
    case "S":
      return Buffer.byteLength(inner as string);
    case "B":
      return (inner as Uint8Array).byteLength;
    case "N":
      return numberBytes(inner as string);
    case "SS":
      return (inner as string[]).reduce((sum, s) => sum + Buffer.byteLength(s), 0);
    case "NS":
      return (inner as string[]).reduce((sum, s) => sum + numberBytes(s), 0);
    case "BS":
      return (inner as Uint8Array[]).reduce((sum, b) => sum + b.byteLength, 0);
    case "BOOL":
    case "NULL":
      return 1;
    case "L":
      return 3 + (inner as Value[]).reduce((sum, v) => sum + 1 + valueBytes(v), 0);
    case "M":
      return (
        3 +
        Object.entries(inner as Record<string, Value>).reduce(
          (sum, [k, v]) => sum + 1 + Buffer.byteLength(k) + valueBytes(v),
          0,
        )
      );
    default:
      throw new Error(`dynamoItemBytes: unknown attribute type ${String(type)}`);
  }
}

function numberBytes(text: string): number {
  const digits = text.replace(/^-/, "").replace(".", "").replace(/^0+/, "").replace(/0+$/, "");
  return Math.ceil(Math.max(digits.length, 1) / 2) + 1;
}

/** What one kind of call cost, per call (medians over the probe's calls). */
export interface CallCost {
  readonly requests: number;
  readonly requestNames: string;
  readonly units: number;
}

export interface SubjectCost {
  readonly subject: string;
  readonly first: CallCost;
  readonly replay: CallCost;
  readonly itemBytes: number;
}

interface Sent {
  name: string;
  units: number;
  refused: boolean;
}

/**
 * Counts what the client sends while `probe` runs: each command's name and the units dynalite reports
 * (asked for on every request while counting). Outside a probe the middleware only passes requests on.
 */
export function costCounter(client: DynamoDBClient) {
  let sent: Sent[] | undefined;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const log = sent;
      if (log === undefined) return next(args);
      const input = args.input as Value;
      input.ReturnConsumedCapacity = "TOTAL";
      const entry: Sent = {
        name: String(context.commandName).replace(/Command$/, ""),
        units: 0,
        refused: false,
      };
      log.push(entry);
      try {
        const result = await next(args);
        const consumed = (result.output as { ConsumedCapacity?: { CapacityUnits?: number } })
          .ConsumedCapacity;
        entry.units = consumed?.CapacityUnits ?? 0;
        return result;
      } catch (error) {
        entry.refused = (error as { name?: unknown }).name === "ConditionalCheckFailedException";
        throw error;
      }
    },
    { step: "initialize", name: "benchDynamoCost" },
  );
  return {
    async probe(run: () => Promise<unknown>): Promise<Sent[]> {
      sent = [];
      try {
        await run();
        return sent;
      } finally {
        sent = undefined;
      }
    },
  };
}

/**
 * `calls` first calls and as many replays of the subject on fresh keys; the settled items' size is read
 * back from its table (every item there is one of this run's settled calls).
 */
export async function measureCost(
  counter: ReturnType<typeof costCounter>,
  raw: DynamoDBClient,
  table: string,
  subject: Subject,
  nextKey: () => string,
  calls = 20,
): Promise<SubjectCost> {
  const keys = Array.from({ length: calls }, nextKey);
  const firsts: Sent[][] = [];
  for (const key of keys) firsts.push(await counter.probe(() => subject.first(key, toolArgs)));
  const replays: Sent[][] = [];
  for (const key of keys) replays.push(await counter.probe(() => subject.replay(key, toolArgs)));
  const sizes: number[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await raw.send(
      new ScanCommand({
        TableName: table,
        ConsistentRead: true,
        ...(start ? { ExclusiveStartKey: start as never } : {}),
      }),
    );
    for (const item of page.Items ?? []) sizes.push(dynamoItemBytes(item as Value));
    start = page.LastEvaluatedKey;
  } while (start !== undefined);
  const itemBytes = median(sizes);
  // A refused conditional write is billed as a write at the size of the item that refused it.
  const refusedUnits = Math.max(1, Math.ceil(itemBytes / 1024));
  const cost = (log: Sent[][]): CallCost => ({
    requests: median(log.map((l) => l.length)),
    requestNames: log[0]?.map((s) => (s.refused ? `${s.name} (refused)` : s.name)).join(" + ") ?? "",
    units: median(log.map((l) => l.reduce((sum, s) => sum + (s.refused ? refusedUnits : s.units), 0))),
  });
  return { subject: subject.name, first: cost(firsts), replay: cost(replays), itemBytes };
}

/** The costs as Markdown lines: a table, one row per subject. */
export function costLines(costs: readonly SubjectCost[]): string[] {
  return [
    "DynamoDB cost per call, counted on dynalite (deterministic): requests sent, capacity units as DynamoDB",
    "bills them (a refused conditional write at the size of the item that refused it), and the settled item's",
    "size as DynamoDB counts it (attribute names + values). On DynamoDB a replay's refused write returns the",
    "item (ReturnValuesOnConditionCheckFailure), so its read here (1 request, 1 read unit) is not made there.",
    "",
    "| subject | first call: requests | units | replay: requests | units | settled item bytes |",
    "|---|---|---:|---|---:|---:|",
    ...costs.map(
      (c) =>
        `| ${c.subject} | ${c.first.requests} (${c.first.requestNames}) | ${c.first.units} | ${c.replay.requests} (${c.replay.requestNames}) | ${c.replay.units} | ${c.itemBytes} |`,
    ),
  ];
}
