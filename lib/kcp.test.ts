// What the holders read keeps: a Kyma's SyncResources read page by page, each reduced to
// who it is, whether it is letting go and its inventory (specs can be large; several runs
// read them at once).
import { describe, expect, it } from 'vitest';
import type { KubeClient } from './kube/client.ts';
import { KcpStore } from './kcp.ts';
import type { SyncResource } from './model.ts';

const sr = (i: number, extra: Partial<SyncResource['spec']> = {}): SyncResource => ({
  apiVersion: 'operator.kyma-project.io/v1alpha1',
  kind: 'SyncResource',
  metadata: {
    name: `sr-${i}`,
    namespace: 'kcp-system',
    uid: `u-${i}`,
    ...(i === 1 ? { deletionTimestamp: '2026-12-05T00:00:00Z' } : {}),
  },
  spec: {
    kyma: 'kyma-1',
    items: [{ name: 'big', strategy: 'CreateAndSync', resource: 'x'.repeat(1000) }],
    ...extra,
  },
  status: {
    synced: [{ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name: `cm-${i}` }],
    items: [{ name: 'big', state: 'Ready', reason: 'Created' }],
  } as never,
});

describe('KcpStore.holdersForKyma', () => {
  it("reads the Kyma's SyncResources in pages and keeps only their holder views", async () => {
    const all = Array.from({ length: 250 }, (_, i) =>
      sr(i, i === 2 ? { deletionPolicy: 'Orphan', suspend: true } : {}),
    );
    const calls: Record<string, unknown>[] = [];
    const client = {
      async call(_m: string, _path: string, opts: { query?: Record<string, unknown> } = {}) {
        const q = opts.query ?? {};
        calls.push(q);
        const from = Number(q.continue ?? 0);
        const size = Number(q.limit);
        const more = from + size < all.length;
        return {
          metadata: more ? { continue: String(from + size) } : {},
          items: all.slice(from, from + size),
        };
      },
    } as unknown as KubeClient;
    const views = await new KcpStore({ client } as never, 'kcp-sync').holdersForKyma('kyma-1', [
      'kcp-system',
    ]);
    expect(calls.map((q) => [q.limit, q.continue, q.labelSelector])).toEqual([
      [100, undefined, 'operator.kyma-project.io/kyma-name=kyma-1'],
      [100, '100', 'operator.kyma-project.io/kyma-name=kyma-1'],
      [100, '200', 'operator.kyma-project.io/kyma-name=kyma-1'],
    ]);
    expect(views).toHaveLength(250);
    expect(views[0]).toEqual({
      metadata: { namespace: 'kcp-system', name: 'sr-0' },
      spec: { kyma: 'kyma-1' },
      status: { synced: [{ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name: 'cm-0' }] },
    });
    expect(views[1]!.metadata.deletionTimestamp).toBe('2026-12-05T00:00:00Z');
    expect(views[2]!.spec).toEqual({ kyma: 'kyma-1', deletionPolicy: 'Orphan', suspend: true });
  });
});
