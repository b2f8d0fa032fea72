// Findings: an object gone is posted at once, and of objects gone after it only those not
// seen back by the time their post is due; an object gone for a SyncResource being deleted
// waits for the SyncResource to go (its deletion run deleted the object and is about to
// remove the finalizer); one that is still there then is posted, as a deletion waiting for
// the object needs.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CloudEvent } from 'cloudevents';
import { Findings, GONE_WHILE_DELETING_MS } from './findings.ts';
import { testEntry, testView } from './testing.ts';
import type { SrView } from './view.ts';
import { holderOf } from './watch.ts';

beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] }));
afterEach(() => vi.useRealTimers());

const entry = testEntry('a', 'default');
const names = (e: CloudEvent<unknown>) =>
  (e.data as { changes: { name: string }[] }).changes.map((c) => c.name);

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
  const holder = (v: SrView) => holderOf(v, entry)!;
  return { views, posted, findings, holder };
}

describe('Findings', () => {
  it('posts an object gone at once; of those gone soon after, one seen back by the time their post is due is not posted', async () => {
    const { views, posted, findings } = setup();
    const [b, c] = [testEntry('b', 'default'), testEntry('c', 'default')];
    const v = testView('three', { entries: [entry, b, c] });
    views.set(v.key, v);
    const h = (e: typeof entry) => holderOf(v, e)!;
    findings.consider(h(entry), entry, undefined, false);
    await vi.advanceTimersByTimeAsync(1);
    expect(posted.map(names)).toEqual([['a']]);
    // The run it asks for may read every object of the inventory while it reads the SyncResource.
    const id = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name });
    expect((posted[0]!.data as { ahead: unknown }).ahead).toEqual([id('a'), id('b'), id('c')]);
    findings.consider(h(b), b, undefined, false);
    findings.consider(h(c), c, undefined, false);
    // The run of the first post finds b gone too and puts it back: its watch event is its own write.
    const back = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'default', name: 'b' } };
    findings.consider(h(b), b, back, true);
    await vi.advanceTimersByTimeAsync(100);
    expect(posted.map(names)).toEqual([['a'], ['c']]);
    findings.stop();
  });

  it('posts an object gone for a SyncResource being deleted only if it is still there a moment later', async () => {
    const { views, posted, findings, holder } = setup();
    const going = testView('going', { deleting: true, entries: [entry] });
    const waiting = testView('waiting', { deleting: true, entries: [entry] });
    const kept = testView('kept', { entries: [entry] });
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
