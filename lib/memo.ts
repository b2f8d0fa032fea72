// memo.ts: values computed once and shared for a while: a load shared for a TTL, reads
// shared by the callers that wait for the same one, and a small least-recently-used memo
// of pure computations.
import { detached } from './concurrency.ts';

/**
 * TtlMemo shares one pending or settled load per key for ttlMs, then forgets it (so
 * nothing outlives its use). A failed load is forgotten at once unless keep says the
 * failure is a definite answer worth sharing too. A load asked for fresh is one begun
 * after the caller asked, shared with those who ask meanwhile (FreshReads): a burst of
 * fresh callers costs two loads, not one each.
 */
export class TtlMemo<T> {
  private readonly ttlMs: number;
  private readonly keep: (err: unknown) => boolean;
  private readonly entries = new Map<string, { at: number; wall: number; value: Promise<T> }>();
  private readonly loads = new FreshReads<T>();

  constructor(ttlMs: number, keep: (err: unknown) => boolean = () => false) {
    this.ttlMs = ttlMs;
    this.keep = keep;
  }

  /** get returns the shared value of key, loading it when there is none, fresh is set, or it was loaded before notBefore (epoch ms). */
  get(key: string, load: () => Promise<T>, fresh = false, notBefore = 0): Promise<T> {
    const now = performance.now();
    const hit = this.entries.get(key);
    if (hit && !fresh && now - hit.at < this.ttlMs && hit.wall >= notBefore) return hit.value;
    const value = this.loads.get(key, load);
    // Joined the load a caller before this one asked for.
    if (hit?.value === value) return value;
    // Taken now: the load begins now or when the one in flight ends.
    const entry = { at: now, wall: Date.now(), value };
    this.entries.set(key, entry);
    const drop = () => this.entries.get(key) === entry && this.entries.delete(key);
    entry.value.catch((err: unknown) => this.keep(err) || drop());
    setTimeout(drop, this.ttlMs).unref();
    return entry.value;
  }
}

/**
 * FreshReads shares a read of a key among concurrent callers without handing any of them a
 * read that began before it asked: a read in flight serves those who asked before it began;
 * who asks meanwhile shares the one read that starts when it ends. At most one read per key
 * is in flight, so n callers at once cost two reads, not n, and each sees every write that
 * was done before it asked (a quorum read, as its own read would). A failure fails those who
 * shared the read, and the next read starts afresh.
 */
export class FreshReads<T> {
  private readonly keys = new Map<string, { running: Promise<T>; next?: Promise<T> }>();

  get(key: string, read: () => Promise<T>): Promise<T> {
    const k = this.keys.get(key);
    if (!k) return this.start(key, read);
    return (k.next ??= k.running.then(
      () => this.start(key, read),
      () => this.start(key, read),
    ));
  }

  private start(key: string, read: () => Promise<T>): Promise<T> {
    // A shared read belongs to no gate task: it must not yield to urgent work that may be waiting for it.
    const running = detached(read);
    const entry: { running: Promise<T>; next?: Promise<T> } = { running };
    this.keys.set(key, entry);
    const done = () => {
      if (this.keys.get(key) === entry && entry.next === undefined) this.keys.delete(key);
    };
    running.then(done, done);
    return running;
  }

  /** size is the number of keys with a read in flight (tests). */
  get size(): number {
    return this.keys.size;
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
