/**
 * Loads `@opentelemetry/api`, the optional peer dependency `idempotool/otel` is built on, so that an
 * application without it fails on import with one line that says what to install, not with Node's
 * "Cannot find package" from inside our files.
 */
import { createRequire } from "node:module";

type OtelApi = typeof import("@opentelemetry/api");

const peer = "@opentelemetry/api";

/** The API, or an error naming the package to install when it is not there. */
export function loadOtelApi(): OtelApi {
  try {
    // Synchronous, so the entry stays a plain module (no top-level await) that `require()` can load too.
    // Node resolves this package to the same CommonJS build whether imported or required.
    return createRequire(import.meta.url)(peer) as OtelApi;
  } catch (cause) {
    if (isMissing(cause)) {
      throw new Error(`idempotool/otel needs ${peer}, which is not installed: npm install ${peer}`, {
        cause,
      });
    }
    throw cause;
  }
}

/** Node's "cannot find" for the peer itself, not for something it failed to load in turn. */
function isMissing(error: unknown): boolean {
  if (!(error instanceof Error) || !("code" in error) || error.code !== "MODULE_NOT_FOUND") return false;
  return error.message.includes(`'${peer}'`);
}
