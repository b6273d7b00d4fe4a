/**
 * The `requestState` option of `registerIdempotentTool` (MCP SDK 2.x, multi-round-trip calls): each
 * question a tool asks is sealed to the call that asked it, so an answer (an approval, a choice) given for
 * one key and one set of arguments cannot be carried to another.
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { fingerprint } from "../core/fingerprint.js";

/**
 * What seals a question's `requestState` and opens it again: the MCP SDK's
 * `createRequestStateCodec({ key })` (HMAC-SHA256, with an expiry), or anything with its two methods.
 */
export interface QuestionSeal<Extra> {
  mint(payload: SealedQuestion, ctx: Extra): Promise<string>;
  verify(state: string, ctx: Extra): Promise<unknown>;
}

/** What a sealed `requestState` holds: the call that asked, and the tool's own state, if it gave one. */
export interface SealedQuestion {
  readonly idempotool: QuestionBinding;
  readonly state?: unknown;
}

/**
 * The call a question belongs to: the tool, its scope, its key ("" for a call keyed by its arguments) and
 * a digest of its arguments, under a label of its own (no other use of the same codec reads as one), and
 * when it was asked.
 */
export interface QuestionBinding {
  readonly purpose: typeof purpose;
  readonly tool: string;
  readonly scope: string;
  readonly key: string;
  readonly arguments: string;
  readonly askedAt: number;
}

const purpose = "idempotool/question v1";

export function bindingOf(
  tool: string,
  scope: string,
  key: string,
  args: unknown,
  now: number,
): QuestionBinding {
  return { purpose, tool, scope, key, arguments: fingerprint(args), askedAt: now };
}

/** The part of a 2.x request context read here. */
interface Continuation {
  readonly mcpReq?: { readonly inputResponses?: unknown; requestState?(): unknown } | undefined;
}

/**
 * The context the tool gets for this request, once its `requestState` (if any) is checked: the tool's own
 * state in place of the sealed one. Throws `invalid_arguments`, before anything runs, for answers that
 * come without the question's sealed state, a state that does not open, or one sealed for another call.
 */
export async function openQuestion<Extra>(
  seal: QuestionSeal<Extra>,
  extra: Extra,
  binding: QuestionBinding,
  now: number,
  maxAgeMs?: number,
): Promise<Extra> {
  const request = (extra as Continuation).mcpReq;
  const raw = request?.requestState?.();
  if (raw === undefined) {
    if (request?.inputResponses !== undefined) {
      refuse("The answers came without the requestState of the question they answer: ask again.");
    }
    return extra;
  }
  let opened: unknown = raw;
  if (typeof raw === "string") {
    try {
      opened = await seal.verify(raw, extra);
    } catch {
      refuse("The requestState does not verify (altered, expired or sealed elsewhere): ask again.");
    }
  }
  const sealed = opened as Partial<SealedQuestion> | null;
  const bound = typeof sealed === "object" && sealed !== null ? sealed.idempotool : undefined;
  if (
    bound?.purpose !== purpose ||
    bound.tool !== binding.tool ||
    bound.scope !== binding.scope ||
    bound.key !== binding.key ||
    bound.arguments !== binding.arguments
  ) {
    refuse(
      "These answers were given for another call (another key or other arguments): ask again for this one.",
    );
  }
  if (maxAgeMs !== undefined && !(now - bound.askedAt <= maxAgeMs)) {
    refuse("These answers were given for an earlier call with the same arguments: ask again for this one.");
  }
  const state = sealed?.state;
  return { ...extra, mcpReq: { ...request, requestState: () => state } } as Extra;
}

function refuse(message: string): never {
  throw new IdempotencyError(ErrorCode.invalidArguments, message);
}
