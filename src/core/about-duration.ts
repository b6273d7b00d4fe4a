/**
 * A duration as a model (or a person) reads it in advice, rounded to the nearest unit that keeps it
 * honest: 134 ms stays "about 134 ms", never "about 1 second".
 * @example
 * aboutDuration(134); // "about 134 ms"
 * aboutDuration(2_600); // "about 3 seconds"
 * aboutDuration(150_000); // "about 3 minutes"
 */
export function aboutDuration(ms: number): string {
  const millis = Math.max(1, Math.round(ms));
  if (millis < 1000) return `about ${millis} ms`;
  const seconds = Math.round(ms / 1000);
  if (seconds < 120) return `about ${counted(seconds, "second")}`;
  const minutes = Math.round(ms / 60_000);
  if (minutes < 120) return `about ${counted(minutes, "minute")}`;
  return `about ${counted(Math.round(ms / 3_600_000), "hour")}`;
}

function counted(n: number, unit: string): string {
  return `${n} ${unit}${n === 1 ? "" : "s"}`;
}
