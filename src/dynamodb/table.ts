/**
 * The table the store expects, as the input of DynamoDB's CreateTable: a string partition key `pk`, no
 * sort key, on-demand capacity. Pass it to `CreateTableCommand`, then turn TTL on for the `ttl` attribute
 * (`UpdateTimeToLiveCommand`); docs/stores.md has the same table for the CLI, CloudFormation and the CDK.
 * @example
 * import { CreateTableCommand, DynamoDBClient, UpdateTimeToLiveCommand } from "@aws-sdk/client-dynamodb";
 * import { createTableInput } from "idempotool/dynamodb";
 *
 * const client = new DynamoDBClient({ region: "eu-west-1" });
 * await client.send(new CreateTableCommand(createTableInput("idempotool_records")));
 * await client.send(
 *   new UpdateTimeToLiveCommand({
 *     TableName: "idempotool_records",
 *     TimeToLiveSpecification: { AttributeName: "ttl", Enabled: true },
 *   }),
 * );
 */
export function createTableInput(table: string) {
  return {
    TableName: table,
    AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" as const }],
    KeySchema: [{ AttributeName: "pk", KeyType: "HASH" as const }],
    BillingMode: "PAY_PER_REQUEST" as const,
  };
}
