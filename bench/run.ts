// run.ts is `npm run bench` (`-- --quick` for the small version): the product on the
// local stack (real API servers, real function processes, the local event runtime),
// measured against a direct server-side-apply loop. Prints a table of figures and the
// targets they are held to. Figures only: nothing here asserts a time.
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { KubeConfig, KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import { ClusterSet, NODE_NAME } from '../infra/clusters.ts';
import { applyObjects, connect, installCrds, kymaObjects, setupKcp } from '../infra/kcp-setup.ts';
import { dist } from '../infra/build.ts';
import { freePort } from '../infra/net.ts';
import { DEFAULT_REPLICAS, startRuntime, type Runtime } from '../infra/runtime/index.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { getObject, mustFind, type Cluster, type KubeObject } from '../lib/kube/objects.ts';
import { syncResourceInfo } from '../lib/kcp.ts';
import { healthOf } from '../lib/health.ts';
import { KYMA_NAME_LABEL, type SyncResource } from '../lib/model.ts';
import { mapLimit } from '../lib/concurrency.ts';
import {
  metrics,
  QUIET_MS,
  scaleScenario,
  scrape,
  settle as settleBroker,
  type ScaleContext,
} from './scale.ts';
import { costScenario } from './cost.ts';
import { writeRun } from './record.ts';
import { benchCrd, objectsFor, syncResourceFor } from './workload.ts';
import { pipelineVerify, verifyCost } from './senders.ts';
import { peerComparison } from './peer.ts';
import { cpuSeconds, rssOf } from './procs.ts';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    /** --scale runs scenario 10 alone at S=10,000 SyncResources over K=1,000 Kymas (with --quick: 1,000 over 100; bench/scale.ts). */
    scale: { type: 'boolean', default: false },
    /** --kymas N runs the scale scenario with one SyncResource per Kyma over N Kymas (the SKR source's cost per watched SKR). */
    kymas: { type: 'string' },
    /** --cost runs the cost scenario alone: KCP requests and CPU per SyncResource created, RSS of each function at rest (bench/cost.ts). */
    cost: { type: 'boolean', default: false },
    /** --broker async runs on a broker that answers posts at once; the default is the channel-based Broker's semantics (infra/runtime/broker.ts). */
    broker: { type: 'string', default: 'channel' },
    /** --knative real runs on Knative Eventing's own controllers and data plane, each function behind queue-proxy (infra/runtime/real.ts). */
    knative: { type: 'string', default: 'emulated' },
    /** --oidc off runs knative: real without sender identity (authentication-oidc), to set its figures beside those with it. */
    oidc: { type: 'string', default: 'on' },
    /** --keep leaves the state directory (function logs, kubeconfigs) in place for inspection. */
    keep: { type: 'boolean', default: false },
    /** --peer off skips the side-by-side with Gardener's resource-manager (bench/peer.ts; built on first use); --peer only runs it alone. */
    peer: { type: 'string', default: 'on' },
    /** --cpu-prof DIR has every function process and SKR source replica write a V8 CPU profile into DIR when it stops (bench/profile.ts sums them). */
    'cpu-prof': { type: 'string' },
    /** --json FILE writes the run (commit, machine, options, every row) as JSON; bench/render.ts makes BENCHMARKS.md's table of it. */
    json: { type: 'string' },
  },
});
if (!['channel', 'async'].includes(args.broker))
  throw new Error(`--broker is channel or async, not ${args.broker}`);
if (!['emulated', 'real'].includes(args.knative))
  throw new Error(`--knative is emulated or real, not ${args.knative}`);
const quick = args.quick;
const scaleOnly = args.scale;
const brokerMode = args.broker as 'channel' | 'async';
const knative = args.knative as 'emulated' | 'real';
if (!['on', 'off'].includes(args.oidc)) throw new Error(`--oidc is on or off, not ${args.oidc}`);
const oidc = args.oidc === 'on';
const keep = args.keep;
if (!['on', 'off', 'only'].includes(args.peer))
  throw new Error(`--peer is on, off or only, not ${args.peer}`);
const peerMode = args.peer as 'on' | 'off' | 'only';
const S = quick ? 60 : 300;
const K = quick ? 2 : 3;
// A p99 needs 100 samples to be more than the maximum.
const EDITS = quick ? 20 : 100;
const NS = 'bench';
const rows: { scenario: string; figure: string; value: string; target?: string }[] = [];
// With --json the file is rewritten after every row: a run that stops leaves what it measured.
let saved = Promise.resolve();
const save = (complete: boolean) =>
  (saved = saved.then(() =>
    args.json ? writeRun(args.json, startedAt, runOptions(), rows, complete) : undefined,
  ));
const row = (scenario: string, figure: string, value: string, target?: string) => {
  rows.push({ scenario, figure, value, ...(target ? { target } : {}) });
  console.log(`  ${scenario} | ${figure}: ${value}${target ? ` (target ${target})` : ''}`);
  void save(false);
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** pct is the nearest-rank percentile: the smallest value with at least p% of the values at or below it. */
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)]!;
const median = (xs: number[]) => pct(xs, 50);

const startedAt = new Date();
const runOptions = () => ({
  quick,
  scale: scaleOnly,
  cost: args.cost,
  broker: brokerMode,
  knative,
  oidc: oidc ? 'on' : 'off',
  peer: peerMode,
});
const stateDir = await mkdtemp(join(tmpdir(), 'kcp-sync-bench-'));
console.log(
  `bench (${scaleOnly ? 'scale' : quick ? 'quick' : 'full'})${scaleOnly ? '' : `: S=${S} K=${K}`} on ${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB, ${knative === 'real' ? "Knative Eventing's own broker (MTChannelBasedBroker, in-memory channel) and queue-proxy" : `${brokerMode} broker stand-in`}, ${DEFAULT_REPLICAS} replicas per function`,
);
if (args.cost) {
  await costScenario(row);
  console.log('\n| scenario | figure | value | target |\n|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.scenario} | ${r.figure} | ${r.value} | ${r.target ?? ''} |`);
  await save(true);
  await rm(stateDir, { recursive: true, force: true });
  process.exit(0);
}
const set = await ClusterSet.start({ skrs: K, stateDir });
let runtime: Runtime | undefined;
try {
  await setupKcp(set);
  const kcp = await connect(set.kcp.kubeconfig, 'kcp');
  const skrs = await Promise.all(set.skrs.map((s, i) => connect(s.kubeconfig, `skr-${i + 1}`)));
  for (const skr of skrs) {
    await installCrds(skr, [benchCrd]);
    await applyObjects(skr, [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } },
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'direct' } },
    ]);
  }
  await applyObjects(kcp, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'bench-direct' } }]);
  const ports: Record<string, number> = {};
  for (const svc of [
    'sync-resync',
    'sync-resolve-cluster',
    'sync-apply-items',
    'sync-write-status',
    'sync-dead-letter',
  ]) {
    for (let r = 0; r < DEFAULT_REPLICAS; r++) ports[`${svc}/${r}`] = await freePort();
  }
  runtime = await startRuntime({
    kubeconfig: set.kcp.kubeconfigFile,
    stateDir,
    pingIntervalMs: 24 * 3600_000,
    brokerMode,
    knative,
    oidc,
    env: {
      OTEL_METRICS_EXPORTER: 'prometheus',
      ...(args['cpu-prof']
        ? {
            NODE_OPTIONS: `--max-old-space-size=128 --max-semi-space-size=16 --cpu-prof --cpu-prof-dir=${resolve(args['cpu-prof'])}`,
          }
        : {}),
    },
    envFor: (svc, r) => ({
      OTEL_EXPORTER_PROMETHEUS_PORT: String(ports[`${svc}/${r}`]),
      OTEL_EXPORTER_PROMETHEUS_HOST: '127.0.0.1',
    }),
    // The SKR source's replicas are profiled too (its heap limit as knative.yaml sets it).
    ...(args['cpu-prof']
      ? {
          adapterEnv: {
            NODE_OPTIONS: `--max-old-space-size=256 --cpu-prof --cpu-prof-dir=${resolve(args['cpu-prof'])}`,
          },
        }
      : {}),
  });
  const rt = runtime;
  const kymaOf = (i: number) => `kyma-${(i % K) + 1}`;
  const srPath = (name?: string, ns = 'kcp-system') => resourcePath(syncResourceInfo, ns, name);

  /**
   * waitReady waits until n SyncResources of one batch (label bench-batch) are Ready for
   * their generation. It lists once and then watches, as an informer does: polling full
   * lists would load the KCP it measures.
   */
  const waitReadyOnce = async (prefix: string, n: number, timeoutMs = 600_000) => {
    const labelSelector = `bench-batch=${prefix.replace(/-$/, '')}`;
    const isReady = (s: SyncResource) =>
      s.status?.state === 'Ready' && s.status.observedGeneration === s.metadata.generation;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    try {
      while (!abort.signal.aborted) {
        const ready = new Set<string>();
        // From the watch cache (resourceVersion 0), as an informer lists: a quorum LIST of
        // thousands of SyncResources right after a bulk create could take over 30 s; the
        // watch from its resourceVersion delivers whatever the cache had not seen yet. A
        // watch that times out is resumed from the last resourceVersion seen (bookmarks
        // keep it fresh); only an expired one lists again (a list of ten thousand every
        // minute failed on the KCP's HTTP/2 stream).
        const list = await kcp.client.call<{ items: SyncResource[]; metadata: { resourceVersion: string } }>(
          'GET',
          srPath(),
          { query: { labelSelector, resourceVersion: '0' } },
        );
        for (const s of list.items) if (isReady(s)) ready.add(s.metadata.name);
        if (ready.size >= n) return;
        let rv = list.metadata.resourceVersion;
        let expired = false;
        while (!expired && !abort.signal.aborted) {
          for await (const ev of kcp.client.watch<SyncResource>(
            srPath(),
            { resourceVersion: rv, labelSelector, timeoutSeconds: '60', allowWatchBookmarks: 'true' },
            abort.signal,
          )) {
            if (ev.type === 'ERROR') {
              expired = true;
              break;
            }
            rv = ev.object.metadata.resourceVersion ?? rv;
            if (ev.type === 'BOOKMARK') continue;
            if (ev.type !== 'DELETED' && isReady(ev.object)) ready.add(ev.object.metadata.name);
            else ready.delete(ev.object.metadata.name);
            if (ready.size >= n) return;
          }
        }
      }
    } catch (err) {
      if (!abort.signal.aborted) throw err;
    } finally {
      clearTimeout(timer);
      abort.abort();
    }
    // Say where the rest stand, so that a run that stalls can be read.
    const left = await kcp.client.call<{ items: SyncResource[] }>('GET', srPath(), {
      query: { labelSelector },
    });
    const stand = new Map<string, number>();
    for (const x of left.items.filter((x) => !isReady(x))) {
      const key = `${x.status?.state ?? 'no status'}/${x.status?.conditions?.[0]?.reason ?? '-'} gen ${x.status?.observedGeneration ?? '-'} of ${x.metadata.generation}`;
      stand.set(key, (stand.get(key) ?? 0) + 1);
    }
    throw new Error(
      `${prefix}: not all ${n} Ready after ${timeoutMs} ms; the others: ${JSON.stringify(Object.fromEntries(stand))}`,
    );
  };
  /**
   * waitReady is waitReadyOnce with the resync the product relies on for events its sources
   * drop: a burst can outrun an ApiServerSource adapter (it sends one event after another),
   * the API server then closes its watch as unresponsive, and the adapter, watching again,
   * sends nothing for what it missed. In production the next PingSource tick catches up;
   * here the timer is off, so a tick is fired when nothing has been delivered for 20 s, and
   * counted (a row at the end; waitReady returns how many), so that no figure hides one.
   */
  const caughtUp = new Map<string, number>();
  const waitReady = async (prefix: string, n: number, timeoutMs = 600_000): Promise<number> => {
    let done = false;
    let fired = 0;
    const ticks = (async () => {
      let last = -1;
      let quietSince = performance.now();
      while (!done) {
        await sleep(2_000);
        if (rt.broker.stats.received !== last || rt.broker.pending > 0) {
          last = rt.broker.stats.received;
          quietSince = performance.now();
        } else if (performance.now() - quietSince > 20_000 && !done) {
          rt.ping[0]!.fire();
          fired++;
          caughtUp.set(prefix, (caughtUp.get(prefix) ?? 0) + 1);
          quietSince = performance.now();
        }
      }
    })();
    try {
      await waitReadyOnce(prefix, n, timeoutMs);
    } finally {
      done = true;
      await ticks;
    }
    return fired;
  };
  const create = (objs: KubeObject[]) =>
    mapLimit(objs, 32, (o) => kcp.client.call('POST', srPath(undefined, o.metadata.namespace), { body: o }));
  const bulk = async (from: number, n: number, prefix = 'bench-'): Promise<number> => {
    const objs = Array.from({ length: n }, (_, j) => {
      const o = syncResourceFor(from + j, NS, 'kcp-system', kymaOf(from + j));
      o.metadata.name = `${prefix}${from + j}`;
      o.metadata.labels = { 'bench-batch': prefix.replace(/-$/, '') };
      return o;
    });
    const t0 = performance.now();
    await create(objs);
    await waitReady(prefix, n);
    return performance.now() - t0;
  };
  const pids = () => [
    ...rt.functions.map((f) => ({ svc: f.service, pid: f.proc.pid })),
    ...rt.skrSources.map((a) => ({ svc: a.name, pid: a.proc.pid })),
  ];

  // CPU seconds of every process of the stack (profile: where a bulk create's time goes).
  const cpuGroups = () => {
    const groups: Record<string, number[]> = {
      'this process (bench client, event runtime)': [process.pid],
      etcd: [set.etcd.pid],
    };
    for (const c of [set.kcp, ...set.skrs]) {
      const who = c === set.kcp ? 'KCP' : 'SKRs';
      (groups[`${who} kube-apiserver`] ??= []).push(c.apiserver.pid);
      (groups['kube-controller-managers'] ??= []).push(c.controllerManager.pid);
    }
    for (const p of pids()) (groups[p.svc] ??= []).push(p.pid);
    groups['ApiServerSource adapters'] = rt.adapters.map((a) => a.proc.pid);
    for (const p of rt.processes?.() ?? []) (groups[p.group] ??= []).push(p.pid);
    return groups;
  };
  const cpuNow = async () =>
    Object.fromEntries(
      await Promise.all(
        Object.entries(cpuGroups()).map(
          async ([g, ps]) => [g, (await Promise.all(ps.map(cpuSeconds))).reduce((a, b) => a + b, 0)] as const,
        ),
      ),
    );

  /**
   * healthScenario: H SyncResources, each with a Deployment whose Pods wait for a Node label
   * (Progressing). The label is set on every SKR's KWOK Node at once; per SyncResource, the
   * time from its Deployment turning Available in the SKR (watched by polling, as kstatus
   * reads it) to the SyncResource Ready in the KCP. No resync tick runs: the SKR source's
   * watch is what reports it.
   */
  const healthScenario = async (r: Runtime) => {
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
        all.every(
          (x) =>
            x.status?.state === 'Processing' &&
            x.status.conditions?.some((c) => c.type === 'Progressing' && c.status === 'True'),
        )
      )
        break;
      await sleep(250);
    }
    await r.broker.idle(60_000);
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
  };

  /**
   * downScenario: skr-1's API server is killed with every SyncResource of kyma-1 Ready (the
   * bulk's and 100 more), and resync ticks are fired every TICK_MS for DOWN_MS, as the
   * PingSource would: deliveries (and redeliveries), runs by outcome (sync_runs_total) and
   * the product's CPU over that time. Then it is started again: one tick, and the time
   * until all are Ready (target: within one interval).
   */
  const downScenario = async () => {
    const TICK_MS = 60_000;
    const DOWN_MS = quick ? 2 * TICK_MS : 10 * TICK_MS;
    await bulk(30_000, 100 * K, 'down-');
    await settleBroker(rt);
    const onKyma = (
      await kcp.client.call<{ items: unknown[] }>('GET', srPath(), {
        query: { labelSelector: `${KYMA_NAME_LABEL}=kyma-1` },
        headers: { accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' },
      })
    ).items.length;
    const runsNow = async () => {
      const out: Record<string, number> = {};
      for (const [svc, port] of Object.entries(ports))
        for (const m of (await scrape(svc, port)).matchAll(/^sync_runs_total\{([^}]*)\} (\d+)/gm)) {
          const outcome = /outcome="([^"]*)"/.exec(m[1]!)?.[1] ?? '';
          out[outcome] = (out[outcome] ?? 0) + Number(m[2]);
        }
      return out;
    };
    const product = (cpu: Record<string, number>) =>
      Object.entries(cpu)
        .filter(([g]) => g.startsWith('sync-'))
        .reduce((a, [, v]) => a + v, 0);
    const before = {
      stats: { ...rt.broker.stats },
      runs: await runsNow(),
      cpu: product(await cpuNow()),
    };
    await set.killApiServer('skr-1');
    try {
      const t0 = performance.now();
      let ticks = 0;
      while (performance.now() - t0 < DOWN_MS) {
        rt.ping[0]!.fire();
        ticks++;
        await sleep(Math.min(TICK_MS, DOWN_MS - (performance.now() - t0)));
      }
      await settleBroker(rt);
      const runs = await runsNow();
      const d = (k: string) => (runs[k] ?? 0) - (before.runs[k] ?? 0);
      const stats = rt.broker.stats;
      row(
        '13 SKR down',
        `${onKyma} SyncResources on the SKR, ${DOWN_MS / 60_000} min down, ${ticks} resync ticks: deliveries / redeliveries / dead letters`,
        `${stats.delivered - before.stats.delivered} / ${stats.retries - before.stats.retries} / ${stats.deadLettered - before.stats.deadLettered}`,
      );
      row(
        '13 SKR down',
        'runs: unreachable / not started (the batch found the SKR down) / done (the other Kymas)',
        `${d('unreachable')} / ${d('skipped')} / ${d('done')}`,
      );
      row(
        '13 SKR down',
        // Every run of kyma-1's SyncResources while its SKR is down ends unreachable ("done" are the other Kymas').
        `runs per SyncResource of kyma-1 per resync tick`,
        (d('unreachable') / onKyma / ticks).toFixed(2),
        '<= 2',
      );
      row(
        '13 SKR down',
        'CPU of the functions while down, per minute',
        `${((product(await cpuNow()) - before.cpu) / (DOWN_MS / 60_000)).toFixed(2)} s`,
      );
    } finally {
      await set.restartApiServer('skr-1');
    }
    const t1 = performance.now();
    rt.ping[0]!.fire();
    await waitReadyOnce('down-', 100 * K, 10 * TICK_MS);
    row(
      '13 SKR down',
      'back up: one resync tick -> all Ready',
      `${((performance.now() - t1) / 1000).toFixed(1)} s`,
      '<= one interval',
    );
  };

  const scaleCtx: ScaleContext = {
    kcp,
    skrs,
    skrKubeconfigs: set.skrs.map((c) => c.kubeconfig),
    rt,
    metricsPorts: ports,
    row,
    waitReady,
    cpu: cpuNow,
  };
  if (scaleOnly) {
    await rt.broker.idle(60_000);
    const kymas = args.kymas !== undefined ? Number(args.kymas) : undefined;
    if (kymas !== undefined && !(Number.isInteger(kymas) && kymas >= 100))
      throw new Error(`--kymas is a number of at least 100, not ${args.kymas}`);
    await scaleScenario(scaleCtx, kymas ?? (quick ? 1_000 : 10_000), kymas ?? (quick ? 100 : 1_000));
  } else if (peerMode !== 'only') {
    // 1. Bulk create. First the runtime's start settles: its sources report every existing
    // Kyma and access Secret as added, and each fans out a resync of its SyncResources;
    // overlapping the bulk, that resynced a varying share of it (7 to 18 per Kyma).
    await rt.broker.idle(60_000);
    console.log('1. bulk create');
    const cpuBefore = await cpuNow();
    const bulkMs = await bulk(0, S);
    const cpuAfter = await cpuNow();
    row('1 bulk create', `S=${S} over K=${K}: wall time to all Ready`, `${(bulkMs / 1000).toFixed(2)} s`);
    row('1 bulk create', 'SyncResources per second', (S / (bulkMs / 1000)).toFixed(1));
    for (const [g, s] of Object.entries(cpuAfter))
      row('1 bulk create', `CPU ms per SyncResource: ${g}`, (((s - cpuBefore[g]!) * 1000) / S).toFixed(1));
    for (const p of pids())
      row(
        '7 memory',
        `peak RSS ${p.svc} during bulk create`,
        `${(await rssOf(p.pid, 'VmHWM')).toFixed(0)} MiB`,
      );

    // 2. The limit: the same objects applied directly, plus the KCP writes a SyncResource needs.
    console.log('2. direct apply');
    const widgetInfo = await mustFind(skrs[0]!, 'bench.kcp-sync.io/v1', 'Widget');
    let best = Infinity;
    let bestC = 0;
    for (const c of [8, 16, 32, 64]) {
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
          const { objects, status } = objectsFor(i, 'direct', c);
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
            resourcePath(widgetInfo, 'direct', status.metadata.name, 'status'),
            {
              body: status,
              query: { fieldManager: 'bench-direct', force: true },
              contentType: 'application/apply-patch+yaml',
            },
          );
          const sr = syncResourceFor(i, 'direct', 'bench-direct', kymaOf(i));
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
      if (ms < best) [best, bestC] = [ms, c];
    }
    row(
      '2 limit',
      `direct SSA loop (client-node, best concurrency ${bestC}) + KCP writes`,
      `${(best / 1000).toFixed(2)} s`,
    );
    row('2 limit', 'ratio pipeline time / direct time', (bulkMs / best).toFixed(2), '<= 2.0');

    // 3. Latency of one edit, idle and under load.
    console.log('3. latency');
    const kcpFile = set.kcp.kubeconfigFile;
    // Latency targets: one SyncResource per edit under load, so edits overlap freely.
    await create(
      Array.from({ length: EDITS }, (_, i) => {
        const o = syncResourceFor(5_000 + i, NS, 'kcp-system', kymaOf(i));
        o.metadata.name = `lat-${i}`;
        o.metadata.labels = { 'bench-batch': 'lat' };
        return o;
      }),
    );
    await waitReady('lat-', EDITS);
    /** edit applies a new revision of lat-i with kubectl and waits for Ready at the new generation. */
    const kubectlMs: number[] = [];
    const marks: { name: string; generation: number; start: number; kubectlDone: number; ready: number }[] =
      [];
    /**
     * readyAt watches lat-i (as `kubectl wait` does) and resolves with the time it is
     * first seen Ready at a generation at least the one `generation` resolves to;
     * opened() is called with the watch's first event (the object as it is).
     */
    const readyAt = async (
      name: string,
      generation: Promise<number>,
      opened: () => void,
    ): Promise<number> => {
      const abort = new AbortController();
      try {
        for await (const { object: o } of kcp.client.watch<SyncResource>(
          srPath(),
          { fieldSelector: `metadata.name=${name}`, timeoutSeconds: '120' },
          abort.signal,
        )) {
          const seen = Date.now();
          opened();
          if (
            o.status?.state === 'Ready' &&
            o.status.observedGeneration === o.metadata.generation &&
            o.metadata.generation! >= (await generation)
          )
            return seen;
        }
        throw new Error(`${name}: watch ended before Ready`);
      } finally {
        abort.abort();
      }
    };
    const edit = async (i: number, rev: number) => {
      const sr = syncResourceFor(5_000 + i, NS, 'kcp-system', kymaOf(i), rev);
      sr.metadata.name = `lat-${i}`;
      sr.metadata.labels = { 'bench-batch': 'lat' };
      // The watch opens first (its first event is the object as it is), so no change is missed.
      let setGeneration!: (g: number) => void;
      const generation = new Promise<number>((r) => (setGeneration = r));
      let ready!: Promise<number>;
      await new Promise<void>((opened, failed) => {
        ready = readyAt(sr.metadata.name, generation, opened);
        ready.catch(failed);
      });
      const t0 = performance.now();
      const start = Date.now();
      let out = '';
      await new Promise<void>((resolve, reject) => {
        const p = spawn(
          'kubectl',
          [
            '--kubeconfig',
            kcpFile,
            'apply',
            '--server-side',
            '--force-conflicts',
            '--field-manager=bench',
            '-o',
            'jsonpath={.metadata.generation}',
            '-f',
            '-',
          ],
          { stdio: ['pipe', 'pipe', 'inherit'] },
        );
        p.stdout.on('data', (d: Buffer) => (out += d.toString()));
        p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`kubectl exited ${code}`))));
        p.stdin.end(JSON.stringify(sr));
      });
      kubectlMs.push(performance.now() - t0);
      const kubectlDone = Date.now();
      setGeneration(Number(out));
      const readyTime = await ready;
      marks.push({ name: `lat-${i}`, generation: Number(out), start, kubectlDone, ready: readyTime });
      return readyTime - start;
    };
    const idle: number[] = [];
    for (let i = 0; i < EDITS; i++) idle.push(await edit(0, 100 + i));
    const kubectlIdle = kubectlMs.splice(0);
    marks.length = 0;
    row(
      '3 latency',
      `idle, kubectl apply -> Ready (${EDITS} edits) p50`,
      `${median(idle).toFixed(0)} ms`,
      '<= 300 ms',
    );
    row('3 latency', 'idle p99', `${pct(idle, 99).toFixed(0)} ms`);
    row('3 latency', 'idle: of which kubectl apply itself, p50', `${median(kubectlIdle).toFixed(0)} ms`);
    // Load: scenario 1 (bulk creates of S SyncResources, one after another) running the
    // whole time while an operator makes the edits one after another, each on its own
    // SyncResource. (Fifty overlapping edits would measure fifty kubectl processes
    // competing with each other as much as the product.)
    let loading = true;
    let rounds = 0;
    const load = (async () => {
      while (loading) await bulk(10_000 + rounds++ * S, S, `load${rounds}-`);
    })();
    await sleep(1_000);
    const loaded: number[] = [];
    for (let i = 0; i < EDITS; i++) loaded.push(await edit(i, 1_000 + i));
    loading = false;
    row(
      '3 latency',
      `under load (bulk creates of ${S} SyncResources running: ${rounds} rounds) p50`,
      `${median(loaded).toFixed(0)} ms`,
    );
    row('3 latency', 'under load p99', `${pct(loaded, 99).toFixed(0)} ms`, '<= 2 s');
    row('3 latency', 'under load: slowest edit', `${Math.max(...loaded).toFixed(0)} ms`);
    row(
      '3 latency',
      'under load: of which kubectl apply itself, p50 / p99',
      `${median(kubectlMs).toFixed(0)} / ${pct(kubectlMs, 99).toFixed(0)} ms`,
    );
    // Where an edit's time goes under load, from the functions' logs: kubectl done ->
    // cluster resolved -> items applied -> status handled -> Ready seen by the poller.
    // Each step's line carries ms, the time its handler took; the rest of a hop is
    // delivery (watch, broker, HTTP) and waiting in the process.
    const logged = new Map<string, { time: number; ms: number }>();
    for (const f of await readdir(join(stateDir, 'logs'))) {
      if (!f.startsWith('function-')) continue;
      for (const line of (await readFile(join(stateDir, 'logs', f), 'utf8')).split('\n')) {
        if (!line.includes('"kcp-system/lat-')) continue;
        const j = JSON.parse(line) as {
          time: number;
          ms: number;
          msg: string;
          syncResource: string;
          generation?: number;
        };
        const key = `${j.syncResource}/${j.generation}/${j.msg}`;
        if (j.generation !== undefined && !logged.has(key)) logged.set(key, { time: j.time, ms: j.ms });
      }
    }
    const hops: Record<string, { total: number[]; handler: number[] }> = {};
    const hop = (name: string, total: number, handler?: number) => {
      const h = (hops[name] ??= { total: [], handler: [] });
      h.total.push(total);
      if (handler !== undefined) h.handler.push(handler);
    };
    for (const m of marks) {
      const at = (msg: string) => logged.get(`kcp-system/${m.name}/${m.generation}/${msg}`);
      const [r, a, s] = [at('cluster resolved'), at('items applied'), at('status handled')];
      if (r === undefined || a === undefined || s === undefined) continue;
      hop('event -> cluster resolved', r.time - m.kubectlDone, r.ms);
      hop('resolved -> items applied', a.time - r.time, a.ms);
      hop('applied -> status written', s.time - a.time, s.ms);
      hop('status -> Ready seen', m.ready - s.time);
    }
    for (const [name, { total, handler }] of Object.entries(hops)) {
      const of =
        handler.length > 0
          ? `; in the handler ${median(handler).toFixed(0)} / ${pct(handler, 99).toFixed(0)} ms`
          : '';
      row(
        '3 latency',
        `under load: ${name}, p50 / p99 (${total.length} edits)`,
        `${median(total).toFixed(0)} / ${pct(total, 99).toFixed(0)} ms${of}`,
      );
    }
    await load;
    await rt.broker.idle(120_000);

    // 4. No-op resync.
    console.log('4. no-op resync');
    const total = await kcp.client.call<{ items: unknown[] }>('GET', srPath()).then((l) => l.items.length);
    // API requests of every function process, as kcp|skr:read|write (bench/scale.ts).
    const scrapeAll = async () => (await metrics(scaleCtx)).requests;
    // Quiet periods of QUIET_MS (bench/scale.ts): a measurement never ends inside a tick.
    const settle = () => settleBroker(rt);
    await settle();
    // Warm-up: the first resync after creation records items as Unchanged instead of
    // Created (one status write each); the second is the no-op being measured.
    rt.ping[0]!.fire();
    await sleep(300);
    await settle();
    const diff = (a: Record<string, number>, b: Record<string, number>, k: string) =>
      (b[k] ?? 0) - (a[k] ?? 0);
    let before = await scrapeAll();
    let t0 = performance.now();
    rt.ping[0]!.fire();
    await sleep(300);
    await settle();
    let ms = performance.now() - t0 - 300 - QUIET_MS;
    let after = await scrapeAll();
    row(
      '4 no-op resync',
      `${total} SyncResources: SKR requests per SyncResource`,
      (diff(before, after, 'skr:read') / total + diff(before, after, 'skr:write') / total).toFixed(2),
      '<= 1',
    );
    row(
      '4 no-op resync',
      'KCP requests per SyncResource',
      ((diff(before, after, 'kcp:read') + diff(before, after, 'kcp:write')) / total).toFixed(2),
    );
    row(
      '4 no-op resync',
      'writes anywhere (SKR + KCP)',
      String(diff(before, after, 'skr:write') + diff(before, after, 'kcp:write')),
      '0',
    );
    row('4 no-op resync', 'time for the whole resync', `${(ms / 1000).toFixed(2)} s`);

    // 5. Drift: edit or delete 10% of the synced objects, resync.
    console.log('5. drift');
    const victims = Array.from({ length: Math.ceil(S / 10) }, (_, j) => j * 10).filter((i) => i < S);
    await mapLimit(victims, 16, async (i) => {
      const skr = skrs[i % K]!;
      const info = await mustFind(skr, 'v1', 'ConfigMap');
      if (i % 20 === 0) await skr.client.call('DELETE', resourcePath(info, NS, `b${i}-a`));
      else
        await skr.client.call('PATCH', resourcePath(info, NS, `b${i}-a`), {
          body: { data: { rev: 'drifted' } },
          contentType: 'application/merge-patch+json',
        });
    });
    before = await scrapeAll();
    const corrected = async () =>
      (
        await mapLimit(victims, 16, async (i) => {
          const skr = skrs[i % K]!;
          const o = await getObject(skr, await mustFind(skr, 'v1', 'ConfigMap'), NS, `b${i}-a`);
          return (o?.data as { rev?: string } | undefined)?.rev === '1';
        })
      ).every(Boolean);
    // Snapshots taken before a tick began confirm nothing for it (since), so one tick
    // corrects everything; when a tick has run its course and objects are still drifted,
    // tick again (and say so).
    t0 = performance.now();
    let ticks = 0;
    let done = false;
    while (!done) {
      rt.ping[0]!.fire();
      ticks++;
      await sleep(300);
      await settle();
      done = await corrected();
    }
    ms = performance.now() - t0 - ticks * (300 + QUIET_MS);
    await settle();
    after = await scrapeAll();
    row(
      '5 drift',
      `${victims.length} objects edited or deleted (10%): time until corrected`,
      `${(ms / 1000).toFixed(2)} s`,
    );
    row('5 drift', 'resync ticks needed', String(ticks));
    row(
      '5 drift',
      'SKR requests per SyncResource (all ticks)',
      ((diff(before, after, 'skr:read') + diff(before, after, 'skr:write')) / total).toFixed(2),
    );

    // 6. Cold start of one function process, and its first reconcile.
    console.log('6. cold start');
    const cold: number[] = [];
    const first: number[] = [];
    const phaseRuns: Record<string, number>[] = [];
    for (let i = 0; i < 10; i++) {
      const port = await freePort();
      const t = performance.now();
      // What the image runs: the build in dist/ (the runtime built it).
      const child = spawn(process.execPath, [join(dist, 'functions', 'serve.js'), 'apply-items'], {
        cwd: dist,
        env: {
          ...process.env,
          PORT: String(port),
          KUBECONFIG: set.kcp.kubeconfigFile,
          K_SINK: rt.broker.url,
          LOG_LEVEL: 'warn',
          SYNC_EVENT_AUTH: 'none',
        },
        stdio: ['ignore', 'pipe', 'ignore'],
      });
      let out = '';
      child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
      for (;;) {
        const ok = await fetch(`http://127.0.0.1:${port}/health/readiness`).then(
          (r) => r.ok,
          () => false,
        );
        if (ok) break;
        await sleep(5);
      }
      cold.push(performance.now() - t);
      // The function's own account of its start-up phases (functions/serve.ts), once it has logged it.
      for (let w = 0; w < 100 && !out.includes('"msg":"started"'); w++) await sleep(10);
      const started = out
        .split('\n')
        .map((l) => {
          try {
            return JSON.parse(l) as { msg?: string; phasesMs?: Record<string, number> };
          } catch {
            return undefined;
          }
        })
        .find((l) => l?.msg === 'started');
      if (started?.phasesMs) phaseRuns.push(started.phasesMs);
      const sr = await kcp.client.call<SyncResource>('GET', srPath('bench-1'));
      const secret = await kcp.client.call<{ items: KubeObject[] }>(
        'GET',
        '/api/v1/namespaces/kcp-system/secrets',
        { query: { labelSelector: `operator.kyma-project.io/kyma-name=${sr.spec.kyma}` } },
      );
      const s = secret.items[0]!;
      const t1 = performance.now();
      const res = await fetch(`http://127.0.0.1:${port}/`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'ce-specversion': '1.0',
          'ce-id': `cold-${i}`,
          'ce-source': '/bench',
          'ce-type': 'io.kyma-project.syncresource.cluster.resolved',
        },
        body: JSON.stringify({
          namespace: 'kcp-system',
          name: 'bench-1',
          uid: sr.metadata.uid,
          generation: sr.metadata.generation,
          kyma: sr.spec.kyma,
          secret: {
            namespace: 'kcp-system',
            name: s.metadata.name,
            uid: s.metadata.uid,
            resourceVersion: s.metadata.resourceVersion,
          },
        }),
      });
      await res.text();
      first.push(performance.now() - t1);
      child.kill('SIGKILL');
    }
    row(
      '6 cold start',
      'spawn -> ready on /health/readiness (median of 10)',
      `${median(cold).toFixed(0)} ms`,
      '<= 500 ms',
    );
    if (phaseRuns.length > 0)
      row(
        '6 cold start',
        'its phases (medians, as the function logs them): node / telemetry / imports / init / listening',
        Object.keys(phaseRuns[0]!)
          .map((p) => `${median(phaseRuns.map((r) => r[p] ?? 0)).toFixed(0)}`)
          .join(' / ') + ' ms',
      );
    row(
      '6 cold start',
      'first reconcile of a 5-item SyncResource (median of 10)',
      `${median(first).toFixed(0)} ms`,
    );

    // 7. Memory with clients cached for 50 SKRs (50 access Secrets, one cached client each).
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

    // 9. Rotation: a source Secret's value changed -> the SKR Secret of a dataFrom item has it.
    // The path is the event of the source Secret (the resync timer is off): resolve-cluster
    // maps it to its Kyma, whose SyncResources (S/K of them) are reconciled.
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

    // 8. Scaling (full only).
    if (!quick) {
      console.log('8. scaling');
      const per: number[] = [];
      let from = 20_000;
      for (const n of [100, 300, 1000]) {
        const t = await bulk(from, n, `scale${n}-`);
        from += n;
        per.push(t / n);
        row('8 scaling', `S=${n}: time per SyncResource`, `${(t / n).toFixed(1)} ms`);
      }
      row('8 scaling', 'ratio S=1000 / S=100 per SyncResource', (per[2]! / per[0]!).toFixed(2), '<= 1.5');
    }
    // 11. Health: objects that become ready in the SKR, and how soon their SyncResources say so.
    console.log('11. health');
    await healthScenario(rt);

    // 13. An SKR that stops answering: what it costs while down, how soon it is caught up.
    console.log('13. an SKR down');
    await downScenario();

    // 10. Scale (issue 16): S=1,000 over K=100 here; --scale runs it at 10,000 over 1,000.
    await scaleScenario(scaleCtx, 1_000, 100);
  }
  // 12. Sender identity: what verifying a delivery's token costs (bench/senders.ts).
  if (peerMode !== 'only') await senderScenario();
  async function senderScenario() {
    console.log('12. sender identity');
    const cost = await verifyCost(kcp, set.kcp.kubeconfigFile, NS);
    row(
      '12 sender identity',
      'verification per delivery, one process: CPU / wall',
      `${cost.cpuUs.toFixed(0)} µs / ${cost.wallUs.toFixed(0)} µs`,
    );
    row('12 sender identity', 'first verification (reads discovery and keys)', `${cost.first.toFixed(0)} ms`);
    if (knative === 'real') {
      const p = await pipelineVerify(ports);
      row(
        '12 sender identity',
        oidc
          ? 'in the pipeline: deliveries verified, mean time each, refused'
          : 'in the pipeline: off (--oidc off)',
        oidc ? `${p.count}, ${p.meanUs.toFixed(0)} µs, ${p.refused}` : 'no delivery verified',
      );
    }
  }
  // 14. Side by side with a real peer (bench/peer.ts).
  if (!scaleOnly && peerMode !== 'off') {
    console.log("14. side by side with Gardener's resource-manager");
    await rt.broker.idle(60_000);
    const infra = new Set(['etcd', 'KCP kube-apiserver', 'SKRs kube-apiserver', 'kube-controller-managers']);
    await peerComparison({
      set,
      kcp,
      skrs,
      rt,
      stateDir,
      quick,
      nodeName: NODE_NAME,
      n: S,
      edits: EDITS,
      row,
      settle: () => settleBroker(rt),
      requests: async () => (await metrics(scaleCtx)).requests,
      productCpu: async () =>
        Object.entries(await cpuNow())
          .filter(([g]) => !infra.has(g) && !g.startsWith('this process'))
          .reduce((a, [, v]) => a + v, 0),
      productPids: () => pids().map((p) => p.pid),
      log: (l) => console.log(`  ${l}`),
    });
  }
  row(
    'all',
    'resync ticks fired to catch up events an adapter dropped (its watch closed as unresponsive), by batch',
    caughtUp.size === 0 ? 'none' : [...caughtUp].map(([b, t]) => `${b.replace(/-$/, '')}: ${t}`).join(', '),
  );
  await save(false);
  for (const c of [kcp, ...skrs]) await (c as Cluster).client.close();
} finally {
  await runtime?.stop();
  await set.stop();
  if (keep) console.log(`state kept in ${stateDir}`);
  else await rm(stateDir, { recursive: true, force: true });
}
// 15. The cost of a reconcile, on a stack of its own (bench/cost.ts).
if (!scaleOnly && knative !== 'real') {
  console.log('15. cost');
  await costScenario(row);
}
console.log('\n| scenario | figure | value | target |\n|---|---|---|---|');
for (const r of rows) console.log(`| ${r.scenario} | ${r.figure} | ${r.value} | ${r.target ?? ''} |`);
await save(true);
