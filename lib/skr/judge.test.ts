// judge: what a watched object asks of the SyncResource that holds it, from the KCP's view
// (inventory digest, strategy, reported health) and the live object alone.
import { describe, expect, it } from 'vitest';
import { appliedDigest } from '../engine/drift.ts';
import type { KubeObject } from '../kube/objects.ts';
import { judge, ourStamp, ownWrite, type Holder } from './judge.ts';

const MANAGER = 'kcp-sync-resource/kcp-system/a';
const cm = (
  rv: string,
  data: Record<string, string>,
  managers: { manager: string; time: string; keys: string[] }[],
) =>
  ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'x',
      namespace: 'n',
      uid: 'u1',
      resourceVersion: rv,
      managedFields: managers.map((m) => ({
        manager: m.manager,
        operation: m.manager.startsWith('kcp-sync-resource') ? 'Apply' : 'Update',
        time: m.time,
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:data': Object.fromEntries(m.keys.map((k) => [`f:${k}`, {}])) },
      })),
    },
    data,
  }) as KubeObject;

const applied = cm('1', { k: 'v' }, [{ manager: MANAGER, time: '2026-12-03T10:00:00Z', keys: ['k'] }]);
const holder = (extra: Partial<Holder> = {}): Holder => ({
  sr: 'kcp-system/a',
  manager: MANAGER,
  strategy: 'CreateAndSync',
  digest: appliedDigest(applied, MANAGER),
  health: 'Current',
  itemReason: 'Applied',
  state: 'Ready',
  deleting: false,
  ...extra,
});
// kubectl edit took k: the field is no longer ours, our entry's time did not move.
const edited = cm('2', { k: 'edited' }, [
  { manager: MANAGER, time: '2026-12-03T10:00:00Z', keys: [] },
  { manager: 'kubectl-edit', time: '2026-12-03T10:00:05Z', keys: ['k'] },
]);

describe('judge', () => {
  it('finds nothing in the object as applied', () => {
    expect(judge(holder(), applied, false)).toBeUndefined();
  });

  it('finds drift when another manager took a field, one finding per version of the object', () => {
    expect(judge(holder(), edited, false)).toEqual({ change: 'drift', mark: 'drift:2' });
    const again = { ...edited, metadata: { ...edited.metadata, resourceVersion: '3' } };
    expect(judge(holder(), again, false)?.mark).toBe('drift:3');
  });

  it('takes no drift from our own write, from CreateAndIgnore, or from an item in Conflict with another SyncResource', () => {
    expect(judge(holder(), edited, true)).toBeUndefined();
    expect(judge(holder({ strategy: 'CreateAndIgnore' }), edited, false)).toBeUndefined();
    expect(judge(holder({ itemReason: 'Conflict' }), edited, false)).toBeUndefined();
  });

  it('finds an object gone for an item in the spec, a deleting SyncResource and a prune in progress, not for a prune done', () => {
    expect(judge(holder(), undefined, false)?.change).toBe('gone');
    expect(judge(holder({ strategy: undefined, deleting: true }), undefined, false)?.change).toBe('gone');
    expect(judge(holder({ strategy: undefined, state: 'Processing' }), undefined, false)?.change).toBe(
      'gone',
    );
    expect(judge(holder({ strategy: undefined }), undefined, false)).toBeUndefined();
  });

  it('finds health that is not what the status says, and nothing while the SyncResource is being deleted', () => {
    const rolling = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'd', namespace: 'n', generation: 2, resourceVersion: '5' },
      spec: { replicas: 1 },
      status: { observedGeneration: 1 },
    } as KubeObject;
    // The health as a run would read it goes with the finding (a report may carry it).
    expect(judge(holder({ digest: undefined }), rolling, true)).toEqual({
      change: 'health',
      mark: 'health:InProgress',
      health: {
        status: 'InProgress',
        reason: 'LatestGenerationNotObserved',
        message: 'Deployment generation is 2, but latest observed generation is 1',
      },
    });
    expect(judge(holder({ digest: undefined, health: 'InProgress' }), rolling, true)).toBeUndefined();
    expect(judge(holder({ digest: undefined, deleting: true }), rolling, false)).toBeUndefined();
  });
});

describe('ourStamp and ownWrite', () => {
  it('see what our managers last did, blind to the others, even one named like the product', () => {
    expect(ourStamp(applied, 'kcp-sync-resource')).toBe(`${MANAGER}@2026-12-03T10:00:00Z;`);
    expect(ourStamp(edited, 'kcp-sync-resource')).toBe(ourStamp(applied, 'kcp-sync-resource'));
    // A client whose user agent is the product's (the default manager of an Update) is not one of ours.
    const impostor = cm('3', { k: 'x' }, [
      { manager: MANAGER, time: '2026-12-03T10:00:00Z', keys: [] },
      { manager: 'kcp-sync-resource', time: '2026-12-03T10:00:09Z', keys: ['k'] },
    ]);
    expect(ourStamp(impostor, 'kcp-sync-resource')).toBe(ourStamp(applied, 'kcp-sync-resource'));
  });

  it("tells a holder's own write by its own manager's time, not another SyncResource's", () => {
    const before = ourStamp(applied, 'kcp-sync-resource');
    const again = cm('4', { k: 'v' }, [
      { manager: MANAGER, time: '2026-12-03T10:01:00Z', keys: ['k'] },
      { manager: 'kcp-sync-resource/kcp-system/b', time: '2026-12-03T10:01:00Z', keys: ['k'] },
    ]);
    const now = ourStamp(again, 'kcp-sync-resource');
    expect(ownWrite(before, now, MANAGER)).toBe(true);
    expect(ownWrite(now, now, MANAGER)).toBe(false);
    expect(ownWrite(undefined, now, MANAGER)).toBe(false);
    // b wrote (its entry is new), a did not.
    const onlyB = ourStamp(
      cm('5', { k: 'v' }, [
        { manager: MANAGER, time: '2026-12-03T10:00:00Z', keys: ['k'] },
        { manager: 'kcp-sync-resource/kcp-system/b', time: '2026-12-03T10:02:00Z', keys: ['k'] },
      ]),
      'kcp-sync-resource',
    );
    expect(ownWrite(before, onlyB, MANAGER)).toBe(false);
    expect(ownWrite(before, onlyB, 'kcp-sync-resource/kcp-system/b')).toBe(true);
  });
});
