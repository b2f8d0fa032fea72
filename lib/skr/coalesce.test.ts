// The coalescer: findings for one key within its delay become one post; a quiet key's
// finding with no delay is posted at once, what comes while it is in flight waits the first
// gap; a key that keeps changing is posted at growing gaps; a failed post is retried with
// its findings.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Coalescer } from './coalesce.ts';

beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] }));
afterEach(() => vi.useRealTimers());

describe('Coalescer', () => {
  it('merges the findings of one key within the delay into one post, keys apart', async () => {
    const posts: [string, number[]][] = [];
    const c = new Coalescer<number>({ post: async (k, f) => void posts.push([k, f]) });
    c.add('a', 1, 20);
    c.add('a', 2, 20);
    c.add('b', 3, 20);
    await vi.advanceTimersByTimeAsync(25);
    expect(posts).toEqual([
      ['a', [1, 2]],
      ['b', [3]],
    ]);
  });

  it("posts a quiet key's finding at once, and what is found while that post is in flight as one post after the first gap", async () => {
    const posts: [number, number[]][] = [];
    let release = () => {};
    const c = new Coalescer<number>({
      post: async (_k, f) => {
        posts.push([performance.now(), f]);
        if (posts.length === 1) await new Promise<void>((r) => (release = r));
      },
      minGapMs: 50,
    });
    c.add('a', 1, 0);
    await vi.advanceTimersByTimeAsync(1);
    expect(posts).toEqual([[0, [1]]]);
    c.add('a', 2, 0);
    c.add('a', 3, 0);
    await vi.advanceTimersByTimeAsync(10);
    release();
    await vi.advanceTimersByTimeAsync(30);
    expect(posts).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(20);
    expect(posts).toEqual([
      [0, [1]],
      [50, [2, 3]],
    ]);
  });

  it('posts a finding with no delay at once though another waits for its delay, and a finding found after a post no sooner than its delay', async () => {
    const at: number[] = [];
    const c = new Coalescer<number>({ post: async () => void at.push(performance.now()), minGapMs: 50 });
    c.add('a', 1, 150);
    await vi.advanceTimersByTimeAsync(10);
    c.add('a', 2, 0);
    await vi.advanceTimersByTimeAsync(1);
    expect(at).toEqual([10]);
    c.add('a', 3, 150);
    await vi.advanceTimersByTimeAsync(200);
    expect(at).toEqual([10, 161]);
  });

  it('posts a key that keeps changing at growing gaps: a thousand findings over ten seconds are a few posts', async () => {
    let posts = 0;
    const c = new Coalescer<number>({ post: async () => void posts++, minGapMs: 500, maxGapMs: 60_000 });
    for (let t = 0; t < 10_000; t += 10) {
      c.add('a', t, 20);
      await vi.advanceTimersByTimeAsync(10);
    }
    await vi.advanceTimersByTimeAsync(20_000);
    // 0, 0.5, 1.5, 3.5, 7.5 s, then one after the last finding: about log2 of the span.
    expect(posts).toBeGreaterThanOrEqual(4);
    expect(posts).toBeLessThanOrEqual(7);
  });

  it('starts over once a key has been quiet', async () => {
    const at: number[] = [];
    const c = new Coalescer<number>({ post: async () => void at.push(performance.now()), minGapMs: 500 });
    c.add('a', 1, 20);
    await vi.advanceTimersByTimeAsync(5_000);
    c.add('a', 2, 20);
    await vi.advanceTimersByTimeAsync(25);
    expect(at).toHaveLength(2);
    expect(at[1]! - at[0]!).toBeLessThan(5_100);
  });

  it('drops what no longer holds and retries a failed post with its findings', async () => {
    const posts: number[][] = [];
    let fail = true;
    const c = new Coalescer<number>({
      post: async (_k, f) => {
        if (fail) {
          fail = false;
          throw new Error('broker down');
        }
        posts.push(f);
      },
      keep: (_k, f) => f !== 2,
      retryMs: 1_000,
    });
    c.add('a', 1, 20);
    c.add('a', 2, 20);
    await vi.advanceTimersByTimeAsync(25);
    expect(posts).toEqual([]);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(posts).toEqual([[1]]);
  });
});

describe('Coalescer after a failed post', () => {
  it('posts what is found while the retry waits with the retry, not sooner', async () => {
    const posts: [number, number[]][] = [];
    let fail = true;
    const c = new Coalescer<number>({
      post: async (_k, f) => {
        if (fail) {
          fail = false;
          throw new Error('broker down');
        }
        posts.push([performance.now(), f]);
      },
      retryMs: 1_000,
    });
    c.add('a', 1, 0);
    await vi.advanceTimersByTimeAsync(10);
    c.add('a', 2, 0);
    await vi.advanceTimersByTimeAsync(500);
    expect(posts).toEqual([]);
    await vi.advanceTimersByTimeAsync(500);
    expect(posts).toEqual([[1_000, [1, 2]]]);
  });
});
