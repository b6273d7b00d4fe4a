/**
 * The turn a tool call belongs to, read from the conversation the AI SDK hands to `execute`.
 */
import type { ModelMessage } from "ai";
import { canonicalJson } from "../core/canonical-json.js";
import { IdempotencyError } from "../core/errors.js";
import { sha256Hex } from "../core/fingerprint.js";

/**
 * The id of the user turn a tool call answers: `user-turn-<n>-<hash>`, where `n` counts the user
 * messages in `messages` and the hash covers their content, in order.
 *
 * Every step of one `generateText`/`streamText` call sees the same user messages (the steps append
 * assistant and tool messages only), so every re-emission within the turn gets the same id; a new user
 * message gives a new id, even when its text repeats an earlier one. Assistant and tool messages are left
 * out, so provider metadata that differs between runs does not change the id, and a run that is repeated
 * with the same conversation (a user retry after a timeout) is the same turn.
 *
 * Two different conversations whose user messages are identical get the same id: give each user or
 * conversation its own `scope`. If `prepareStep` or a history window drops early user messages, the
 * count changes: then derive the turn id yourself (`turnId` option, e.g. from the tool's context).
 * @throws IdempotencyError `idempotency_key_missing` when `messages` holds no user message.
 * @example
 * import { turnIdFromMessages } from "idempotool/ai-sdk";
 *
 * turnIdFromMessages([{ role: "user", content: "Send Alice the summary" }]); // "user-turn-1-…"
 */
export function turnIdFromMessages(messages: readonly ModelMessage[]): string {
  const users = Array.isArray(messages) ? messages.filter((message) => message?.role === "user") : [];
  if (users.length === 0) {
    throw new IdempotencyError(
      "idempotency_key_missing",
      "No user message in the conversation, so there is no turn to key the tool call by. Pass the " +
        "`turnId` option (for example from the tool's context) or a `key` function.",
    );
  }
  const text = canonicalJson(
    users.map((message) => contentDigest(message.content)),
    { path: "messages" },
  );
  return `user-turn-${users.length}-${sha256Hex(text).slice(0, 32)}`;
}

/** The content of a user message as JSON data: text as it is, binary data and URLs as a digest. */
function contentDigest(content: unknown): unknown {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return dataDigest(content);
  return content.map((part: unknown) => {
    if (typeof part !== "object" || part === null) return dataDigest(part);
    const { type, text, image, data, mediaType, filename } = part as Record<string, unknown>;
    // providerOptions (cache control and the like) are left out: they are not what the user said.
    return {
      type,
      ...(text === undefined ? {} : { text }),
      ...(image === undefined ? {} : { image: dataDigest(image) }),
      ...(data === undefined ? {} : { data: dataDigest(data) }),
      ...(mediaType === undefined ? {} : { mediaType }),
      ...(filename === undefined ? {} : { filename }),
    };
  });
}

function dataDigest(value: unknown): unknown {
  if (value instanceof URL) return { url: value.href };
  // Bytes count as their base64 text, so an image given as a Buffer or as base64 is the same turn.
  if (value instanceof ArrayBuffer) return dataDigest(Buffer.from(value).toString("base64"));
  if (ArrayBuffer.isView(value)) {
    return dataDigest(Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64"));
  }
  if (typeof value === "string") return value.length > 256 ? { sha256: sha256Hex(value) } : value;
  try {
    canonicalJson(value);
    return value;
  } catch {
    return { unhashable: String(value) };
  }
}
