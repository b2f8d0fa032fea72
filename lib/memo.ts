// memo.ts: values computed once and shared for a while: a load shared for a TTL, and a
// small least-recently-used memo of pure computations.
import { detached } from './concurrency.ts';

/**
 * TtlMemo shares one pending or settled load per key for ttlMs, then forgets it (so
 * nothing outlives its use). A failed load is forgotten at once unless keep says the
 * failure is a definite answer worth sharing too.
 */
export class TtlMemo<T> {
  private readonly ttlMs: number;
  private readonly keep: (err: unknown) => boolean;
  private readonly entries = new Map<string, { at: number; wall: number; value: Promise<T> }>();

  constructor(ttlMs: number, keep: (err: unknown) => boolean = () => false) {
    this.ttlMs = ttlMs;
    this.keep = keep;
  }

  /** get returns the shared value of key, loading it when there is none, fresh is set, or it was loaded before notBefore (epoch ms). */
  get(key: string, load: () => Promise<T>, fresh = false, notBefore = 0): Promise<T> {
    const now = performance.now();
    const hit = this.entries.get(key);
    if (hit && !fresh && now - hit.at < this.ttlMs && hit.wall >= notBefore) return hit.value;
    // A shared load belongs to no gate task: it must not yield to urgent work that may be waiting for it.
    const entry = { at: now, wall: Date.now(), value: detached(load) };
    this.entries.set(key, entry);
    const drop = () => this.entries.get(key) === entry && this.entries.delete(key);
    entry.value.catch((err: unknown) => this.keep(err) || drop());
    setTimeout(drop, this.ttlMs).unref();
    return entry.value;
  }
}

/**
 * Memo remembers up to max computed values by key, forgetting the least recently used: for
 * pure functions of their key (an object's uid and resourceVersion) computed again shortly
 * after (a run decides an item twice). Under a cyclic working set larger than max it misses
 * every time, so it is kept small and meant for reuse close in time.
 */
export class Memo<T> {
  private readonly entries = new Map<string, T>();
  private readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  get(key: string, compute: () => T): T {
    if (this.entries.has(key)) {
      const hit = this.entries.get(key) as T;
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit;
    }
    const value = compute();
    this.entries.set(key, value);
    if (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value!);
    return value;
  }

  get size(): number {
    return this.entries.size;
  }
}
