import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "./canonical-json.js";
import { IdempotencyError } from "./errors.js";
import { maxArgumentDepth } from "./option-checks.js";

/** An array of `first` and `last` with an empty slot between them. */
function holey(first: string, last: string): string[] {
  const array = [first];
  array[2] = last;
  return array;
}

/** The double with these IEEE 754 bits, as RFC 8785 Appendix B lists its number samples. */
function double(bits: bigint): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, bits);
  return view.getFloat64(0);
}

function rejection(run: () => unknown): IdempotencyError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(IdempotencyError);
    expect((error as IdempotencyError).code).toBe("invalid_arguments");
    return error as IdempotencyError;
  }
  throw new Error("expected canonicalJson to throw");
}

describe("canonicalJson", () => {
  describe("RFC 8785 rules", () => {
    it("sorts keys by UTF-16 code units, so an astral character sorts by its high surrogate", () => {
      const value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\ud83d\ude00": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
      };
      expect(canonicalJson(value)).toBe(
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
          '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
      );
    });

    it("writes the RFC's sample object without whitespace, numbers and strings in ECMAScript form", () => {
      const value = {
        // biome-ignore lint/correctness/noPrecisionLoss: the RFC's sample input is written this way on purpose
        numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 0.000000000000000000000000001],
        string: "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"/",
        literals: [null, true, false],
      };
      expect(canonicalJson(value)).toBe(
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' +
          '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
      );
    });

    it.each([
      [0x0000000000000000n, "0"],
      [0x8000000000000000n, "0"], // -0
      [0x0000000000000001n, "5e-324"],
      [0x8000000000000001n, "-5e-324"],
      [0x7fefffffffffffffn, "1.7976931348623157e+308"],
      [0xffefffffffffffffn, "-1.7976931348623157e+308"],
      [0x4340000000000000n, "9007199254740992"],
      [0xc340000000000000n, "-9007199254740992"],
      [0x4430000000000000n, "295147905179352830000"],
      [0x44b52d02c7e14af5n, "9.999999999999997e+22"],
      [0x44b52d02c7e14af6n, "1e+23"],
      [0x44b52d02c7e14af7n, "1.0000000000000001e+23"],
      [0x444b1ae4d6e2ef4en, "999999999999999700000"],
      [0x444b1ae4d6e2ef4fn, "999999999999999900000"],
      [0x444b1ae4d6e2ef50n, "1e+21"],
      [0x3eb0c6f7a0b5ed8cn, "9.999999999999997e-7"],
      [0x3eb0c6f7a0b5ed8dn, "0.000001"],
      [0x41b3de4355555553n, "333333333.3333332"],
      [0x41b3de4355555554n, "333333333.33333325"],
      [0x41b3de4355555555n, "333333333.3333333"],
      [0x41b3de4355555556n, "333333333.3333334"],
      [0x41b3de4355555557n, "333333333.33333343"],
      [0xbecbf647612f3696n, "-0.0000033333333333333333"],
      [0x43143ff3c1cb0959n, "1424953923781206.2"],
    ])("writes the double with bits %s as %s", (bits, expected) => {
      expect(canonicalJson(double(bits))).toBe(expected);
    });

    it.each([
      [1e21, "1e+21"],
      [1e20, "100000000000000000000"],
      [1e-7, "1e-7"],
      [0.000001, "0.000001"],
      [-0, "0"],
      // biome-ignore lint/correctness/noPrecisionLoss: the RFC's literal, read to the nearest double
      [333333333.33333329, "333333333.3333333"],
      [5e-324, "5e-324"],
      [0.1 + 0.2, "0.30000000000000004"],
      [100, "100"],
      [-1.5, "-1.5"],
    ])("writes the number %s as %s", (value, expected) => {
      expect(canonicalJson(value)).toBe(expected);
    });

    it("escapes strings as JSON.stringify does: short escapes, lowercase \\u00xx for other controls, nothing else", () => {
      expect(canonicalJson('\b\t\n\f\r\u0000\u001f\u007f\u2028/"\\é')).toBe(
        '"\\b\\t\\n\\f\\r\\u0000\\u001f\u007f\u2028/\\"\\\\é"',
      );
    });

    it("sorts integer-like keys as strings, not in the numeric order objects list them in", () => {
      expect(canonicalJson({ 9: "nine", 10: "ten", a: "a", 1: "one" })).toBe(
        '{"1":"one","10":"ten","9":"nine","a":"a"}',
      );
    });

    it("sorts the keys of nested objects and keeps array order", () => {
      expect(canonicalJson({ b: [{ z: 1, a: 2 }, 3], a: { d: null, c: "x" } })).toBe(
        '{"a":{"c":"x","d":null},"b":[{"a":2,"z":1},3]}',
      );
    });

    it("sorts the keys of objects with more than 16 keys too, whatever order they were written in", () => {
      for (const size of [17, 40]) {
        // Letters of both cases, digits, integer-like keys and non-ASCII: not in code unit order as written.
        const names = Array.from({ length: size }, (_, i) =>
          i % 4 === 0 ? `${size - i}` : i % 4 === 1 ? `Z${i}` : i % 4 === 2 ? `\u00e9${i}` : `a${size - i}`,
        );
        const sorted = [...names].sort();
        expect(names).not.toEqual(sorted);
        const expected = `{${sorted.map((name) => `${JSON.stringify(name)}:${JSON.stringify(name)}`).join(",")}}`;
        for (const order of [names, [...names].reverse(), sorted]) {
          const value = Object.fromEntries(order.map((name) => [name, name]));
          expect(canonicalJson(value)).toBe(expected);
          expect(canonicalJson({ nested: [value] })).toBe(`{"nested":[${expected}]}`);
        }
      }
    });
  });

  describe("JSON.stringify conventions", () => {
    it("writes a Date as its ISO string through toJSON", () => {
      expect(canonicalJson({ when: new Date(Date.UTC(2026, 4, 19, 10, 11, 12)) })).toBe(
        '{"when":"2026-05-19T10:11:12.000Z"}',
      );
    });

    it("calls a function's toJSON too, as JSON.stringify does", () => {
      const money = Object.assign(() => 0, { toJSON: () => ({ cents: 500 }) });
      expect(canonicalJson({ money })).toBe('{"money":{"cents":500}}');
    });

    it("calls toJSON with the property name or array index, and serializes what it returns", () => {
      const seen: string[] = [];
      const probe = {
        toJSON(key: string) {
          seen.push(key);
          return { key };
        },
      };
      expect(canonicalJson({ p: probe, list: [probe] })).toBe('{"list":[{"key":"0"}],"p":{"key":"p"}}');
      expect(canonicalJson(probe)).toBe('{"key":""}');
      expect(seen).toEqual(["0", "p", ""]);
    });

    it("omits object properties that are undefined, or whose toJSON returns undefined", () => {
      expect(canonicalJson({ a: undefined, b: 1, c: { toJSON: () => undefined } })).toBe('{"b":1}');
    });

    it("ignores symbol keys and non-enumerable properties", () => {
      const value = { a: 1, [Symbol("s")]: 2 };
      Object.defineProperty(value, "hidden", { value: 3, enumerable: false });
      expect(canonicalJson(value)).toBe('{"a":1}');
    });

    it("unwraps boxed primitives", () => {
      expect(canonicalJson([Object(1), Object("s"), Object(false)])).toBe('[1,"s",false]');
    });

    it("serializes class instances and null-prototype objects by their own enumerable properties", () => {
      class Point {
        constructor(
          readonly x: number,
          readonly y: number,
        ) {}
      }
      const bare = Object.create(null) as Record<string, unknown>;
      bare.b = 1;
      bare.a = 2;
      expect(canonicalJson([new Point(1, 2), bare])).toBe('[{"x":1,"y":2},{"a":2,"b":1}]');
    });

    it("accepts the same object twice side by side: a repeat is not a cycle", () => {
      const shared = { id: 7 };
      expect(canonicalJson({ a: shared, b: [shared, shared] })).toBe(
        '{"a":{"id":7},"b":[{"id":7},{"id":7}]}',
      );
    });

    it("writes a BigInt as its decimal string when bigint is 'string'", () => {
      expect(canonicalJson({ amount: 12345678901234567890n, neg: -1n }, { bigint: "string" })).toBe(
        '{"amount":"12345678901234567890","neg":"-1"}',
      );
    });
  });

  describe("rejections name the path and the problem", () => {
    it.each<[string, () => unknown, RegExp]>([
      [
        "a function",
        () => canonicalJson({ items: [0, 1, { when: () => 0 }] }),
        /^args\.items\[2\]\.when is a function/,
      ],
      ["a symbol value", () => canonicalJson({ tag: Symbol("x") }), /^args\.tag is a symbol/],
      [
        "a BigInt",
        () => canonicalJson({ amount: 10n }),
        /^args\.amount is a BigInt \(10n\).*bigint: "string"/,
      ],
      [
        "NaN",
        () => canonicalJson({ score: Number.NaN }),
        /^args\.score is NaN, which JSON would turn into null/,
      ],
      [
        "Infinity",
        () => canonicalJson({ score: [Number.POSITIVE_INFINITY] }),
        /^args\.score\[0\] is Infinity/,
      ],
      ["-Infinity", () => canonicalJson({ score: Number.NEGATIVE_INFINITY }), /^args\.score is -Infinity/],
      ["boxed NaN", () => canonicalJson({ score: Object(Number.NaN) }), /^args\.score is NaN/],
      ["undefined at the top", () => canonicalJson(undefined), /^args is undefined/],
      ["undefined in an array", () => canonicalJson({ cc: ["a", undefined] }), /^args\.cc\[1\] is undefined/],
      [
        "a hole in an array",
        () => canonicalJson({ cc: holey("a", "c") }),
        /^args\.cc\[1\] is undefined \(or an empty slot\)/,
      ],
      [
        "top-level toJSON returning undefined",
        () => canonicalJson({ toJSON: () => undefined }),
        /^args is undefined/,
      ],
      [
        "a lone high surrogate",
        () => canonicalJson({ name: "ab\ud83d" }),
        /^args\.name contains a lone surrogate \(U\+D83D at index 2\)/,
      ],
      [
        "a lone low surrogate",
        () => canonicalJson(["\ude00x"]),
        /^args\[0\] contains a lone surrogate \(U\+DE00 at index 0\)/,
      ],
      [
        "a reversed pair",
        () => canonicalJson("\ude00\ud83d"),
        /^args contains a lone surrogate \(U\+DE00 at index 0\)/,
      ],
      [
        "a lone surrogate in a key",
        () => canonicalJson({ meta: { "k\udc00": 1 } }),
        /^args\.meta has a key with a lone surrogate \(U\+DC00 at index 1 of "k\\udc00"\)/,
      ],
      [
        "a Map",
        () => canonicalJson({ headers: new Map([["a", "1"]]) }),
        /^args\.headers is a Map, which JSON would serialize as \{\}/,
      ],
      ["a Set", () => canonicalJson({ tags: new Set(["a"]) }), /^args\.tags is a Set/],
      ["a WeakMap", () => canonicalJson([new WeakMap()]), /^args\[0\] is a WeakMap/],
      ["a WeakSet", () => canonicalJson([new WeakSet()]), /^args\[0\] is a WeakSet/],
      ["a Promise", () => canonicalJson({ body: Promise.resolve("x") }), /^args\.body is a Promise/],
      ["a RegExp", () => canonicalJson({ match: /x/ }), /^args\.match is a RegExp/],
      ["an Error", () => canonicalJson({ last: new TypeError("boom") }), /^args\.last is an Error/],
      [
        "an ArrayBuffer",
        () => canonicalJson({ bytes: new ArrayBuffer(2) }),
        /^args\.bytes is an ArrayBuffer/,
      ],
      [
        "a key that is not an identifier",
        () => canonicalJson({ "content-type": [() => 0] }),
        /^args\["content-type"\]\[0\] is a function/,
      ],
    ])("rejects %s", (_, run, message) => {
      expect(rejection(run).message).toMatch(message);
    });

    it("rejects a cycle and names the ancestor it refers back to", () => {
      const thread: Record<string, unknown> = { id: "t1" };
      thread.messages = [{ text: "hi", thread }];
      expect(rejection(() => canonicalJson({ thread })).message).toBe(
        "args.thread.messages[0].thread refers back to args.thread, a cycle JSON cannot represent.",
      );
      const self: unknown[] = [];
      self.push(self);
      expect(rejection(() => canonicalJson(self)).message).toMatch(/^args\[0\] refers back to args,/);
    });

    it("writes the whole message: path, problem, and a cycle's ancestor path step by step", () => {
      expect(rejection(() => canonicalJson({ score: Number.NaN })).message).toBe(
        "args.score is NaN, which JSON would turn into null (and so make it equal to null).",
      );
      const order: Record<string, unknown> = { id: "o-1" };
      const root = { account: { orders: [order] } };
      order.back = root.account.orders;
      expect(rejection(() => canonicalJson(root)).message).toBe(
        "args.account.orders[0].back refers back to args.account.orders, a cycle JSON cannot represent.",
      );
      expect(rejection(() => canonicalJson({ s: "a\ud800" })).message).toBe(
        "args.s contains a lone surrogate (U+D800 at index 1), which RFC 8785 forbids: strings must be well-formed Unicode.",
      );
    });

    it.each<[string, unknown, string]>([
      ["a Map", new Map([["a", 1]]), "Object.fromEntries(map) or [...map]"],
      ["a Set", new Set(["a"]), "[...set]"],
      ["a WeakMap", new WeakMap(), "the data it holds"],
      ["a WeakSet", new WeakSet(), "the data it holds"],
      ["a Promise", Promise.resolve(1), "its awaited value"],
      ["a WeakRef", new WeakRef({}), "the data it refers to"],
      ["a RegExp", /x/, "its source string"],
      ["an Error", new Error("boom"), "{ name, message }"],
      ["an ArrayBuffer", new ArrayBuffer(2), "its bytes as a string (e.g. base64) or an array"],
      ["a SharedArrayBuffer", new SharedArrayBuffer(2), "its bytes as a string (e.g. base64) or an array"],
      ["a DataView", new DataView(new ArrayBuffer(2)), "its bytes as a string (e.g. base64) or an array"],
    ])("says what to pass instead of %s", (article, value, instead) => {
      expect(rejection(() => canonicalJson({ v: value })).message).toBe(
        `args.v is ${article}, which JSON would serialize as {} (so different values would look equal); pass ${instead} instead.`,
      );
    });

    it("names the root as options.path says", () => {
      expect(rejection(() => canonicalJson({ n: Number.NaN }, { path: "result" })).message).toMatch(
        /^result\.n is NaN/,
      );
    });

    it("accepts escaped backslashes that merely look like a surrogate escape", () => {
      expect(canonicalJson("\\ud800")).toBe('"\\\\ud800"');
    });

    it("rejects an unknown bigint option at once, by name", () => {
      const bad = { bigint: "number" } as unknown as { bigint: "string" };
      expect(() => canonicalJson(1, bad)).toThrow(/Option "bigint" must be "reject" or "string"/);
      expect(() => canonicalJson(1, bad)).toThrow(expect.objectContaining({ code: "invalid_options" }));
    });

    it("lets an error thrown by a getter or toJSON through unchanged", () => {
      const boom = new Error("getter failed");
      const value = {
        get a() {
          throw boom;
        },
      };
      expect(() => canonicalJson(value)).toThrow(boom);
    });
  });

  describe("depth", () => {
    const nest = (levels: number, wrap: (inner: unknown) => unknown) => {
      let value: unknown = 1;
      for (let i = 0; i < levels; i++) value = wrap(value);
      return value;
    };

    it("writes objects and arrays nested exactly maxArgumentDepth levels deep", () => {
      expect(canonicalJson(nest(maxArgumentDepth, (v) => [v]))).toBe(
        `${"[".repeat(maxArgumentDepth)}1${"]".repeat(maxArgumentDepth)}`,
      );
      expect(canonicalJson(nest(maxArgumentDepth, (v) => ({ a: v })))).toMatch(/^\{"a":/);
    });

    it("rejects one level more as invalid_arguments naming the limit, and 6,000 levels without overflowing the stack", () => {
      for (const levels of [maxArgumentDepth + 1, 6_000, 100_000]) {
        for (const wrap of [(v: unknown) => [v], (v: unknown) => ({ a: v })]) {
          const error = rejection(() => canonicalJson(nest(levels, wrap)));
          expect(error.message).toContain(`nests deeper than ${maxArgumentDepth} levels`);
        }
      }
    });

    it("writes a path of up to 12 steps whole", () => {
      const error = rejection(() => canonicalJson({ items: nest(11, (v) => [v === 1 ? Number.NaN : v]) }));
      expect(error.message).toMatch(/^args\.items(\[0\]){11} is NaN/);
    });

    it("keeps the message short: a deep path shows its ends and how many steps it skipped", () => {
      const error = rejection(() => canonicalJson({ items: nest(6_000, (v) => [v]) }));
      expect(error.message).toMatch(
        /^args\.items\[0\]\[0\]\[0\]\[0\]\[0\]…\(247 more\)…\[0\]\[0\]\[0\] nests deeper/,
      );
      expect(error.message.length).toBeLessThan(300);
    });
  });

  describe("properties", () => {
    /** A copy of `value` whose objects list their keys in another (seeded, random) order. */
    function shuffled(value: unknown, seed: { next: number }): unknown {
      if (Array.isArray(value)) return value.map((element) => shuffled(element, seed));
      if (typeof value !== "object" || value === null) return value;
      const entries = Object.entries(value);
      for (let i = entries.length - 1; i > 0; i--) {
        seed.next = (seed.next * 1103515245 + 12345) % 2147483648;
        const j = seed.next % (i + 1);
        [entries[i], entries[j]] = [entries[j]!, entries[i]!];
      }
      // fromEntries defines properties, so a "__proto__" key stays a key.
      return Object.fromEntries(entries.map(([key, element]) => [key, shuffled(element, seed)]));
    }

    const json = fc.jsonValue({ stringUnit: "grapheme", maxDepth: 5 });

    it("gives the same text whatever the key order", () => {
      fc.assert(
        fc.property(json, fc.nat(), (value, seed) => {
          expect(canonicalJson(shuffled(value, { next: seed }))).toBe(canonicalJson(value));
        }),
      );
    });

    it("gives the same text whatever the key order, for objects with more than 16 keys", () => {
      const wide = fc.dictionary(fc.string({ unit: "grapheme" }), fc.jsonValue({ maxDepth: 1 }), {
        minKeys: 17,
        maxKeys: 40,
      });
      fc.assert(
        fc.property(wide, fc.nat(), (value, seed) => {
          const text = canonicalJson(value);
          expect(canonicalJson(shuffled(value, { next: seed }))).toBe(text);
          expect(text).toBe(sortedKeysJson(value));
        }),
        { numRuns: 50 },
      );
    });

    it("parses back to what JSON.stringify would give", () => {
      fc.assert(
        fc.property(json, (value) => {
          expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
        }),
      );
    });

    it("matches a plain sorted-keys writer on JSON values", () => {
      fc.assert(
        fc.property(json, (value) => {
          expect(canonicalJson(value)).toBe(sortedKeysJson(value));
        }),
      );
    });

    it("rejects a string exactly when it is not well-formed UTF-16", () => {
      const units = fc.array(
        fc.oneof(fc.integer({ min: 0xd7f0, max: 0xe010 }), fc.integer({ min: 0, max: 0xffff })),
      );
      fc.assert(
        fc.property(units, (codes) => {
          const text = String.fromCharCode(...codes);
          // encodeURIComponent refuses lone surrogates: an oracle independent of the implementation.
          let wellFormed = true;
          try {
            encodeURIComponent(text);
          } catch {
            wellFormed = false;
          }
          if (wellFormed) expect(JSON.parse(canonicalJson({ [text]: text }))).toEqual({ [text]: text });
          else expect(() => canonicalJson(text)).toThrow(/lone surrogate/);
        }),
      );
    });
  });
});

/** The simplest writer of sorted-keys, whitespace-free JSON, without any checks: an oracle for JSON values. */
function sortedKeysJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(sortedKeysJson).join(",")}]`;
  if (typeof value !== "object" || value === null) return JSON.stringify(value);
  const members = Object.keys(value)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${sortedKeysJson((value as Record<string, unknown>)[key])}`);
  return `{${members.join(",")}}`;
}
