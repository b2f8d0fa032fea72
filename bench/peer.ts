// peer.ts: the product side by side with a real peer, Gardener's resource-manager (GRM):
// ManagedResources in the KCP (their manifests in Secrets) applied into an SKR, one GRM
// process per target as it must run, built from its Go module (infra/gardener, on the
// first benchmark that needs it). Both get the same workload (bench/workload.ts: five
// objects per resource, the product's Widget status aside, which GRM does not write), one
// after the other on the same clusters, the other idle, at two topologies: one target per
// local SKR, and 100 targets (each its own Kyma and access Secret for the product, its own
// GRM process for the peer, spread over the local SKRs, a namespace each):
//   - bulk create: N resources until all applied (product: its Resources condition True
//     at their generation, every item applied; GRM: ResourcesApplied True at theirs), then
//     until all healthy (product: Ready; GRM: ResourcesHealthy True and
//     ResourcesProgressing False), at most two minutes more;
//   - edit: one resource's manifest changed until its SKR object holds the new value
//     (both the same way), idle and under load (bulk creates of N running), p50/p99;
//   - no-op resync: requests to source (KCP) and target (SKR) per resource over one
//     resync (product: one tick fired; GRM: one syncPeriod of a minute, its metrics), and
//     writes among them;
//   - drift of 1 % of the objects, deleted in the SKR, each until recreated, and edited,
//     each until reverted, with nothing fired (product: its SKR source; GRM: its watches,
//     else its one-minute resync);
//   - health: Deployments whose Pods wait for a Node label; from each turning Available
//     (kstatus, polled) until its resource reports it (product: Ready; GRM:
//     ResourcesHealthy True and ResourcesProgressing False);
//   - deletion: all resources deleted until their objects are gone and the resources too;
//   - CPU at rest (30 s with nothing to do, a minute after the side started) and over each side's scenarios, and RSS now
//     and at peak (product: its functions; GRM: its processes).
// Figures only; each row names both and the ratio product/peer.
import { writeFile, readFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { load, dump } from 'js-yaml';
import { ensurePeerBinaries } from '../infra/binaries.ts';
import type { ClusterSet } from '../infra/clusters.ts';
import { applyObjects, installCrds, kymaObjects } from '../infra/kcp-setup.ts';
import { freePort, waitFor } from '../infra/net.ts';
import { startProcess, stopProcess, type Proc } from '../infra/processes.ts';
import type { Runtime } from '../infra/runtime/index.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { healthOf } from '../lib/health.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { getObject, listObjects, mustFind, type Cluster, type KubeObject } from '../lib/kube/objects.ts';
import { syncResourceInfo } from '../lib/kcp.ts';
import type { SyncResource } from '../lib/model.ts';
import { cpuSeconds, rssOf } from './procs.ts';
import { addRequests, scrape } from './scale.ts';
import { appliedAt, conditionTrue, itemsOf, objectsFor, readyAt } from './workload.ts';

/** PeerContext is what the comparison needs of the benchmark's run (bench/run.ts). */
export interface PeerContext {
  set: ClusterSet;
  kcp: Cluster;
  skrs: Cluster[];
  rt: Runtime;
  stateDir: string;
  quick: boolean;
  /** n resources in all at one target per SKR; edits measured per side. */
  n: number;
  edits: number;
  /** nodeName is the KWOK Node of every SKR (its Pods are "running" there). */
  nodeName: string;
  row: (scenario: string, figure: string, value: string, target?: string) => void;
  /** settle waits until the broker has had nothing to deliver for a while. */
  settle: () => Promise<void>;
  /** requests sums the functions' API requests by cluster (kcp/skr) and kind (read/write). */
  requests: () => Promise<Record<string, number>>;
  /** productCpu is the CPU seconds of the product's processes (functions and the event runtime's). */
  productCpu: () => Promise<number>;
  /** productPids are the product's function processes. */
  productPids: () => number[];
  log: (line: string) => void;
}

/** Topology is where the resources go: targets (one per SKR, or more sharing them) and how many. */
interface Topology {
  id: string;
  targets: number;
  n: number;
  edits: number;
  /** health and underLoad run these scenarios too (at the first topology). */
  health: number;
  underLoad: boolean;
}

type Batch = 'm' | 'l' | 'h';
/** Work is what one resource applies: objects, and the status the product writes to the Widget's. */
type Work = { objects: KubeObject[]; status?: KubeObject };
/** Seen is one resource as its side reports it. */
interface Seen {
  i: number;
  applied: boolean;
  /** healthy: applied and its objects reported ready; progressing: applied, not yet. */
  healthy: boolean;
  progressing: boolean;
}

/** Side is the product or the peer, driven the same way by the scenarios. */
interface Side {
  who: 'product' | 'peer';
  /** ns is target t's namespace in its SKR. */
  ns(t: number): string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** put creates resource i of a batch with these objects (status: the Widget's) or changes it to them. */
  put(batch: Batch, i: number, work: Work, create: boolean): Promise<void>;
  remove(batch: Batch, i: number): Promise<void>;
  list(batch: Batch): Promise<Seen[]>;
  /** quiet waits until the side has nothing left to do for the last change. */
  quiet(): Promise<void>;
  /** between waits between two idle edits: the last one's echoes through. */
  between(): Promise<void>;
  /** resync runs one resync with nothing changed: requests per resource to KCP and SKR, and writes. */
  resync(): Promise<{ kcp: number; skr: number; writes: number }>;
  cpu(): Promise<number>;
  pids(): number[];
}

const MR_API = '/apis/resources.gardener.cloud/v1alpha1';
const SYNC_PERIOD_S = 60;

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)]!;
const ratio = (a: number, b: number) => (b > 0 ? (a / b).toFixed(2) : 'n/a');
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const diff = (a: Record<string, number>, b: Record<string, number>) =>
  Object.fromEntries(
    [...new Set([...Object.keys(a), ...Object.keys(b)])].map((k) => [k, (a[k] ?? 0) - (b[k] ?? 0)]),
  );
/** perResource is a resync's requests (by kcp/skr and read/write) per resource of n, and its writes. */
const perResource = (r: Record<string, number>, n: number) => ({
  kcp: ((r['kcp:read'] ?? 0) + (r['kcp:write'] ?? 0)) / n,
  skr: ((r['skr:read'] ?? 0) + (r['skr:write'] ?? 0)) / n,
  writes: (r['kcp:write'] ?? 0) + (r['skr:write'] ?? 0),
});
const indexOf = (name: string) => Number(/(\d+)$/.exec(name)![1]);
/** ours tells the workload's objects from what the SKR puts in every namespace (kube-root-ca.crt). */
const ours = (o: KubeObject) => /^b\d+-/.test(o.metadata.name);

interface ManagedResource {
  metadata: { name: string; namespace: string; generation?: number };
  status?: { observedGeneration?: number; conditions?: { type: string; status: string }[] };
}

/** grmConfig is a ResourceManagerConfiguration for one target: every controller but managedResource and health off, every webhook off. */
function grmConfig(opts: {
  source: string;
  target: string;
  namespace: string;
  targetNamespace: string;
  ports: { webhooks: number; health: number; metrics: number };
  certDir: string;
}): Record<string, unknown> {
  const off = { enabled: false };
  return {
    apiVersion: 'resourcemanager.config.gardener.cloud/v1alpha1',
    kind: 'ResourceManagerConfiguration',
    sourceClientConnection: { kubeconfig: opts.source, namespaces: [opts.namespace], qps: 100, burst: 130 },
    // Its target cache holds its own namespace: the local SKRs are shared by many targets,
    // where each would be a cluster of its own.
    targetClientConnection: {
      kubeconfig: opts.target,
      namespaces: [opts.targetNamespace],
      qps: 100,
      burst: 130,
    },
    leaderElection: {
      leaderElect: false,
      resourceLock: 'leases',
      resourceName: 'grm',
      resourceNamespace: opts.namespace,
    },
    logLevel: 'info',
    logFormat: 'json',
    server: {
      webhooks: { bindAddress: '127.0.0.1', port: opts.ports.webhooks, tls: { serverCertDir: opts.certDir } },
      healthProbes: { bindAddress: '127.0.0.1', port: opts.ports.health },
      metrics: { bindAddress: '127.0.0.1', port: opts.ports.metrics },
    },
    controllers: {
      garbageCollector: off,
      health: { concurrentSyncs: 5, syncPeriod: `${SYNC_PERIOD_S}s` },
      csrApprover: off,
      // The key is managedResource (the module's own example says managedResources, which
      // is ignored): the label value below proves on the applied objects that it was read.
      managedResource: {
        concurrentSyncs: 5,
        syncPeriod: `${SYNC_PERIOD_S}s`,
        alwaysUpdate: false,
        managedByLabelValue: 'kcp-sync-peer',
      },
      networkPolicy: off,
      nodeCriticalComponents: off,
      nodeAgentReconciliationDelay: off,
      tokenRequestor: off,
    },
    webhooks: Object.fromEntries(
      [
        'crdDeletionProtection',
        'endpointSliceHints',
        'extensionValidation',
        'highAvailabilityConfig',
        'kubernetesServiceHost',
        'systemComponentsConfig',
        'podKubeAPIServerLoadBalancing',
        'podSchedulerName',
        'podTopologySpreadConstraints',
        'projectedTokenMount',
        'nodeAgentAuthorizer',
        'seccompProfile',
      ].map((w) => [w, off]),
    ),
  };
}

/** productSide drives the product: SyncResources in kcp-system, one Kyma per target. */
function productSide(ctx: PeerContext, topo: Topology): Side {
  const { kcp, set } = ctx;
  const virtual = topo.targets !== ctx.skrs.length;
  const kyma = (t: number) => (virtual ? `cmp${topo.id}-${t + 1}` : `kyma-${t + 1}`);
  const name = (b: Batch, i: number) => `cmp${topo.id}-${b}${i}`;
  const path = (n?: string) => resourcePath(syncResourceInfo, 'kcp-system', n);
  return {
    who: 'product',
    ns: (t) => `cmp${topo.id}-${t + 1}`,
    async start() {
      if (virtual)
        await applyObjects(
          kcp,
          Array.from({ length: topo.targets }, (_, t) =>
            kymaObjects(kyma(t), set.skrs[t % set.skrs.length]!.kubeconfig),
          ).flat(),
        );
    },
    async stop() {},
    async put(b, i, work, create) {
      const o: KubeObject = {
        apiVersion: 'operator.kyma-project.io/v1alpha1',
        kind: 'SyncResource',
        metadata: {
          name: name(b, i),
          namespace: 'kcp-system',
          labels: { 'bench-batch': `cmp${topo.id}-${b}` },
        },
        spec: { kyma: kyma(i % topo.targets), items: itemsOf(work.objects, work.status) },
      };
      if (create) await kcp.client.call('POST', path(), { body: o });
      else
        await kcp.client.call('PATCH', path(o.metadata.name), {
          body: { spec: o.spec },
          contentType: 'application/merge-patch+json',
        });
    },
    async remove(b, i) {
      await kcp.client.call('DELETE', path(name(b, i)));
    },
    async list(b) {
      const { items } = await kcp.client.call<{ items: SyncResource[] }>('GET', path(), {
        query: { labelSelector: `bench-batch=cmp${topo.id}-${b}` },
      });
      return items.map((s) => {
        const progressing =
          s.status?.state === 'Processing' && conditionTrue(s.status.conditions, 'Progressing');
        return { i: indexOf(s.metadata.name), applied: appliedAt(s), healthy: readyAt(s), progressing };
      });
    },
    quiet: ctx.settle,
    between: () => ctx.rt.broker.idle(60_000),
    async resync() {
      // The first tick after edits records their items as Unchanged (they read Configured
      // until then): one status write per edited SyncResource, once. The second is the
      // steady state measured here.
      ctx.rt.ping[0]!.fire();
      await sleep(500);
      await ctx.settle();
      // A tick reconciles every SyncResource of the system: per resource of them all.
      const all = (await kcp.client.call<{ items: unknown[] }>('GET', path())).items.length;
      const r0 = await ctx.requests();
      ctx.rt.ping[0]!.fire();
      await sleep(500);
      await ctx.settle();
      return perResource(diff(await ctx.requests(), r0), all);
    },
    cpu: ctx.productCpu,
    pids: ctx.productPids,
  };
}

/** peerSide drives GRM: a ManagedResource and its Secret per resource, one process per target. */
function peerSide(
  ctx: PeerContext,
  topo: Topology,
  bins: Awaited<ReturnType<typeof ensurePeerBinaries>>,
): Side {
  const { kcp, set } = ctx;
  const kcpNs = (t: number) => `peer${topo.id}-${t + 1}`;
  const name = (b: Batch, i: number) => `mr${topo.id}-${b}${i}`;
  const peers: { proc: Proc; metrics: number; health: number }[] = [];
  /** requests sums GRM's client-go request counter by source/target host and read/write. */
  const requests = async () => {
    const out: Record<string, number> = {};
    const kcpHost = new URL(set.kcp.url).host;
    for (const p of peers)
      addRequests(
        out,
        await scrape(`GRM ${p.proc.cluster}`, p.metrics),
        'rest_client_requests_total',
        (labels) => labels.host === kcpHost,
      );
    return out;
  };
  const listMrs = async (b: Batch) =>
    (
      await kcp.client.call<{ items: ManagedResource[] }>('GET', `${MR_API}/managedresources`, {
        query: { labelSelector: `bench-batch=peer${topo.id}-${b}` },
      })
    ).items;
  return {
    who: 'peer',
    ns: kcpNs,
    async start() {
      const dir = join(ctx.stateDir, 'peer');
      await mkdir(dir, { recursive: true });
      await applyObjects(
        kcp,
        Array.from({ length: topo.targets }, (_, t) => ({
          apiVersion: 'v1',
          kind: 'Namespace',
          metadata: { name: kcpNs(t) },
        })),
      );
      // Ports are probed free, then bound by the process: with 300 of them another process
      // may take one in between, and GRM exits. It is then started again on fresh ports,
      // up to three tries.
      const used = new Set<number>();
      const port = async () => {
        for (;;) {
          const p = await freePort();
          if (used.has(p)) continue;
          used.add(p);
          return p;
        }
      };
      const launch = async (t: number, attempt = 1): Promise<void> => {
        const ports = { webhooks: await port(), health: await port(), metrics: await port() };
        const config = grmConfig({
          source: set.kcp.kubeconfigFile,
          target: set.skrs[t % set.skrs.length]!.kubeconfigFile,
          namespace: kcpNs(t),
          targetNamespace: kcpNs(t),
          ports,
          certDir: bins.certDir,
        });
        const file = join(dir, `grm-${topo.id}-${t + 1}.yaml`);
        await writeFile(file, dump(config));
        // The file read back is the configuration written (no key dropped by the dump).
        if (JSON.stringify(load(await readFile(file, 'utf8'))) !== JSON.stringify(config))
          throw new Error(`${file} does not read back as written`);
        const proc = startProcess(
          'gardener-resource-manager',
          `${topo.id}-${t + 1}-${attempt}`,
          bins.resourceManager,
          [`--config=${file}`],
          { logDir: dir },
        );
        try {
          await waitFor(
            `gardener-resource-manager ${proc.cluster} (log: ${proc.logFile})`,
            async () => (await fetch(`http://127.0.0.1:${ports.health}/readyz`)).ok,
            300_000,
            () => (proc.child.exitCode !== null ? `exited with ${proc.child.exitCode}` : undefined),
            250,
          );
        } catch (err) {
          if (attempt >= 3 || proc.child.exitCode === null) throw err;
          ctx.log(`${err instanceof Error ? err.message : String(err)}; starting it again`);
          return launch(t, attempt + 1);
        }
        peers.push({ proc, metrics: ports.metrics, health: ports.health });
      };
      await mapLimit(
        Array.from({ length: topo.targets }, (_, t) => t),
        16,
        (t) => launch(t),
      );
    },
    async stop() {
      await Promise.all(peers.map((p) => stopProcess(p.proc)));
    },
    async put(b, i, { objects }, create) {
      const t = i % topo.targets;
      const secrets = `/api/v1/namespaces/${kcpNs(t)}/secrets`;
      const secret = {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: name(b, i), namespace: kcpNs(t) },
        type: 'Opaque',
        stringData: { 'objects.yaml': objects.map((o) => dump(o)).join('---\n') },
      };
      if (!create) {
        await kcp.client.call('PUT', `${secrets}/${name(b, i)}`, { body: secret });
        return;
      }
      await kcp.client.call('POST', secrets, { body: secret });
      await kcp.client.call('POST', `${MR_API}/namespaces/${kcpNs(t)}/managedresources`, {
        body: {
          apiVersion: 'resources.gardener.cloud/v1alpha1',
          kind: 'ManagedResource',
          metadata: {
            name: name(b, i),
            namespace: kcpNs(t),
            labels: { 'bench-batch': `peer${topo.id}-${b}` },
          },
          spec: { secretRefs: [{ name: name(b, i) }] },
        },
      });
    },
    async remove(b, i) {
      const t = i % topo.targets;
      await kcp.client.call('DELETE', `${MR_API}/namespaces/${kcpNs(t)}/managedresources/${name(b, i)}`);
      await kcp.client.call('DELETE', `/api/v1/namespaces/${kcpNs(t)}/secrets/${name(b, i)}`);
    },
    async list(b) {
      return (await listMrs(b)).map((mr) => {
        const c = mr.status?.conditions;
        const applied =
          mr.status?.observedGeneration === mr.metadata.generation && conditionTrue(c, 'ResourcesApplied');
        const healthy =
          applied &&
          conditionTrue(c, 'ResourcesHealthy') &&
          c?.some((x) => x.type === 'ResourcesProgressing' && x.status === 'False') === true;
        return { i: indexOf(mr.metadata.name), applied, healthy, progressing: applied && !healthy };
      });
    },
    // GRM has no queue to look into: a few seconds.
    quiet: () => sleep(3_000),
    between: () => sleep(1_000),
    async resync() {
      // One syncPeriod (and a little) with nothing changed: per resource of this topology.
      const n = (await listMrs('m')).length;
      const r0 = await requests();
      await sleep((SYNC_PERIOD_S + 5) * 1000);
      return perResource(diff(await requests(), r0), n);
    },
    cpu: async () => sum(await Promise.all(peers.map((p) => cpuSeconds(p.proc.pid)))),
    pids: () => peers.map((p) => p.proc.pid),
  };
}

const LOAD = 100_000;

/** figures names each figure of a topology, in the order printed, with its unit. */
function figures(topo: Topology, drifted: number): Record<string, [string, string]> {
  return {
    bulk: [`bulk create, ${topo.n} resources over ${topo.targets} targets: until all applied`, 's'],
    bulkHealthy: ['bulk create: until all healthy (two minutes at most after applied)', 's'],
    edit50: ['edit until the SKR object changed, idle: p50', 'ms'],
    edit99: ['edit, idle: p99', 'ms'],
    load50: [`edit under load (bulk creates and deletions of ${topo.n} running): p50`, 'ms'],
    load99: ['edit under load: p99', 'ms'],
    noopKcp: ['no-op resync: source (KCP) requests per resource', ''],
    noopSkr: ['no-op resync: target (SKR) requests per resource', ''],
    noopWrites: ['no-op resync: writes', ''],
    drift50: [`drift, nothing fired: 1 % (${drifted} objects) deleted, each until recreated: p50`, 's'],
    drift99: ['drift, deleted: p99', 's'],
    edited50: [`drift, nothing fired: 1 % edited, each until reverted (90 s at most): p50`, 's'],
    edited99: ['drift, edited: p99', 's'],
    health50: [`health (${topo.health} Deployments): object Available until reported, p50`, 's'],
    health99: ['health: p99', 's'],
    delete: ['deletion of all until their objects are gone', 's'],
    cpu: ['CPU over these scenarios', 's'],
    rest: ['CPU at rest, per minute', 's'],
    rssNow: ['RSS after these scenarios, all processes', 'MiB'],
    rssPeak: ['peak RSS, all processes', 'MiB'],
  };
}

/** healthWork is health resource i: a Deployment whose Pods wait for the Node label key. */
const healthWork = (ns: string, i: number, key: string): Work => ({
  objects: [
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: `web-${i}`, namespace: ns, labels: { 'bench-health': key } },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: `web-${i}` } },
        template: {
          metadata: { labels: { app: `web-${i}` } },
          spec: { nodeSelector: { [key]: 'go' }, containers: [{ name: 'c', image: 'example.io/web:1' }] },
        },
      },
    },
  ],
});

/** runSide runs every scenario of a topology for one side; figure records each value. */
async function runSide(
  ctx: PeerContext,
  topo: Topology,
  side: Side,
  drifted: number[],
  figure: (key: string, v: number) => void,
): Promise<void> {
  const r = await sideRun(ctx, topo, side);
  for (let t = 0; t < r.T; t++)
    await applyObjects(r.skrOf(t), [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: side.ns(t) } }]);
  await side.start();
  await side.quiet();
  // At rest: nothing to do, for 30 s, on a side started at least a minute ago (what a
  // process does once, after it starts, is not rest: its first minute is start-up).
  await sleep(60_000);
  const rest0 = await side.cpu();
  await sleep(30_000);
  figure('rest', ((await side.cpu()) - rest0) * 2);
  const cpu0 = await side.cpu();
  await bulkPhase(r, figure);
  await editPhases(r, figure);
  const noop = await side.resync();
  figure('noopKcp', noop.kcp);
  figure('noopSkr', noop.skr);
  figure('noopWrites', noop.writes);
  await driftPhase(r, drifted, figure);
  if (topo.health > 0) await healthPhase(r, figure);
  const t0 = performance.now();
  await mapLimit(r.range(topo.n), 32, (i) => side.remove('m', i));
  await r.gone('m');
  await waitFor(
    `${side.who}: objects gone`,
    async () =>
      (
        await mapLimit(r.range(r.T), 16, async (t) =>
          (await listObjects(r.skrOf(t), r.cmInfo, { namespace: side.ns(t) })).filter(ours),
        )
      ).every((l) => l.length === 0),
    300_000,
    undefined,
    500,
  );
  figure('delete', (performance.now() - t0) / 1000);
  figure('cpu', (await side.cpu()) - cpu0);
  figure('rssNow', sum(await Promise.all(side.pids().map((p) => rssOf(p, 'VmRSS')))));
  figure('rssPeak', sum(await Promise.all(side.pids().map((p) => rssOf(p, 'VmHWM')))));
}

type SideRun = Awaited<ReturnType<typeof sideRun>>;

/** sideRun is what the phases of one side's run share: where resource i goes, how to create and wait for a batch. */
async function sideRun(ctx: PeerContext, topo: Topology, side: Side) {
  const T = topo.targets;
  const skrOf = (i: number) => ctx.skrs[(i % T) % ctx.skrs.length]!;
  const nsOf = (i: number) => side.ns(i % T);
  const work = (b: Batch, i: number, rev = 1): Work => objectsFor(b === 'l' ? LOAD + i : i, nsOf(i), rev);
  const range = (n: number, from = 0) => Array.from({ length: n }, (_, j) => from + j);
  const createAll = (b: Batch, ids: number[], w = (i: number) => work(b, i)) =>
    mapLimit(ids, 32, (i) => side.put(b, i, w(i), true));
  const reached = (b: Batch, n: number, what: 'applied' | 'healthy', timeoutMs = 900_000) =>
    waitFor(
      `${side.who}: ${n} of batch ${b} ${what}`,
      async () => (await side.list(b)).filter((s) => s[what]).length >= n,
      timeoutMs,
      undefined,
      250,
    );
  const applied = (b: Batch, n: number) => reached(b, n, 'applied');
  const gone = (b: Batch) =>
    waitFor(
      `${side.who}: batch ${b} gone`,
      async () => (await side.list(b)).length === 0,
      900_000,
      undefined,
      500,
    );
  const cmInfo = await mustFind(ctx.skrs[0]!, 'v1', 'ConfigMap');
  /** watched times act on resource i's ConfigMap b<i>-a until done, as a watch of it sees it (ms; Infinity after timeoutMs). */
  const watched = (i: number, act: () => Promise<void>, done: Done, timeoutMs?: number) =>
    timeUntil(skrOf(i), resourcePath(cmInfo, nsOf(i)), `b${i}-a`, act, done, timeoutMs);
  // Edits, each on the next resource, at its next revision.
  const revs = new Map<number, number>();
  const edit = async (e: number) => {
    const i = e % topo.n;
    const rev = (revs.get(i) ?? 1) + 1;
    revs.set(i, rev);
    return watched(
      i,
      () => side.put('m', i, work('m', i, rev), false),
      (o) => (o?.data as { rev?: string } | undefined)?.rev === String(rev),
    );
  };
  return { ctx, topo, side, T, skrOf, nsOf, range, createAll, reached, applied, gone, cmInfo, watched, edit };
}

/** bulkPhase creates n resources and waits for all applied, then for all healthy (two minutes at most). */
async function bulkPhase(r: SideRun, figure: (key: string, v: number) => void): Promise<void> {
  const { side, topo } = r;
  const t0 = performance.now();
  await r.createAll('m', r.range(topo.n));
  await r.applied('m', topo.n);
  figure('bulk', (performance.now() - t0) / 1000);
  try {
    await r.reached('m', topo.n, 'healthy', 120_000);
    figure('bulkHealthy', (performance.now() - t0) / 1000);
  } catch (err) {
    r.ctx.log(`${side.who}: ${(err as Error).message}; no figure`);
  }
  if (side.who === 'peer') {
    // Its configuration was read: the objects carry the managed-by value it names.
    const sample = (await getObject(r.skrOf(0), r.cmInfo, r.nsOf(0), 'b0-a')) as KubeObject | undefined;
    const managedBy = sample?.metadata.labels?.['resources.gardener.cloud/managed-by'];
    if (managedBy !== 'kcp-sync-peer')
      throw new Error(
        `the peer's configuration was not read as written: managed-by is ${JSON.stringify(managedBy)}`,
      );
  }
  await side.quiet();
}

/**
 * editPhases makes edits one after another, idle, then under load: bulk creates of n
 * resources while the edits are made, round after round, each round's deleted before the
 * next (resources piling up would load GRM's one-minute resync of every resource more with
 * each round; no product tick fires meanwhile).
 */
async function editPhases(r: SideRun, figure: (key: string, v: number) => void): Promise<void> {
  const { side, topo } = r;
  const idle: number[] = [];
  for (let e = 0; e < topo.edits; e++) {
    idle.push(await r.edit(e));
    await side.between();
  }
  figure('edit50', pct(idle, 50));
  figure('edit99', pct(idle, 99));
  if (!topo.underLoad) return;
  let loading = true;
  let rounds = 0;
  const loader = (async () => {
    while (loading) {
      const ids = r.range(topo.n, rounds++ * topo.n);
      await r.createAll('l', ids);
      await r.applied('l', topo.n);
      await mapLimit(ids, 32, (i) => side.remove('l', i));
      await r.gone('l');
    }
  })();
  await sleep(1_000);
  const loaded: number[] = [];
  // At most 20: at full size the product's take up to half a minute each.
  for (let e = 0; e < Math.min(topo.edits, 20); e++) loaded.push(await r.edit(topo.edits + e));
  loading = false;
  await loader;
  figure('load50', pct(loaded, 50));
  figure('load99', pct(loaded, 99));
  await side.quiet();
}

/**
 * driftPhase drifts with nothing fired (each side's own watch, or its own resync): 1 % of
 * the objects deleted in the SKRs, each until recreated; then 1 % edited (a field both
 * apply), each until reverted, or 90 s.
 */
async function driftPhase(
  r: SideRun,
  drifted: number[],
  figure: (key: string, v: number) => void,
): Promise<void> {
  const { skrOf, nsOf, cmInfo } = r;
  const latency = async (
    act: (i: number) => Promise<void>,
    done: (o: KubeObject | undefined, i: number) => boolean,
  ) =>
    Promise.all(
      drifted.map(
        async (i) =>
          (await r.watched(
            i,
            () => act(i),
            (o) => done(o, i),
            90_000,
          )) / 1000,
      ),
    );
  const uids = new Map<number, string | undefined>();
  for (const i of drifted) uids.set(i, (await getObject(skrOf(i), cmInfo, nsOf(i), `b${i}-a`))?.metadata.uid);
  const recreated = await latency(
    (i) =>
      skrOf(i)
        .client.call('DELETE', resourcePath(cmInfo, nsOf(i), `b${i}-a`))
        .then(() => undefined),
    (o, i) => o !== undefined && o.metadata.uid !== uids.get(i),
  );
  figure('drift50', pct(recreated, 50));
  figure('drift99', pct(recreated, 99));
  await r.side.quiet();
  const edited = await latency(
    (i) =>
      skrOf(i)
        .client.call('PATCH', resourcePath(cmInfo, nsOf(i), `b${i}-a`), {
          body: { data: { k: 'edited' } },
          contentType: 'application/merge-patch+json',
          query: { fieldManager: 'bench-user' },
        })
        .then(() => undefined),
    (o) => (o?.data as { k?: string } | undefined)?.k === 'v'.repeat(64),
  );
  figure('edited50', pct(edited, 50));
  figure('edited99', pct(edited, 99));
  await r.side.quiet();
}

/**
 * healthPhase: Deployments Progressing until a Node label lets their Pods run; from each
 * turning Available in its SKR until its resource reports it.
 */
async function healthPhase(r: SideRun, figure: (key: string, v: number) => void): Promise<void> {
  const { ctx, side, topo } = r;
  const H = topo.health;
  const key = `bench-health-${side.who}-${topo.id}`;
  await r.createAll('h', r.range(H), (i) => healthWork(r.nsOf(i), i, key));
  await waitFor(
    `${side.who}: health resources progressing`,
    async () => {
      const l = await side.list('h');
      return l.length === H && l.every((s) => s.progressing);
    },
    300_000,
    undefined,
    250,
  );
  await side.quiet();
  const start = Date.now();
  for (const skr of ctx.skrs)
    await skr.client.call('PATCH', `/api/v1/nodes/${ctx.nodeName}`, {
      body: { metadata: { labels: { [key]: 'go' } } },
      contentType: 'application/merge-patch+json',
    });
  const available = new Map<number, number>();
  const reported = new Map<number, number>();
  while (reported.size < H && Date.now() - start < 300_000) {
    const now = Date.now();
    for (const skr of ctx.skrs) {
      const { items } = await skr.client.call<{ items: KubeObject[] }>('GET', '/apis/apps/v1/deployments', {
        query: { labelSelector: `bench-health=${key}` },
      });
      for (const d of items)
        if (
          !available.has(indexOf(d.metadata.name)) &&
          healthOf({ ...d, apiVersion: 'apps/v1', kind: 'Deployment' }).status === 'Current'
        )
          available.set(indexOf(d.metadata.name), now);
    }
    for (const s of await side.list('h')) if (s.healthy && !reported.has(s.i)) reported.set(s.i, now);
    await sleep(100);
  }
  if (reported.size < H) throw new Error(`${side.who}: ${H - reported.size} of ${H} never reported healthy`);
  const lag = [...reported].map(([i, t]) => (t - (available.get(i) ?? t)) / 1000);
  figure('health50', pct(lag, 50));
  figure('health99', pct(lag, 99));
  await mapLimit(r.range(H), 16, (i) => side.remove('h', i));
  await r.gone('h');
}

/** peerComparison runs every scenario for the product and then for GRM, at each topology, and prints each figure for both. */
export async function peerComparison(ctx: PeerContext): Promise<void> {
  const bins = await ensurePeerBinaries(ctx.log);
  await installCrds(ctx.kcp, [bins.crd]);
  const topologies: Topology[] = [
    {
      id: 'a',
      targets: ctx.skrs.length,
      n: ctx.n,
      edits: ctx.edits,
      health: ctx.quick ? 10 : 30,
      underLoad: true,
    },
    {
      id: 'b',
      targets: 100,
      n: ctx.quick ? 200 : 1_000,
      edits: ctx.quick ? 10 : 20,
      health: 0,
      underLoad: false,
    },
  ];
  for (const topo of topologies) {
    // The 1 % of resources whose first ConfigMap both sides have deleted, spread evenly.
    const count = Math.max(1, Math.round(topo.n / 100));
    const drifted = Array.from({ length: count }, (_, j) => Math.floor((j * topo.n) / count));
    const fig: Record<string, { product?: number; peer?: number }> = {};
    for (const side of [productSide(ctx, topo), peerSide(ctx, topo, bins)]) {
      ctx.log(
        `peer comparison, ${topo.targets} targets: ${side.who === 'product' ? 'the product' : `Gardener's resource-manager ${bins.versions.gardener}, one process per target`}`,
      );
      try {
        await runSide(ctx, topo, side, drifted, (key, v) => {
          (fig[key] ??= {})[side.who] = v;
          ctx.log(`${side.who}: ${key} ${v}`);
        });
      } finally {
        await side.stop();
      }
      if (side.who === 'product') await ctx.settle();
    }
    const fmt = (v: number | undefined, unit: string) =>
      v === undefined ? 'n/a' : `${v < 10 ? v.toFixed(2) : v.toFixed(0)}${unit ? ` ${unit}` : ''}`;
    for (const [key, [what, unit]] of Object.entries(figures(topo, drifted.length))) {
      const f = fig[key];
      if (!f) continue;
      const r =
        f.product !== undefined && f.peer !== undefined && f.peer > 0 ? ratio(f.product, f.peer) : 'n/a';
      ctx.row(
        `14 peer, ${topo.targets} targets`,
        `${what}: product / GRM (ratio)`,
        `${fmt(f.product, unit)} / ${fmt(f.peer, unit)} (${r})`,
        '<= 1.0',
      );
    }
  }
}

/** Done tells whether an object, as a watch event has it (undefined once deleted), is what is waited for. */
type Done = (o: KubeObject | undefined) => boolean;

/**
 * timeUntil opens a watch of the object name in the collection at path (its first event is
 * the object as it is, so nothing after is missed), then runs act and returns the ms from
 * act's start until an event makes done true, as `kubectl wait` sees it: no polling grain,
 * the same for both sides. Infinity once timeoutMs passed.
 */
export async function timeUntil(
  c: Cluster,
  path: string,
  name: string,
  act: () => Promise<void>,
  done: Done,
  timeoutMs = 900_000,
): Promise<number> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  let opened!: () => void;
  const open = new Promise<void>((r) => (opened = r));
  let t0: number | undefined;
  const seen = (async () => {
    for await (const { type, object } of c.client.watch<KubeObject>(
      path,
      { fieldSelector: `metadata.name=${name}`, timeoutSeconds: String(Math.ceil(timeoutMs / 1000)) },
      abort.signal,
    )) {
      opened();
      if (type !== 'BOOKMARK' && t0 !== undefined && done(type === 'DELETED' ? undefined : object))
        return performance.now();
    }
    throw new Error(`watch of ${name} ended`);
  })();
  try {
    await Promise.race([open, seen]);
    t0 = performance.now();
    await act();
    return (await seen) - t0;
  } catch (err) {
    if (abort.signal.aborted) return Infinity;
    throw err;
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}
