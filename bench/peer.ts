// peer.ts: the product side by side with a real peer, Gardener's resource-manager (GRM):
// ManagedResources in the KCP (their manifests in Secrets) applied into an SKR, one GRM
// process per target as it must run, built from its Go module (infra/gardener, on the
// first benchmark that needs it). Both get the same workload (bench/workload.ts: five
// objects per resource, the product's Widget status aside, which GRM does not write), one
// after the other on the same clusters, the other idle:
//   - bulk create: N resources until all applied (product: Ready at their generation;
//     GRM: ResourcesApplied True at theirs);
//   - edit: one resource's manifest changed until its SKR object holds the new value
//     (both the same way), idle, p50/p99;
//   - no-op resync: requests to source (KCP) and target (SKR) per resource over one
//     resync (product: one tick fired; GRM: one syncPeriod of a minute, its metrics), and
//     writes among them;
//   - drift of 1 % of the objects (deleted in the SKR) until recreated (product: a resync
//     tick fired at once; GRM: its own one-minute resync, there is nothing to fire);
//   - deletion: all resources deleted until their objects are gone and the resources too;
//   - CPU over each side's scenarios, and peak RSS (product: its functions; GRM: its
//     processes).
// Figures only; each row names both and the ratio product/peer.
import { writeFile, readFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { load, dump } from 'js-yaml';
import { ensurePeerBinaries } from '../infra/binaries.ts';
import type { ClusterSet } from '../infra/clusters.ts';
import { applyObjects, installCrds } from '../infra/kcp-setup.ts';
import { freePort, waitFor } from '../infra/net.ts';
import { startProcess, stopProcess, type Proc } from '../infra/processes.ts';
import type { Runtime } from '../infra/runtime/index.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { getObject, listObjects, mustFind, type Cluster, type KubeObject } from '../lib/kube/objects.ts';
import { syncResourceInfo } from '../lib/kcp.ts';
import type { SyncResource } from '../lib/model.ts';
import { objectsFor, syncResourceFor } from './workload.ts';

/** PeerContext is what the comparison needs of the benchmark's run (bench/run.ts). */
export interface PeerContext {
  set: ClusterSet;
  kcp: Cluster;
  skrs: Cluster[];
  rt: Runtime;
  stateDir: string;
  /** n resources in all, over the SKRs; edits measured per side. */
  n: number;
  edits: number;
  row: (scenario: string, figure: string, value: string, target?: string) => void;
  /** settle waits until the broker has had nothing to deliver for a while. */
  settle: () => Promise<void>;
  /** requests sums the functions' API requests by cluster (kcp/skr) and kind (read/write). */
  requests: () => Promise<Record<string, number>>;
  /** productCpu is the CPU seconds of the product's processes (functions and the event runtime's). */
  productCpu: () => Promise<number>;
  /** productRss is the peak RSS of the product's function processes, summed (MiB). */
  productRss: () => Promise<number>;
  log: (line: string) => void;
}

const MR_API = '/apis/resources.gardener.cloud/v1alpha1';
const KCP_NS = (k: number) => `peer-${k + 1}`;
const TARGET_NS = 'peer';
const PRODUCT_NS = 'cmp';
const SYNC_PERIOD_S = 60;

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)]!;
const ratio = (a: number, b: number) => (b > 0 ? (a / b).toFixed(2) : 'n/a');

interface ManagedResource {
  metadata: { name: string; namespace: string; generation?: number };
  status?: { observedGeneration?: number; conditions?: { type: string; status: string }[] };
}
/** ours tells the workload's objects from what the SKR puts in every namespace (kube-root-ca.crt). */
const ours = (o: KubeObject) => /^b\d+-/.test(o.metadata.name);
const applied = (mr: ManagedResource) =>
  mr.status?.observedGeneration === mr.metadata.generation &&
  mr.status?.conditions?.some((c) => c.type === 'ResourcesApplied' && c.status === 'True') === true;

/** grmConfig is a ResourceManagerConfiguration for one target: every controller but managedResource and health off, every webhook off. */
function grmConfig(opts: {
  source: string;
  target: string;
  namespace: string;
  ports: { webhooks: number; health: number; metrics: number };
  certDir: string;
}): Record<string, unknown> {
  const off = { enabled: false };
  return {
    apiVersion: 'resourcemanager.config.gardener.cloud/v1alpha1',
    kind: 'ResourceManagerConfiguration',
    sourceClientConnection: { kubeconfig: opts.source, namespaces: [opts.namespace], qps: 100, burst: 130 },
    targetClientConnection: { kubeconfig: opts.target, qps: 100, burst: 130 },
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

/** Peer is one GRM process and where it listens. */
interface Peer {
  proc: Proc;
  metrics: number;
  skr: number;
}

async function cpuSeconds(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
async function peakRss(pid: number): Promise<number> {
  return Number(/VmHWM:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
}

/** peerRequests sums GRM's client-go request counter by source/target host and read/write. */
async function peerRequests(peers: Peer[], set: ClusterSet): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const kcpHost = new URL(set.kcp.url).host;
  for (const p of peers) {
    const text = await (await fetch(`http://127.0.0.1:${p.metrics}/metrics`)).text();
    for (const m of text.matchAll(/^rest_client_requests_total\{([^}]*)\} ([\d.e+]+)/gm)) {
      const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
      const who = labels.host === kcpHost ? 'kcp' : 'skr';
      const key = `${who}:${labels.method === 'GET' ? 'read' : 'write'}`;
      out[key] = (out[key] ?? 0) + Number(m[2]);
    }
  }
  return out;
}

const diff = (a: Record<string, number>, b: Record<string, number>) =>
  Object.fromEntries(
    [...new Set([...Object.keys(a), ...Object.keys(b)])].map((k) => [k, (a[k] ?? 0) - (b[k] ?? 0)]),
  );

/** peerComparison runs every scenario for the product and then for GRM, and prints each figure for both. */
export async function peerComparison(ctx: PeerContext): Promise<void> {
  const { set, kcp, skrs, n, row } = ctx;
  const K = skrs.length;
  const bins = await ensurePeerBinaries(ctx.log);
  const dir = join(ctx.stateDir, 'peer');
  await mkdir(dir, { recursive: true });
  await installCrds(kcp, [bins.crd]);
  for (let k = 0; k < K; k++)
    await applyObjects(kcp, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: KCP_NS(k) } }]);
  for (const skr of skrs)
    await applyObjects(skr, [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: TARGET_NS } },
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: PRODUCT_NS } },
    ]);
  const cmInfo = await mustFind(skrs[0]!, 'v1', 'ConfigMap');
  const fig: Record<string, { product: number; peer: number; unit: string; what: string }> = {};
  const both = (key: string, what: string, unit: string, side: 'product' | 'peer', v: number) => {
    (fig[key] ??= { product: NaN, peer: NaN, unit, what })[side] = v;
  };
  /** valueIn polls an SKR ConfigMap until its data.rev is rev; returns the ms it took from t0. */
  const waitRev = async (skr: Cluster, ns: string, name: string, rev: string, t0: number) => {
    for (;;) {
      const o = (await getObject(skr, cmInfo, ns, name)) as { data?: { rev?: string } } | undefined;
      if (o?.data?.rev === rev) return performance.now() - t0;
      await sleep(20);
    }
  };
  const targetOf = (i: number) => i % K;
  // The 1 % of resources whose first ConfigMap both sides have deleted, spread evenly.
  const driftCount = Math.max(1, Math.round(n / 100));
  const drifted = Array.from({ length: driftCount }, (_, j) => Math.floor((j * n) / driftCount));

  // ---- The product ------------------------------------------------------------------
  {
    const label = 'bench-batch=cmp';
    const srBody = (i: number, rev = 1) => {
      const o = syncResourceFor(i, PRODUCT_NS, 'kcp-system', `kyma-${targetOf(i) + 1}`, rev);
      o.metadata.name = `cmp-${i}`;
      o.metadata.labels = { 'bench-batch': 'cmp' };
      return o;
    };
    const srs = async () =>
      (
        await kcp.client.call<{ items: SyncResource[] }>(
          'GET',
          resourcePath(syncResourceInfo, 'kcp-system'),
          {
            query: { labelSelector: label },
          },
        )
      ).items;
    const ready = (s: SyncResource) =>
      s.status?.state === 'Ready' && s.status.observedGeneration === s.metadata.generation;
    const cpu0 = await ctx.productCpu();
    ctx.log('peer comparison: the product');
    let t0 = performance.now();
    await mapLimit(
      Array.from({ length: n }, (_, i) => i),
      32,
      (i) => kcp.client.call('POST', resourcePath(syncResourceInfo, 'kcp-system'), { body: srBody(i) }),
    );
    await waitFor(
      'product bulk',
      async () => (await srs()).filter(ready).length >= n,
      900_000,
      undefined,
      250,
    );
    both(
      'bulk',
      `bulk create, ${n} resources over ${K} SKRs: until all applied`,
      's',
      'product',
      (performance.now() - t0) / 1000,
    );
    await ctx.settle();
    const edits: number[] = [];
    for (let e = 0; e < ctx.edits; e++) {
      const i = e % n;
      const rev = String(e + 2);
      const body = srBody(i, e + 2);
      t0 = performance.now();
      await kcp.client.call('PATCH', resourcePath(syncResourceInfo, 'kcp-system', `cmp-${i}`), {
        body: { spec: body.spec },
        contentType: 'application/merge-patch+json',
      });
      edits.push(await waitRev(skrs[targetOf(i)]!, PRODUCT_NS, `b${i}-a`, rev, t0));
      // Idle edits: each after the last one's status and echoes are through.
      await ctx.rt.broker.idle(60_000);
    }
    both('edit50', 'edit until the SKR object changed, idle: p50', 'ms', 'product', pct(edits, 50));
    both('edit99', 'edit: p99', 'ms', 'product', pct(edits, 99));
    // A no-op resync: every SyncResource of the system is reconciled by a tick; per resource.
    const all = (
      await kcp.client.call<{ items: unknown[] }>('GET', resourcePath(syncResourceInfo, 'kcp-system'))
    ).items.length;
    const r0 = await ctx.requests();
    ctx.rt.ping[0]!.fire();
    await sleep(500);
    await ctx.settle();
    const r = diff(await ctx.requests(), r0);
    both(
      'noopKcp',
      'no-op resync: source (KCP) requests per resource',
      '',
      'product',
      ((r['kcp:read'] ?? 0) + (r['kcp:write'] ?? 0)) / all,
    );
    both(
      'noopSkr',
      'no-op resync: target (SKR) requests per resource',
      '',
      'product',
      ((r['skr:read'] ?? 0) + (r['skr:write'] ?? 0)) / all,
    );
    both('noopWrites', 'no-op resync: writes', '', 'product', (r['kcp:write'] ?? 0) + (r['skr:write'] ?? 0));
    // Drift: 1 % of the objects deleted in the SKRs, until recreated.
    t0 = performance.now();
    for (const i of drifted)
      await skrs[targetOf(i)]!.client.call('DELETE', resourcePath(cmInfo, PRODUCT_NS, `b${i}-a`));
    ctx.rt.ping[0]!.fire();
    await Promise.all(
      drifted.map((i) =>
        waitFor(
          'drift',
          async () => (await getObject(skrs[targetOf(i)]!, cmInfo, PRODUCT_NS, `b${i}-a`)) !== undefined,
          600_000,
          undefined,
          50,
        ),
      ),
    );
    both(
      'drift',
      `drift of 1 % (${drifted.length} objects deleted) until recreated`,
      's',
      'product',
      (performance.now() - t0) / 1000,
    );
    await ctx.settle();
    // Deletion.
    t0 = performance.now();
    await mapLimit(
      Array.from({ length: n }, (_, i) => i),
      32,
      (i) => kcp.client.call('DELETE', resourcePath(syncResourceInfo, 'kcp-system', `cmp-${i}`)),
    );
    await waitFor('product deletion', async () => (await srs()).length === 0, 900_000, undefined, 250);
    await waitFor(
      'product objects gone',
      async () =>
        (await Promise.all(skrs.map((s) => listObjects(s, cmInfo, { namespace: PRODUCT_NS })))).every(
          (l) => l.filter(ours).length === 0,
        ),
      300_000,
    );
    both(
      'delete',
      'deletion of all until their objects are gone',
      's',
      'product',
      (performance.now() - t0) / 1000,
    );
    both('cpu', 'CPU over these scenarios', 's', 'product', (await ctx.productCpu()) - cpu0);
    both('rss', 'peak RSS, all processes', 'MiB', 'product', await ctx.productRss());
    await ctx.settle();
  }

  // ---- The peer -----------------------------------------------------------------------
  const peers: Peer[] = [];
  try {
    ctx.log(`peer comparison: Gardener's resource-manager ${bins.versions.gardener}, one process per SKR`);
    for (let k = 0; k < K; k++) {
      const ports = { webhooks: await freePort(), health: await freePort(), metrics: await freePort() };
      const config = grmConfig({
        source: set.kcp.kubeconfigFile,
        target: set.skrs[k]!.kubeconfigFile,
        namespace: KCP_NS(k),
        ports,
        certDir: bins.certDir,
      });
      const file = join(dir, `grm-${k + 1}.yaml`);
      await writeFile(file, dump(config));
      // The file read back is the configuration written (no key dropped by the dump).
      if (JSON.stringify(load(await readFile(file, 'utf8'))) !== JSON.stringify(config))
        throw new Error(`${file} does not read back as written`);
      const proc = startProcess(
        'gardener-resource-manager',
        `skr-${k + 1}`,
        bins.resourceManager,
        [`--config=${file}`],
        {
          logDir: dir,
        },
      );
      peers.push({ proc, metrics: ports.metrics, skr: k });
      await waitFor(
        `gardener-resource-manager for skr-${k + 1} (log: ${proc.logFile})`,
        async () => (await fetch(`http://127.0.0.1:${ports.health}/readyz`)).ok,
        120_000,
        () => (proc.child.exitCode !== null ? `exited with ${proc.child.exitCode}` : undefined),
        250,
      );
    }
    const cpu = async () =>
      (await Promise.all(peers.map((p) => cpuSeconds(p.proc.pid)))).reduce((a, b) => a + b, 0);
    const cpu0 = await cpu();
    const secretOf = (i: number, rev = 1) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: `mr-${i}`, namespace: KCP_NS(targetOf(i)) },
      type: 'Opaque',
      stringData: {
        'objects.yaml': objectsFor(i, TARGET_NS, rev)
          .objects.map((o) => dump(o))
          .join('---\n'),
      },
    });
    const mrOf = (i: number) => ({
      apiVersion: 'resources.gardener.cloud/v1alpha1',
      kind: 'ManagedResource',
      metadata: { name: `mr-${i}`, namespace: KCP_NS(targetOf(i)) },
      spec: { secretRefs: [{ name: `mr-${i}` }] },
    });
    const mrs = async () =>
      (
        await Promise.all(
          Array.from({ length: K }, (_, k) =>
            kcp.client.call<{ items: ManagedResource[] }>(
              'GET',
              `${MR_API}/namespaces/${KCP_NS(k)}/managedresources`,
            ),
          ),
        )
      ).flatMap((l) => l.items);
    const quiet = () => sleep(3_000);
    let t0 = performance.now();
    await mapLimit(
      Array.from({ length: n }, (_, i) => i),
      32,
      async (i) => {
        await kcp.client.call('POST', `/api/v1/namespaces/${KCP_NS(targetOf(i))}/secrets`, {
          body: secretOf(i),
        });
        await kcp.client.call('POST', `${MR_API}/namespaces/${KCP_NS(targetOf(i))}/managedresources`, {
          body: mrOf(i),
        });
      },
    );
    await waitFor(
      'peer bulk',
      async () => (await mrs()).filter(applied).length >= n,
      900_000,
      undefined,
      250,
    );
    both('bulk', '', 's', 'peer', (performance.now() - t0) / 1000);
    // Its configuration was read: the objects carry the managed-by value it names.
    const sample = (await getObject(skrs[0]!, cmInfo, TARGET_NS, 'b0-a')) as KubeObject | undefined;
    const managedBy = sample?.metadata.labels?.['resources.gardener.cloud/managed-by'];
    if (managedBy !== 'kcp-sync-peer')
      throw new Error(
        `the peer's configuration was not read as written: managed-by is ${JSON.stringify(managedBy)}`,
      );
    await quiet();
    const edits: number[] = [];
    for (let e = 0; e < ctx.edits; e++) {
      const i = e % n;
      const rev = String(e + 2);
      t0 = performance.now();
      await kcp.client.call('PUT', `/api/v1/namespaces/${KCP_NS(targetOf(i))}/secrets/mr-${i}`, {
        body: secretOf(i, e + 2),
      });
      edits.push(await waitRev(skrs[targetOf(i)]!, TARGET_NS, `b${i}-a`, rev, t0));
      await sleep(1_000);
    }
    both('edit50', '', 'ms', 'peer', pct(edits, 50));
    both('edit99', '', 'ms', 'peer', pct(edits, 99));
    // A no-op resync: one syncPeriod (and a little) with nothing changed.
    const r0 = await peerRequests(peers, set);
    await sleep((SYNC_PERIOD_S + 5) * 1000);
    const r = diff(await peerRequests(peers, set), r0);
    both('noopKcp', '', '', 'peer', ((r['kcp:read'] ?? 0) + (r['kcp:write'] ?? 0)) / n);
    both('noopSkr', '', '', 'peer', ((r['skr:read'] ?? 0) + (r['skr:write'] ?? 0)) / n);
    both('noopWrites', '', '', 'peer', (r['kcp:write'] ?? 0) + (r['skr:write'] ?? 0));
    t0 = performance.now();
    for (const i of drifted)
      await skrs[targetOf(i)]!.client.call('DELETE', resourcePath(cmInfo, TARGET_NS, `b${i}-a`));
    await Promise.all(
      drifted.map((i) =>
        waitFor(
          'drift',
          async () => (await getObject(skrs[targetOf(i)]!, cmInfo, TARGET_NS, `b${i}-a`)) !== undefined,
          600_000,
          undefined,
          50,
        ),
      ),
    );
    both('drift', '', 's', 'peer', (performance.now() - t0) / 1000);
    await quiet();
    t0 = performance.now();
    await mapLimit(
      Array.from({ length: n }, (_, i) => i),
      32,
      (i) =>
        kcp.client.call('DELETE', `${MR_API}/namespaces/${KCP_NS(targetOf(i))}/managedresources/mr-${i}`),
    );
    await waitFor('peer deletion', async () => (await mrs()).length === 0, 900_000, undefined, 250);
    await waitFor(
      'peer objects gone',
      async () =>
        (await Promise.all(skrs.map((s) => listObjects(s, cmInfo, { namespace: TARGET_NS })))).every(
          (l) => l.filter(ours).length === 0,
        ),
      300_000,
    );
    both('delete', '', 's', 'peer', (performance.now() - t0) / 1000);
    both('cpu', '', 's', 'peer', (await cpu()) - cpu0);
    both(
      'rss',
      '',
      'MiB',
      'peer',
      (await Promise.all(peers.map((p) => peakRss(p.proc.pid)))).reduce((a, b) => a + b, 0),
    );
  } finally {
    await Promise.all(peers.map((p) => stopProcess(p.proc)));
  }
  const fmt = (v: number, unit: string) =>
    Number.isNaN(v) ? 'n/a' : `${v < 10 ? v.toFixed(2) : v.toFixed(0)}${unit ? ` ${unit}` : ''}`;
  for (const f of Object.values(fig))
    row(
      '14 peer',
      `${f.what}: product / GRM (ratio)`,
      `${fmt(f.product, f.unit)} / ${fmt(f.peer, f.unit)} (${f.unit === '' && f.peer === 0 ? 'n/a' : ratio(f.product, f.peer)})`,
      '<= 1.0',
    );
}
