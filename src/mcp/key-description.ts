const second = 1000;
const minute = 60 * second;
const hour = 60 * minute;
const day = 24 * hour;

/** The `idempotency_key` field's description: what the model reads in `tools/list`, with the dedup window. */
export function keyDescription(ttlMs: number): string {
  return (
    "Unique per intent: choose it before calling (a UUID, say) and send the same key when you retry the same action. " +
    `The server dedupes within ${windowText(ttlMs)}: a repeat with the same key and arguments returns the original ` +
    "result and does not run the action again. Use a new key for a new intent, even with the same arguments; " +
    "never reuse a key with different arguments."
  );
}

/** The message a client gets when `idempotency_key` is missing or not a string. */
export const keyRequiredMessage =
  "idempotency_key is required: a string of 1-255 characters, unique per intent. " +
  "Reuse the same key to retry the same action; use a new key for a new intent.";

/** A window in words, as a person would say it: "24 hours", "7 days", "5 minutes". */
export function windowText(ms: number): string {
  if (ms >= 2 * day && ms % day === 0) return plural(ms / day, "day");
  if (ms >= hour && ms % hour === 0) return plural(ms / hour, "hour");
  if (ms >= minute && ms % minute === 0) return plural(ms / minute, "minute");
  if (ms >= second) return plural(Math.floor(ms / second), "second");
  return plural(ms, "millisecond");
}

function plural(count: number, unit: string): string {
  return `${count} ${unit}${count === 1 ? "" : "s"}`;
}
