/**
 * `idempotool/dynamodb`: an idempotency store on Amazon DynamoDB, for agent workers on Lambda, containers
 * or anywhere else that share one dedup state. It takes the `DynamoDBClient` you already have, typed by the
 * one method it uses (`@aws-sdk/client-dynamodb` is an optional peer dependency, loaded on first use). One
 * item per record; every claim and settle is one conditional write, fenced by the owner token. DynamoDB has
 * no clock an operation can read, so leases are judged by the caller's clock with a skew margin.
 *
 * @example
 * import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
 * import { idempotent } from "idempotool";
 * import { dynamoStore } from "idempotool/dynamodb";
 *
 * const client = new DynamoDBClient({ region: "eu-west-1" });
 * const store = dynamoStore({ client, table: "idempotool_records" });
 * const sendSms = idempotent(async (args: { to: string }) => ({ queued: args.to }), { name: "send_sms", store });
 * await sendSms({ to: "+15550100" }, { key: "turn-3-sms" });
 * await sendSms({ to: "+15550100" }, { key: "turn-3-sms" }); // was_replay: true, and one SMS queued
 *
 * @module
 */
export type { DynamoDBClientLike, DynamoStore, DynamoStoreOptions } from "./dynamo-store.js";
export { dynamoStore } from "./dynamo-store.js";
export { createTableInput } from "./table.js";
