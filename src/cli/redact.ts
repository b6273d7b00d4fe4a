/**
 * Secrets on the command line: a store URL may carry a password (`postgres://user:pw@host/db`,
 * `redis://:pw@host`, `?password=`). Messages print the URL with the password masked, and whatever a
 * driver or a stack trace echoes is scrubbed of the secrets found in the arguments before it is printed.
 */

const mask = "***";

/** Query parameters that carry a secret in a connection URL (libpq's `password`, `sslpassword`, …). */
const secretParameter = /pass|pwd|secret|token|auth|credential/i;

/** Everything after `scheme://`, or undefined for text that is not such a URL. */
function splitScheme(text: string): { scheme: string; rest: string } | undefined {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)(.*)$/is.exec(text);
  return match ? { scheme: match[1]!, rest: match[2]! } : undefined;
}

/**
 * A URL the WHATWG parser reads the way a driver would. A raw `@` past the host means the user info held
 * one the parser did not take for its end (`u:p?w@host` parses as host `u`), so the URL is not trusted.
 */
function trustedUrl(text: string): URL | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  const tail = `${url.pathname}${url.search}${url.hash}`;
  return tail.includes("@") || safeDecode(tail).includes("@") ? undefined : url;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * The URL with its password and secret query parameters masked; text that is not a URL comes back as is.
 * When the URL cannot be parsed, everything between `scheme://user:` and the last `@` is masked, which
 * may hide more than the password but never less.
 * @example
 * redactUrl("postgres://app:s3cret@db/agents?password=s3cret"); // "postgres://app:***@db/agents?password=***"
 */
export function redactUrl(text: string): string {
  const url = trustedUrl(text);
  if (url) {
    if (url.password !== "") url.password = mask;
    for (const name of [...url.searchParams.keys()]) {
      if (secretParameter.test(name)) url.searchParams.set(name, mask);
    }
    return url.href;
  }
  const parts = splitScheme(text);
  if (!parts) return text;
  let rest = parts.rest;
  const at = rest.lastIndexOf("@");
  const colon = rest.indexOf(":");
  if (at >= 0 && colon >= 0 && colon < at) rest = `${rest.slice(0, colon)}:${mask}${rest.slice(at)}`;
  rest = rest.replace(/([?&;]([^=&#]*)=)([^&#]*)/g, (whole, key: string, name: string) =>
    secretParameter.test(name) ? `${key}${mask}` : whole,
  );
  return `${parts.scheme}${rest}`;
}

/** The secrets a URL carries, raw and decoded: its password and its secret query parameters. */
export function secretsOf(text: string): string[] {
  const found: string[] = [];
  const parts = splitScheme(text);
  if (!parts) return found;
  const at = parts.rest.lastIndexOf("@");
  const colon = parts.rest.indexOf(":");
  if (at >= 0 && colon >= 0 && colon < at) found.push(parts.rest.slice(colon + 1, at));
  for (const match of parts.rest.matchAll(/[?&;]([^=&#]*)=([^&#]*)/g)) {
    if (secretParameter.test(match[1]!)) found.push(match[2]!);
  }
  try {
    const url = new URL(text);
    found.push(url.password);
    for (const [name, value] of url.searchParams) if (secretParameter.test(name)) found.push(value);
  } catch {
    // Not parseable: the textual reading above is all there is.
  }
  return [...new Set(found.flatMap((secret) => [secret, safeDecode(secret)]))].filter((s) => s !== "");
}

/** The secrets of every URL in the command-line arguments (`--store URL` and `--store=URL` alike). */
export function secretsIn(argv: readonly string[]): string[] {
  const found = argv.flatMap((arg) => {
    const start = arg.search(/[a-z][a-z0-9+.-]*:\/\//i);
    return start < 0 ? [] : secretsOf(arg.slice(start));
  });
  // Longest first, so a secret that contains another is masked whole.
  return [...new Set(found)].sort((a, b) => b.length - a.length);
}

/** `text` with every secret replaced by `***`. */
export function scrub(text: string, secrets: readonly string[]): string {
  let clean = text;
  for (const secret of secrets) clean = clean.replaceAll(secret, mask);
  return clean;
}
