// rotation.ts: scenario 9, a source Secret's value changed -> the SKR Secret of a dataFrom
// item has it. The path is the event of the source Secret (the resync timer is off):
// resolve-cluster maps it to its Kyma, whose SyncResources (S/K of them) are reconciled.
import { resourcePath } from '../../lib/kube/discovery.ts';
import { getObject, mustFind } from '../../lib/kube/objects.ts';
import { median, pct, sleep, type Bench } from '../context.ts';

/** rotation rotates a source Secret 20 times and times each until the SKR Secret has the value. */
export async function rotation(b: Bench): Promise<void> {
  const { row, S, K, NS, kcp, skrs, rt, create, waitReady } = b;
  console.log('9. rotation of a Secret by reference');
  const secretsInfo = await mustFind(skrs[0]!, 'v1', 'Secret');
  const srcPath = resourcePath(secretsInfo, 'kcp-system', 'rotation-source');
  const token = () =>
    Buffer.from(`t-${Math.random().toString(36).slice(2)}-${performance.now()}`).toString('base64');
  await kcp.client.call('POST', resourcePath(secretsInfo, 'kcp-system'), {
    body: {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: 'rotation-source',
        namespace: 'kcp-system',
        labels: {
          'operator.kyma-project.io/sync-source': 'true',
          'operator.kyma-project.io/kyma-name': 'kyma-1',
        },
      },
      data: { token: token() },
    },
  });
  await create([
    {
      apiVersion: 'operator.kyma-project.io/v1alpha1',
      kind: 'SyncResource',
      metadata: { name: 'rotation', namespace: 'kcp-system', labels: { 'bench-batch': 'rotation' } },
      spec: {
        kyma: 'kyma-1',
        items: [
          {
            name: 'creds',
            strategy: 'CreateAndSync',
            resource: JSON.stringify({
              apiVersion: 'v1',
              kind: 'Secret',
              metadata: { name: 'rotated', namespace: NS },
            }),
            dataFrom: { secretRef: { name: 'rotation-source' } },
          },
        ],
      },
    },
  ]);
  await waitReady('rotation-', 1);
  const rotations: number[] = [];
  for (let i = 0; i < 20; i++) {
    await rt.broker.idle(60_000);
    const value = token();
    const t = performance.now();
    await kcp.client.call('PATCH', srcPath, {
      body: { data: { token: value } },
      contentType: 'application/merge-patch+json',
    });
    for (;;) {
      const o = (await getObject(skrs[0]!, secretsInfo, NS, 'rotated')) as
        { data?: Record<string, string> } | undefined;
      if (o?.data?.token === value) break;
      await sleep(20);
    }
    rotations.push(performance.now() - t);
  }
  row(
    '9 rotation',
    `source Secret changed -> SKR Secret updated (20 rotations, ${Math.ceil(S / K)} SyncResources on its Kyma) p50`,
    `${median(rotations).toFixed(0)} ms`,
  );
  row('9 rotation', 'p99', `${pct(rotations, 99).toFixed(0)} ms`, '<= 2 s');
}
