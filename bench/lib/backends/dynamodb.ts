import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { IdempotencyConfig, makeIdempotent } from "@aws-lambda-powertools/idempotency";
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import dynalite from "dynalite";
import type { Library } from "../library.js";
import {
  type Call,
  countedTool,
  type Subject,
  SubjectName,
  type ToolArgs,
  wrapperSubject,
} from "../subject.js";
import { BackendName, type BackendSetup } from "./backend.js";
import { costCounter, costLines, measureCost } from "./dynamodb-cost.js";
import { idempotoolSubject } from "./memory.js";

type PowertoolsDynamo = typeof import("@aws-lambda-powertools/idempotency/dynamodb");

const ttlSeconds = 24 * 60 * 60;
const leaseMs = 60_000;

/** Powertools' DynamoDB persistence layer on the same client: its default table (key attribute `id`). */
function powertoolsDynamoSubject(
  DynamoDBPersistenceLayer: PowertoolsDynamo["DynamoDBPersistenceLayer"],
  client: DynamoDBClient,
  tableName: string,
): Subject {
  const tool = countedTool();
  const build = (): Call => {
    const config = new IdempotencyConfig({
      eventKeyJmesPath: "key",
      expiresAfterSeconds: ttlSeconds,
      hashFunction: "sha256",
      throwOnNoIdempotencyKey: true,
    });
    // Outside Lambda there is no remaining time: the same 60 s in-progress lease as idempotool.
    config.registerLambdaContext({ getRemainingTimeInMillis: () => leaseMs } as Parameters<
      IdempotencyConfig["registerLambdaContext"]
    >[0]);
    const wrapped = makeIdempotent(
      async (payload: { key: string; args: ToolArgs }) => tool.fn(payload.args),
      {
        persistenceStore: new DynamoDBPersistenceLayer({ tableName, awsSdkV3Client: client }),
        config,
      },
    );
    return (key, args) => wrapped({ key, args });
  };
  return wrapperSubject({
    name: SubjectName.powertools,
    description:
      "@aws-lambda-powertools/idempotency makeIdempotent + DynamoDBPersistenceLayer (same client; eventKeyJmesPath 'key', sha256, 24 h, 60 s in-progress expiry)",
    tool,
    build,
    validatesPayload: false,
  });
}

/** idempotool's dynamoStore and Powertools' DynamoDB layer, on one dynalite (in memory) this run starts. */
export async function dynamoBackends(lib: Library, candidate?: Library): Promise<BackendSetup> {
  const server = dynalite({ createTableMs: 0 });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const client = new DynamoDBClient({
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    region: "us-east-1",
    credentials: { accessKeyId: "bench", secretAccessKey: "bench" },
  });
  // Counts requests and units for the notes, after the timed runs; it only passes requests on before.
  const counter = costCounter(client);
  const raw = new DynamoDBClient({
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    region: "us-east-1",
    credentials: { accessKeyId: "bench", secretAccessKey: "bench" },
  });
  const table = async (key: string) => {
    const name = `bench-${key}-${randomUUID()}`;
    await client.send(
      new CreateTableCommand({
        TableName: name,
        AttributeDefinitions: [{ AttributeName: key, AttributeType: "S" }],
        KeySchema: [{ AttributeName: key, KeyType: "HASH" }],
        BillingMode: "PAY_PER_REQUEST",
      }),
    );
    // dynalite turns a new table ACTIVE a moment after it answers; until then it refuses its items.
    for (;;) {
      const { Table } = await client.send(new DescribeTableCommand({ TableName: name }));
      if (Table?.TableStatus === "ACTIVE") break;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    return name;
  };
  const subjects: Subject[] = [];
  // Without a built idempotool/dynamodb (run.ts reports why) Powertools' row still runs.
  const storeTable = await table("pk");
  const store = lib.dynamodb?.dynamoStore({ client, table: storeTable });
  if (store) {
    const subject = idempotoolSubject(lib, () => store, "dynamoStore({ client: DynamoDBClient })");
    subjects.push(subject);
  }
  // Powertools' layer needs @aws-sdk/lib-dynamodb, a peer dependency of it: without it, its row is skipped.
  let powertools: PowertoolsDynamo | undefined;
  let missing = "";
  try {
    powertools = await import("@aws-lambda-powertools/idempotency/dynamodb");
    const powertoolsTable = await table("id");
    const subject = powertoolsDynamoSubject(powertools.DynamoDBPersistenceLayer, client, powertoolsTable);
    subjects.push(subject);
  } catch (error) {
    missing = `; Powertools' row skipped: ${(error as Error).message.split("\n")[0]}`;
  }
  const candidateTable = await table("pk");
  const candidateStore = candidate?.dynamodb?.dynamoStore({ client, table: candidateTable });
  if (candidate && candidateStore) {
    const subject = idempotoolSubject(
      candidate,
      () => candidateStore,
      `dynamoStore from ${candidate.dir}`,
      false,
      SubjectName.candidate,
    );
    subjects.push(subject);
  }
  return {
    backends: [
      {
        name: BackendName.dynamodb,
        description: `dynalite 4 (the DynamoDB API on in-memory LevelDB) over HTTP on loopback, @aws-sdk/client-dynamodb v3; dynalite sends no item with a refused write, so an idempotool replay is 2 requests here (1 on DynamoDB)${missing}`,
        concurrencies: [1],
        subjects,
      },
    ],
    info: { dynalite: "4.0.0" },
    async notes(nextKey) {
      const costs = [];
      // On tables of their own, so that every item a scan finds is one of the probe's settled calls.
      for (const subject of subjects) {
        const own = await table(subject.name === SubjectName.powertools ? "id" : "pk");
        const probed =
          subject.name === SubjectName.powertools && powertools
            ? powertoolsDynamoSubject(powertools.DynamoDBPersistenceLayer, client, own)
            : subject.name === SubjectName.candidate && candidate?.dynamodb
              ? idempotoolSubject(
                  candidate,
                  () => candidate.dynamodb!.dynamoStore({ client, table: own }),
                  "",
                  false,
                  SubjectName.candidate,
                )
              : lib.dynamodb
                ? idempotoolSubject(lib, () => lib.dynamodb!.dynamoStore({ client, table: own }), "")
                : undefined;
        if (probed) costs.push(await measureCost(counter, raw, own, probed, nextKey));
      }
      return costLines(costs);
    },
    async close() {
      raw.destroy();
      client.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
