import { describe, expect, it } from 'vitest';
import type { ClusterResolved } from './events.ts';
import { mergeRequests } from './pipeline/apply.ts';
import { KeyedQueue } from './util.ts';

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
