// latency.ts is the benchmark's latency scenario (issue 38): on a small stack of its own
// (one SKR, nothing else running), how long an idle edit of a SyncResource and drift in its
// SKR take to reach the SKR object, as a watch of it sees it, and what each drift costs the
// KCP. The same workload and timing as scenario 14's edits and drift (peer.ts), in about a
// minute, so that a change on their path can be measured before and after:
//   npm run bench -- --latency [--json FILE]
import { applyObjects, connect, installCrds } from '../infra/kcp-setup.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { syncResourceInfo } from '../lib/kcp.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import type { KubeObject } from '../lib/kube/objects.ts';
import { pct, sleep } from './context.ts';
import { kcpRequests, onSmallStack, untilBatch } from './cost.ts';
import { timeUntil } from './peer.ts';
import { benchCrd, itemsOf, objectsFor } from './workload.ts';

const SCENARIO = '16 latency';

/**
 * latencyScenario: n SyncResources of the benchmark's five objects on one SKR; two idle
 * edits of each, one after the other (each until its first ConfigMap has the new value);
 * then that ConfigMap of each deleted, three at a time as scenario 14 does at a target per
 * SKR (each until it is back), and edited (each until it is reverted).
 */
export async function latencyScenario(
  row: (scenario: string, figure: string, value: string, target?: string) => void,
  n = 30,
): Promise<void> {
  await onSmallStack('latency', async ({ set, kcp }) => {
    const skr = await connect(set.skrs[0]!.kubeconfig, 'skr-1');
    await installCrds(skr, [benchCrd]);
    await applyObjects(skr, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'latency' } }]);
    const ns = 'kcp-system';
    const put = (i: number, rev: number, create: boolean) => {
      const w = objectsFor(i, 'latency', rev);
      const spec = { kyma: 'kyma-1', items: itemsOf(w.objects, w.status) };
      return create
        ? kcp.client.call('POST', resourcePath(syncResourceInfo, ns), {
            body: {
              apiVersion: 'operator.kyma-project.io/v1alpha1',
              kind: 'SyncResource',
              metadata: { name: `latency-${i}`, namespace: ns, labels: { 'bench-batch': 'latency' } },
              spec,
            },
          })
        : kcp.client.call('PATCH', `${resourcePath(syncResourceInfo, ns)}/latency-${i}`, {
            body: { spec },
            contentType: 'application/merge-patch+json',
          });
    };
    const ids = Array.from({ length: n }, (_, i) => i);
    await mapLimit(ids, 8, (i) => put(i, 1, true));
    await untilBatch(kcp, ns, 'latency', performance.now(), 300, (items) => {
      const ready = items.filter((s) => s.status?.state === 'Ready').length;
      return ready >= n ? undefined : `only ${ready} of ${n} Ready`;
    });
    await sleep(2_000);
    const cms = '/api/v1/namespaces/latency/configmaps';
    const data = (o: KubeObject | undefined) => o?.data as Record<string, string> | undefined;
    const edits: number[] = [];
    for (const rev of [2, 3])
      for (const i of ids) {
        edits.push(
          await timeUntil(
            skr,
            cms,
            `b${i}-a`,
            () => put(i, rev, false).then(() => undefined),
            (o) => data(o)?.rev === String(rev),
          ),
        );
        await sleep(300);
      }
    await sleep(2_000);
    const before = await kcpRequests(set.kcp.kubeconfigFile);
    const drift = async (
      act: (i: number) => Promise<unknown>,
      done: (o: KubeObject | undefined, i: number) => boolean,
    ) => {
      const out: number[] = [];
      for (let i = 0; i < n; i += 3) {
        const at = ids.slice(i, i + 3);
        out.push(
          ...(await Promise.all(
            at.map((j) =>
              timeUntil(
                skr,
                cms,
                `b${j}-a`,
                () => act(j).then(() => undefined),
                (o) => done(o, j),
              ),
            ),
          )),
        );
        await sleep(500);
      }
      return out;
    };
    const uids = new Map<number, string | undefined>();
    for (const i of ids)
      uids.set(i, (await skr.client.call<KubeObject>('GET', `${cms}/b${i}-a`)).metadata.uid);
    const deleted = await drift(
      (i) => skr.client.call('DELETE', `${cms}/b${i}-a`),
      (o, i) => o !== undefined && o.metadata.uid !== uids.get(i),
    );
    await sleep(2_000);
    const edited = await drift(
      (i) =>
        skr.client.call('PATCH', `${cms}/b${i}-a`, {
          body: { data: { k: 'edited' } },
          contentType: 'application/merge-patch+json',
          query: { fieldManager: 'bench-user' },
        }),
      (o) => data(o)?.k === 'v'.repeat(64),
    );
    await sleep(2_000);
    const after = await kcpRequests(set.kcp.kubeconfigFile);
    const spent = Object.entries(after)
      .map(([k, v]) => [k, v - (before[k] ?? 0)] as const)
      .filter(
        ([k, v]) => v > 0 && /^(syncresources|secrets|kymas|events)\b/.test(k) && k !== 'syncresources LIST',
      )
      .sort(([a], [b]) => a.localeCompare(b));
    const ms = (xs: number[]) => `${pct(xs, 50).toFixed(0)} / ${pct(xs, 99).toFixed(0)} ms`;
    row(SCENARIO, `idle edit until the SKR object changed (${edits.length} edits), p50 / p99`, ms(edits));
    row(
      SCENARIO,
      `drift: object deleted until recreated (${deleted.length}, three at a time), p50 / p99`,
      ms(deleted),
    );
    row(
      SCENARIO,
      `drift: object edited until reverted (${edited.length}, three at a time), p50 / p99`,
      ms(edited),
    );
    row(
      SCENARIO,
      'KCP requests per drift corrected, by kind',
      spent.map(([k, v]) => `${k} ${(v / (deleted.length + edited.length)).toFixed(2)}`).join(', '),
    );
  });
}
