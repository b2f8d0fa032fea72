// coalesce.ts turns the SKR source's findings into posts, at most one in flight and one
// waiting per SyncResource: findings for a SyncResource within a short delay become one
// post; a SyncResource that keeps changing (a customer flipping an object) is posted at
// growing gaps (minGapMs doubling to maxGapMs) until it has been quiet for twice its gap,
// so a thousand flips a second cost a few runs, not a write storm.

/** CoalesceOptions tune the delays; post is called with every finding merged since the last post. */
export interface CoalesceOptions<T> {
  post(key: string, findings: T[]): Promise<void>;
  /** minGapMs is the first gap after a post that is followed by another finding soon (default 500). */
  minGapMs?: number;
  maxGapMs?: number;
  /** retryMs is the wait after a failed post (default 1 s); its findings are posted again. */
  retryMs?: number;
  /** keep drops a finding at post time that no longer holds (the status caught up meanwhile). */
  keep?: (key: string, finding: T) => boolean;
}

type Slot<T> = { findings: T[]; timer?: NodeJS.Timeout; lastAt: number; gap: number; busy: boolean };

/** Coalescer merges findings per key and posts them as CoalesceOptions says. */
export class Coalescer<T> {
  private readonly slots = new Map<string, Slot<T>>();
  private readonly opts: Required<Omit<CoalesceOptions<T>, 'keep'>> & Pick<CoalesceOptions<T>, 'keep'>;

  constructor(opts: CoalesceOptions<T>) {
    this.opts = { minGapMs: 500, maxGapMs: 60_000, retryMs: 1_000, ...opts };
  }

  /** add records a finding for key, to be posted after delayMs at the earliest. */
  add(key: string, finding: T, delayMs: number): void {
    const now = performance.now();
    let s = this.slots.get(key);
    if (!s) this.slots.set(key, (s = { findings: [], lastAt: -Infinity, gap: 0, busy: false }));
    s.findings.push(finding);
    if (s.timer || s.busy) return;
    this.schedule(key, s, now, delayMs);
  }

  private schedule(key: string, s: Slot<T>, now: number, delayMs: number): void {
    // Soon after a post: the key is changing again; wait a growing gap. Quiet for twice the gap: start over.
    const since = now - s.lastAt;
    s.gap =
      since < Math.max(2 * s.gap, 2 * this.opts.minGapMs)
        ? Math.min(Math.max(2 * s.gap, this.opts.minGapMs), this.opts.maxGapMs)
        : 0;
    const at = Math.max(now + delayMs, s.lastAt + s.gap);
    s.timer = setTimeout(() => void this.fire(key, s), at - now);
    s.timer.unref?.();
  }

  private async fire(key: string, s: Slot<T>): Promise<void> {
    s.timer = undefined;
    const findings = s.findings.splice(0).filter((f) => this.opts.keep?.(key, f) ?? true);
    if (findings.length > 0) {
      s.busy = true;
      s.lastAt = performance.now();
      try {
        await this.opts.post(key, findings);
      } catch {
        s.findings.unshift(...findings);
        s.busy = false;
        s.timer = setTimeout(() => void this.fire(key, s), this.opts.retryMs);
        s.timer.unref?.();
        return;
      }
      s.busy = false;
    }
    if (s.findings.length > 0) this.schedule(key, s, performance.now(), 0);
    else if (performance.now() - s.lastAt > 2 * this.opts.maxGapMs) this.slots.delete(key);
    this.sweep();
  }

  private sweep(): void {
    if (this.slots.size < 10_000) return;
    const now = performance.now();
    for (const [k, s] of this.slots)
      if (!s.timer && !s.busy && now - s.lastAt > 2 * Math.max(s.gap, this.opts.minGapMs))
        this.slots.delete(k);
  }

  /** stop cancels every timer. */
  stop(): void {
    for (const s of this.slots.values()) clearTimeout(s.timer);
    this.slots.clear();
  }
}
