import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { IdleCollector } from './idle.ts';

describe('IdleCollector', () => {
  it('collects once deliveries have stopped for a moment, never while one is in flight, and not again without work', async () => {
    const idle = new IdleCollector(40);
    await sleep(150);
    const atStart = idle.collections; // the start-up's garbage, once
    expect(atStart).toBe(1);
    let release!: () => void;
    const delivery = idle.run(() => new Promise<void>((r) => (release = r)));
    await sleep(150);
    expect(idle.collections).toBe(atStart); // in flight: nothing
    release();
    await delivery;
    await sleep(100);
    expect(idle.collections).toBe(atStart + 1);
    await sleep(200);
    expect(idle.collections).toBe(atStart + 1); // idle and nothing grown: no more
  });

  it('collects again when work a delivery left behind grows the heap after the first collection', async () => {
    const idle = new IdleCollector(40);
    await idle.run(async () => {});
    await sleep(80);
    const first = idle.collections;
    // Work after the answer (a post), allocating more than the margin.
    const kept = Array.from({ length: 100_000 }, (_, i) => ({ i, s: `x${i}` }));
    await sleep(80);
    expect(kept.length).toBe(100_000);
    expect(idle.collections).toBeGreaterThan(first);
  });

  it('waits for the work a step left pending after its answer (posts the broker holds), then collects', async () => {
    const idle = new IdleCollector(40);
    let pending = true;
    idle.alsoWaitFor(() => pending);
    await idle.run(async () => {});
    const before = idle.collections;
    await sleep(200);
    expect(idle.collections).toBe(before); // the posts are still held: nothing
    pending = false;
    await sleep(100);
    expect(idle.collections).toBe(before + 1);
  });
});
