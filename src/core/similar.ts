/**
 * The near-duplicate hint (docs/concepts.md, "Near-duplicates across turns"): a new intent that looks like
 * one just completed still runs, but its envelope says so, so the agent can ask the user "I sent this 20
 * seconds ago, send again?".
 *
 * The hint is advisory. It lives in the same store as a marker record per (scope, tool, similar fields),
 * kept for the window; a lost or raced marker only loses a hint, never an outcome. The marker's key is made
 * in keys.ts (`similarMarkerKey`), with the other keys idempotool keeps for itself.
 */

import type { IdempotencyStore } from "./store.js";
import { iso } from "./time.js";

/** What the envelope of a near-duplicate call carries. */
export interface RecentSimilarCall {
  /** When the similar call ran (ISO-8601). */
  readonly called_at: string;
  /** Its idempotency key. */
  readonly idempotency_key: string;
}

export interface ResolvedSimilar<A> {
  readonly pick: (args: A) => unknown;
  readonly windowMs: number;
}

/** Markers are records of their own tool name, so listings and purges can tell them apart. */
export const similarMarkerTool = "idempotool:similar";

/** The similar call recorded under `markerKey`, unless it is this very key. */
export async function findSimilar(
  store: IdempotencyStore,
  scope: string,
  markerKey: string,
  key: string,
  now: number,
): Promise<RecentSimilarCall | undefined> {
  const marker = await store.get({ scope, key: markerKey }, now);
  if (marker?.tool !== similarMarkerTool || marker.status !== "completed" || marker.result === null) {
    return undefined;
  }
  const seen = JSON.parse(marker.result) as RecentSimilarCall;
  return seen.idempotency_key === key ? undefined : seen;
}

/** Remember that `key` completed at `calledAt`, for the next `windowMs`. */
export async function rememberSimilar(
  store: IdempotencyStore,
  scope: string,
  markerKey: string,
  key: string,
  calledAt: number,
  now: number,
  windowMs: number,
): Promise<void> {
  const result = JSON.stringify({
    called_at: iso(calledAt),
    idempotency_key: key,
  } satisfies RecentSimilarCall);
  const claim = () =>
    store.claim({
      scope,
      key: markerKey,
      tool: similarMarkerTool,
      fingerprint: markerKey,
      token: crypto.randomUUID(),
      leaseMs: 1,
      ttlMs: windowMs,
      now,
    });
  let claimed = await claim();
  if (!claimed.claimed) {
    // Only ever a marker: a call's record is never deleted to make room for a hint.
    if (claimed.record.tool !== similarMarkerTool) return;
    // The newest similar call wins: replace the older marker.
    await store.delete({ scope, key: markerKey });
    claimed = await claim();
    if (!claimed.claimed) return;
  }
  await store.settle({
    scope,
    key: markerKey,
    token: claimed.record.token,
    status: "completed",
    result,
    error: null,
    ttlMs: windowMs,
    now,
  });
}
