/**
 * How a (scope, key) pair becomes one Redis key name, and back.
 *
 * A name is `<prefix><scope>:<key>` with scope and key escaped so that neither can hold the `:` between
 * them: (scope, key) pairs never collide, whatever characters they carry. The escape also removes
 * `{` and `}` (a caller's key can never form a Cluster hash tag that piles records onto one slot), the
 * glob characters of SCAN's MATCH, ASCII spaces and control characters (names stay readable in `redis-cli`),
 * and lone UTF-16 surrogates (which UTF-8 cannot carry, so two of them would otherwise meet as U+FFFD).
 */

const reserved = new Set("%:{}*?[]\\");
const escapeSequence = /%(u[0-9A-F]{4}|[0-9A-F]{2})/g;
const glob = /[*?[\]\\]/g;
const plain = /^[\w.@+=/-]*$/;

/** The part of a record's name that stands for one scope or key. */
export function encodePart(part: string): string {
  if (plain.test(part)) return part;
  let encoded = "";
  for (let i = 0; i < part.length; i++) {
    const code = part.charCodeAt(i);
    const char = part[i]!;
    if (code >= 0xd800 && code <= 0xdbff && i + 1 < part.length) {
      const next = part.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        encoded += char + part[++i]!;
        continue;
      }
    }
    if (code >= 0xd800 && code <= 0xdfff) encoded += `%u${code.toString(16).toUpperCase()}`;
    else if (code <= 0x20 || code === 0x7f || reserved.has(char)) {
      encoded += `%${code.toString(16).toUpperCase().padStart(2, "0")}`;
    } else encoded += char;
  }
  return encoded;
}

function decodePart(part: string): string {
  return part.replace(escapeSequence, (_, hex: string) =>
    String.fromCharCode(Number.parseInt(hex.startsWith("u") ? hex.slice(1) : hex, 16)),
  );
}

/** The Redis key name of the record for (scope, key). */
export function recordName(prefix: string, scope: string, key: string): string {
  return `${prefix}${encodePart(scope)}:${encodePart(key)}`;
}

/**
 * The name of the tokens released on (scope, key), for a store that remembers them (a sorted set): the
 * record's name and `:[released]`. No store's record has it, whatever its prefix: a record's name ends in
 * an escaped key, which never holds a `:` or a `[`.
 */
export function releasedName(prefix: string, scope: string, key: string): string {
  return `${recordName(prefix, scope, key)}:[released]`;
}

/**
 * The (scope, key) a name stands for, or undefined when the name is not one this codec writes for
 * this prefix (another store's prefix that starts with ours, or a foreign key): it must decode and
 * re-encode to itself.
 */
export function parseRecordName(prefix: string, name: string): { scope: string; key: string } | undefined {
  if (!name.startsWith(prefix)) return undefined;
  const rest = name.slice(prefix.length);
  const colon = rest.indexOf(":");
  if (colon < 0 || rest.indexOf(":", colon + 1) >= 0) return undefined;
  const scope = decodePart(rest.slice(0, colon));
  const key = decodePart(rest.slice(colon + 1));
  if (scope === "" || key === "" || recordName(prefix, scope, key) !== name) return undefined;
  return { scope, key };
}

/** A SCAN MATCH pattern matching `text` literally. */
export function globLiteral(text: string): string {
  return text.replace(glob, "\\$&");
}
