// The request budget of a no-op resync (issue 16), counted on the real KCP and SKR with
// the function handlers called in-process as the broker would: a tick costs each Kyma one
// KCP request (the list of its SyncResources) plus a few per namespace (the names-only walk
// and the snapshots of Kymas and access Secrets), two deliveries (resolve-cluster and
// apply-items) and one SKR request per kind and namespace of its objects; nothing is
// written anywhere and nothing goes to the status step. Two "replicas" (two sets of
// per-process state) share the Kymas and keep to the same budget.
import { ProcessState } from '../lib/pipeline/process.ts';
import { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { handle as applyItems } from '../functions/apply-items/index.ts';
import { handle as resolveCluster } from '../functions/resolve-cluster/index.ts';
import { handle as resync } from '../functions/resync/index.ts';
import { handle as writeStatus } from '../functions/write-status/index.ts';
import { setDeps } from '../functions/deps.ts';
import { applyObjects, connect, kymaObjects } from '../infra/kcp-setup.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { ClientCache } from '../lib/cluster/cache.ts';
import { Lookups } from '../lib/cluster/resolve.ts';
import { parseConfig } from '../lib/config.ts';
import { EventTypes } from '../lib/events/contract.ts';
import { KcpStore, syncResourceInfo } from '../lib/kcp.ts';
import type { Cluster } from '../lib/kube/objects.ts';
import { Recorder } from '../lib/kube/recorder.ts';
import type { SyncResource } from '../lib/model.ts';
import { fanoutsDone } from '../lib/pipeline/fanout.ts';
import type { Deps } from '../lib/pipeline/deps.ts';
import { cluster, uniqueName } from './helpers.ts';

const KYMAS = 4;
const PER_KYMA = 5;
const ctx = {} as Context;
const ns = uniqueName('budget');
const skrNs = uniqueName('budget');

/** Counted is one replica's per-process state, with its API requests counted. */
interface Counted {
  deps: Deps;
  kcp: Cluster;
  /** ours are its KCP requests but those into other tests' team namespaces (SyncPolicies are cluster-wide). */
  ours: { requests: number; writes: number };
  skr: { reads: number; writes: number };
}

let kcpAdmin: Cluster;
let replicas: Counted[] = [];
const sent: CloudEvent<unknown>[] = [];

async function replica(): Promise<Counted> {
  const config = { ...parseConfig({}), controlPlaneNamespaces: [ns] };
  // A client of its own, so its requests are this replica's. The tick also walks the team
  // namespaces another test file's SyncPolicies name meanwhile: requests into them are not
  // this test's budget.
  const ours = { requests: 0, writes: 0 };
  const kcp = await connect(inject('clusters').kcp.kubeconfig, 'kcp', {
    onRequest: (info) => {
      const namespace = /\/namespaces\/([^/]+)/.exec(info.path)?.[1];
      if (namespace !== undefined && namespace !== ns) return;
      ours.requests++;
      if (info.write) ours.writes++;
    },
  });
  const skr = { reads: 0, writes: 0 };
  const cache = new ClientCache(config, {
    onRequest: (info) => {
      if (info.write) skr.writes++;
      else skr.reads++;
    },
  });
  const deps: Deps = {
    config,
    kcp,
    store: new KcpStore(kcp, config.fieldManager),
    cache,
    lookups: new Lookups(kcp),
    recorder: new Recorder(kcp, 'test'),
    process: new ProcessState(config),
    send: async (e) => {
      sent.push(e);
    },
    log: { info() {}, warn() {}, error() {} },
  };
  return { deps, kcp, ours, skr };
}

/** on runs a handler in replica r's process state. */
async function on<T>(r: Counted, fn: () => Promise<T>): Promise<T> {
  setDeps(r.deps);
  const out = await fn();
  await fanoutsDone(r.deps);
  return out;
}

/**
 * tick delivers a ping and everything it leads to, as the broker would, spreading the
 * deliveries over the replicas in turn; returns the deliveries by event type.
 */
async function tick(): Promise<Record<string, number>> {
  const deliveries: Record<string, number> = {};
  let turn = 0;
  const deliver = async (e: CloudEvent<unknown>) => {
    // Requests for another test's team namespaces are not delivered: not this test's, nor its budget.
    const namespace = (e.data as { namespace?: string } | undefined)?.namespace;
    if (namespace !== undefined && namespace !== ns) return;
    deliveries[e.type] = (deliveries[e.type] ?? 0) + 1;
    const r = replicas[turn++ % replicas.length]!;
    const before = sent.length;
    if (e.type === 'dev.knative.sources.ping') await on(r, () => resync(ctx, e));
    else if (e.type === EventTypes.reconcileKyma || e.type === EventTypes.reconcile) {
      const reply = await on(r, () => resolveCluster(ctx, e));
      if (reply) sent.push(reply);
    } else if (e.type === EventTypes.kymaResolved || e.type === EventTypes.clusterResolved) {
      const reply = await on(r, () => applyItems(ctx, e));
      if (reply) sent.push(reply);
    } else if (e.type === EventTypes.itemsApplied) await on(r, () => writeStatus(ctx, e));
    for (const next of sent.splice(before)) await deliver(next);
  };
  await deliver(
    new CloudEvent({
      type: 'dev.knative.sources.ping',
      source: '/apis/v1/namespaces/x/pingsources/p',
      data: {},
    }),
  );
  return deliveries;
}

const count = () =>
  replicas.reduce(
    (a, r) => ({
      kcp: a.kcp + r.ours.requests,
      kcpWrites: a.kcpWrites + r.ours.writes,
      skr: a.skr + r.skr.reads + r.skr.writes,
      skrWrites: a.skrWrites + r.skr.writes,
    }),
    { kcp: 0, kcpWrites: 0, skr: 0, skrWrites: 0 },
  );

describe('no-op resync request budget', () => {
  beforeAll(async () => {
    kcpAdmin = await cluster('kcp');
    const skr = await cluster(0);
    await applyObjects(skr, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: skrNs } }]);
    await applyObjects(kcpAdmin, [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
      ...Array.from({ length: KYMAS }, (_, k) =>
        kymaObjects(`kyma-${k}`, inject('clusters').skrs[0]!.kubeconfig, ns),
      ).flat(),
    ]);
    replicas = [await replica(), await replica()];
    // Each SyncResource: two ConfigMaps and a ServiceAccount, in one namespace of the SKR.
    for (let k = 0; k < KYMAS; k++) {
      for (let j = 0; j < PER_KYMA; j++) {
        const name = `sr-${k}-${j}`;
        const obj = (kind: string, n: string) =>
          JSON.stringify({
            apiVersion: 'v1',
            kind,
            metadata: { name: n, namespace: skrNs },
            ...(kind === 'ConfigMap' ? { data: { a: '1' } } : {}),
          });
        await kcpAdmin.client.call('POST', resourcePath(syncResourceInfo, ns), {
          body: {
            apiVersion: 'operator.kyma-project.io/v1alpha1',
            kind: 'SyncResource',
            metadata: { name, namespace: ns },
            spec: {
              kyma: `kyma-${k}`,
              items: [
                { name: 'a', strategy: 'CreateAndSync', resource: obj('ConfigMap', `${name}-a`) },
                { name: 'b', strategy: 'CreateAndSync', resource: obj('ConfigMap', `${name}-b`) },
                { name: 'c', strategy: 'CreateAndSync', resource: obj('ServiceAccount', `${name}-c`) },
              ],
            },
          },
        });
      }
    }
    // The first tick runs them all (unlabelled: each on its own), the second records the
    // items as Unchanged; after that, ticks change nothing.
    await tick();
    await tick();
  });
  afterAll(async () => {
    setDeps(replicas[0]!.deps);
    for (const r of replicas) {
      await r.deps.cache.closeAll();
      await r.kcp.client.close();
    }
  });

  it('every SyncResource is Ready and labelled for its Kyma', async () => {
    const list = await kcpAdmin.client.call<{ items: SyncResource[] }>(
      'GET',
      resourcePath(syncResourceInfo, ns),
    );
    expect(list.items).toHaveLength(KYMAS * PER_KYMA);
    for (const sr of list.items) {
      expect(sr.status?.state).toBe('Ready');
      expect(sr.metadata.labels?.['operator.kyma-project.io/kyma-name']).toBe(sr.spec.kyma);
    }
  });

  it('a no-op tick costs one KCP request per Kyma plus three for the namespace, two deliveries per Kyma, one SKR request per kind per Kyma, and writes nothing', async () => {
    const before = count();
    const deliveries = await tick();
    const after = count();
    expect(deliveries).toEqual({
      'dev.knative.sources.ping': 1,
      [EventTypes.reconcileKyma]: KYMAS,
      [EventTypes.kymaResolved]: KYMAS,
    });
    expect(after.kcpWrites - before.kcpWrites).toBe(0);
    expect(after.skrWrites - before.skrWrites).toBe(0);
    // The names-only walk (one page), the Kyma and access-Secret snapshots (once per
    // replica at most), and each Kyma's list of its SyncResources.
    expect(after.kcp - before.kcp).toBeLessThanOrEqual(1 + 2 * replicas.length + KYMAS);
    // Each Kyma's objects are confirmed from one LIST per kind and namespace (ConfigMaps, ServiceAccounts).
    expect(after.skr - before.skr).toBeLessThanOrEqual(2 * KYMAS);
  });

  it('drift in one object is corrected by the next tick, at the cost of one confirming read of its SyncResource', async () => {
    const skr = await cluster(0);
    await skr.client.call('PATCH', `/api/v1/namespaces/${skrNs}/configmaps/sr-2-3-a`, {
      body: { data: { a: 'drifted' } },
      contentType: 'application/merge-patch+json',
    });
    const before = count();
    const deliveries = await tick();
    const after = count();
    expect(
      (
        await skr.client.call<{ data?: Record<string, string> }>(
          'GET',
          `/api/v1/namespaces/${skrNs}/configmaps/sr-2-3-a`,
        )
      ).data,
    ).toEqual({ a: '1' });
    // The corrected one goes to the status step (a drift Event); no other.
    expect(deliveries[EventTypes.itemsApplied]).toBe(1);
    expect(after.skrWrites - before.skrWrites).toBe(1);
    expect(after.kcp - before.kcp).toBeLessThanOrEqual(1 + 2 * replicas.length + KYMAS + 1 + 3);
  });
});
