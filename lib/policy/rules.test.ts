// The trust boundary's rules on their own; test/trust-boundary.test.ts attacks them through the pipeline.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../config.ts';
import { KubeApiError } from '../kube/errors.ts';
import {
  checkReadIdentity,
  claimRefusal,
  heldBy,
  dataFromRefusal,
  deleteOptionsFor,
  feedbackRefusal,
  firstClaims,
  IdentityMismatchError,
  mayUseResolvedSecret,
  pruneAction,
  redacted,
  requestFailure,
  restriction,
  resultNamesSpec,
  secretValues,
  sourceRefusal,
  stableMessage,
  statusWriteTests,
} from './rules.ts';

const config = parseConfig({});
const obj = (annotations?: Record<string, string>, extra: Record<string, unknown> = {}) => ({
  metadata: {
    name: 'x',
    namespace: 'ns',
    uid: 'u1',
    generation: 3,
    ...(annotations ? { annotations } : {}),
    ...extra,
  },
});
const OWNER = 'kcp-sync.kyma-project.io/owned-by';

describe('stableMessage', () => {
  it('sorts an "errors:" list the API server builds from a Go map (its order changes per request), and leaves the rest', () => {
    const a =
      'failed to create typed patch object (ns/x; apps/v1, Kind=Deployment): errors:\n  .metadata.labels.l: expected string\n  .metadata.annotations.a: expected string';
    const b =
      'failed to create typed patch object (ns/x; apps/v1, Kind=Deployment): errors:\n  .metadata.annotations.a: expected string\n  .metadata.labels.l: expected string';
    expect(stableMessage(a)).toBe(b);
    expect(stableMessage(b)).toBe(b);
    expect(stableMessage(`${a}\nnext line`)).toBe(`${b}\nnext line`);
    expect(stableMessage('field is immutable')).toBe('field is immutable');
  });
});

describe('reads and deletes name one object', () => {
  it('refuses an answer that is another object, and a delete without the uid read', () => {
    expect(() =>
      checkReadIdentity('ConfigMap', 'ns', 'x', {
        kind: 'ConfigMap',
        metadata: { name: 'x', namespace: 'ns' },
      }),
    ).not.toThrow();
    expect(() =>
      checkReadIdentity('ConfigMap', 'ns', 'x', {
        kind: 'ConfigMap',
        metadata: { name: 'y', namespace: 'ns' },
      }),
    ).toThrow(IdentityMismatchError);
    expect(() =>
      checkReadIdentity('Namespace', undefined, 'x', {
        kind: 'Namespace',
        metadata: { name: 'x', namespace: 'ns' },
      }),
    ).toThrow(/returned Namespace ns\/x/);
    expect(deleteOptionsFor('ConfigMap', obj())).toEqual({
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      propagationPolicy: 'Background',
      preconditions: { uid: 'u1' },
    });
    expect(() => deleteOptionsFor('ConfigMap', { metadata: { name: 'x' } })).toThrow(/without the uid/);
  });
});

describe('restricted kinds and protected namespaces', () => {
  it('matches group and kind in any version and case; a Secret by reference passes; protected namespaces and their objects are refused', () => {
    expect(restriction({ apiVersion: 'v1', kind: 'secret', name: 'x', namespace: 'ns' }, config)).toMatch(
      /restricted/,
    );
    expect(
      restriction({ apiVersion: 'v1', kind: 'Secret', name: 'x', namespace: 'ns' }, config, true),
    ).toBeUndefined();
    expect(
      restriction({ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', namespace: 'kube-system' }, config),
    ).toMatch(/protected/);
    expect(restriction({ apiVersion: 'v1', kind: 'Namespace', name: 'default' }, config)).toMatch(
      /never taken over/,
    );
    expect(
      restriction({ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', namespace: 'ns' }, config),
    ).toBeUndefined();
  });
});

describe('what we did not create, we never delete', () => {
  const marked = {
    metadata: { name: 'x', labels: { 'kcp-sync.kyma-project.io/managed-by': 'kcp-sync-resource' } },
  };
  it('deletes what carries our mark and was created; releases what was adopted; hands a shared one over; leaves the rest', () => {
    expect(pruneAction(marked, 'kcp-system/a', false, false)).toBe('delete');
    expect(pruneAction(marked, 'kcp-system/a', true, false)).toBe('release');
    expect(pruneAction(marked, 'kcp-system/a', false, true)).toBe('share');
    expect(pruneAction(marked, 'kcp-system/a', true, true)).toBe('share');
    // An object of an earlier version: its owner annotation names us.
    expect(pruneAction(obj({ [OWNER]: 'kcp-system/a' }), 'kcp-system/a', false, false)).toBe('delete');
    // Someone else's (another SyncResource's former mark, or no mark at all): never touched.
    expect(pruneAction(obj({ [OWNER]: 'kcp-system/b' }), 'kcp-system/a', false, false)).toBe('leave');
    expect(pruneAction(obj({ [OWNER]: 'kcp-system/b' }), 'kcp-system/a', false, true)).toBe('leave');
    expect(pruneAction(obj(), 'kcp-system/a', false, false)).toBe('leave');
    expect(pruneAction(undefined, 'kcp-system/a', false, true)).toBe('leave');
  });
});

describe('one object, one item', () => {
  it('gives an object to the first item naming it', () => {
    expect([
      ...firstClaims([
        { name: 'a', key: 'k' },
        { name: 'b', key: 'l' },
        { name: 'c', key: 'k' },
        { name: 'd', key: undefined },
      ]),
    ]).toEqual([[2, 'a']]);
  });
});

describe('a failure stays where it is', () => {
  it("makes any status code the item's failure and rethrows what is the cluster's", () => {
    const refused = new KubeApiError('skr-1', 'PATCH', '/x', 422, { message: 'invalid' });
    expect(requestFailure('ConfigMap ns/x', refused)).toMatchObject({
      reason: 'ApplyFailed',
      message: 'ConfigMap ns/x: invalid',
    });
    expect(() => requestFailure('ConfigMap ns/x', new KubeApiError('skr-1', 'PATCH', '/x', 0))).toThrow(
      KubeApiError,
    );
    expect(() => requestFailure('ConfigMap ns/x', new TypeError('bug'))).toThrow(TypeError);
  });
});

describe('events are not trusted', () => {
  it('holds an SKR change only for an object the live inventory holds', () => {
    const live = {
      status: { synced: [{ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'a', name: 'x' }] },
    };
    const id = (kind: string, namespace: string, name: string) => ({
      apiVersion: 'v1',
      kind,
      namespace,
      name,
    });
    expect(heldBy(live, [id('ConfigMap', 'a', 'y'), id('ConfigMap', 'a', 'x')])).toBe(true);
    expect(heldBy(live, [id('Secret', 'a', 'x'), id('ConfigMap', 'b', 'x')])).toBe(false);
    expect(heldBy({}, [id('ConfigMap', 'a', 'x')])).toBe(false);
  });

  it("holds a claim only for the live uid and a generation it had; a result must name the live spec's items", () => {
    expect(claimRefusal(obj(), { uid: 'u1', generation: 3 })).toBeUndefined();
    expect(claimRefusal(obj(), { uid: 'u2', generation: 3 })).toBe('gone or replaced');
    expect(claimRefusal(undefined, { uid: 'u1', generation: 1 })).toBe('gone or replaced');
    expect(claimRefusal(obj(), { uid: 'u1', generation: 4 })).toBe('generation from the future');
    const live = { ...obj(), spec: { items: [{ name: 'a' }, { name: 'b' }] } };
    expect(resultNamesSpec({ generation: 3, items: [{ name: 'a' }, { name: 'b' }] }, live)).toBe(true);
    expect(resultNamesSpec({ generation: 3, items: [{ name: 'a' }, { name: 'forged' }] }, live)).toBe(false);
    expect(resultNamesSpec({ generation: 2, items: [{ name: 'forged' }] }, live)).toBe(true);
    expect(
      statusWriteTests(
        { metadata: { name: 'x', uid: 'u1', resourceVersion: '7' } },
        { generation: 3, items: ['a'] },
      ),
    ).toEqual([
      { op: 'test', path: '/metadata/uid', value: 'u1' },
      { op: 'test', path: '/metadata/resourceVersion', value: '7' },
      { op: 'test', path: '/metadata/generation', value: 3 },
      { op: 'test', path: '/spec/items/0/name', value: 'a' },
    ]);
  });

  it("uses the client of an event's access Secret only for the live Kyma, where the SyncResource's Kymas are", () => {
    const live = { spec: { kyma: 'kyma-1' } };
    const home = 'kcp-system';
    expect(mayUseResolvedSecret(live, { kyma: 'kyma-1', secret: { namespace: 'kcp-system' } }, home)).toBe(
      true,
    );
    expect(mayUseResolvedSecret(live, { kyma: 'kyma-2', secret: { namespace: 'kcp-system' } }, home)).toBe(
      false,
    );
    // A team's namespace never holds the access Secret its SyncResources use.
    expect(mayUseResolvedSecret(live, { kyma: 'kyma-1', secret: { namespace: 'nfs-manager' } }, home)).toBe(
      false,
    );
    expect(mayUseResolvedSecret(live, { kyma: 'kyma-1' }, home)).toBe(false);
  });
});

describe('values by reference', () => {
  it('ships a source only when labelled a sync source and for the Kyma; a ConfigMap without a Kyma label serves every Kyma', () => {
    const src = { 'operator.kyma-project.io/sync-source': 'true' };
    const kyma = (k: string) => ({ ...src, 'operator.kyma-project.io/kyma-name': k });
    expect(sourceRefusal('Secret s', kyma('kyma-1'), 'kyma-1', false)).toBeUndefined();
    expect(sourceRefusal('Secret s', kyma('kyma-2'), 'kyma-1', false)).toMatch(
      /labelled for Kyma kyma-2, not for kyma-1/,
    );
    expect(sourceRefusal('Secret s', src, 'kyma-1', false)).toMatch(/labelled for no Kyma/);
    expect(
      sourceRefusal('Secret s', { 'operator.kyma-project.io/kyma-name': 'kyma-1' }, 'kyma-1', false),
    ).toMatch(/not a sync source/);
    expect(sourceRefusal('ConfigMap c', src, 'kyma-1', true)).toBeUndefined();
    expect(sourceRefusal('ConfigMap c', kyma('kyma-2'), 'kyma-1', true)).toMatch(/labelled for Kyma kyma-2/);
  });

  it('puts values by reference only into a plain v1 Secret, reads no feedback from a Secret, and redacts every value', () => {
    expect(dataFromRefusal({ apiVersion: 'v1', kind: 'Secret' }, false)).toBeUndefined();
    expect(dataFromRefusal({ apiVersion: 'v1', kind: 'ConfigMap' }, false)).toMatch(/only on a v1 Secret/);
    expect(dataFromRefusal({ apiVersion: 'v1', kind: 'Secret', data: {} }, false)).toMatch(/sets data/);
    expect(dataFromRefusal({ apiVersion: 'v1', kind: 'Secret' }, true)).toMatch(/no subresource/);
    expect(feedbackRefusal({ apiVersion: 'v1', kind: 'Secret' })).toMatch(/never read from a Secret/);
    const secrets = secretValues({ token: Buffer.from('s3cr3t-value').toString('base64') });
    const r = redacted(
      {
        message: 'sent s3cr3t-value',
        health: { message: 'has czNjcjN0LXZhbHVl' },
        feedback: [{ value: 's3cr3t-value' }],
      },
      secrets,
    );
    expect(JSON.stringify(r)).not.toMatch(/s3cr3t|czNjcjN0/);
  });
});
