// ratelimit.ts: a token bucket (client-go's flowcontrol semantics: qps refill, burst
// capacity, callers reserve a token and wait for it).
import { setTimeout as sleep } from 'node:timers/promises';

/** TokenBucket limits the rate of take() calls to qps, allowing bursts of burst. */
export class TokenBucket {
  readonly qps: number;
  readonly burst: number;
  private tokens: number;
  private last: number;
  private readonly now: () => number;

  constructor(qps: number, burst: number, now: () => number = performance.now.bind(performance)) {
    if (!(qps > 0) || !(burst >= 1)) throw new RangeError(`invalid rate limit qps=${qps} burst=${burst}`);
    this.qps = qps;
    this.burst = burst;
    this.tokens = burst;
    this.now = now;
    this.last = now();
  }

  /** take resolves when a token is available; reservations queue in call order. */
  take(): Promise<void> {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.qps) / 1000);
    this.last = now;
    this.tokens -= 1;
    if (this.tokens >= 0) return Promise.resolve();
    return sleep((-this.tokens / this.qps) * 1000);
  }
}
