/**
 * CPU per call on dynalite (this process: the client, the SDK and dynalite, which runs here), idempotool's
 * built `dynamoStore` beside Powertools' DynamoDB layer, and beside another build with --compare, on one
 * dynalite. The subjects take turns call by call (A B C, C B A, …), so load from other processes and
 * dynalite's own housekeeping fall on them alike: on a shared machine this reads steadier than the bench's
 * 300 ms repetitions. Prints each subject's CPU per first call and per replay, and the ratios.
 *
 *   node --import tsx bench/dynamo-cpu.ts [--calls 1500] [--lib dist] [--compare DIR]
 */
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { IdempotencyConfig, makeIdempotent } from "@aws-lambda-powertools/idempotency";
import { DynamoDBPersistenceLayer } from "@aws-lambda-powertools/idempotency/dynamodb";
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import dynalite from "dynalite";
import { type ToolArgs, toolArgs } from "./lib/subject.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    calls: { type: "string", default: "1500" },
    lib: { type: "string", default: "dist" },
    compare: { type: "string" },
  },
});
const calls = Number(values.calls);
if (!Number.isSafeInteger(calls) || calls < 100) throw new Error("--calls must be an integer ≥ 100");

const server = dynalite({ createTableMs: 0 });
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
const client = new DynamoDBClient({
  endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
  region: "us-east-1",
  credentials: { accessKeyId: "bench", secretAccessKey: "bench" },
});

async function table(key: string): Promise<string> {
  const name = `cpu-${randomUUID()}`;
  await client.send(
    new CreateTableCommand({
      TableName: name,
      AttributeDefinitions: [{ AttributeName: key, AttributeType: "S" }],
      KeySchema: [{ AttributeName: key, KeyType: "HASH" }],
      BillingMode: "PAY_PER_REQUEST",
    }),
  );
  for (;;) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: name }));
    if (Table?.TableStatus === "ACTIVE") return name;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

const tool = async (args: ToolArgs) => ({ queued: true, to: args.to, messageId: "m-1" });
type Call = (key: string) => Promise<unknown>;

/** idempotool's `idempotent()` on `dynamoStore`, both from the build in `dir`. */
async function idempotool(dir: string): Promise<Call> {
  const url = (file: string) => pathToFileURL(path.resolve(root, dir, file)).href;
  const core = (await import(url("index.js"))) as typeof import("../src/index.js");
  const { dynamoStore } = (await import(
    url("dynamodb/index.js")
  )) as typeof import("../src/dynamodb/index.js");
  const wrapped = core.idempotent(tool, {
    name: "send_email",
    store: dynamoStore({ client, table: await table("pk") }),
  });
  return (key) => wrapped(toolArgs, { key });
}

/** Powertools' DynamoDB layer, configured as the bench's (validation off, 24 h, a 60 s lease). */
async function powertools(): Promise<Call> {
  const config = new IdempotencyConfig({
    eventKeyJmesPath: "key",
    expiresAfterSeconds: 86_400,
    hashFunction: "sha256",
    throwOnNoIdempotencyKey: true,
  });
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 } as Parameters<
    IdempotencyConfig["registerLambdaContext"]
  >[0]);
  const wrapped = makeIdempotent(async (payload: { key: string; args: ToolArgs }) => tool(payload.args), {
    persistenceStore: new DynamoDBPersistenceLayer({ tableName: await table("id"), awsSdkV3Client: client }),
    config,
  });
  return (key) => wrapped({ key, args: toolArgs });
}

const subjects: [string, Call][] = [
  ["idempotool", await idempotool(values.lib)],
  ["powertools", await powertools()],
  ...(values.compare ? [["candidate", await idempotool(values.compare)] as [string, Call]] : []),
];
let sequence = 0;
const completed = new Map<string, string[]>();
for (const [name, call] of subjects) {
  const keys: string[] = [];
  for (let i = 0; i < 100; i++) {
    const key = `warm-${sequence++}`;
    await call(key);
    keys.push(key);
  }
  completed.set(name, keys);
}
const cpu = () => {
  const used = process.cpuUsage();
  return used.user + used.system;
};
console.log(`CPU µs per call, ${calls} calls each, subjects taking turns call by call`);
console.log("");
console.log("| workload | subject | CPU µs/call | idempotool ÷ subject |");
console.log("| --- | --- | ---: | ---: |");
for (const workload of ["first", "replay"]) {
  const spent = new Map<string, number>();
  for (let i = 0; i < calls; i++) {
    for (const [name, call] of i % 2 === 0 ? subjects : [...subjects].reverse()) {
      const key = workload === "first" ? `key-${sequence++}` : completed.get(name)![i % 100]!;
      const start = cpu();
      await call(key);
      spent.set(name, (spent.get(name) ?? 0) + cpu() - start);
    }
  }
  const ours = spent.get("idempotool")!;
  for (const [name] of subjects) {
    const theirs = spent.get(name)!;
    const ratio = name === "idempotool" ? "" : (ours / theirs).toFixed(2);
    console.log(`| ${workload} | ${name} | ${(theirs / calls).toFixed(0)} | ${ratio} |`);
  }
}
client.destroy();
await new Promise<void>((resolve) => server.close(() => resolve()));
