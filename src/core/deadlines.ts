/**
 * Deadlines of one length on one timer, for a store's operations in flight.
 *
 * Every deadline one instance sets lasts the same `ms`, so they fall due in the order they were set: they
 * wait on one list, and one timer, armed for the oldest, serves them all. An operation costs a list entry
 * rather than a timer of its own to set and clear, which cost more than a fast store operation itself. The
 * timer keeps the process alive only while a deadline is pending, as a timer per operation would.
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
  /** Whether the timer keeps the process alive: only while a deadline is pending. */
  #holding = false;

  constructor(readonly ms: number) {}

  add(onExpire: () => void): Entry {
    const entry = new Entry(this, performance.now() + this.ms, onExpire);
    entry.previous = this.#newest;
    if (this.#newest) this.#newest.next = entry;
    else this.#oldest = entry;
    this.#newest = entry;
    this.#arm();
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
    if (this.#timer === undefined) {
      // At least 1 ms: a timer may fire a fraction early, and then it looks again.
      this.#timer = setTimeout(this.#expire, Math.max(1, Math.ceil(oldest.at - performance.now())));
      this.#holding = true;
    } else if (!this.#holding) {
      // A timer armed for an earlier deadline fires no later than this one's, then re-arms.
      keepsProcessAlive(this.#timer, true);
      this.#holding = true;
    }
  }

  readonly #expire = () => {
    this.#timer = undefined;
    this.#holding = false;
    const now = performance.now();
    try {
      while (this.#oldest !== undefined && this.#oldest.at <= now) {
        const entry = this.#oldest;
        entry.state = "expired";
        this.unlink(entry);
        entry.onExpire();
      }
    } finally {
      // An onExpire that throws must not strand the deadlines behind it, as it would not with a timer each.
      this.#arm();
    }
  };
}

/**
 * Deadlines of `ms` each on one timer.
 * @example
 * const deadline = sameLengthDeadlines(5_000);
 * const pending = deadline(() => reject(new Error("no answer within 5000 ms")));
 * // … when the answer comes:
 * if (pending.clear()) resolve(answer);
 */
export function sameLengthDeadlines(ms: number): SetDeadline {
  const list = new DeadlineList(ms);
  return (onExpire) => list.add(onExpire);
}
