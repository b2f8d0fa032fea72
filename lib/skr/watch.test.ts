// listed: what a list does not find is gone at once for a SyncResource in sync (deleted
// while nobody watched), and for one not in sync only if it has not appeared meanwhile
// (its run records an object before it creates it: a first list races that run).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ResourceInfo } from '../kube/discovery.ts';
import type { KubeObject } from '../kube/objects.ts';
import type { Findings } from './findings.ts';
import {
  ABSENT_GRACE_MS,
  listed,
  observed,
  type KindWatch,
  type KymaWatch,
  type WatchContext,
} from './watch.ts';
import { testEntry, testView } from './testing.ts';
import type { Entry, SrView } from './view.ts';

beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }));
afterEach(() => vi.useRealTimers());

const info: ResourceInfo = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  resource: 'configmaps',
  namespaced: true,
  hasStatus: false,
};

function setup() {
  const [a, b, c] = ['a', 'b', 'c'].map((n) => testEntry(n, 'ns')) as [Entry, Entry, Entry];
  const views = new Map<string, SrView>();
  for (const v of [
    testView('settled', { inSync: true, entries: [a] }),
    testView('new', { entries: [b] }),
    testView('new2', { entries: [c] }),
  ])
    views.set(v.key, v);
  const gone: string[] = [];
  const findings = {
    consider: (h: { sr: string }, e: Entry, o: KubeObject | undefined) =>
      void (!o && gone.push(`${h.sr} ${e.name}`)),
  } as unknown as Findings;
  const w = {
    key: 'kcp-system/kyma-1',
    holders: new Map([
      [a.key, new Set(['kcp-system/settled'])],
      [b.key, new Set(['kcp-system/new'])],
      [c.key, new Set(['kcp-system/new2'])],
    ]),
    kinds: new Map(),
    srs: new Set(views.keys()),
  } as unknown as KymaWatch;
  const k: KindWatch = {
    key: 'ConfigMap.|ns',
    gk: 'ConfigMap.',
    namespace: 'ns',
    apiVersion: 'v1',
    kind: 'ConfigMap',
    abort: new AbortController(),
    objects: new Map(),
    state: 'listing',
  };
  w.kinds.set(k.key, k);
  const ctx: WatchContext = {
    views,
    kymas: new Map([[w.key, w]]),
    findings,
    stats: { events: 0, ignored: 0 },
    fieldManager: 'kcp-sync-resource',
  };
  return { ctx, w, k, gone };
}

describe('listed', () => {
  it('judges an object not listed gone at once if its SyncResource is in sync, later and only if still absent if not', async () => {
    const { ctx, w, k, gone } = setup();
    listed(ctx, w, k, info, []);
    expect(gone).toEqual(['kcp-system/settled a']);
    // The run of one of the new SyncResources creates its object: the watch sees it.
    observed(ctx, w, k, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'b', namespace: 'ns', resourceVersion: '2' },
    });
    await vi.advanceTimersByTimeAsync(ABSENT_GRACE_MS);
    expect(gone).toEqual(['kcp-system/settled a', 'kcp-system/new2 c']);
  });
});
