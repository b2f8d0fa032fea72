// Findings: an object gone for a SyncResource being deleted waits for the SyncResource to
// go (its deletion run deleted the object and is about to remove the finalizer); one that
// is still there then is posted, as a deletion waiting for the object needs.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CloudEvent } from 'cloudevents';
import { Findings, GONE_WHILE_DELETING_MS } from './findings.ts';
import type { Holder } from './judge.ts';
import type { Entry, SrView } from './view.ts';

beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] }));
afterEach(() => vi.useRealTimers());

const view = (name: string, deleting: boolean): SrView => ({
  key: `kcp-system/${name}`,
  namespace: 'kcp-system',
  name,
  uid: `uid-${name}`,
  kyma: 'kcp-system/kyma-1',
  manager: `kcp-sync-resource/kcp-system/${name}`,
  deleting,
  claimed: true,
  inSync: false,
  items: new Map(),
  health: new Map(),
  reasons: new Map(),
  entries: [],
});

const entry: Entry = {
  key: 'v1/ConfigMap/default/a',
  gk: '/ConfigMap',
  apiVersion: 'v1',
  kind: 'ConfigMap',
  namespace: 'default',
  name: 'a',
  item: 'a',
};

function setup() {
  const views = new Map<string, SrView>();
  const posted: CloudEvent<unknown>[] = [];
  const findings = new Findings({
    view: (sr) => views.get(sr),
    stillHolds: () => true,
    emit: async (e) => void posted.push(e),
    log: { info: () => {}, warn: () => {}, error: () => {} } as never,
    stats: { findings: 0, posts: 0 },
  });
  const holder = (v: SrView): Holder => ({
    sr: v.key,
    manager: v.manager,
    strategy: v.deleting ? undefined : 'CreateAndSync',
    deleting: v.deleting,
  });
  return { views, posted, findings, holder };
}

describe('Findings', () => {
  it('posts an object gone for a SyncResource being deleted only if it is still there a moment later', async () => {
    const { views, posted, findings, holder } = setup();
    const going = view('going', true);
    const waiting = view('waiting', true);
    const kept = view('kept', false);
    for (const v of [going, waiting, kept]) views.set(v.key, v);
    for (const v of [going, waiting, kept]) findings.consider(holder(v), entry, undefined, false);
    // An item in the spec wants its object back at once.
    await vi.advanceTimersByTimeAsync(25);
    expect(posted.map((e) => (e.data as { name: string }).name)).toEqual(['kept']);
    // The deletion of one finishes (its finalizer removed, the SyncResource gone): nothing is posted for it.
    views.delete(going.key);
    await vi.advanceTimersByTimeAsync(GONE_WHILE_DELETING_MS);
    expect(posted.map((e) => (e.data as { name: string }).name)).toEqual(['kept', 'waiting']);
    findings.stop();
  });
});
