// Micro-benchmark: KCP API server CPU per inventory write, server-side apply vs JSON patch.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterSet } from '../infra/clusters.ts';
import { connect, setupKcp } from '../infra/kcp-setup.ts';
import { KcpStore, syncResourceInfo } from '../lib/kcp.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { cpuSeconds } from '../bench/procs.ts';
import { syncResourceFor } from '../bench/workload.ts';
import type { SyncResource, InventoryEntry } from '../lib/model.ts';

const set = await ClusterSet.start({ skrs: 0, stateDir: await mkdtemp(join(tmpdir(), 'ssa-')), workloads: false });
try {
  await setupKcp(set);
  const kcp = await connect(set.kcp.kubeconfig, 'kcp');
  const store = new KcpStore(kcp, 'kcp-sync-resource');
  const N = 400;
  const entries = (i: number): InventoryEntry[] =>
    Array.from({ length: 5 }, (_, j) => ({ item: `item-${j}`, apiVersion: 'v1', kind: 'ConfigMap', namespace: 'bench', name: `b${i}-${j}`, digest: 'a'.repeat(64) }) as unknown as InventoryEntry);
  const apiPid = set.kcp.apiserver.pid;
  for (const mode of ['apply', 'patch', 'apply', 'patch']) {
    const srs = await mapLimit(Array.from({ length: N }, (_, i) => i), 16, async (i) => {
      const o = syncResourceFor(i, 'bench', 'kcp-system', 'kyma-1');
      o.metadata.name = `${mode}-${Math.random().toString(36).slice(2, 8)}-${i}`;
      return kcp.client.call<SyncResource>('POST', resourcePath(syncResourceInfo, 'kcp-system'), { body: o });
    });
    await new Promise((r) => setTimeout(r, 2000));
    const c0 = await cpuSeconds(apiPid);
    const t0 = performance.now();
    await mapLimit(srs, 16, async (sr, i) => {
      if (mode === 'apply') return store.writeInventory(sr, entries(i));
      return kcp.client.call('PATCH', resourcePath(syncResourceInfo, 'kcp-system', sr.metadata.name) + '/status', {
        body: [
          { op: 'test', path: '/metadata/resourceVersion', value: sr.metadata.resourceVersion },
          { op: 'add', path: '/status', value: { synced: entries(i) } },
        ],
        contentType: 'application/json-patch+json',
        query: { fieldManager: 'kcp-sync-resource-inventory' },
      });
    });
    const ms = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 1000));
    const c1 = await cpuSeconds(apiPid);
    console.log(mode, 'apiserver CPU ms per write', (((c1 - c0) / N) * 1000).toFixed(2), 'wall ms', ms.toFixed(0));
  }
} finally {
  await set.stop();
}
