// memory.ts: scenario 7, apply-items' memory with clients cached for 50 SKRs (50 access
// Secrets, one cached client each).
import { applyObjects, kymaObjects } from '../../infra/kcp-setup.ts';
import type { Bench } from '../context.ts';
import { rssOf } from '../procs.ts';

/** cachedClients reconciles one SyncResource on each of 50 Kymas and reads the RSS of apply-items. */
export async function cachedClients(b: Bench): Promise<void> {
  const { row, K, NS, kcp, set, create, waitReady, pids } = b;
  console.log('7. memory with 50 cached clients');
  const kymas = Array.from({ length: 50 }, (_, i) => `mem-${i}`);
  await applyObjects(
    kcp,
    kymas.flatMap((k, i) => kymaObjects(k, set.skrs[i % K]!.kubeconfig)),
  );
  await create(
    kymas.map((k, i) => ({
      apiVersion: 'operator.kyma-project.io/v1alpha1',
      kind: 'SyncResource',
      metadata: { name: `mem-${i}`, namespace: 'kcp-system', labels: { 'bench-batch': 'mem' } },
      spec: {
        kyma: k,
        items: [
          {
            name: 'cm',
            strategy: 'CreateAndSync',
            resource: JSON.stringify({
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name: `mem-${i}`, namespace: NS },
            }),
          },
        ],
      },
    })),
  );
  await waitReady('mem-', 50);
  const apply = pids().find((p) => p.svc === 'sync-apply-items')!;
  row(
    '7 memory',
    'RSS of apply-items with 50 SKR clients cached',
    `${(await rssOf(apply.pid, 'VmRSS')).toFixed(0)} MiB`,
  );
}
