// coalesce.ts turns the SKR source's findings into posts, at most one in flight and one
// waiting per SyncResource, as a controller's workqueue holds a key: a quiet
// SyncResource's finding is posted after its delay (none for an object gone or drifted),
// and what is found while that post is in flight or soon after waits a gap (and its own
// delay) and is one post; a SyncResource that keeps changing (a customer flipping an
// object) is posted at growing gaps (minGapMs doubling to maxGapMs) until it has been
// quiet for quietMs or twice its gap, so a thousand flips a second cost a few runs, not a
// write storm.

/** CoalesceOptions tune the delays; post is called with every finding merged since the last post. */
export interface CoalesceOptions<T> {
  post(key: string, findings: T[]): Promise<void>;
  /** minGapMs is the first gap after a post that is followed by another finding soon (default 50). */
  minGapMs?: number;
  maxGapMs?: number;
  /** quietMs is how long a key goes without a post before its next finding is posted with no gap (default 1 s). */
  quietMs?: number;
  /** retryMs is the wait after a failed post (default 1 s); its findings are posted again. */
  retryMs?: number;
  /** keep drops a finding at post time that no longer holds (the status caught up meanwhile). */
  keep?: (key: string, finding: T) => boolean;
}

/**
 * Slot is a key's state: the findings waiting, when the first of them is due (its delay),
 * when its timer fires, and whether a post is in flight or failed and waits for its retry
 * (busy: the findings found meanwhile go with it).
 */
type Slot<T> = {
  findings: T[];
  due: number;
  at: number;
  timer?: NodeJS.Timeout;
  lastAt: number;
  gap: number;
  busy: boolean;
};

/** Coalescer merges findings per key and posts them as CoalesceOptions says. */
export class Coalescer<T> {
  private readonly slots = new Map<string, Slot<T>>();
  private readonly opts: Required<Omit<CoalesceOptions<T>, 'keep'>> & Pick<CoalesceOptions<T>, 'keep'>;

  constructor(opts: CoalesceOptions<T>) {
    this.opts = { minGapMs: 50, maxGapMs: 60_000, quietMs: 1_000, retryMs: 1_000, ...opts };
  }

  /** add records a finding for key, to be posted after delayMs at the earliest. */
  add(key: string, finding: T, delayMs: number): void {
    const now = performance.now();
    let s = this.slots.get(key);
    if (!s) {
      s = { findings: [], due: Infinity, at: Infinity, lastAt: -Infinity, gap: 0, busy: false };
      this.slots.set(key, s);
    }
    s.findings.push(finding);
    s.due = Math.min(s.due, now + delayMs);
    if (s.busy) return;
    if (!s.timer) this.schedule(key, s, now);
    // Due before the timer that waits for another finding's delay: sooner, within the gap.
    else if (s.due < s.at) this.arm(key, s, now);
  }

  private schedule(key: string, s: Slot<T>, now: number): void {
    // Soon after a post: the key is changing again; wait a growing gap. Quiet: start over.
    const since = now - s.lastAt;
    s.gap =
      since < Math.max(2 * s.gap, this.opts.quietMs)
        ? Math.min(Math.max(2 * s.gap, this.opts.minGapMs), this.opts.maxGapMs)
        : 0;
    this.arm(key, s, now);
  }

  private arm(key: string, s: Slot<T>, now: number): void {
    clearTimeout(s.timer);
    s.at = Math.max(s.due, s.lastAt + s.gap);
    s.timer = setTimeout(() => void this.fire(key, s), Math.max(0, s.at - now));
    s.timer.unref?.();
  }

  private async fire(key: string, s: Slot<T>): Promise<void> {
    s.timer = undefined;
    s.due = Infinity;
    s.busy = false;
    const findings = s.findings.splice(0).filter((f) => this.opts.keep?.(key, f) ?? true);
    if (findings.length > 0) {
      s.busy = true;
      s.lastAt = performance.now();
      try {
        await this.opts.post(key, findings);
      } catch {
        // Still busy: the retry takes what is found until then along.
        s.findings.unshift(...findings);
        s.timer = setTimeout(() => void this.fire(key, s), this.opts.retryMs);
        s.timer.unref?.();
        return;
      }
      s.busy = false;
    }
    if (s.findings.length > 0) this.schedule(key, s, performance.now());
    else if (performance.now() - s.lastAt > 2 * this.opts.maxGapMs) this.slots.delete(key);
    this.sweep();
  }

  private sweep(): void {
    if (this.slots.size < 10_000) return;
    const now = performance.now();
    for (const [k, s] of this.slots)
      if (!s.timer && !s.busy && now - s.lastAt > Math.max(2 * s.gap, this.opts.quietMs))
        this.slots.delete(k);
  }

  /** stop cancels every timer. */
  stop(): void {
    for (const s of this.slots.values()) clearTimeout(s.timer);
    this.slots.clear();
  }
}
