// context.ts is what every benchmark scenario works with: the local stack (a KCP, K SKRs,
// the product on the event runtime), the workload's sizes, the row printer, and helpers
// that wait for SyncResources, create them in bulk and read the stack's CPU.
import { resolve } from 'node:path';
import { ClusterSet } from '../infra/clusters.ts';
import { applyObjects, connect, installCrds, setupKcp } from '../infra/kcp-setup.ts';
import { metricsPortEnv } from '../infra/net.ts';
import { startRuntime, type Runtime } from '../infra/runtime/index.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import type { Cluster, KubeObject } from '../lib/kube/objects.ts';
import { syncResourceInfo } from '../lib/kcp.ts';
import type { SyncResource } from '../lib/model.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { metrics, settle as settleBroker, type ScaleContext } from './scale.ts';
import {
  appliedAt,
  benchCrd,
  DIRECT_CONCURRENCIES,
  directNamespace,
  readyAt,
  syncResourceFor,
} from './workload.ts';
import { cpuSeconds } from './procs.ts';

/** Row prints one figure (and its target) and records it. */
export type Row = (scenario: string, figure: string, value: string, target?: string) => void;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)]!;
export const median = (xs: number[]) => pct(xs, 50);

/** BenchOptions are the command line's choices that the scenarios read. */
export interface BenchOptions {
  quick: boolean;
  brokerMode: 'channel' | 'async';
  knative: 'emulated' | 'real';
  oidc: boolean;
  /** cpuProf is the directory every function process writes a V8 CPU profile to. */
  cpuProf?: string | undefined;
  /** apiserverProf is the directory the KCP's and skr-1's API servers' CPU profiles (pprof) over the bulk create go to. */
  apiserverProf?: string | undefined;
}

/** BulkTimes is how long a bulk create took until all its SyncResources were Ready, and until all were applied (ms). */
export interface BulkTimes {
  readyMs: number;
  appliedMs: number;
}

/** Bench is the stack the scenarios run on and what they share. */
export interface Bench {
  opts: BenchOptions;
  /** S SyncResources over K Kymas (one SKR each); EDITS edits for a latency figure; NS the SKR namespace of the workload. */
  S: number;
  K: number;
  EDITS: number;
  NS: string;
  stateDir: string;
  row: Row;
  set: ClusterSet;
  kcp: Cluster;
  skrs: Cluster[];
  rt: Runtime;
  /** ports are the functions' metrics ports by "service/replica". */
  ports: Record<string, number>;
  scaleCtx: ScaleContext;
  kymaOf: (i: number) => string;
  srPath: (name?: string, ns?: string) => string;
  waitReadyOnce: (prefix: string, n: number, timeoutMs?: number, onApplied?: () => void) => Promise<void>;
  waitReady: (prefix: string, n: number, timeoutMs?: number, onApplied?: () => void) => Promise<number>;
  /** caughtUp counts the resync ticks waitReady fired, by batch. */
  caughtUp: Map<string, number>;
  create: (objs: KubeObject[]) => Promise<unknown[]>;
  bulk: (from: number, n: number, prefix?: string) => Promise<BulkTimes>;
  pids: () => { svc: string; pid: number }[];
  cpuNow: () => Promise<Record<string, number>>;
  /** settle waits for quiet periods of the broker (bench/scale.ts). */
  settle: () => Promise<void>;
  /** requests are the API requests of every function process, as kcp|skr:read|write (bench/scale.ts). */
  requests: () => Promise<Record<string, number>>;
}

const NS = 'bench';

/** startBench starts the stack: K SKRs with the bench CRD and namespaces, the KCP, the product. */
export async function startBench(
  opts: BenchOptions,
  stateDir: string,
  row: Row,
): Promise<{ bench: Bench; stop: () => Promise<void> }> {
  const S = opts.quick ? 60 : 300;
  const K = opts.quick ? 2 : 3;
  // A p99 needs 100 samples to be more than the maximum.
  const EDITS = opts.quick ? 20 : 100;
  const set = await ClusterSet.start({ skrs: K, stateDir, profiling: opts.apiserverProf !== undefined });
  let runtime: Runtime | undefined;
  const stop = async () => {
    await runtime?.stop();
    await set.stop();
  };
  try {
    await setupKcp(set);
    const kcp = await connect(set.kcp.kubeconfig, 'kcp');
    const skrs = await Promise.all(set.skrs.map((s, i) => connect(s.kubeconfig, `skr-${i + 1}`)));
    for (const skr of skrs) {
      await installCrds(skr, [benchCrd]);
      await applyObjects(skr, [
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } },
        // The direct loop creates its objects afresh at each concurrency, as the bulk create does.
        ...DIRECT_CONCURRENCIES.map((c) => ({
          apiVersion: 'v1',
          kind: 'Namespace',
          metadata: { name: directNamespace(c) },
        })),
      ]);
    }
    await applyObjects(kcp, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'bench-direct' } }]);
    const ports: Record<string, number> = {};
    runtime = await startRuntime(runtimeOptions(opts, set, stateDir, ports));
    const bench = helpersOf({ opts, S, K, EDITS, NS, stateDir, row, set, kcp, skrs, rt: runtime, ports });
    return {
      bench,
      stop: async () => {
        for (const c of [kcp, ...skrs]) await c.client.close();
        await stop();
      },
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

function runtimeOptions(
  opts: BenchOptions,
  set: ClusterSet,
  stateDir: string,
  ports: Record<string, number>,
) {
  const prof = opts.cpuProf ? resolve(opts.cpuProf) : undefined;
  return {
    kubeconfig: set.kcp.kubeconfigFile,
    stateDir,
    pingIntervalMs: 24 * 3600_000,
    brokerMode: opts.brokerMode,
    knative: opts.knative,
    oidc: opts.oidc,
    env: {
      OTEL_METRICS_EXPORTER: 'prometheus',
      ...(prof
        ? {
            NODE_OPTIONS: `--max-old-space-size=128 --max-semi-space-size=16 --v8-pool-size=1 --cpu-prof --cpu-prof-dir=${prof}`,
          }
        : {}),
    },
    envFor: metricsPortEnv(ports),
    // The SKR source's replicas are profiled too (its heap limit as knative.yaml sets it).
    ...(prof
      ? { adapterEnv: { NODE_OPTIONS: `--max-old-space-size=256 --cpu-prof --cpu-prof-dir=${prof}` } }
      : {}),
  };
}

type Base = Pick<
  Bench,
  'opts' | 'S' | 'K' | 'EDITS' | 'NS' | 'stateDir' | 'row' | 'set' | 'kcp' | 'skrs' | 'rt' | 'ports'
>;

/** helpersOf adds the scenarios' helpers to the stack. */
function helpersOf(base: Base): Bench {
  const { kcp, rt, set, K, NS } = base;
  const kymaOf = (i: number) => `kyma-${(i % K) + 1}`;
  const srPath = (name?: string, ns = 'kcp-system') => resourcePath(syncResourceInfo, ns, name);

  /**
   * waitReady waits until n SyncResources of one batch (label bench-batch) are Ready for
   * their generation, and calls onApplied once all n were applied (their Resources
   * condition True for it; Ready adds that their objects work). It lists once and then
   * watches, as an informer does: polling full lists would load the KCP it measures.
   */
  const waitReadyOnce = async (prefix: string, n: number, timeoutMs = 600_000, onApplied?: () => void) => {
    const labelSelector = `bench-batch=${prefix.replace(/-$/, '')}`;
    const ready = new Set<string>();
    const applied = new Set<string>();
    /** see keeps both sets as the SyncResource name now is (undefined: deleted). */
    const see = (s: SyncResource | undefined, name: string) => {
      const mark = (set: Set<string>, yes: boolean) => (yes ? set.add(name) : set.delete(name));
      mark(ready, s !== undefined && readyAt(s));
      mark(applied, s !== undefined && appliedAt(s));
      if (onApplied && applied.size >= n) {
        onApplied();
        onApplied = undefined;
      }
    };
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    try {
      while (!abort.signal.aborted) {
        ready.clear();
        applied.clear();
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
        for (const s of list.items) see(s, s.metadata.name);
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
            see(ev.type === 'DELETED' ? undefined : ev.object, ev.object.metadata.name);
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
    for (const x of left.items.filter((x) => !readyAt(x))) {
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
  const waitReady = async (
    prefix: string,
    n: number,
    timeoutMs = 600_000,
    onApplied?: () => void,
  ): Promise<number> => {
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
      await waitReadyOnce(prefix, n, timeoutMs, onApplied);
    } finally {
      done = true;
      await ticks;
    }
    return fired;
  };
  const create = (objs: KubeObject[]) =>
    mapLimit(objs, 32, (o) => kcp.client.call('POST', srPath(undefined, o.metadata.namespace), { body: o }));
  const bulk = async (from: number, n: number, prefix = 'bench-'): Promise<BulkTimes> => {
    const objs = Array.from({ length: n }, (_, j) => {
      const o = syncResourceFor(from + j, NS, 'kcp-system', kymaOf(from + j));
      o.metadata.name = `${prefix}${from + j}`;
      o.metadata.labels = { 'bench-batch': prefix.replace(/-$/, '') };
      return o;
    });
    const t0 = performance.now();
    let appliedMs = 0;
    await create(objs);
    await waitReady(prefix, n, undefined, () => (appliedMs = performance.now() - t0));
    return { readyMs: performance.now() - t0, appliedMs };
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

  const scaleCtx: ScaleContext = {
    kcp,
    skrs: base.skrs,
    skrKubeconfigs: set.skrs.map((c) => c.kubeconfig),
    rt,
    metricsPorts: base.ports,
    row: base.row,
    waitReady,
    cpu: cpuNow,
  };
  return {
    ...base,
    scaleCtx,
    kymaOf,
    srPath,
    waitReadyOnce,
    waitReady,
    caughtUp,
    create,
    bulk,
    pids,
    cpuNow,
    settle: () => settleBroker(rt),
    requests: async () => (await metrics(scaleCtx)).requests,
  };
}
