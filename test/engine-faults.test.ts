// Crashes and HTTP faults in the middle of a run: each is classified (transient or
// not), nothing is half-recorded, and a rerun converges with nothing orphaned.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KubeClient } from '../lib/kube/client.ts';
import { credentialsFromKubeconfig } from '../lib/kube/credentials.ts';
import { reconcile, reconcileRun } from '../lib/engine/reconcile.ts';
import { KubeApiError, lostRace } from '../lib/kube/errors.ts';
import { RestMapper, resourcePath } from '../lib/kube/discovery.ts';
import { syncResourceInfo } from '../lib/kcp.ts';
import { listObjects, mustFind, type Cluster } from '../lib/kube/objects.ts';
import { heldBy } from './helpers.ts';
import { Harness } from './engine-harness.ts';
import { FaultProxy } from './fault-proxy.ts';

let proxy: FaultProxy;
let viaProxy: Cluster;

/** annotated lists ConfigMaps in ns whose fields h's field manager holds. */
async function annotated(h: Harness): Promise<string[]> {
  const all = await listObjects(h.skr, await mustFind(h.skr, 'v1', 'ConfigMap'), { namespace: h.ns });
  return all
    .filter((o) => heldBy(o, `kcp-system/${h.name}`))
    .map((o) => o.metadata.name)
    .sort();
}

const items = (h: Harness) =>
  ['a', 'b', 'c'].map((n) => ({ name: n, strategy: 'CreateAndSync' as const, resource: h.cm(n, { v: n }) }));

describe('faults', () => {
  beforeAll(async () => {
    proxy = await FaultProxy.start(inject('clusters').skrs[0]!.kubeconfig);
    const client = KubeClient.create(credentialsFromKubeconfig(proxy.kubeconfig), {
      name: 'skr-1-via-proxy',
    });
    viaProxy = { client, mapper: new RestMapper(client) };
  });
  afterAll(async () => {
    await viaProxy.client.close();
    await proxy.stop();
  });

  it('a crash after the inventory write and before the create orphans nothing', async () => {
    const h = await new Harness('crash').init();
    await h.put(items(h));
    const crash = new Error('injected crash');
    await expect(
      h.sync({
        hooks: {
          afterInventoryWrite: async () => {
            throw crash;
          },
        },
      }),
    ).rejects.toBe(crash);
    let sr = await h.get();
    expect(sr?.status?.synced?.map((e) => e.name).sort()).toEqual(['a', 'b', 'c']);
    expect(await annotated(h)).toEqual([]); // recorded, not created: nothing unknown exists
    // The rerun creates them; removing an item then prunes it.
    ({ sr } = await h.sync());
    expect(await annotated(h)).toEqual(['a', 'b', 'c']);
    await h.put(items(h).slice(0, 1));
    ({ sr } = await h.sync());
    expect(await annotated(h)).toEqual(['a']);
    expect(sr?.status?.synced?.map((e) => e.name)).toEqual(['a']);
    // A crash before the create of an item that is then removed: its entry is dropped, nothing is left.
    await h.put([...items(h).slice(0, 1), { name: 'd', strategy: 'CreateAndSync', resource: h.cm('d', {}) }]);
    await expect(
      h.sync({
        hooks: {
          afterInventoryWrite: async () => {
            throw crash;
          },
        },
      }),
    ).rejects.toBe(crash);
    await h.put(items(h).slice(0, 1));
    ({ sr } = await h.sync());
    expect(sr?.status?.synced?.map((e) => e.name)).toEqual(['a']);
    expect(await annotated(h)).toEqual(['a']);
  });

  it('a 500 in the middle of a run fails that item as transient; a rerun converges', async () => {
    const h = await new Harness('f500').init();
    await h.put(items(h));
    proxy.faults.push({
      method: 'PATCH',
      path: new RegExp(`/namespaces/${h.ns}/configmaps/b\\?`),
      kind: 'status',
      status: 500,
    });
    const { result, sr } = await h.sync({ skr: viaProxy });
    const b = result.items.find((i) => i.name === 'b');
    expect(b).toMatchObject({ state: 'Error', reason: 'ApplyFailed', transient: true });
    expect(b?.message).toContain('injected 500');
    expect(result.items.filter((i) => i.name !== 'b').map((i) => i.reason)).toEqual(['Created', 'Created']);
    expect(await annotated(h)).toEqual(['a', 'c']);
    // b stays recorded (the server may or may not have acted): never an orphan.
    expect(sr?.status?.synced?.map((e) => e.name).sort()).toEqual(['a', 'b', 'c']);
    const again = await h.sync({ skr: viaProxy });
    expect(again.sr?.status?.state).toBe('Ready');
    expect(await annotated(h)).toEqual(['a', 'b', 'c']);
  });

  it('429 is retried after its Retry-After; when it persists it is transient and carries the delay', async () => {
    const seen = proxy.seen.length;
    proxy.faults.push({
      method: 'GET',
      path: /\/api\/v1\/namespaces\/default$/,
      kind: 'status',
      status: 429,
      headers: { 'retry-after': '1' },
    });
    const ns = await viaProxy.client.call<{ metadata: { name: string } }>(
      'GET',
      '/api/v1/namespaces/default',
    );
    expect(ns.metadata.name).toBe('default');
    expect(
      proxy.seen
        .slice(seen)
        .filter((s) => s.path === '/api/v1/namespaces/default')
        .map((s) => s.fault ?? 'passed'),
    ).toEqual(['429', 'passed']);
    proxy.faults.push({
      method: 'GET',
      path: /\/api\/v1\/namespaces\/default$/,
      kind: 'status',
      status: 429,
      headers: { 'retry-after': '0' },
      times: 4,
    });
    const err = await viaProxy.client.call('GET', '/api/v1/namespaces/default').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect(err).toMatchObject({ code: 429, transient: true, retryAfterSeconds: 0, authFailure: false });
    const h = await new Harness('f429').init();
    await h.put(items(h));
    proxy.faults.push({
      method: 'PATCH',
      path: new RegExp(`/namespaces/${h.ns}/configmaps/c\\?`),
      kind: 'status',
      status: 429,
      headers: { 'retry-after': '0' },
      times: 4,
    });
    const { result } = await h.sync({ skr: viaProxy });
    expect(result.items.find((i) => i.name === 'c')).toMatchObject({
      state: 'Error',
      reason: 'ApplyFailed',
      transient: true,
    });
  });

  it('discovery that lags behind an Established CRD: its custom resource is still applied in the same run', async () => {
    const h = await new Harness('flag').init();
    const group = `${h.name}.example.io`;
    const gv = `/apis/${group}/v1alpha1`;
    // The first look (before the CRD exists) and three after it is Established find no such group-version.
    proxy.faults.push({
      method: 'GET',
      path: new RegExp(`^${gv.replaceAll('.', '\\.')}$`),
      kind: 'status',
      status: 404,
      times: 4,
    });
    const seen = proxy.seen.length;
    await h.put([
      { name: 'crd', strategy: 'CreateAndSync', resource: Harness.crd(group, 'Lagging', 'laggings') },
      {
        name: 'cr',
        strategy: 'CreateAndSync',
        resource: `apiVersion: ${group}/v1alpha1\nkind: Lagging\nmetadata: {name: one, namespace: ${h.ns}}\nspec: {a: 1}\n`,
      },
    ]);
    const { sr } = await h.sync({ skr: viaProxy });
    expect(
      proxy.seen
        .slice(seen)
        .filter((x) => x.path === gv)
        .map((x) => x.fault ?? 'passed'),
    ).toEqual(['404', '404', '404', '404', 'passed']);
    expect(sr?.status?.items?.map((i) => `${i.name}:${i.state}:${i.reason}`)).toEqual([
      'crd:Ready:Created',
      'cr:Ready:Created',
    ]);
    expect((await h.skrGet(`${group}/v1alpha1`, 'Lagging', 'one', h.ns))?.spec).toEqual({ a: 1 });
  });

  it('a reset connection aborts the run as ClusterUnreachable, with nothing created or recorded', async () => {
    const h = await new Harness('freset').init();
    await h.put(items(h));
    proxy.faults.push({
      method: 'GET',
      path: new RegExp(`/namespaces/${h.ns}/configmaps/`),
      kind: 'reset',
      times: 3,
    });
    const { result, sr } = await h.sync({ skr: viaProxy });
    expect(result.clusterError).toMatchObject({ reason: 'ClusterUnreachable', transient: true });
    expect(sr?.status?.state).toBe('Error');
    expect(sr?.status?.conditions?.[0]?.reason).toBe('ClusterUnreachable');
    expect(sr?.status?.synced ?? []).toEqual([]);
    expect(await annotated(h)).toEqual([]);
    proxy.faults.length = 0;
    const again = await h.sync({ skr: viaProxy });
    expect(again.sr?.status?.state).toBe('Ready');
  });

  it('an inventory write beaten by a status write is retried on the fresh resourceVersion; one beaten by another inventory fails the run with nothing created', async () => {
    const h = await new Harness('finv').init();
    await h.put(items(h).slice(0, 1));
    await h.sync();
    // The status step writes after the run read the SyncResource: only other fields changed.
    await h.put(items(h).slice(0, 2));
    let stale = (await h.get())!;
    await h.store.writeStatus(stale, { state: 'Processing' });
    const deps = { skr: h.skr, kcp: h.store, config: h.config };
    const { result } = await reconcileRun(stale, deps);
    expect(result.items.map((i) => i.state)).toEqual(['Ready', 'Ready']);
    expect(await annotated(h)).toEqual(['a', 'b']);
    expect((await h.get())?.status?.synced?.map((e) => e.name).sort()).toEqual(['a', 'b']);
    // A SyncResource claimed and without a status yet, whose first status is written meanwhile: kept.
    const fresh = await new Harness('finv0').init();
    await fresh.put(items(fresh).slice(0, 1));
    const claimed = await fresh.store.claim((await fresh.get())!);
    expect(claimed.status).toBeUndefined();
    await fresh.store.writeStatus(claimed, { state: 'Processing' });
    await reconcileRun(claimed, { skr: fresh.skr, kcp: fresh.store, config: fresh.config });
    expect((await fresh.get())?.status).toMatchObject({ state: 'Processing', synced: [{ name: 'a' }] });
    // Another run recorded another inventory meanwhile: this run's entries are not written, nothing is created.
    await h.put(items(h));
    stale = (await h.get())!;
    await h.store.writeInventory(stale, [...stale.status!.synced!].reverse());
    const skrWrites = h.skr.client.writes;
    await expect(reconcile(stale, deps)).rejects.toSatisfy(lostRace);
    expect(h.skr.client.writes - skrWrites).toBe(0);
    expect(await annotated(h)).toEqual(['a', 'b']);
  });

  it('a run whose claim is refused (the SyncResource changed since it was read) writes nothing anywhere, though its reads went out with the claim', async () => {
    const h = await new Harness('fclaim').init();
    await h.put(items(h));
    await h.sync();
    // A user removes the finalizer and edits an item: the next run must claim again, and
    // every object is in the inventory already, so no inventory write would stop it.
    const path = resourcePath(syncResourceInfo, 'kcp-system', h.name);
    await h.kcp.client.call('PATCH', path, {
      body: { metadata: { finalizers: null } },
      contentType: 'application/merge-patch+json',
    });
    await h.put([
      { name: 'a', strategy: 'CreateAndSync', resource: h.cm('a', { v: 'edited' }) },
      ...items(h).slice(1),
    ]);
    const stale = (await h.get())!;
    expect(stale.metadata.finalizers ?? []).toEqual([]);
    // Changed after the run read it: the claim's resourceVersion test fails.
    await h.kcp.client.call('PATCH', path, {
      body: { metadata: { annotations: { touched: 'yes' } } },
      contentType: 'application/merge-patch+json',
    });
    const kcpWrites = h.kcp.client.writes;
    const skrWrites = h.skr.client.writes;
    await expect(reconcile(stale, { skr: h.skr, kcp: h.store, config: h.config })).rejects.toSatisfy(
      lostRace,
    );
    expect(h.skr.client.writes - skrWrites).toBe(0);
    expect(h.kcp.client.writes - kcpWrites).toBe(1); // the refused claim
    expect(await h.skrGet('v1', 'ConfigMap', 'a', h.ns)).toMatchObject({ data: { v: 'a' } });
    expect((await h.get())?.metadata.finalizers ?? []).toEqual([]);
    // The next run, from the SyncResource as it is, claims it and applies the edit.
    await h.sync();
    expect(await h.skrGet('v1', 'ConfigMap', 'a', h.ns)).toMatchObject({ data: { v: 'edited' } });
  });
});
