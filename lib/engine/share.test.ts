import { describe, expect, it } from 'vitest';
import { KubeApiError } from '../kube/errors.ts';
import type { SyncResource } from '../model.ts';
import {
  fieldConflicts,
  holdersOf,
  managerOf,
  OwnedFieldConflict,
  syncResourceOf,
  type Writer,
} from './share.ts';

const w: Writer = {
  owner: 'kcp-system/a',
  manager: 'kcp-sync-resource/kcp-system/a',
  legacy: 'kcp-sync-resource',
};

const sr = (
  name: string,
  synced: { name: string; adopted?: boolean }[],
  extra: { kyma?: string; deleting?: boolean; policy?: 'Delete' | 'Orphan'; suspend?: boolean } = {},
): SyncResource => ({
  apiVersion: 'operator.kyma-project.io/v1alpha1',
  kind: 'SyncResource',
  metadata: {
    name,
    namespace: 'kcp-system',
    ...(extra.deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
  },
  spec: {
    kyma: extra.kyma ?? 'kyma-1',
    items: [],
    ...(extra.policy ? { deletionPolicy: extra.policy } : {}),
    ...(extra.suspend ? { suspend: true } : {}),
  },
  status: {
    synced: synced.map(({ name, adopted }) => ({
      item: name,
      apiVersion: 'v1',
      kind: 'Namespace',
      name,
      ...(adopted ? { adopted } : {}),
    })),
  },
});

describe('field managers', () => {
  it('are <base>/<namespace>/<name>, and a long one is cut to 128 characters with a hash of its name', () => {
    expect(managerOf('kcp-sync-resource', { namespace: 'kcp-system', name: 'a' })).toBe(
      'kcp-sync-resource/kcp-system/a',
    );
    const long = 'n'.repeat(253);
    const m = managerOf('kcp-sync-resource', { namespace: 'team', name: long });
    expect(m).toHaveLength(128);
    expect(m).toMatch(/^kcp-sync-resource\/team\/n+~[0-9a-f]{10}$/);
    // Stable, and two names that share their first 117 characters still differ.
    expect(managerOf('kcp-sync-resource', { namespace: 'team', name: long })).toBe(m);
    expect(managerOf('kcp-sync-resource', { namespace: 'team', name: `${long.slice(1)}x` })).not.toBe(m);
  });

  it('name the SyncResource behind them; an earlier version speaks for the owner its annotation names; anyone else is nobody', () => {
    expect(syncResourceOf('kcp-sync-resource/kcp-system/b', w)).toBe('kcp-system/b');
    const legacy = {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'x', annotations: { 'kcp-sync.kyma-project.io/owned-by': 'kcp-system/c' } },
    };
    expect(syncResourceOf('kcp-sync-resource', w, legacy)).toBe('kcp-system/c');
    expect(syncResourceOf('kcp-sync-resource', w, { ...legacy, metadata: { name: 'x' } })).toBeUndefined();
    expect(syncResourceOf('kubectl-edit', w)).toBeUndefined();
    expect(syncResourceOf('kcp-sync-resourcex/kcp-system/b', w)).toBeUndefined();
  });
});

describe('conflicts of a non-forced apply', () => {
  it('are read from the 409 the API server answers, manager and field', () => {
    const err = new KubeApiError('skr', 'PATCH', '/api/v1/namespaces/ns/configmaps/x', 409, {
      message: 'Apply failed with 2 conflicts',
      reason: 'Conflict',
      code: 409,
      details: {
        causes: [
          { message: 'conflict with "kcp-sync-resource/kcp-system/b"', field: '.data.k' },
          { message: 'conflict with "kubectl-edit" using v1', field: '.data.j' },
        ],
      },
    } as never);
    expect(fieldConflicts(err)).toEqual([
      { manager: 'kcp-sync-resource/kcp-system/b', field: '.data.k' },
      { manager: 'kubectl-edit', field: '.data.j' },
    ]);
    // A 409 without field conflicts (a resourceVersion precondition) is not one.
    expect(
      fieldConflicts(new KubeApiError('skr', 'PATCH', '/x', 409, { message: 'modified' } as never)),
    ).toBeUndefined();
    expect(fieldConflicts(new Error('x'))).toBeUndefined();
  });

  it('name the fields and the SyncResources in the item message', () => {
    const id = { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ns', name: 'x' };
    expect(new OwnedFieldConflict(id, [{ owner: 'kcp-system/b', field: '.data.k' }]).message).toBe(
      'ConfigMap ns/x: field .data.k is set to another value by SyncResource kcp-system/b; nothing was forced',
    );
  });
});

describe('holders', () => {
  it('are the other SyncResources of the Kyma whose inventories name an object, with whether they adopted it', () => {
    const self = sr('a', [{ name: 'shared' }]);
    const holders = holdersOf(self, [
      self,
      sr('b', [{ name: 'shared' }, { name: 'only-b', adopted: true }]),
      sr('c', [{ name: 'shared' }], { kyma: 'kyma-2' }),
      // Being deleted with policy Delete: letting go, holds nothing.
      sr('d', [{ name: 'shared' }], { deleting: true }),
      // Being deleted but leaving its objects (Orphan), or suspended: still holds them.
      sr('e', [{ name: 'orphaned' }], { deleting: true, policy: 'Orphan' }),
      sr('f', [{ name: 'suspended' }], { deleting: true, suspend: true }),
    ]);
    expect(Object.fromEntries(holders)).toEqual({
      'Namespace//shared': [{ owner: 'kcp-system/b', adopted: false }],
      'Namespace//only-b': [{ owner: 'kcp-system/b', adopted: true }],
      'Namespace//orphaned': [{ owner: 'kcp-system/e', adopted: false }],
      'Namespace//suspended': [{ owner: 'kcp-system/f', adopted: false }],
    });
  });
});
