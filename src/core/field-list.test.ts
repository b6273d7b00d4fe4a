/**
 * Field lists at run time, for JavaScript users and for values the types cannot see: `significant` and
 * `similar.fields` must never quietly count nothing.
 */
import { describe, expect, it } from "vitest";
import {
  type Email,
  rejection,
  type SentEmail,
  emailTool as sharedEmailTool,
} from "../../test/fixtures/tools.js";
import { isIdempotencyError } from "./errors.js";
import type { IdempotentOptions } from "./options.js";

const alice: Email = { to: "alice@example.com", subject: "Hi" };
const bob: Email = { to: "bob@example.com", subject: "Hi" };

/** Options as a JavaScript caller passes them: no type checks the lists. */
function emailTool(options: Record<string, unknown>) {
  return sharedEmailTool(options as Partial<Omit<IdempotentOptions<Email, SentEmail>, "clock">>);
}

describe("a significant field list", () => {
  it("rejects a call with none of its fields (a misspelt list) before anything runs, naming the fields", async () => {
    const { send, sent, store } = emailTool({ significant: ["too"] });

    const error = await rejection(send(alice, { key: "k" }));

    expect(isIdempotencyError(error, "invalid_arguments")).toBe(true);
    expect((error as Error).message).toMatch(/`significant`.*\(too\)/);
    // Before the check, Bob got Alice's result as a replay here: both fingerprinted `{}`.
    expect(isIdempotencyError(await rejection(send(bob, { key: "k" })), "invalid_arguments")).toBe(true);
    expect(sent).toEqual([]);
    expect((await store.list({ limit: 10 })).records).toEqual([]);
  });

  it("counts an absent optional field as absent, not as any value", async () => {
    const { send, sent } = emailTool({ significant: ["to", "cc"] });
    await send(alice, { key: "k" });

    expect((await send({ ...alice, cc: undefined, subject: "Re: Hi" }, { key: "k" })).was_replay).toBe(true);
    const error = await rejection(send({ ...alice, cc: "carol@example.com" }, { key: "k" }));
    expect(isIdempotencyError(error, "idempotency_key_conflict")).toBe(true);
    expect(sent).toHaveLength(1);
  });

  it("rejects arguments that are not an object, since it names fields of one", async () => {
    const { send, sent } = emailTool({ significant: ["to"] });
    for (const args of [null, undefined, "alice@example.com", [alice]]) {
      const error = await rejection(send(args as unknown as Email, { key: "k" }));
      expect(isIdempotencyError(error, "invalid_arguments")).toBe(true);
    }
    expect(sent).toEqual([]);
  });

  it("keeps a field named __proto__ as data", async () => {
    const { send, sent } = emailTool({ significant: ["__proto__"] });
    await send(JSON.parse('{"__proto__": {"to": "alice"}}') as Email, { key: "k" });

    const error = await rejection(send(JSON.parse('{"__proto__": {"to": "bob"}}') as Email, { key: "k" }));
    expect(isIdempotencyError(error, "idempotency_key_conflict")).toBe(true);
    expect(sent).toHaveLength(1);
  });

  it("is copied when the tool is made: changing the array later changes nothing", async () => {
    const significant = ["to"];
    const { send } = emailTool({ significant });
    significant[0] = "subject";
    await send(alice, { key: "k" });

    const error = await rejection(send(bob, { key: "k" }));
    expect(isIdempotencyError(error, "idempotency_key_conflict")).toBe(true);
  });

  const badLists: [string, unknown][] = [
    ["an empty list", []],
    ["an entry that is not a string", ["to", 1]],
    ["an empty name", ["to", ""]],
    ["a string instead of a list", "to"],
  ];
  for (const [what, significant] of badLists) {
    it(`rejects ${what} when the tool is made`, () => {
      let thrown: unknown;
      try {
        emailTool({ significant });
      } catch (error) {
        thrown = error;
      }
      expect(isIdempotencyError(thrown, "invalid_options")).toBe(true);
      expect((thrown as Error).message).toContain("`significant`");
    });
  }
});

describe("a similar field list", () => {
  it("rejects a call with none of its fields before anything runs", async () => {
    const { send, sent } = emailTool({ similar: { fields: ["too"] } });

    const error = await rejection(send(alice, { key: "k" }));

    expect(isIdempotencyError(error, "invalid_arguments")).toBe(true);
    expect((error as Error).message).toContain("`similar.fields`");
    expect(sent).toEqual([]);
  });

  it("rejects an empty list when the tool is made, naming similar.fields", () => {
    expect(() => emailTool({ similar: { fields: [] } })).toThrow(/`similar\.fields`/);
  });
});
