// throughput.ts: scenario 1, a bulk create of S SyncResources through the pipeline, and
// scenario 2, the limit: the same objects applied directly, plus the KCP writes a
// SyncResource needs.
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig, KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import { resourcePath } from '../../lib/kube/discovery.ts';
import { mustFind } from '../../lib/kube/objects.ts';
import { mapLimit } from '../../lib/concurrency.ts';
import { kcpRequests } from '../cost.ts';
import type { Bench, BulkTimes } from '../context.ts';
import { cpuMsPer, rssOf } from '../procs.ts';
import { DIRECT_CONCURRENCIES, directNamespace, objectsFor, syncResourceFor } from '../workload.ts';

const run = promisify(execFile);

/**
 * bulkCreate creates S SyncResources and waits for all Ready: wall time (and until all were
 * applied), rate, CPU per SyncResource by process, peak RSS.
 */
export async function bulkCreate(b: Bench): Promise<BulkTimes> {
  const { row, S, K, bulk, pids, cpuNow } = b;
  console.log('1. bulk create');
  const cpuBefore = await cpuNow();
  const reqBefore = await requests(b);
  const profiles = b.opts.apiserverProf ? apiserverProfiles(b, b.opts.apiserverProf) : undefined;
  const times = await bulk(0, S);
  const bulkMs = times.readyMs;
  await profiles;
  const cpuAfter = await cpuNow();
  await requestRows(b, '1 bulk create', reqBefore, S);
  row('1 bulk create', `S=${S} over K=${K}: wall time to all Ready`, `${(bulkMs / 1000).toFixed(2)} s`);
  row(
    '1 bulk create',
    'wall time to all applied (every item applied: the Resources condition; Ready adds the rollouts)',
    `${(times.appliedMs / 1000).toFixed(2)} s`,
  );
  row('1 bulk create', 'SyncResources per second', (S / (bulkMs / 1000)).toFixed(1));
  for (const [g, ms] of cpuMsPer(cpuBefore, cpuAfter, S))
    row('1 bulk create', `CPU ms per SyncResource: ${g}`, ms.toFixed(1));
  for (const p of pids())
    row(
      '7 memory',
      `peak RSS ${p.svc} during bulk create`,
      `${(await rssOf(p.pid, 'VmHWM')).toFixed(0)} MiB`,
    );

  return times;
}

/**
 * directLimit creates what the bulk create created with a direct server-side-apply loop,
 * at the best of four concurrencies (each in a namespace of its own, so that every one
 * creates its objects, as the bulk create does), and sets the bulk's time beside it.
 */
export async function directLimit(b: Bench, bulk: BulkTimes): Promise<void> {
  const { row, S, K, kcp, skrs, set, kymaOf, srPath, cpuNow } = b;
  console.log('2. direct apply');
  const cpuBefore = await cpuNow();
  const reqBefore = await requests(b);
  const widgetInfo = await mustFind(skrs[0]!, 'bench.kcp-sync.io/v1', 'Widget');
  let best = Infinity;
  let bestC = 0;
  const times: string[] = [];
  for (const c of DIRECT_CONCURRENCIES) {
    const ns = directNamespace(c);
    const apis = set.skrs.map((s) => {
      const kc = new KubeConfig();
      kc.loadFromString(s.kubeconfig);
      return KubernetesObjectApi.makeApiClient(kc);
    });
    const kcpKc = new KubeConfig();
    kcpKc.loadFromString(set.kcp.kubeconfig);
    const kcpApi = KubernetesObjectApi.makeApiClient(kcpKc);
    const t0 = performance.now();
    await mapLimit(
      Array.from({ length: S }, (_, i) => i),
      c,
      async (i) => {
        const api = apis[i % K]!;
        const { objects, status } = objectsFor(i, ns);
        for (const o of objects)
          await api.patch(
            o as never,
            undefined,
            undefined,
            'bench-direct',
            true,
            PatchStrategy.ServerSideApply,
          );
        await skrs[i % K]!.client.call(
          'PATCH',
          resourcePath(widgetInfo, ns, status.metadata.name, 'status'),
          {
            body: status,
            query: { fieldManager: 'bench-direct', force: true },
            contentType: 'application/apply-patch+yaml',
          },
        );
        const sr = syncResourceFor(i, ns, 'bench-direct', kymaOf(i));
        sr.metadata.name = `direct-${c}-${i}`;
        await kcpApi.create(sr as never);
        await kcp.client.call('PATCH', srPath(sr.metadata.name, 'bench-direct') + '/status', {
          body: {
            apiVersion: sr.apiVersion,
            kind: sr.kind,
            metadata: { name: sr.metadata.name, namespace: 'bench-direct' },
            status: { state: 'Ready', observedGeneration: 1 },
          },
          query: { fieldManager: 'bench-direct', force: true },
          contentType: 'application/apply-patch+yaml',
        });
      },
    );
    const ms = performance.now() - t0;
    times.push(`${c}: ${(ms / 1000).toFixed(2)} s`);
    if (ms < best) [best, bestC] = [ms, c];
  }
  row('2 limit', 'direct SSA loop at each concurrency', times.join(', '));
  row(
    '2 limit',
    `direct SSA loop (client-node, best concurrency ${bestC}) + KCP writes`,
    `${(best / 1000).toFixed(2)} s`,
  );
  // Where the direct loop's CPU goes, beside the bulk create's (scenario 1): per SyncResource
  // applied, over the four concurrencies.
  for (const [g, ms] of cpuMsPer(cpuBefore, await cpuNow(), 4 * S))
    row('2 limit', `CPU ms per SyncResource: ${g}`, ms.toFixed(1));
  await requestRows(b, '2 limit', reqBefore, 4 * S);
  // 1.5 on the stand-in broker, 2.0 on Knative's own eventing (more hops per event).
  const target = b.opts.knative === 'real' ? '<= 2.0' : '<= 1.5';
  row('2 limit', 'ratio pipeline time / direct time', (bulk.readyMs / best).toFixed(2), target);
  // The direct loop applies and writes Ready at once; it waits for no rollout.
  row(
    '2 limit',
    'ratio pipeline time until all applied / direct time (like for like: neither waits for rollouts)',
    (bulk.appliedMs / best).toFixed(2),
  );
}

/**
 * apiserverProfiles writes 15 s of the KCP's and skr-1's API server CPU profiles (their
 * /debug/pprof, on with --apiserver-prof) into dir, taken from the bulk create's start.
 */
async function apiserverProfiles(b: Bench, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  await Promise.all(
    [b.set.kcp, b.set.skrs[0]!].map(async (c) => {
      const { stdout } = await run(
        'kubectl',
        ['--kubeconfig', c.kubeconfigFile, 'get', '--raw', '/debug/pprof/profile?seconds=15'],
        { encoding: 'buffer', maxBuffer: 64 * 2 ** 20 },
      );
      await writeFile(join(dir, `${c.name}.pprof`), stdout);
    }),
  );
}

type Counts = Awaited<ReturnType<typeof kcpRequests>>;

/** requests reads the request counters of the KCP's and the SKRs' API servers (apiserver_request_total). */
async function requests(b: Bench): Promise<{ kcp: Counts; skr: Counts }> {
  const [kcp, ...skrs] = await Promise.all(
    [b.set.kcp, ...b.set.skrs].map((c) => kcpRequests(c.kubeconfigFile)),
  );
  const skr: Counts = {};
  for (const s of skrs) for (const [k, v] of Object.entries(s)) skr[k] = (skr[k] ?? 0) + v;
  return { kcp: kcp!, skr };
}

/** requestRows prints the requests the API servers served per SyncResource since before, by resource and verb (watches left out). */
async function requestRows(b: Bench, scenario: string, before: { kcp: Counts; skr: Counts }, n: number) {
  const after = await requests(b);
  for (const side of ['kcp', 'skr'] as const) {
    const spent = Object.entries(after[side])
      .map(([k, v]) => [k, (v - (before[side][k] ?? 0)) / n] as const)
      .filter(([k, v]) => v >= 0.01 && !k.endsWith(' WATCH'))
      .sort(([a], [c]) => a.localeCompare(c));
    const all = spent.reduce((a, [, v]) => a + v, 0);
    b.row(
      scenario,
      `${side === 'kcp' ? 'KCP' : 'SKR'} requests per SyncResource (the benchmark's own included)`,
      `${all.toFixed(2)}: ${spent.map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}`,
    );
  }
}
