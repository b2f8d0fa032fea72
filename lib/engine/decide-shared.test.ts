// decide for objects several SyncResources name: who wrote the object, who else names it,
// and what that makes of an item (pure: no cluster).
import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/objects.ts';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER_ANNOTATION, type Strategy } from '../model.ts';
import { strategies } from '../strategies.ts';
import { decide, desiredObject, manifestDigest } from './decide.ts';
import type { ResolvedItem } from './plan.ts';
import type { Writer } from './share.ts';

const w: Writer = {
  owner: 'kcp-system/a',
  manager: 'kcp-sync-resource/kcp-system/a',
  legacy: 'kcp-sync-resource',
};
const id = { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ns', name: 'x' };

const item = (strategy: Strategy): ResolvedItem & { object: KubeObject } => ({
  item: { name: 'x', strategy },
  opts: strategies[strategy],
  object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'ns' }, data: { k: 'v' } },
  id,
  info: { apiVersion: 'v1', kind: 'ConfigMap', resource: 'configmaps', namespaced: true, hasStatus: false },
});

const live = (extra: { managers?: string[]; labelled?: boolean; owner?: string } = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: {
    name: 'x',
    namespace: 'ns',
    uid: 'u',
    resourceVersion: '1',
    ...(extra.labelled ? { labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE } } : {}),
    ...(extra.owner ? { annotations: { [OWNER_ANNOTATION]: extra.owner } } : {}),
    managedFields: (extra.managers ?? ['someone']).map((manager) => ({
      manager,
      operation: 'Apply',
      fieldsV1: { 'f:data': { 'f:k': {} } },
    })),
  },
  data: { k: 'v' },
});

describe('decide, for an object not in the inventory', () => {
  it('takes on one another SyncResource created as created, and one that existed before as adopted; both recorded first', () => {
    const p = item('CreateAndSync');
    const shared = decide(p, live({ labelled: true, managers: ['kcp-sync-resource/kcp-system/b'] }), {
      writer: w,
      holders: [{ owner: 'kcp-system/b', adopted: false }],
    });
    expect(shared).toMatchObject({ op: 'update', record: true, adopt: false, drift: false });
    const before = decide(p, live(), { writer: w, holders: [] });
    expect(before).toMatchObject({ op: 'update', record: true, adopt: true });
    // Held by another SyncResource that had adopted it: it existed before, still.
    const adoptedByB = decide(p, live({ labelled: true }), {
      writer: w,
      holders: [{ owner: 'kcp-system/b', adopted: true }],
    });
    expect(adoptedByB).toMatchObject({ record: true, adopt: true });
  });

  it('trusts no mark in the SKR: our label on an object no SyncResource names makes it adopted, not created', () => {
    const forged = live({ labelled: true, owner: 'kcp-system/b' });
    expect(decide(item('CreateAndSync'), forged, { writer: w, holders: [] })).toMatchObject({ adopt: true });
    expect(decide(item('CreateAndIgnore'), forged, { writer: w, holders: [] })).toMatchObject({
      op: 'adopt',
      record: true,
      adopt: true,
    });
  });

  it('knows one this SyncResource wrote (its manager and our label, or the former owner annotation naming it) as its own', () => {
    const ours = live({ labelled: true, managers: [w.manager] });
    expect(decide(item('CreateAndSync'), ours, { writer: w })).toMatchObject({ record: true, adopt: false });
    expect(decide(item('CreateAndIgnore'), ours, { writer: w })).toMatchObject({
      op: 'ignore',
      record: true,
    });
    const former = live({ labelled: true, managers: [w.legacy], owner: w.owner });
    expect(decide(item('CreateAndSync'), former, { writer: w })).toMatchObject({
      record: true,
      adopt: false,
    });
    // Our manager without our label: an object an UpdateAndDelete item of ours updated, not one we made.
    expect(
      decide(item('CreateAndSync'), live({ managers: [w.manager] }), { writer: w, holders: [] }),
    ).toMatchObject({
      adopt: true,
    });
  });
});

describe('decide, for an object in the inventory', () => {
  it('applies a changed manifest as such, and finds nothing to do when the manifest and our fields are as last applied', () => {
    const p = item('CreateAndSync');
    const entry = { item: 'x', ...id, digest: 'old', manifest: 'other' };
    expect(decide(p, live({ labelled: true, managers: [w.manager] }), { writer: w, entry })).toMatchObject({
      op: 'update',
      record: false,
      drift: false,
    });
  });

  it('finds nothing to do for an entry whose digests are not recorded yet when the object holds what it wants, and applies when it does not', () => {
    // Recorded before the create; the run's digests go with its status, which a next run may precede.
    const p = item('CreateAndSync');
    const entry = { item: 'x', ...id };
    const holds = live({ labelled: true, managers: [w.manager] });
    holds.metadata.labels = { ...holds.metadata.labels, ...desiredObject(p).metadata.labels };
    expect(decide(p, holds, { writer: w, entry })).toMatchObject({ op: 'unchanged', record: false });
    const edited = { ...holds, data: { k: 'edited' } };
    expect(decide(p, edited, { writer: w, entry })).toMatchObject({ op: 'update', drift: false });
  });

  it('refuses a Delete item on an object another SyncResource names', () => {
    const d = decide(item('Delete'), live({ labelled: true }), {
      writer: w,
      holders: [{ owner: 'kcp-system/b', adopted: false }],
    });
    expect(d).toMatchObject({ op: 'none', done: { state: 'Error', reason: 'Conflict' } });
    expect(d.done?.message).toBe(
      'ConfigMap ns/x is named by SyncResource kcp-system/b too: a shared object is never deleted by a Delete item',
    );
    expect(decide(item('Delete'), live(), { writer: w, holders: [] })).toMatchObject({ op: 'delete' });
  });

  it('keeps the manifest digest of an object it does not own on the object (UpdateAndDelete), and of one it owns in the inventory', () => {
    const own = desiredObject(item('CreateAndSync'));
    expect(own.metadata.annotations).toBeUndefined();
    expect(own.metadata.labels).toEqual({ [MANAGED_BY_LABEL]: MANAGED_BY_VALUE });
    const notOwn = desiredObject(item('UpdateAndDelete'));
    expect(notOwn.metadata.labels).toBeUndefined();
    expect(Object.keys(notOwn.metadata.annotations ?? {})).toEqual([
      'kcp-sync.kyma-project.io/applied-digest',
    ]);
    expect(manifestDigest(own)).toMatch(/^[0-9a-f]{32}$/);
  });
});
