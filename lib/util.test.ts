import { describe, expect, it } from 'vitest';
import type { ClusterResolved } from './events.ts';
import { mergeRequests } from './pipeline/apply.ts';
import { KeyedQueue, PriorityGate } from './util.ts';

describe('KeyedQueue', () => {
  it('runs one task per key; requests arriving meanwhile share one more run with their values merged', async () => {
    const runs: number[][] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const q = new KeyedQueue<number[], string>(async (v) => {
      runs.push(v);
      if (runs.length === 1) await gate;
      return v.join('+');
    }, (a, b) => [...a, ...b]);
    const first = q.run('k', [1]);
    const joined = [q.run('k', [2]), q.run('k', [3]), q.run('other', [9])];
    release();
    expect(await first).toBe('1');
    expect(await Promise.all(joined)).toEqual(['2+3', '2+3', '9']);
    expect(runs).toEqual([[1], [9], [2, 3]]);
    expect(await q.run('k', [4])).toBe('4');
  });
});

describe('mergeRequests', () => {
  const req = (generation: number, trigger: ClusterResolved['trigger'], uid = 'u1'): ClusterResolved => ({
    namespace: 'n', name: 's', uid, generation, trigger, kyma: 'k', secret: { namespace: 'n', name: 'x', uid: 'su', resourceVersion: '1' },
  });

  it('keeps the newest identity and a reconcile request over a watch echo', () => {
    expect(mergeRequests(req(1, 'resync'), req(1, 'watch'))).toMatchObject({ generation: 1, trigger: 'resync' });
    expect(mergeRequests(req(2, 'watch'), req(1, 'watch'))).toMatchObject({ generation: 2, trigger: 'watch' });
    expect(mergeRequests(req(1, 'kyma'), req(3, 'secret'))).toMatchObject({ generation: 3, trigger: 'secret' });
    expect(mergeRequests(req(5, 'watch'), req(1, 'watch', 'u2'))).toMatchObject({ generation: 1, uid: 'u2' });
  });
});

describe('PriorityGate', () => {
  it('bounds tasks in progress and starts urgent waiting tasks first, each class in order', async () => {
    const gate = new PriorityGate(2);
    const started: string[] = [];
    let active = 0;
    let peak = 0;
    const releases = new Map<string, () => void>();
    const task = (name: string, urgent: boolean) => gate.run(urgent, async () => {
      started.push(name);
      peak = Math.max(peak, ++active);
      await new Promise<void>((r) => releases.set(name, r));
      active--;
      return name;
    });
    const all = [task('b1', false), task('b2', false), task('b3', false), task('b4', false), task('u1', true), task('u2', true)];
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual(['b1', 'b2']);
    expect(gate.waiting).toBe(4);
    for (let i = 0; i < 4; i++) {
      releases.get(started[i]!)!();
      await new Promise((r) => setImmediate(r));
    }
    for (const name of started.slice(4)) releases.get(name)!();
    await new Promise((r) => setImmediate(r));
    for (const name of started.slice(4)) releases.get(name)?.();
    expect(await Promise.all(all)).toEqual(['b1', 'b2', 'b3', 'b4', 'u1', 'u2']);
    expect(started).toEqual(['b1', 'b2', 'u1', 'u2', 'b3', 'b4']);
    expect(peak).toBe(2);
  });
});
