// cost.ts is the benchmark's cost scenario (issue 38): what one SyncResource created
// costs the KCP, counted by the KCP API server itself (apiserver_request_total), and what
// each function process holds at rest. Runs alone, in a few minutes:
//   npm run bench -- --cost [--json FILE]
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterSet } from '../infra/clusters.ts';
import { connect, setupKcp } from '../infra/kcp-setup.ts';
import { sourcesSettled, startRuntime, type Runtime } from '../infra/runtime/index.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { syncResourceInfo } from '../lib/kcp.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import type { Cluster } from '../lib/kube/objects.ts';
import type { SyncResource } from '../lib/model.ts';
import { sleep } from './context.ts';
import { cpuSeconds, rssOf } from './procs.ts';
import { readyAt } from './workload.ts';

const SCENARIO = '15 cost';
const run = promisify(execFile);

/** Requests are apiserver_request_total samples summed by "resource[/subresource] VERB". */
type Requests = Record<string, number>;

/** kcpRequests reads the KCP API server's request counter, by resource, subresource and verb. */
export async function kcpRequests(kubeconfigFile: string): Promise<Requests> {
  const { stdout: text } = await run(
    'kubectl',
    ['--kubeconfig', kubeconfigFile, 'get', '--raw', '/metrics'],
    {
      maxBuffer: 256 * 2 ** 20,
    },
  );
  const out: Requests = {};
  for (const m of text.matchAll(/^apiserver_request_total\{([^}]*)\} ([\d.e+]+)/gm)) {
    const l = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (!l.resource) continue;
    const key = `${l.resource}${l.subresource ? `/${l.subresource}` : ''} ${l.verb}`;
    out[key] = (out[key] ?? 0) + Number(m[2]);
  }
  return out;
}

const minus = (a: Requests, b: Requests): Requests =>
  Object.fromEntries(
    Object.entries(a)
      .map(([k, v]) => [k, v - (b[k] ?? 0)] as const)
      .filter(([, v]) => v > 0),
  );

/** The product's own requests: what the benchmark's client and the sources' long watches do is not counted. */
const PRODUCT_RESOURCES = ['syncresources', 'secrets', 'kymas', 'configmaps', 'events'];
const isWrite = (key: string) => !/ (GET|LIST|WATCH)$/.test(key);

/**
 * productRequests are the product's requests of spent: without the benchmark's own (the
 * request named, and polls of its polling LISTs; the product's own LISTs of SyncResources,
 * a deletion's holders reads, stay).
 */
const productRequests = (spent: Requests, benchmarks: string, polls: number): [string, number][] =>
  Object.entries(spent)
    .map(([k, v]): [string, number] => [k, k === 'syncresources LIST' ? v - polls : v])
    .filter(([k, v]) => v > 0 && k !== benchmarks && PRODUCT_RESOURCES.includes(k.split(/[ /]/)[0]!));

/** byKind lists requests per SyncResource of n, by resource and verb. */
const byKind = (xs: [string, number][], n: number): string =>
  [...xs]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k} ${(v / n).toFixed(2)}`)
    .join(', ');

/**
 * createBatch creates n SyncResources `<batch>-<i>` in ns, labelled `bench-batch: <batch>`,
 * each with one ConfigMap of that name in kyma-1's `default` namespace, concurrency at a time.
 */
export async function createBatch(
  kcp: Cluster,
  ns: string,
  batch: string,
  n: number,
  concurrency: number,
): Promise<void> {
  await mapLimit(
    Array.from({ length: n }, (_, i) => i),
    concurrency,
    async (i) => {
      await kcp.client.call('POST', resourcePath(syncResourceInfo, ns), {
        body: {
          apiVersion: 'operator.kyma-project.io/v1alpha1',
          kind: 'SyncResource',
          metadata: { name: `${batch}-${i}`, namespace: ns, labels: { 'bench-batch': batch } },
          spec: {
            kyma: 'kyma-1',
            items: [
              {
                name: 'cm',
                strategy: 'CreateAndSync',
                resource: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${batch}-${i}, namespace: default}\ndata: {i: "${i}"}\n`,
              },
            ],
          },
        },
      });
    },
  );
}

/** listBatch lists a batch's SyncResources from the API server's cache (the benchmark's polls). */
export async function listBatch(kcp: Cluster, ns: string, batch: string): Promise<SyncResource[]> {
  return (
    await kcp.client.call<{ items: SyncResource[] }>('GET', resourcePath(syncResourceInfo, ns), {
      query: { labelSelector: `bench-batch=${batch}`, resourceVersion: '0' },
    })
  ).items;
}

/**
 * untilBatch polls a batch (listBatch) every everyMs until left says nothing is left, and
 * returns how many polls that took; 300 s after since it throws with what left said last.
 */
export async function untilBatch(
  kcp: Cluster,
  ns: string,
  batch: string,
  since: number,
  everyMs: number,
  left: (items: SyncResource[]) => string | undefined,
): Promise<number> {
  for (let polls = 1; ; polls++) {
    const missing = left(await listBatch(kcp, ns, batch));
    if (missing === undefined) return polls;
    if (performance.now() - since > 300_000) throw new Error(`${missing} after 300 s`);
    await sleep(everyMs);
  }
}

/** SmallStack is a stack of a scenario's own: one KCP, one SKR, the runtime settled. */
export interface SmallStack {
  set: ClusterSet;
  kcp: Cluster;
  rt: Runtime;
}

/**
 * onSmallStack runs scenario on a stack of its own (one SKR, no resync tick), once the
 * runtime's start has settled as before every scenario (bench/run.ts settled), and stops
 * it after (its state kept with KCP_SYNC_KEEP_STATE).
 */
export async function onSmallStack(name: string, scenario: (s: SmallStack) => Promise<void>): Promise<void> {
  const stateDir = await mkdtemp(join(tmpdir(), `kcp-sync-bench-${name}-`));
  const set = await ClusterSet.start({ skrs: 1, stateDir });
  try {
    await setupKcp(set);
    const kcp = await connect(set.kcp.kubeconfig, 'kcp');
    const rt = await startRuntime({
      kubeconfig: set.kcp.kubeconfigFile,
      stateDir,
      pingIntervalMs: 24 * 3600_000,
    });
    try {
      await sourcesSettled(rt);
      await scenario({ set, kcp, rt });
    } finally {
      await rt.stop();
    }
  } finally {
    await set.stop();
    if (!process.env.KCP_SYNC_KEEP_STATE) await rm(stateDir, { recursive: true, force: true });
  }
}

export async function costScenario(
  row: (scenario: string, figure: string, value: string, target?: string) => void,
  n = 100,
): Promise<void> {
  await onSmallStack('cost', async ({ set, kcp, rt }) => {
    const fns = () => rt.functions.map((f) => ({ svc: f.service, pid: f.proc.pid }));
    const rss = async () => {
      const by: Record<string, number[]> = {};
      for (const f of fns()) (by[f.svc] ??= []).push(await rssOf(f.pid, 'VmRSS'));
      return by;
    };
    await sleep(5_000);
    for (const [svc, xs] of Object.entries(await rss()))
      row(SCENARIO, `${svc}: RSS after start (MiB, per replica)`, xs.map((x) => x.toFixed(0)).join(', '));

    const ns = 'kcp-system';
    const cpuPids = () => [
      set.kcp.apiserver.pid,
      set.etcd.pid,
      ...set.skrs.map((s) => s.apiserver.pid),
      ...fns().map((f) => f.pid),
      ...rt.adapters.map((a) => a.proc.pid),
      ...rt.skrSources.map((a) => a.proc.pid),
      process.pid,
    ];
    const cpu = async () => (await Promise.all(cpuPids().map(cpuSeconds))).reduce((a, b) => a + b, 0);
    const before = await kcpRequests(set.kcp.kubeconfigFile);
    const cpu0 = await cpu();
    const t0 = performance.now();
    await createBatch(kcp, ns, 'cost', n, 8);
    // Ready, then quiet: the echoes of the last writes are part of the cost.
    const polls = await untilBatch(kcp, ns, 'cost', t0, 500, (items) => {
      const ready = items.filter(readyAt).length;
      return ready >= n ? undefined : `only ${ready} of ${n} Ready`;
    });
    const took = performance.now() - t0;
    let quiet = rt.broker.stats.received;
    for (;;) {
      await sleep(3_000);
      if (rt.broker.stats.received === quiet && rt.broker.pending === 0) break;
      quiet = rt.broker.stats.received;
    }
    const cpu1 = await cpu();
    // Not the product's: the benchmark's creates and its polling LISTs.
    const product = productRequests(
      minus(await kcpRequests(set.kcp.kubeconfigFile), before),
      'syncresources POST',
      polls,
    );
    const per = (xs: [string, number][]) => xs.reduce((a, [, v]) => a + v, 0) / n;
    row(SCENARIO, `${n} SyncResources created, Ready in (s)`, (took / 1000).toFixed(1));
    row(SCENARIO, 'KCP requests per SyncResource created', per(product).toFixed(2), '<= 5');
    row(
      SCENARIO,
      'KCP writes per SyncResource created',
      per(product.filter(([k]) => isWrite(k))).toFixed(2),
      '<= 3',
    );
    row(SCENARIO, 'KCP requests per SyncResource created, by kind', byKind(product, n));
    row(
      SCENARIO,
      'CPU per SyncResource created, all processes (ms)',
      (((cpu1 - cpu0) / n) * 1000).toFixed(0),
      '<= 150',
    );
    await sleep(10_000);
    for (const [svc, xs] of Object.entries(await rss()))
      row(
        SCENARIO,
        `${svc}: RSS at rest (MiB, per replica)`,
        xs.map((x) => x.toFixed(0)).join(', '),
        '<= 90',
      );

    // Deletion: every SyncResource deleted at once, until they are gone (their objects
    // with them); the KCP requests and CPU that costs, per SyncResource.
    const before2 = await kcpRequests(set.kcp.kubeconfigFile);
    const cpu2 = await cpu();
    const t2 = performance.now();
    await mapLimit(
      Array.from({ length: n }, (_, i) => i),
      8,
      (i) => kcp.client.call('DELETE', `${resourcePath(syncResourceInfo, ns)}/cost-${i}`),
    );
    const polls2 = await untilBatch(kcp, ns, 'cost', t2, 250, (items) =>
      items.length === 0 ? undefined : `${items.length} of ${n} not gone`,
    );
    row(SCENARIO, `${n} SyncResources deleted, gone in (s)`, ((performance.now() - t2) / 1000).toFixed(1));
    const cpu3 = await cpu();
    const product2 = productRequests(
      minus(await kcpRequests(set.kcp.kubeconfigFile), before2),
      'syncresources DELETE',
      polls2,
    );
    row(SCENARIO, 'KCP requests per SyncResource deleted', per(product2).toFixed(2));
    row(SCENARIO, 'KCP requests per SyncResource deleted, by kind', byKind(product2, n));
    row(
      SCENARIO,
      'CPU per SyncResource deleted, all processes (ms)',
      (((cpu3 - cpu2) / n) * 1000).toFixed(0),
    );
  });
}
