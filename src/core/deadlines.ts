/**
 * Deadlines of one length on one timer, for a store's operations in flight.
 *
 * Every deadline one instance sets lasts the same `ms`, so they fall due in the order they were set: they
 * wait on one list, and one timer, armed for the oldest, serves them all. An operation costs a list entry
 * rather than a timer of its own to set and clear, which cost more than a fast store operation itself. The
 * timer keeps the process alive only while a deadline is pending, as a timer per operation would; with
 * `{ ref: false }` it never does (background work such as a lease's renewals).
 */

import { keepsProcessAlive } from "./clock.js";

/** One pending deadline. */
export interface Deadline {
  /** The work is done: stop waiting. True when it beat the deadline, false when the deadline had passed. */
  clear(): boolean;
}

/** Sets a deadline `ms` from now; `onExpire` runs once it passes, unless cleared first. */
export type SetDeadline = (onExpire: () => void) => Deadline;

class Entry implements Deadline {
  previous: Entry | undefined;
  next: Entry | undefined;
  /** "pending" until cleared or expired. */
  state: "pending" | "cleared" | "expired" = "pending";

  constructor(
    readonly list: DeadlineList,
    readonly at: number,
    readonly onExpire: () => void,
  ) {}

  clear(): boolean {
    if (this.state !== "pending") return this.state === "cleared";
    this.state = "cleared";
    this.list.unlink(this);
    return true;
  }
}

class DeadlineList {
  #oldest: Entry | undefined;
  #newest: Entry | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** The `setTimeout` that armed it: a test's fake timers swapped in or out leave it never firing. */
  #armedWith: typeof setTimeout | undefined;
  /** When the armed timer is due, by performance.now() at arming: it has waited at least that long. */
  #armedUntil = 0;
  /** Whether the timer keeps the process alive: only while a deadline is pending. */
  #holding = false;

  constructor(
    readonly ms: number,
    readonly ref: boolean,
  ) {}

  add(onExpire: () => void): Entry {
    const entry = new Entry(this, performance.now() + this.ms, onExpire);
    entry.previous = this.#newest;
    if (this.#newest) this.#newest.next = entry;
    else this.#oldest = entry;
    this.#newest = entry;
    try {
      this.#arm();
    } catch (error) {
      // No timer (a runtime that refuses one): nothing would ever expire the entry.
      this.unlink(entry);
      throw error;
    }
    return entry;
  }

  unlink(entry: Entry): void {
    if (entry.previous) entry.previous.next = entry.next;
    else this.#oldest = entry.next;
    if (entry.next) entry.next.previous = entry.previous;
    else this.#newest = entry.previous;
    entry.previous = entry.next = undefined;
    // Nothing pending: the timer, which fires later anyway, must not hold a process that has finished.
    if (this.#oldest === undefined && this.#holding) {
      keepsProcessAlive(this.#timer, false);
      this.#holding = false;
    }
  }

  #arm(): void {
    const oldest = this.#oldest;
    if (oldest === undefined) return;
    if (this.#timer === undefined || this.#armedWith !== setTimeout) {
      const delay = Math.max(1, Math.ceil(oldest.at - performance.now()));
      // Only the timer armed last expires anything: one left from before a swap may still fire.
      const timer: NodeJS.Timeout = setTimeout(() => {
        if (this.#timer === timer) this.#expire();
      }, delay);
      this.#timer = timer;
      this.#armedWith = setTimeout;
      this.#armedUntil = performance.now() + delay;
      this.#holding = this.ref;
      if (!this.ref) keepsProcessAlive(timer, false);
    } else if (this.ref && !this.#holding) {
      // A timer armed for an earlier deadline fires no later than this one's, then re-arms.
      keepsProcessAlive(this.#timer, true);
      this.#holding = true;
    }
  }

  #expire(): void {
    this.#timer = undefined;
    this.#holding = false;
    // A timer has waited as long as it was set for, even when it fires a fraction early by performance.now(),
    // or when fake timers drive it while performance.now() stands still.
    const now = Math.max(performance.now(), this.#armedUntil);
    while (this.#oldest !== undefined && this.#oldest.at <= now) {
      const entry = this.#oldest;
      entry.state = "expired";
      this.unlink(entry);
      entry.onExpire();
    }
    this.#arm();
  }
}

/** How a {@link sameLengthDeadlines} timer behaves. */
export interface DeadlineOptions {
  /** Whether a pending deadline keeps the process alive (default true). */
  readonly ref?: boolean;
}

/**
 * Deadlines of `ms` each on one timer.
 * @example
 * const deadline = sameLengthDeadlines(5_000);
 * const pending = deadline(() => reject(new Error("no answer within 5000 ms")));
 * // … when the answer comes:
 * if (pending.clear()) resolve(answer);
 */
export function sameLengthDeadlines(ms: number, options: DeadlineOptions = {}): SetDeadline {
  const list = new DeadlineList(ms, options.ref ?? true);
  return (onExpire) => list.add(onExpire);
}
