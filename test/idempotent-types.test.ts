/**
 * Type tests: a tool whose `idempotent()` has no `key` option cannot be called without a key, and the
 * compiler's error names the fix; with a `key` option, the call options stay optional. Each
 * `@ts-expect-error` line is a call `tsc --noEmit` must reject; the lines around it must still compile.
 * Nothing here calls a tool at run time (the calls sit in functions never called). The last test runs
 * the compiler on a caller's code and reads its messages.
 */
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  type CallOptions,
  type CallWithKey,
  type IdempotentOptions,
  type IdempotentTool,
  type IdempotentToolWithDerivedKey,
  idempotent,
  memoryStore,
} from "../src/index.js";
import { saga } from "../src/saga/index.js";

interface Email {
  readonly to: string;
  readonly subject: string;
}

const store = memoryStore();
const deliver = async (email: Email) => ({ messageId: `m-${email.to}` });
const email: Email = { to: "alice@example.com", subject: "Minutes" };
const maybeKey = (): string | undefined => undefined;

describe("a tool without a key option", () => {
  const sendEmail = idempotent(deliver, { name: "send_email", store });

  it("requires { key } on every call", () => {
    expectTypeOf(sendEmail).toEqualTypeOf<IdempotentTool<Email, { messageId: string }>>();
    expectTypeOf(sendEmail).parameter(1).toEqualTypeOf<CallWithKey>();
    expectTypeOf<CallWithKey["key"]>().toEqualTypeOf<string>();
    async function calls() {
      await sendEmail(email, { key: "turn-7-alice" });
      await sendEmail(email, { key: "turn-7-alice", scope: "tenant-1", signal: AbortSignal.timeout(1000) });
      // @ts-expect-error no call options at all
      await sendEmail(email);
      // @ts-expect-error call options without a key
      await sendEmail(email, {});
      // @ts-expect-error a scope is not a key
      await sendEmail(email, { scope: "tenant-1" });
      // @ts-expect-error a key that may be undefined (exactOptionalPropertyTypes: undefined is no key)
      await sendEmail(email, { key: maybeKey() });
      // @ts-expect-error an explicit undefined
      await sendEmail(email, { key: undefined });
    }
    expect(calls).toBeTypeOf("function");
  });

  it("requires it too when the key option is explicitly undefined, or may be (options typed as a whole)", () => {
    const unset = idempotent(deliver, { name: "send_email", store, key: undefined });
    expectTypeOf(unset).parameter(1).toEqualTypeOf<CallWithKey>();
    const options: IdempotentOptions<Email, { messageId: string }> = { name: "send_email", store };
    expectTypeOf(idempotent(deliver, options)).parameter(1).toEqualTypeOf<CallWithKey>();
    const maybeOption = Math.random() > 2 ? (args: Email) => args.to : undefined;
    expectTypeOf(idempotent(deliver, { name: "send_email", store, key: maybeOption }))
      .parameter(1)
      .toEqualTypeOf<CallWithKey>();
  });

  it("requires it when the type arguments are given explicitly", () => {
    const typed = idempotent<Email, { messageId: string }>(deliver, { name: "send_email", store });
    expectTypeOf(typed).parameter(1).toEqualTypeOf<CallWithKey>();
  });

  it("still rejects a misspelt option", () => {
    // @ts-expect-error ttlMS is not an option (ttlMs is)
    idempotent(deliver, { name: "send_email", store, ttlMS: 60_000 });
  });
});

describe("a tool with a key option", () => {
  const sendEmail = idempotent(deliver, {
    name: "send_email",
    store,
    key: (args, call) => {
      expectTypeOf(args).toEqualTypeOf<Email>();
      expectTypeOf(call).toEqualTypeOf<CallOptions>();
      return `email-${args.to}`;
    },
  });

  it("takes calls with or without call options", () => {
    expectTypeOf(sendEmail).toEqualTypeOf<IdempotentToolWithDerivedKey<Email, { messageId: string }>>();
    expectTypeOf(sendEmail).parameter(1).toEqualTypeOf<CallOptions | undefined>();
    async function calls() {
      await sendEmail(email);
      await sendEmail(email, {});
      await sendEmail(email, { scope: "tenant-1" });
      await sendEmail(email, { key: maybeKey() });
    }
    expect(calls).toBeTypeOf("function");
  });

  it("fits wherever an IdempotentTool is taken", () => {
    expectTypeOf(sendEmail).toExtend<IdempotentTool<Email, { messageId: string }>>();
    const take = (tool: IdempotentTool<Email, { messageId: string }>) => tool.toolName;
    expect(take(sendEmail)).toBe("send_email");
  });
});

describe("a saga (no key option)", () => {
  it("requires { key } on every call", () => {
    const refund = saga({
      name: "refund",
      store,
      run: async (args: { charge: string }) => ({ externalId: `re-${args.charge}` }),
    });
    expectTypeOf(refund).parameter(1).toEqualTypeOf<CallWithKey>();
    async function calls() {
      await refund({ charge: "ch_1" }, { key: "refund-ch_1" });
      // @ts-expect-error no key
      await refund({ charge: "ch_1" });
    }
    expect(calls).toBeTypeOf("function");
  });
});

describe("the compiler's error, as a caller reads it", () => {
  const root = join(import.meta.dirname, "..");
  const caller = `
import { idempotent, memoryStore } from "idempotool";

const sendEmail = idempotent(async (args: { to: string }) => args.to, { name: "send_email", store: memoryStore() });
await sendEmail({ to: "alice@example.com" });
await sendEmail({ to: "alice@example.com" }, { scope: "tenant-1" });
export {};
`;

  /** Each error on the caller's code: its message, and the text the related location points at. */
  function diagnose(): { message: string; related: { message: string; doc: string }[] }[] {
    const file = join(root, "test", "__caller.ts");
    const options: ts.CompilerOptions = {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true,
      exactOptionalPropertyTypes: true,
      skipLibCheck: true,
      noEmit: true,
      types: ["node"],
      paths: { idempotool: [join(root, "src/index.ts")] },
    };
    const host = ts.createCompilerHost(options);
    const readFile = host.readFile.bind(host);
    host.readFile = (name) => (name === file ? caller : readFile(name));
    const fileExists = host.fileExists.bind(host);
    host.fileExists = (name) => name === file || fileExists(name);
    const program = ts.createProgram({ rootNames: [file], options, host });
    const source = program.getSourceFile(file);
    return program.getSemanticDiagnostics(source).map((d) => ({
      message: ts.flattenDiagnosticMessageText(d.messageText, "\n"),
      related: (d.relatedInformation ?? []).map((r) => {
        const text = r.file?.text ?? "";
        const at = r.start ?? 0;
        // The JSDoc just above the declaration the error points at: what an editor shows on hover.
        const open = text.lastIndexOf("/**", at);
        const close = text.lastIndexOf("*/", at);
        return {
          message: ts.flattenDiagnosticMessageText(r.messageText, "\n"),
          doc:
            open !== -1 && close > open && text.slice(close, at).trim().length < 40
              ? text.slice(open, close)
              : "",
        };
      }),
    }));
  }

  it("names the missing call options and the missing key, and the key's doc gives both fixes", () => {
    const [noOptions, noKey, ...rest] = diagnose();
    expect(rest).toEqual([]);
    expect(noOptions?.message).toBe("Expected 2 arguments, but got 1.");
    expect(noOptions?.related.map((r) => r.message)).toEqual([
      "An argument for 'callWithKey' was not provided.",
    ]);
    expect(noKey?.message).toContain(
      "Property 'key' is missing in type '{ scope: string; }' but required in type 'CallWithKey'.",
    );
    expect(noKey?.related.map((r) => r.message)).toEqual(["'key' is declared here."]);
    const doc = noKey?.related[0]?.doc.replaceAll(/\s*\n\s*\*\s*/g, " ") ?? "";
    expect(doc).toContain("Pass `{ key }`");
    expect(doc).toContain("give `idempotent()` a `key` option");
  }, 60_000);
});
