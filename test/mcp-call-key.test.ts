/** callKey: where a tools/call request's idempotency key may be, and that it never reaches the tool. */
import { describe, expect, it } from "vitest";
import { isIdempotencyError } from "../src/core/errors.js";
import { callKey } from "../src/mcp/call-key.js";

describe("callKey", () => {
  it("takes the key from the idempotency_key argument and leaves the other arguments", () => {
    expect(callKey({ to: "a", idempotency_key: "k" }, undefined)).toEqual({
      key: "k",
      args: { to: "a" },
      meta: undefined,
    });
  });

  it("takes the key from _meta under either spelling, and keeps the rest of _meta", () => {
    expect(callKey({ to: "a" }, { idempotencyKey: "k", progressToken: 7 })).toEqual({
      key: "k",
      args: { to: "a" },
      meta: { progressToken: 7 },
    });
    expect(callKey({}, { idempotency_key: "k" }).key).toBe("k");
  });

  it("accepts the same key in several places", () => {
    expect(callKey({ idempotency_key: "k" }, { idempotency_key: "k", idempotencyKey: "k" })).toEqual({
      key: "k",
      args: {},
      meta: {},
    });
  });

  it("refuses keys that differ, naming where each came from", () => {
    let thrown: unknown;
    try {
      callKey({ idempotency_key: "a" }, { idempotency_key: "a", idempotencyKey: "b" });
    } catch (error) {
      thrown = error;
    }
    expect(isIdempotencyError(thrown, "invalid_arguments")).toBe(true);
    expect((thrown as Error).message).toBe(
      'the idempotency key was given twice with different values (the idempotency_key argument is "a", ' +
        '_meta.idempotencyKey is "b"), so nothing ran. Send one key, in one place.',
    );
  });

  it("refuses a key that is not a string", () => {
    expect(() => callKey({ idempotency_key: 42 }, undefined)).toThrow("idempotency_key is required");
    expect(() => callKey({}, { idempotencyKey: null })).toThrow("idempotency_key is required");
  });

  it("gives no key when there is none", () => {
    expect(callKey(undefined, { progressToken: 1 })).toEqual({
      key: undefined,
      args: {},
      meta: { progressToken: 1 },
    });
  });

  it("refuses arguments that are not an object, so no call runs on arguments it was not given", () => {
    expect(() => callKey(["a"], { idempotencyKey: "k" })).toThrow("must be an object, got an array");
    expect(() => callKey("to=a", { idempotencyKey: "k" })).toThrow("must be an object, got string");
  });

  it("refuses a copy that is empty, too long or holds a control character, wherever it is", () => {
    const code = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        return isIdempotencyError(error) ? error.code : "not typed";
      }
      return "accepted";
    };
    expect(code(() => callKey({}, { idempotencyKey: "" }))).toBe("idempotency_key_invalid");
    expect(code(() => callKey({}, { idempotency_key: "k".repeat(256) }))).toBe("idempotency_key_invalid");
    expect(code(() => callKey({ idempotency_key: "a\nb" }, undefined))).toBe("idempotency_key_invalid");
    expect(code(() => callKey({}, { idempotencyKey: "a\u009bb" }))).toBe("idempotency_key_invalid");
    expect(code(() => callKey({}, { idempotencyKey: "k".repeat(255) }))).toBe("accepted");
    expect(code(() => callKey({}, { idempotencyKey: "ключ-✓" }))).toBe("accepted");
  });

  it("reads only the sources it is given, and leaves other fields where they are", () => {
    const sources = { argument: false, metaFields: ["requestKey"] };
    expect(
      callKey({ idempotency_key: "a", to: "x" }, { requestKey: "k", idempotencyKey: "b" }, sources),
    ).toEqual({
      key: "k",
      args: { idempotency_key: "a", to: "x" },
      meta: { idempotencyKey: "b" },
    });
  });
});
