import { describe, expect, it } from 'vitest';
import type { CloudEvent } from 'cloudevents';
import { RECONCILE_ANNOTATION, type SyncResource, type SyncStatus } from '../model.ts';
import type { SyncResourceChanged } from '../events/contract.ts';
import { changed, Changes, seenOf, withRetries } from './changes.ts';
import { Priority } from '../concurrency.ts';
import { runPriority } from '../pipeline/requests.ts';

const sr = (o: {
  uid?: string;
  generation?: number;
  deleting?: boolean;
  status?: Partial<SyncStatus>;
  rv?: string;
  requested?: string;
}): SyncResource => ({
  apiVersion: 'operator.kyma-project.io/v1alpha1',
  kind: 'SyncResource',
  metadata: {
    namespace: 'kcp-system',
    name: 'a',
    uid: o.uid ?? 'u1',
    generation: o.generation ?? 1,
    resourceVersion: o.rv ?? '1',
    ...(o.deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
    ...(o.requested ? { annotations: { [RECONCILE_ANNOTATION]: o.requested } } : {}),
  },
  spec: { kyma: 'kyma-1', items: [] },
  ...(o.status ? { status: o.status as SyncStatus } : {}),
});
const ready = (generation: number): Partial<SyncStatus> => ({
  state: 'Ready',
  observedGeneration: generation,
});

describe('changed', () => {
  it.each([
    ['first seen, no status', undefined, sr({}), 'new'],
    ['first seen, settled', undefined, sr({ status: ready(1) }), undefined],
    [
      'first seen, edited since its last status',
      undefined,
      sr({ generation: 2, status: ready(1) }),
      'change',
    ],
    ['first seen, being deleted', undefined, sr({ deleting: true, status: ready(1) }), 'change'],
    ['our claim or inventory write (same generation)', sr({}), sr({ rv: '2' }), undefined],
    ['our status write', sr({}), sr({ rv: '3', status: ready(1) }), undefined],
    [
      'our status write, not settled',
      sr({}),
      sr({ rv: '3', status: { state: 'Processing', observedGeneration: 1 } }),
      undefined,
    ],
    ['an edit', sr({ status: ready(1) }), sr({ generation: 2, status: ready(1) }), 'change'],
    ['an edit before the first status', sr({}), sr({ generation: 2 }), 'change'],
    [
      'deletion begun',
      sr({ status: ready(1) }),
      sr({ deleting: true, generation: 2, status: ready(1) }),
      'change',
    ],
    ['deleting, our write', sr({ deleting: true }), sr({ deleting: true, rv: '9' }), undefined],
    ['recreated under the same name', sr({ status: ready(1) }), sr({ uid: 'u2' }), 'new'],
    ['a reconcile asked for', sr({ status: ready(1) }), sr({ requested: 't1', status: ready(1) }), 'request'],
    [
      'asked for again',
      sr({ requested: 't1', status: ready(1) }),
      sr({ requested: 't2', status: ready(1) }),
      'request',
    ],
    [
      'the same request, our write',
      sr({ requested: 't1', status: ready(1) }),
      sr({ requested: 't1', rv: '5', status: ready(1) }),
      undefined,
    ],
    [
      'asked for while its deletion failed',
      sr({ deleting: true, status: { state: 'Error', observedGeneration: 1 } }),
      sr({ deleting: true, requested: 't1', status: { state: 'Error', observedGeneration: 1 } }),
      'request',
    ],
  ] as const)('%s', (_, before, now, want) => {
    expect(changed(before ? seenOf(before) : undefined, now)).toBe(want);
  });
});

describe('Changes', () => {
  const posted = () => {
    const events: SyncResourceChanged[] = [];
    const c = new Changes(async (e: CloudEvent<unknown>) => void events.push(e.data as SyncResourceChanged), {
      info() {},
      warn() {},
      error() {},
    });
    return { c, events };
  };
  const flush = () => new Promise((r) => setTimeout(r, 10));

  it('posts nothing before it knows its share, then the unsettled SyncResources of the Kymas it owns', async () => {
    const { c, events } = posted();
    c.put(sr({}));
    c.put({ ...sr({ uid: 'u9', status: ready(1) }), metadata: { ...sr({}).metadata, name: 'b', uid: 'u9' } });
    await flush();
    expect(events).toEqual([]);
    c.shard(() => true);
    await flush();
    expect(events).toEqual([
      { namespace: 'kcp-system', name: 'a', uid: 'u1', generation: 1, kyma: 'kyma-1', resourceVersion: '1' },
    ]);
  });

  it('posts an edit as a change and nothing for its own writes; nothing for a Kyma another replica owns', async () => {
    const { c, events } = posted();
    c.shard((k) => k === 'kcp-system/kyma-1');
    c.put(sr({ status: ready(1) }));
    c.put(sr({ status: ready(1), rv: '2' }));
    c.put(sr({ generation: 2, status: ready(1), rv: '3' }));
    c.put(sr({ generation: 2, status: ready(2), rv: '4' }));
    await flush();
    expect(events).toEqual([
      {
        namespace: 'kcp-system',
        name: 'a',
        uid: 'u1',
        generation: 2,
        kyma: 'kyma-1',
        resourceVersion: '3',
        change: true,
      },
    ]);
    expect(c.stats.echoes).toBe(3);
    c.shard(() => false);
    c.put(sr({ generation: 3, status: ready(2), rv: '5' }));
    await flush();
    expect(events).toHaveLength(1);
    // Taken over again: what is not settled is posted.
    c.shard(() => true);
    await flush();
    expect(events.at(-1)).toEqual({
      namespace: 'kcp-system',
      name: 'a',
      uid: 'u1',
      generation: 3,
      kyma: 'kyma-1',
      // The version last seen: the run reads at no older one.
      resourceVersion: '5',
      change: true,
    });
  });
  it("posts a policy's rerun of its namespace as bulk work, an edit as a change ahead of it", async () => {
    const { c, events } = posted();
    c.shard(() => true);
    c.put(sr({ status: ready(1) }));
    c.rerun('kcp-system');
    c.rerun('team-a');
    c.put(sr({ generation: 2, status: ready(1), rv: '2' }));
    await flush();
    const base = { namespace: 'kcp-system', name: 'a', uid: 'u1', kyma: 'kyma-1' };
    expect(events).toEqual([
      { ...base, generation: 1, resourceVersion: '1', policy: true },
      { ...base, generation: 2, resourceVersion: '2', change: true },
    ]);
    // What each asks of the steps after (lib/pipeline/requests.ts): bulk, then an edit.
    expect(events.map((e) => runPriority(e.change, e.deleting))).toEqual([Priority.bulk, Priority.edit]);
  });

  it('names the objects of the inventory of a SyncResource edited, the first 16, for its run to read ahead', async () => {
    const { c, events } = posted();
    c.shard(() => true);
    const id = (n: number) => ({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name: `o${n}` });
    const synced = Array.from({ length: 20 }, (_, n) => ({ ...id(n), item: `i${n}`, digest: 'd' }));
    c.put(sr({ status: { ...ready(1), synced } }));
    c.put(sr({ generation: 2, status: { ...ready(1), synced }, rv: '2' }));
    await flush();
    expect(events).toEqual([
      {
        namespace: 'kcp-system',
        name: 'a',
        uid: 'u1',
        generation: 2,
        kyma: 'kyma-1',
        resourceVersion: '2',
        change: true,
        ahead: Array.from({ length: 16 }, (_, n) => id(n)),
      },
    ]);
  });

  it('drops a post still waiting when its Kyma goes to another replica, which posts it on taking over', async () => {
    const events: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const c = new Changes(
      async (e: CloudEvent<unknown>) => {
        await held;
        events.push((e.data as SyncResourceChanged).name);
      },
      { info() {}, warn() {}, error() {} },
    );
    c.shard(() => true);
    // Sixteen posts in flight (the bound), held by the broker; the seventeenth waits.
    const names = Array.from({ length: 17 }, (_, i) => `n${i}`);
    for (const n of names)
      c.put({ ...sr({ uid: `u-${n}` }), metadata: { ...sr({}).metadata, name: n, uid: `u-${n}` } });
    await flush();
    c.shard(() => false);
    release();
    await flush();
    expect(events.sort()).toEqual(names.slice(0, 16).sort());
    expect(c.stats.posted).toBe(16);
    // Taken over again: the one never posted is (with the others, none of them settled).
    c.shard(() => true);
    await flush();
    expect(events).toContain('n16');
  });
});

describe('withRetries', () => {
  it('retries a failing post ten times, backing off, then gives up; a post that recovers is sent once', async () => {
    let calls = 0;
    await expect(
      withRetries(async () => {
        calls++;
        throw new Error('broker down');
      }, 1),
    ).rejects.toThrow('broker down');
    expect(calls).toBe(11);
    calls = 0;
    await withRetries(async () => {
      if (++calls < 4) throw new Error('busy');
    }, 1);
    expect(calls).toBe(4);
  });
});
