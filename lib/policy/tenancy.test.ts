import { describe, expect, it } from 'vitest';
import {
  foreignHolders,
  governance,
  governedNamespaces,
  itemRefusal,
  kymaHome,
  kymaRefusal,
  type ItemIdentity,
  type SyncPolicy,
} from './tenancy.ts';

const config = { controlPlaneNamespaces: ['kcp-system'] };
const policy = (name: string, spec: Partial<SyncPolicy['spec']> = {}): SyncPolicy => ({
  metadata: { name },
  spec: { namespaces: ['nfs-manager'], ...spec },
});
const nfs = policy('nfs', {
  kymas: { names: ['kyma-1'], selector: { matchLabels: { 'kyma-project.io/region': 'eu' } } },
  destinationNamespaces: ['nfs-system'],
  clusterResources: [
    { group: 'storage.k8s.io', kind: 'StorageClass' },
    { group: '', kind: 'PersistentVolume' },
  ],
  namespacedResources: [{ group: '', kind: 'PersistentVolumeClaim' }],
});

describe('governance', () => {
  it('keeps the control-plane namespaces to the global rules, even where a policy names them', () => {
    expect(governance('kcp-system', [policy('x', { namespaces: ['kcp-system'] })], config)).toEqual({
      kind: 'control-plane',
    });
  });
  it('gives a namespace named by one policy that policy', () => {
    expect(governance('nfs-manager', [nfs, policy('other', { namespaces: ['b'] })], config)).toEqual({
      kind: 'policy',
      policy: nfs,
    });
  });
  it('refuses a namespace no policy names, and one two policies name (never their union)', () => {
    const none = governance('team-b', [nfs], config);
    expect(none).toMatchObject({ kind: 'refused' });
    expect(none.kind === 'refused' && none.why).toContain('no SyncPolicy governs namespace team-b');
    const two = governance('nfs-manager', [nfs, policy('wide', { strategies: ['Delete'] })], config);
    expect(two.kind === 'refused' && two.why).toContain('named by 2 SyncPolicies (nfs, wide)');
  });
  it('lists the namespaces governed by exactly one policy, never a control-plane one', () => {
    const policies = [
      policy('a', { namespaces: ['a', 'shared', 'kcp-system'] }),
      policy('b', { namespaces: ['b', 'shared'] }),
    ];
    expect(governedNamespaces(policies, config)).toEqual(['a', 'b']);
  });
  it('resolves Kymas of a team namespace in the control-plane namespace', () => {
    expect(kymaHome('nfs-manager', config)).toBe('kcp-system');
    expect(kymaHome('kcp-system', config)).toBe('kcp-system');
  });
});

describe('kymaRefusal', () => {
  it.each([
    ['by name', { name: 'kyma-1' }, undefined],
    [
      'by every label of the selector',
      { name: 'kyma-9', labels: { 'kyma-project.io/region': 'eu' } },
      undefined,
    ],
    [
      'another name, no labels',
      { name: 'kyma-2' },
      'SyncPolicy nfs: Kyma kyma-2 is not allowed (spec.kymas)',
    ],
    [
      'a label of another value',
      { name: 'kyma-2', labels: { 'kyma-project.io/region': 'us' } },
      'SyncPolicy nfs: Kyma kyma-2 is not allowed (spec.kymas)',
    ],
  ])('%s', (_, kyma, want) => {
    expect(kymaRefusal(nfs, kyma)).toBe(want);
  });
  it('allows no Kyma when spec.kymas is absent', () => {
    expect(kymaRefusal(policy('bare'), { name: 'kyma-1', labels: { a: 'b' } })).toContain('not allowed');
  });
});

describe('itemRefusal', () => {
  const id = (group: string, kind: string, namespace?: string, name = 'x'): ItemIdentity => ({
    group,
    kind,
    name,
    namespace,
    namespaced: namespace !== undefined,
  });
  it.each<[string, ItemIdentity, string, string | undefined]>([
    [
      'a listed namespaced kind in a destination namespace',
      id('', 'PersistentVolumeClaim', 'nfs-system'),
      'CreateAndSync',
      undefined,
    ],
    ['a listed cluster-scoped kind', id('storage.k8s.io', 'StorageClass'), 'CreateAndIgnore', undefined],
    [
      'a namespace not listed',
      id('', 'PersistentVolumeClaim', 'kyma-system'),
      'CreateAndSync',
      'SyncPolicy nfs: namespace kyma-system is not allowed (spec.destinationNamespaces)',
    ],
    [
      'a namespaced kind not listed',
      id('', 'ConfigMap', 'nfs-system'),
      'CreateAndSync',
      'SyncPolicy nfs: kind ConfigMap is not allowed (spec.namespacedResources)',
    ],
    [
      'a kind of the same name in another group',
      id('evil.example.com', 'PersistentVolumeClaim', 'nfs-system'),
      'CreateAndSync',
      'SyncPolicy nfs: kind PersistentVolumeClaim.evil.example.com is not allowed (spec.namespacedResources)',
    ],
    [
      'a cluster-scoped kind not listed',
      id('rbac.authorization.k8s.io', 'ClusterRole'),
      'CreateAndSync',
      'SyncPolicy nfs: cluster-scoped kind ClusterRole.rbac.authorization.k8s.io is not allowed (spec.clusterResources)',
    ],
    [
      'a kind whose letter case differs',
      id('storage.k8s.io', 'storageclass'),
      'CreateAndSync',
      'SyncPolicy nfs: cluster-scoped kind storageclass.storage.k8s.io is not allowed (spec.clusterResources)',
    ],
    [
      'Delete, not listed',
      id('', 'PersistentVolumeClaim', 'nfs-system'),
      'Delete',
      'SyncPolicy nfs: strategy Delete is not allowed (spec.strategies)',
    ],
    [
      'UpdateAndDelete, not listed',
      id('', 'PersistentVolumeClaim', 'nfs-system'),
      'UpdateAndDelete',
      'SyncPolicy nfs: strategy UpdateAndDelete is not allowed (spec.strategies)',
    ],
  ])('%s', (_, item, strategy, want) => {
    expect(itemRefusal(nfs, item, strategy as never)).toBe(want);
  });
  it('allows every namespaced kind when namespacedResources is absent, no cluster-scoped one when clusterResources is', () => {
    const open = policy('open', { destinationNamespaces: ['a'] });
    expect(itemRefusal(open, id('apps', 'Deployment', 'a'), 'CreateAndSync')).toBeUndefined();
    expect(itemRefusal(open, id('', 'Namespace'), 'CreateAndSync')).toContain('spec.clusterResources');
    expect(itemRefusal(open, id('apps', 'Deployment', 'b'), 'CreateAndSync')).toContain(
      'spec.destinationNamespaces',
    );
  });
  it('allows a Namespace only by a name of spec.destinationNamespaces, and only where Namespace is listed', () => {
    const ns = policy('ns', {
      destinationNamespaces: ['nfs-system'],
      clusterResources: [{ group: '', kind: 'Namespace' }],
    });
    expect(itemRefusal(ns, id('', 'Namespace', undefined, 'nfs-system'), 'CreateAndSync')).toBeUndefined();
    expect(itemRefusal(ns, id('', 'Namespace', undefined, 'kyma-system'), 'CreateAndSync')).toBe(
      'SyncPolicy ns: Namespace kyma-system is not allowed (spec.destinationNamespaces)',
    );
    expect(itemRefusal(nfs, id('', 'Namespace', undefined, 'nfs-system'), 'CreateAndSync')).toContain(
      'spec.clusterResources',
    );
  });
  it('allows Delete only where listed', () => {
    const del = policy('del', { destinationNamespaces: ['a'], strategies: ['Delete'] });
    expect(itemRefusal(del, id('', 'ConfigMap', 'a'), 'Delete')).toBeUndefined();
    expect(itemRefusal(del, id('', 'ConfigMap', 'a'), 'CreateAndSync')).toContain('strategy CreateAndSync');
  });
});

describe('foreignHolders', () => {
  it('refuses an object a SyncResource of another namespace names, not one of its own namespace', () => {
    expect(foreignHolders('team-a', ['team-a/x'])).toBeUndefined();
    expect(foreignHolders('team-a', ['team-a/x', 'team-b/y'])).toContain(
      'SyncResource team-b/y of another namespace',
    );
    expect(foreignHolders('team-a', ['team-ab/y'])).toContain('team-ab/y');
  });
});
