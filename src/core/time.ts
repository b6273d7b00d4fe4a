/**
 * Times as the library writes and reads them: ISO-8601 for epoch milliseconds, durations for a person or a
 * model to read, and the short durations the CLI takes and prints.
 */

const secondMs = 1_000;
const minuteMs = 60_000;
const hourMs = 3_600_000;
const dayMs = 86_400_000;
const weekMs = 604_800_000;

/** From 10000-01-01 on, Date writes a signed six-digit year: such times go to Date. */
const year10000Ms = 253_402_300_800_000;

/**
 * `Date#toISOString` for epoch milliseconds, without building a Date for the years 1970–9999 (any other
 * value goes to Date, and throws as Date does for a time no Date can hold).
 * @example
 * iso(0); // "1970-01-01T00:00:00.000Z"
 */
export function iso(epochMs: number): string {
  if (!(epochMs >= 0 && epochMs < year10000Ms) || !Number.isInteger(epochMs)) {
    return new Date(epochMs).toISOString();
  }
  const second = Math.floor(epochMs / secondMs);
  return `${secondText(second)}${pad3(epochMs - second * secondMs)}Z`;
}

/**
 * A function that formats a number, remembering the text of the last `size` numbers it saw. It pays where
 * the same few numbers come back: an envelope formats two times per call (when the key was claimed, until
 * when it holds), and calls come in bursts, so their seconds and days repeat.
 */
function recentTexts(size: number, format: (n: number) => string): (n: number) => string {
  const numbers = new Array<number>(size).fill(Number.NaN);
  const texts = new Array<string>(size).fill("");
  let next = 0;
  return (n) => {
    for (let i = 0; i < size; i++) if (numbers[i] === n) return texts[i]!;
    const text = format(n);
    numbers[next] = n;
    texts[next] = text;
    next = (next + 1) % size;
    return text;
  };
}

/** "YYYY-MM-DDT" of a day since the epoch. */
const dayText = recentTexts(4, (day) => new Date(day * dayMs).toISOString().slice(0, 11));

/** "YYYY-MM-DDTHH:MM:SS." of a second since the epoch. */
const secondText = recentTexts(4, (second) => {
  const day = Math.floor(second / 86_400);
  let rest = second - day * 86_400;
  const hours = Math.floor(rest / 3_600);
  rest -= hours * 3_600;
  const minutes = Math.floor(rest / 60);
  return `${dayText(day)}${pad2(hours)}:${pad2(minutes)}:${pad2(rest - minutes * 60)}.`;
});

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
  if (millis < secondMs) return `about ${millis} ms`;
  const seconds = Math.round(ms / secondMs);
  if (seconds < 120) return `about ${counted(seconds, "second")}`;
  const minutes = Math.round(ms / minuteMs);
  if (minutes < 120) return `about ${counted(minutes, "minute")}`;
  return `about ${counted(Math.round(ms / hourMs), "hour")}`;
}

function counted(n: number, unit: string): string {
  return `${n} ${unit}${n === 1 ? "" : "s"}`;
}

/**
 * An age or a time left in a table column, in its largest whole unit, rounded down (a negative one is 0s).
 * @example
 * shortDuration(42_500); // "42s"
 * shortDuration(3 * 86_400_000); // "3d"
 */
export function shortDuration(ms: number): string {
  const abs = Math.max(ms, 0);
  if (abs < minuteMs) return `${Math.floor(abs / secondMs)}s`;
  if (abs < hourMs) return `${Math.floor(abs / minuteMs)}m`;
  if (abs < dayMs) return `${Math.floor(abs / hourMs)}h`;
  return `${Math.floor(abs / dayMs)}d`;
}

const unitMs: Record<string, number> = { ms: 1, s: secondMs, m: minuteMs, h: hourMs, d: dayMs, w: weekMs };

/**
 * A whole number and one unit (`ms`, `s`, `m`, `h`, `d` or `w`), as a command line takes an age, in
 * milliseconds; undefined for any other text.
 * @example
 * parseDuration("10m"); // 600000
 * parseDuration("soon"); // undefined
 */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+)(ms|s|m|h|d|w)$/.exec(text.trim());
  return match ? Number(match[1]) * unitMs[match[2]!]! : undefined;
}

function pad2(n: number): string {
  return n < 10 ? `0${n}` : `${n}`;
}

function pad3(n: number): string {
  return n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`;
}
