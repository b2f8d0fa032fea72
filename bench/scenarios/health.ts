// health.ts: scenario 11, H SyncResources, each with a Deployment whose Pods wait for a Node
// label (Progressing). The label is set on every SKR's KWOK Node at once; per
// SyncResource, the time from its Deployment turning Available in the SKR (watched by
// polling, as kstatus reads it) to the SyncResource Ready in the KCP. No resync tick runs:
// the SKR source's watch is what reports it.
import { NODE_NAME } from '../../infra/clusters.ts';
import { applyObjects } from '../../infra/kcp-setup.ts';
import type { KubeObject } from '../../lib/kube/objects.ts';
import { healthOf } from '../../lib/health.ts';
import type { SyncResource } from '../../lib/model.ts';
import { mapLimit } from '../../lib/concurrency.ts';
import { median, pct, sleep, type Bench } from '../context.ts';
import { conditionTrue } from '../workload.ts';

/** healthScenario makes H objects ready in the SKRs at once and times each SyncResource's Ready after its object's. */
export async function healthScenario(b: Bench): Promise<void> {
  const { row, kcp, skrs, rt, create, kymaOf, srPath } = b;
  const { quick } = b.opts;
  const H = quick ? 10 : 30;
  const ns = 'bench-health';
  for (const skr of skrs)
    await applyObjects(skr, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }]);
  const deploymentOf = (i: number) => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: `web-${i}`, namespace: ns },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: `web-${i}` } },
      template: {
        metadata: { labels: { app: `web-${i}` } },
        spec: {
          nodeSelector: { 'bench-health': 'go' },
          containers: [{ name: 'c', image: 'example.io/web:1' }],
        },
      },
    },
  });
  await create(
    Array.from(
      { length: H },
      (_, i) =>
        ({
          apiVersion: 'operator.kyma-project.io/v1alpha1',
          kind: 'SyncResource',
          metadata: { name: `health-${i}`, namespace: 'kcp-system', labels: { 'bench-batch': 'health' } },
          spec: {
            kyma: kymaOf(i),
            items: [{ name: 'web', strategy: 'CreateAndSync', resource: JSON.stringify(deploymentOf(i)) }],
          },
        }) as KubeObject,
    ),
  );
  const srs = async () =>
    (
      await kcp.client.call<{ items: SyncResource[] }>('GET', srPath(), {
        query: { labelSelector: 'bench-batch=health' },
      })
    ).items;
  for (;;) {
    const all = await srs();
    if (
      all.length === H &&
      all.every((x) => x.status?.state === 'Processing' && conditionTrue(x.status.conditions, 'Progressing'))
    )
      break;
    await sleep(250);
  }
  await rt.broker.idle(60_000);
  const t0 = Date.now();
  for (const skr of skrs) {
    await skr.client.call('PATCH', `/api/v1/nodes/${NODE_NAME}`, {
      body: { metadata: { labels: { 'bench-health': 'go' } } },
      contentType: 'application/merge-patch+json',
    });
  }
  const available = new Map<number, number>();
  const ready = new Map<number, number>();
  while (ready.size < H && Date.now() - t0 < 180_000) {
    const now = Date.now();
    await Promise.all(
      skrs.map(async (skr, k) => {
        const list = await skr.client.call<{ items: KubeObject[] }>(
          'GET',
          '/apis/apps/v1/namespaces/bench-health/deployments',
        );
        for (const d of list.items) {
          const i = Number(d.metadata.name.slice(4));
          if (
            kymaOf(i) === `kyma-${k + 1}` &&
            !available.has(i) &&
            healthOf({ ...d, apiVersion: 'apps/v1', kind: 'Deployment' }).status === 'Current'
          )
            available.set(i, now);
        }
      }),
    );
    for (const x of await srs()) {
      const i = Number(x.metadata.name.slice(7));
      if (!ready.has(i) && x.status?.state === 'Ready') ready.set(i, now);
    }
    await sleep(100);
  }
  const lag = [...ready].map(([i, t]) => t - (available.get(i) ?? t));
  row(
    '11 health',
    `object ready -> SyncResource Ready (H=${H}, SKR source, resync off) p50`,
    `${(median(lag) / 1000).toFixed(1)} s`,
  );
  row('11 health', 'p99', `${(pct(lag, 99) / 1000).toFixed(1)} s`, '<= 1 s');
  row(
    '11 health',
    'Node labelled -> every SyncResource Ready',
    `${((Math.max(...ready.values()) - t0) / 1000).toFixed(1)} s`,
  );
  await mapLimit(
    Array.from({ length: H }, (_, i) => i),
    8,
    (i) => kcp.client.call('DELETE', srPath(`health-${i}`)),
  );
}
