// answer.ts is the one outcome of every step: what its function answers the delivery
// with, what it sends before answering, and what runs after the answer
// (functions/define.ts carries it out).
import type { Priority } from '../concurrency.ts';
import type { SyncRef } from '../events/contract.ts';

/** Emit is an event a step sends: its type and data (the function adds id, source and trace context). */
export interface Emit {
  type: string;
  data: SyncRef;
}

/** Answer is what a step comes to; every field is optional, and {} is a plain 2xx. */
export interface Answer {
  /** reply is answered with: the broker posts it on (and holds the delivery for its pipeline). */
  reply?: Emit;
  /** send are sent before the answer (a few at a time). */
  send?: Emit[];
  /**
   * later are posted after the answer through the process's bound of posts in flight
   * (by priority): the caller is not held for the pipeline behind them. A post cut short
   * is caught up by the next resync.
   */
  later?: { key: string; events: Emit[]; priority: Priority };
  /** fanOut runs after the answer, one per key at a time (fanout.ts background); it returns how many it posted. */
  fanOut?: { key: string; job: () => Promise<number> };
  /** retry answers 503 with this message (after send): the broker redelivers with back-off. */
  retry?: string;
}
