// The fault suite: a private KCP + 2 SKRs and the whole pipeline on Knative's own
// eventing (real.ts: its controllers, broker, channel, adapters; each function replica
// behind Serving's queue-proxy), under an SKR API server killed mid-run, a KCP restart,
// function processes killed at random and a concurrent writer; then, on the broker
// stand-in (which alone can inject them), duplicated, delayed and reordered deliveries.
// Each time the system converges to exactly the desired state, orphans nothing and leaks
// no credential.
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterSet } from '../infra/clusters.ts';
import { connect, setupKcp } from '../infra/kcp-setup.ts';
import { watchPath } from '../infra/runtime/adapter.ts';
import { startRuntime, type Runtime } from '../infra/runtime/index.ts';
import { PatchType } from '../lib/kube/client.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { listObjects, mustFind, type Cluster } from '../lib/kube/objects.ts';
import { syncResourceInfo } from '../lib/kcp.ts';
import { MANAGED_BY_LABEL, SYNC_API_VERSION, type SyncResource } from '../lib/model.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { credentialFragments, eventually, uniqueName } from './helpers.ts';

let set: ClusterSet;
let stateDir: string;
let runtime: Runtime;
let kcp: Cluster;
let skrs: Cluster[];
const NS = 'kcp-system';
// The restarts wait on API servers and on client-go's watch backoff; on a loaded 2-core
// machine that takes minutes, longer than the suite's default of 2.
const FAULT_TIMEOUT_MS = 300_000;

const cm = (name: string, v: string) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: 'default' },
    data: { v },
  });
const srBody = (name: string, kyma: string, v = '1', n = 2) => ({
  apiVersion: 'operator.kyma-project.io/v1alpha1',
  kind: 'SyncResource',
  metadata: { name, namespace: NS },
  spec: {
    kyma,
    items: Array.from({ length: n }, (_, i) => ({
      name: `i${i}`,
      strategy: 'CreateAndSync',
      resource: cm(`${name}-${i}`, v),
    })),
  },
});
const create = (bodies: object[]) =>
  mapLimit(bodies, 16, (b) => kcp.client.call('POST', resourcePath(syncResourceInfo, NS), { body: b }));
const list = async (prefix: string) =>
  (await kcp.client.call<{ items: SyncResource[] }>('GET', resourcePath(syncResourceInfo, NS))).items.filter(
    (s) => s.metadata.name.startsWith(prefix),
  );
const ready = (s: SyncResource) =>
  s.status?.state === 'Ready' && s.status.observedGeneration === s.metadata.generation;

/** settle fires resync ticks and waits for the broker to drain, n times. */
async function resync(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    await runtime.broker.idle(120_000);
    runtime.ping[0]!.fire();
    await new Promise((r) => setTimeout(r, 200));
    await runtime.broker.idle(120_000);
  }
}

/** skrSourcePods names the SKR source's Pods that are not being deleted. */
async function skrSourcePods(): Promise<string[]> {
  const pods = await kcp.client.call<{
    items: { metadata: { name: string; deletionTimestamp?: string } }[];
  }>('GET', `/api/v1/namespaces/${NS}/pods`, {
    query: { labelSelector: 'app.kubernetes.io/name=sync-skr-source' },
  });
  return pods.items.filter((x) => !x.metadata.deletionTimestamp).map((x) => x.metadata.name);
}

/** ours lists the ConfigMaps in an SKR that carry our label, by name. */
async function ours(skr: Cluster): Promise<Map<string, string>> {
  const all = await listObjects(skr, await mustFind(skr, 'v1', 'ConfigMap'), {
    namespace: 'default',
    labelSelector: MANAGED_BY_LABEL,
  });
  return new Map(all.map((o) => [o.metadata.name, (o.data as { v: string }).v]));
}

async function startPipeline(chaos?: { duplicate: number; maxDelayMs: number }): Promise<void> {
  // Knative's retry rules with a short backoff, so a dead SKR's retries end quickly.
  runtime = await startRuntime({
    kubeconfig: set.kcp.kubeconfigFile,
    stateDir,
    pingIntervalMs: 24 * 3600_000,
    delivery: { retry: 3, backoffPolicy: 'exponential', backoffDelay: 'PT0.1S' },
    ...(chaos ? { chaos, knative: 'emulated' } : { knative: 'real' }),
  });
  runtime.broker.observe = true;
}

describe('fault suite', () => {
  beforeAll(async () => {
    stateDir = await mkdtemp(join(tmpdir(), 'kcp-sync-faults-'));
    set = await ClusterSet.start({ skrs: 2, stateDir });
    await setupKcp(set);
    kcp = await connect(set.kcp.kubeconfig, 'kcp');
    skrs = await Promise.all(set.skrs.map((s, i) => connect(s.kubeconfig, `skr-${i + 1}`)));
    await startPipeline();
  });
  afterAll(async () => {
    await runtime?.stop();
    for (const c of [kcp, ...(skrs ?? [])]) await c?.client.close();
    await set?.stop();
    await rm(stateDir, { recursive: true, force: true });
  });

  it(
    'an SKR API server killed mid-apply: its SyncResources go to ClusterUnreachable, the other SKR is unaffected, and after a restart all converge within two resyncs',
    async () => {
      const p = uniqueName('kill');
      const A = 30;
      await create(Array.from({ length: A }, (_, i) => srBody(`${p}-a${i}`, 'kyma-1')));
      await create(Array.from({ length: 5 }, (_, i) => srBody(`${p}-b${i}`, 'kyma-2')));
      await eventually(
        async () => expect((await list(`${p}-a`)).filter(ready).length).toBeGreaterThanOrEqual(5),
        60_000,
        50,
      );
      const skr1 = set.cluster('skr-1');
      const processesBefore = [skr1.controllerManager, ...skr1.workloads].map((x) => x.pid);
      // The SKR comes back whatever happens here, so a failure stays this test's alone.
      await set.killApiServer('skr-1');
      try {
        await resync(1);
        await eventually(
          async () => {
            const a = await list(`${p}-a`);
            expect(a.map((s) => s.status?.conditions?.[0]?.reason)).toEqual(
              Array(A).fill('ClusterUnreachable'),
            );
            expect(a.every((s) => s.status?.state === 'Error')).toBe(true);
          },
          60_000,
          250,
        );
        expect((await list(`${p}-b`)).filter(ready)).toHaveLength(5);
        // The circuit is open (the status says ClusterUnreachable): a tick is one delivery of
        // the Kyma's batch, answered without asking for redelivery, and its runs stop at the
        // first that finds the SKR down.
        const key = `${NS}/kyma-1`;
        const before = { ...(runtime.broker.byObject.get(key) ?? { attempts: 0, failures: 0 }) };
        await resync(1);
        const after = runtime.broker.byObject.get(key)!;
        expect(after.failures - before.failures, 'redeliveries of kyma-1').toBe(0);
        // resolve-cluster's delivery and apply-items' one.
        expect(after.attempts - before.attempts, 'deliveries for kyma-1').toBe(2);
        expect((await list(`${p}-a`)).every((s) => s.status?.state === 'Error')).toBe(true);
      } finally {
        await set.restartApiServer('skr-1');
      }
      // The SKR is whole again at once: its controller-manager, scheduler and KWOK started
      // anew with its API server (left running, they sat out client-go's back-off, and new
      // Deployments turned Available up to a minute later), and it runs a Deployment.
      const processesAfter = [skr1.controllerManager, ...skr1.workloads].map((x) => x.pid);
      expect(processesAfter).toHaveLength(3);
      for (const [i, pid] of processesAfter.entries()) expect(pid).not.toBe(processesBefore[i]);
      const deployment = `/apis/apps/v1/namespaces/default/deployments/${p}-after`;
      await skrs[0]!.client.call('POST', '/apis/apps/v1/namespaces/default/deployments', {
        body: {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: { name: `${p}-after`, namespace: 'default' },
          spec: {
            selector: { matchLabels: { app: `${p}-after` } },
            template: {
              metadata: { labels: { app: `${p}-after` } },
              spec: { containers: [{ name: 'c', image: 'example.invalid/c' }] },
            },
          },
        },
      });
      await eventually(async () => {
        const d = await skrs[0]!.client.call<{ status?: { availableReplicas?: number } }>('GET', deployment);
        expect(d.status?.availableReplicas).toBe(1);
      });
      await skrs[0]!.client.call('DELETE', deployment);
      await resync(2);
      const a = await list(`${p}-a`);
      expect(a.filter(ready)).toHaveLength(A);
      // Exactly the desired objects: each recorded once, none unrecorded.
      const recorded = a.flatMap((s) => (s.status?.synced ?? []).map((e) => e.name)).sort();
      expect(new Set(recorded).size).toBe(recorded.length);
      const live = [...(await ours(skrs[0]!)).keys()].filter((n) => n.startsWith(`${p}-`)).sort();
      expect(live).toEqual(recorded);
      expect(live).toHaveLength(2 * A);
      // The SKR source's watches on skr-1 resumed (after their back-off): an object deleted
      // there now is back with no resync tick.
      const cmPath = `/api/v1/namespaces/default/configmaps/${p}-a0-0`;
      const gone = await skrs[0]!.client.call<{ metadata: { uid: string } }>('GET', cmPath);
      await skrs[0]!.client.call('DELETE', cmPath);
      await eventually(
        async () => {
          const back = await skrs[0]!.client.call<{ metadata: { uid: string } }>('GET', cmPath);
          expect(back.metadata.uid).not.toBe(gone.metadata.uid);
        },
        90_000,
        250,
      );
    },
    FAULT_TIMEOUT_MS,
  );

  it(
    'a KCP API server restart: the adapters watch again, what they missed is caught up by one resync, no function crashes',
    async () => {
      const pids = runtime.functions.map((f) => f.proc.pid);
      const watchesBefore = runtime.proxy!.watched.length;
      await set.restartApiServer('kcp');
      // Created while the adapters' watches are broken: the real adapter may relist and then
      // reports nothing for it (its store ignores lists) ...
      const name = uniqueName('after-kcp');
      await eventually(() => create([srBody(name, 'kyma-2')]), 30_000, 500);
      // ... but its watches come back (client-go's reflector, with its backoff) ...
      const srWatch = watchPath(NS, { apiVersion: SYNC_API_VERSION, kind: 'SyncResource' });
      await eventually(
        async () => expect(runtime.proxy!.watched.slice(watchesBefore)).toContain(srWatch),
        90_000,
        250,
      );
      // ... and the next resync tick catches it up.
      await resync(1);
      await eventually(async () => expect((await list(name)).filter(ready)).toHaveLength(1), 60_000, 250);
      // Once a watch has settled (the first may still end in a relist), a change arrives as
      // an event again, no tick needed: some new SyncResource soon gets Ready by itself.
      await eventually(
        async () => {
          const next = uniqueName('after-kcp');
          await create([srBody(next, 'kyma-2')]);
          await eventually(async () => expect((await list(next)).filter(ready)).toHaveLength(1), 5_000, 250);
        },
        90_000,
        0,
      );
      expect(runtime.functions.map((f) => f.proc.child.exitCode)).toEqual(pids.map(() => null));
      expect(runtime.functions.map((f) => f.proc.pid)).toEqual(pids);
    },
    FAULT_TIMEOUT_MS,
  );

  it('function processes killed with SIGKILL during a bulk create: redelivery and resync converge to the exact desired state', async () => {
    const p = uniqueName('sigkill');
    const creating = create(
      Array.from({ length: 40 }, (_, i) => srBody(`${p}-${i}`, `kyma-${(i % 2) + 1}`, 'x')),
    );
    for (const [i, svc] of [
      'sync-apply-items',
      'sync-write-status',
      'sync-resolve-cluster',
      'sync-apply-items',
    ].entries()) {
      await new Promise((r) => setTimeout(r, 150 + Math.random() * 400));
      await runtime.restartFunction(svc, i % 2);
    }
    await creating;
    await resync(2);
    const srs = await list(p);
    expect(srs.filter(ready)).toHaveLength(40);
    for (const [i, skr] of skrs.entries()) {
      const live = [...(await ours(skr))].filter(([n]) => n.startsWith(`${p}-`));
      const want = srs
        .filter((s) => s.spec.kyma === `kyma-${i + 1}`)
        .flatMap((s) => [0, 1].map((j) => `${s.metadata.name}-${j}`))
        .sort();
      expect(live.map(([n]) => n).sort()).toEqual(want);
      expect(live.every(([, v]) => v === 'x')).toBe(true);
    }
  });

  it('a rollout of the SKR source while SyncResources are created one after another: each reaches Ready with no resync tick', async () => {
    // Ticks are a day apart here: a creation the source does not post stays unreconciled.
    // The replicas of the new ReplicaSet take the Kymas over from those that stop (SIGTERM:
    // each gives its Lease up), one at a time, while the SyncResources come in.
    const p = uniqueName('rollout');
    const before = new Set(await skrSourcePods());
    await kcp.client.call('PATCH', `/apis/apps/v1/namespaces/${NS}/deployments/sync-skr-source`, {
      body: { spec: { template: { metadata: { annotations: { 'test/rolled': p } } } } },
      contentType: PatchType.merge,
    });
    for (let i = 0; i < 24; i++) {
      await create([srBody(`${p}-${i}`, `kyma-${(i % 2) + 1}`)]);
      await new Promise((r) => setTimeout(r, 500));
    }
    await eventually(
      async () => {
        const pods = await skrSourcePods();
        expect(pods).toHaveLength(2);
        expect(pods.filter((n) => before.has(n))).toEqual([]);
      },
      120_000,
      500,
    );
    await eventually(async () => expect((await list(p)).filter(ready)).toHaveLength(24), 120_000, 500);
  });

  it('a concurrent writer on the same SyncResource: conflicts are retried, nothing of either writer is lost', async () => {
    const name = uniqueName('contended');
    await create([srBody(name, 'kyma-1', '1', 8)]);
    const other = (async () => {
      for (let i = 0; i < 40; i++) {
        await kcp.client.call('PATCH', resourcePath(syncResourceInfo, NS, name), {
          body: { metadata: { annotations: { 'example.com/other-writer': String(i) } } },
          contentType: 'application/merge-patch+json',
        });
      }
    })();
    for (const v of ['2', '3']) {
      await kcp.client.call('PATCH', resourcePath(syncResourceInfo, NS, name), {
        body: { spec: srBody(name, 'kyma-1', v, 8).spec },
        contentType: 'application/merge-patch+json',
      });
      await new Promise((r) => setTimeout(r, 100));
    }
    await other;
    await resync(1);
    const [sr] = await list(name);
    expect(ready(sr!)).toBe(true);
    expect(sr!.metadata.annotations?.['example.com/other-writer']).toBe('39');
    expect(sr!.status?.synced?.map((e) => e.name).sort()).toEqual(
      Array.from({ length: 8 }, (_, i) => `${name}-${i}`).sort(),
    );
    const live = await ours(skrs[0]!);
    for (let i = 0; i < 8; i++) expect(live.get(`${name}-${i}`)).toBe('3');
  });

  it('a chaotic broker (duplicates, delays, reordering) ends identical to a clean run, and no older generation status ever follows a newer one', async () => {
    await runtime.stop();
    await startPipeline({ duplicate: 0.4, maxDelayMs: 400 });
    const p = uniqueName('chaos');
    const names = Array.from({ length: 10 }, (_, i) => `${p}-${i}`);
    // Record every status version the KCP holds (a watch sees each write).
    const history = new Map<string, number[]>();
    const abort = new AbortController();
    const info = syncResourceInfo;
    const watching = (async () => {
      try {
        for await (const { object: o } of kcp.client.watch<SyncResource>(
          resourcePath(info, NS),
          {},
          abort.signal,
        )) {
          const g = o.status?.observedGeneration;
          if (g !== undefined && o.metadata.name.startsWith(p))
            history.set(o.metadata.name, [...(history.get(o.metadata.name) ?? []), g]);
        }
      } catch {
        /* aborted */
      }
    })();
    await create(names.map((n) => srBody(n, 'kyma-2', '1', 3)));
    for (const v of ['2', '3']) {
      await new Promise((r) => setTimeout(r, 300));
      await mapLimit(names, 10, (n) =>
        kcp.client.call('PATCH', resourcePath(info, NS, n), {
          body: { spec: srBody(n, 'kyma-2', v, 3).spec },
          contentType: 'application/merge-patch+json',
        }),
      );
    }
    await resync(2);
    abort.abort();
    await watching;
    const srs = await list(p);
    expect(srs.filter(ready)).toHaveLength(10);
    expect(srs.every((s) => s.metadata.generation === 3 && s.status?.observedGeneration === 3)).toBe(true);
    const live = await ours(skrs[1]!);
    for (const n of names) for (let i = 0; i < 3; i++) expect(live.get(`${n}-${i}`)).toBe('3');
    expect([...live.keys()].filter((k) => k.startsWith(`${p}-`))).toHaveLength(30);
    for (const [n, gens] of history) expect(gens, n).toEqual([...gens].sort((a, b) => a - b));
    expect(runtime.broker.stats.received).toBeGreaterThan(0);
    // Two replicas of every function, and each replica of each step took part.
    for (const svc of ['sync-resolve-cluster', 'sync-apply-items', 'sync-write-status']) {
      const replicas = runtime.functions.filter((f) => f.service === svc);
      expect(replicas, svc).toHaveLength(2);
      for (const f of replicas)
        expect(runtime.broker.byReplica.get(f.url), `${svc} replica ${f.replica}`).toBeGreaterThan(0);
    }
  });

  it('leaks no credential byte into logs, events, status or Kubernetes Events during the fault suite', async () => {
    const secrets = set.skrs.flatMap((skr) => credentialFragments(skr.kubeconfig));
    const logs = await Promise.all(
      (await readdir(join(stateDir, 'logs'))).map((f) => readFile(join(stateDir, 'logs', f), 'utf8')),
    );
    const captured = {
      logs: logs.join('\n'),
      events: JSON.stringify(runtime.broker.observed),
      status: JSON.stringify(await list('')),
      kubeEvents: JSON.stringify(
        await kcp.client.call('GET', `/apis/events.k8s.io/v1/namespaces/${NS}/events`),
      ),
    };
    for (const [where, text] of Object.entries(captured)) {
      expect(text.length, where).toBeGreaterThan(100);
      for (const s of secrets) expect(text.includes(s), `${where} holds credential bytes`).toBe(false);
    }
  });
});
