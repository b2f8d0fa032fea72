// The function handlers called directly (as the Knative Functions template tests
// do) against the real KCP and SKR: replies, error mapping, idempotency under
// duplicate and reordered delivery, stale results, cluster gone, foreign namespaces.
import { ProcessState } from '../lib/pipeline/process.ts';
import { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { handle as applyItems } from '../functions/apply-items/index.ts';
import { handle as resync } from '../functions/resync/index.ts';
import { fanoutsDone } from '../lib/pipeline/fanout.ts';
import { handle as writeStatus } from '../functions/write-status/index.ts';
import { getDeps, setDeps } from '../functions/deps.ts';
import { HttpError } from '../functions/errors.ts';
import { applyObjects, connect, kymaObjects } from '../infra/kcp-setup.ts';
import { ClientCache } from '../lib/cluster/cache.ts';
import { kymaInfo, Lookups } from '../lib/cluster/resolve.ts';
import { parseConfig } from '../lib/config.ts';
import { EventTypes, type ClusterResolved, type ItemsApplied } from '../lib/events/contract.ts';
import { KcpStore, syncResourceInfo } from '../lib/kcp.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { Recorder } from '../lib/kube/recorder.ts';
import type { Cluster } from '../lib/kube/objects.ts';
import { FINALIZER, type SyncResource } from '../lib/model.ts';
import type { Deps } from '../lib/pipeline/deps.ts';
import { resolvePosted } from './resolve-posted.ts';
import { cluster, eventually, uniqueName } from './helpers.ts';

let kcp: Cluster;
let deps: Deps;
let ns: string;
const sent: CloudEvent<unknown>[] = [];

const resolveCluster = (c: Context, e: CloudEvent<unknown>) => resolvePosted(sent, c, e);
const ctx = {} as Context;
const cm = (name: string) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: default}\ndata: {a: "1"}\n`;

const ref = (name: string, type = 'dev.knative.apiserver.ref.update') =>
  new CloudEvent({
    type,
    source: 'https://kcp',
    subject: `/apis/operator.kyma-project.io/v1alpha1/namespaces/${ns}/syncresources/${name}`,
    data: { apiVersion: 'operator.kyma-project.io/v1alpha1', kind: 'SyncResource', name, namespace: ns },
    kind: 'SyncResource',
    name,
    namespace: ns,
    traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  });

async function create(name: string, kyma: string, items: unknown[]): Promise<SyncResource> {
  return kcp.client.call<SyncResource>('POST', resourcePath(syncResourceInfo, ns), {
    body: {
      apiVersion: 'operator.kyma-project.io/v1alpha1',
      kind: 'SyncResource',
      metadata: { name, namespace: ns },
      spec: { kyma, items },
    },
  });
}

/** pipeline runs resolve -> apply -> status by hand, returning the events in between. */
async function pipeline(name: string) {
  const resolved = (await resolveCluster(ctx, ref(name))) as CloudEvent<unknown>;
  const applied =
    resolved.type === EventTypes.clusterResolved
      ? ((await applyItems(ctx, resolved)) as CloudEvent<unknown>)
      : resolved;
  await writeStatus(ctx, applied);
  return { resolved, applied };
}

/** listInNs lists the test namespace's SyncResources. */
async function listInNs(): Promise<SyncResource[]> {
  return (await kcp.client.call<{ items: SyncResource[] }>('GET', resourcePath(syncResourceInfo, ns))).items;
}

/**
 * readingThrough runs body with the handlers' SyncResource reads going through get, in a
 * fresh Deps (so with fresh per-process gates and queues), and restores the Deps after.
 */
async function readingThrough<T>(get: KcpStore['get'], body: () => Promise<T>): Promise<T> {
  setDeps({
    ...deps,
    store: Object.assign(Object.create(deps.store) as KcpStore, { get }),
    process: new ProcessState(deps.config),
  });
  try {
    return await body();
  } finally {
    setDeps(deps);
  }
}

describe('functions', () => {
  beforeAll(async () => {
    kcp = await cluster('kcp');
    ns = uniqueName('fn');
    const config = { ...parseConfig({}), controlPlaneNamespaces: [ns] };
    await applyObjects(kcp, [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
      ...kymaObjects('kyma-1', inject('clusters').skrs[0]!.kubeconfig, ns),
    ]);
    deps = {
      config,
      kcp,
      store: new KcpStore(kcp, config.fieldManager),
      cache: new ClientCache(config),
      lookups: new Lookups(kcp),
      recorder: new Recorder(kcp, 'test'),
      process: new ProcessState(config),
      send: async (e) => {
        sent.push(e);
      },
      log: { info() {}, warn() {}, error() {} },
    };
    setDeps(deps);
  });
  afterAll(async () => {
    await deps.cache.closeAll();
  });

  it('chains resolve -> apply -> status, carrying identity and trace context but no credentials', async () => {
    const name = uniqueName('chain');
    await create(name, 'kyma-1', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(name) }]);
    const { resolved, applied } = await pipeline(name);
    expect(resolved.type).toBe(EventTypes.clusterResolved);
    const data = resolved.data as ClusterResolved;
    expect(data).toMatchObject({
      namespace: ns,
      name,
      kyma: 'kyma-1',
      secret: { namespace: ns, name: 'kyma-1-kubeconfig' },
    });
    expect(resolved.subject).toBe(`${ns}/${name}`);
    expect((resolved as unknown as { traceparent: string }).traceparent).toBe(
      '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    );
    expect(applied.type).toBe(EventTypes.itemsApplied);
    const kubeconfig = inject('clusters').skrs[0]!.kubeconfig;
    for (const e of [resolved, applied]) {
      const text = JSON.stringify(e);
      for (const line of kubeconfig.split('\n').filter((l) => l.includes('-data:') || l.includes('token:'))) {
        expect(text).not.toContain(line.split(':')[1]!.trim().slice(0, 40));
      }
    }
    const sr = await deps.store.get(ns, name);
    expect(sr?.status?.state).toBe('Ready');
    expect(sr?.metadata.labels?.['operator.kyma-project.io/kyma-name']).toBe('kyma-1');
  });

  it('is idempotent under duplicate and reordered delivery; an older result never overwrites a newer status; the edit is urgent, the deletion urgent behind edits', async () => {
    const name = uniqueName('dup');
    await create(name, 'kyma-1', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(name) }]);
    const first = await pipeline(name);
    // Generation 2 with a bad item.
    await kcp.client.call('PATCH', resourcePath(syncResourceInfo, ns, name), {
      body: { spec: { items: [{ name: 'a', strategy: 'CreateAndSync', resource: 'kind: [' }] } },
      contentType: 'application/merge-patch+json',
    });
    const second = await pipeline(name);
    // A new SyncResource queues with the bulk; the edit of a reconciled one goes first.
    expect((first.resolved.data as ClusterResolved).urgent).toBeUndefined();
    expect((second.resolved.data as ClusterResolved).urgent).toBe(true);
    expect((second.resolved.data as ClusterResolved).deleting).toBeUndefined();
    expect((second.applied.data as ItemsApplied).urgent).toBe(true);
    let sr = await deps.store.get(ns, name);
    expect(sr?.status).toMatchObject({ observedGeneration: 2, state: 'Error' });
    // The generation-1 outcome arrives late, twice: ignored.
    await writeStatus(ctx, first.applied);
    await writeStatus(ctx, first.applied);
    sr = await deps.store.get(ns, name);
    expect(sr?.status).toMatchObject({ observedGeneration: 2, state: 'Error' });
    // Duplicates of the current events change nothing.
    const before = sr?.metadata.resourceVersion;
    await applyItems(ctx, second.resolved);
    await writeStatus(ctx, second.applied);
    sr = await deps.store.get(ns, name);
    expect(sr?.metadata.resourceVersion).toBe(before);
    // Its deletion goes ahead of bulk work too, behind edits (a mass deletion does not hold an edit up).
    await kcp.client.call('DELETE', resourcePath(syncResourceInfo, ns, name));
    const deletion = (await resolveCluster(ctx, ref(name))) as CloudEvent<unknown>;
    expect(deletion.data).toMatchObject({ urgent: true, deleting: true });
    // Gone with the finalizer: no status is left to write, nothing goes on to the status step.
    expect(await applyItems(ctx, deletion)).toBeUndefined();
    expect(await deps.store.get(ns, name)).toBeUndefined();
  });

  it('a deletion run that removes the last finalizer sends nothing on; one another finalizer still holds goes on to the status step', async () => {
    const name = uniqueName('held-on');
    const other = 'example.com/another-controller';
    await create(name, 'kyma-1', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(name) }]);
    await pipeline(name);
    const skr = await cluster(0);
    const cmCode = () =>
      skr.client
        .call('GET', `/api/v1/namespaces/default/configmaps/${name}`)
        .then(() => 200)
        .catch((e: { code?: number }) => e.code);
    // Another controller's finalizer holds the SyncResource after ours is gone.
    await kcp.client.call('PATCH', resourcePath(syncResourceInfo, ns, name), {
      body: [{ op: 'add', path: '/metadata/finalizers/-', value: other }],
      contentType: 'application/json-patch+json',
    });
    await kcp.client.call('DELETE', resourcePath(syncResourceInfo, ns, name));
    const deletion = (await resolveCluster(ctx, ref(name))) as CloudEvent<unknown>;
    const applied = (await applyItems(ctx, deletion)) as CloudEvent<unknown>;
    expect(applied.type).toBe(EventTypes.itemsApplied);
    expect(applied.data).toMatchObject({ urgent: true, result: { deleting: { finalizerRemoved: true } } });
    expect(await cmCode()).toBe(404);
    const held = await deps.store.get(ns, name);
    expect(held?.metadata.finalizers).toEqual([other]);
    // The status step writes what the run did on the SyncResource still there.
    await writeStatus(ctx, applied);
    const written = await deps.store.get(ns, name);
    expect(written?.metadata.resourceVersion).not.toBe(held?.metadata.resourceVersion);
    expect(written?.status?.observedGeneration).toBe(held?.metadata.generation);
    // Once the other finalizer goes, so does the SyncResource: a run then finds it gone.
    await kcp.client.call('PATCH', resourcePath(syncResourceInfo, ns, name), {
      body: [
        { op: 'test', path: '/metadata/finalizers/0', value: other },
        { op: 'remove', path: '/metadata/finalizers/0' },
      ],
      contentType: 'application/json-patch+json',
    });
    expect(await deps.store.get(ns, name)).toBeUndefined();
  });

  it('a watch echo before the status is written asks for no second run; nor after an Error status (a resync or a change runs it)', async () => {
    const name = uniqueName('echo');
    await create(name, 'kyma-1', [{ name: 'a', strategy: 'CreateAndSync', resource: 'kind: [' }]);
    const resolved = (await resolveCluster(ctx, ref(name))) as CloudEvent<unknown>;
    expect(resolved.type).toBe(EventTypes.clusterResolved);
    // The echo of the finalizer or inventory write of the run just requested.
    expect(await resolveCluster(ctx, ref(name))).toBeUndefined();
    await writeStatus(ctx, (await applyItems(ctx, resolved)) as CloudEvent<unknown>);
    expect((await deps.store.get(ns, name))?.status?.state).toBe('Error');
    // The status echo of a failed run: settled, no run (a run that wrote on every attempt looped on its own echoes).
    expect(await resolveCluster(ctx, ref(name))).toBeUndefined();
    // A reconcile request (resync, Kyma or Secret change) still runs it.
    const request = new CloudEvent({
      type: EventTypes.reconcile,
      source: '/test',
      data: { namespace: ns, name, trigger: 'resync' },
    }) as CloudEvent<unknown>;
    expect(((await resolveCluster(ctx, request)) as CloudEvent<unknown> | undefined)?.type).toBe(
      EventTypes.clusterResolved,
    );
  });

  it('resolve-cluster starts a change of an existing SyncResource ahead of a burst of creations', async () => {
    // Twelve bulk runs at a time.
    const names = Array.from({ length: 14 }, () => uniqueName('burst'));
    const edited = uniqueName('edited');
    for (const n of [...names, edited])
      await create(n, 'kyma-1', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(n) }]);
    const order: string[] = [];
    // A fresh process: the thirteenth creation on queues, the update does not.
    await readingThrough(
      (namespace, name) => {
        order.push(name);
        return deps.store.get(namespace, name);
      },
      async () => {
        const adds = names.map((n) => resolveCluster(ctx, ref(n, 'dev.knative.apiserver.ref.add')));
        const update = resolveCluster(ctx, ref(edited));
        const replies = (await Promise.all([...adds, update])) as CloudEvent<unknown>[];
        expect(replies.map((r) => r.type)).toEqual(Array(15).fill(EventTypes.clusterResolved));
        expect(order).toEqual([...names.slice(0, 12), edited, ...names.slice(12)]);
      },
    );
  });

  it('a run for a change the SKR source saw, and a health report, read the SyncResource at no older version than the source saw', async () => {
    const name = uniqueName('version');
    const created = await create(name, 'kyma-1', [
      { name: 'a', strategy: 'CreateAndSync', resource: cm(name) },
    ]);
    const reads: [string, string | undefined][] = [];
    const recording: KcpStore['get'] = (n, nm, notOlderThan) => {
      reads.push([nm, notOlderThan]);
      return deps.store.get(n, nm, notOlderThan);
    };
    const version = created.metadata.resourceVersion!;
    const changed = new CloudEvent({
      type: EventTypes.changed,
      source: '/kcp-sync-resource/skr-source',
      data: {
        namespace: ns,
        name,
        uid: created.metadata.uid,
        generation: 1,
        kyma: 'kyma-1',
        resourceVersion: version,
      },
    });
    await readingThrough(recording, async () => {
      const resolved = (await resolveCluster(ctx, changed)) as CloudEvent<unknown>;
      expect((resolved.data as ClusterResolved).resourceVersion).toBe(version);
      await writeStatus(ctx, (await applyItems(ctx, resolved)) as CloudEvent<unknown>);
    });
    // resolve-cluster read nothing; apply-items read at the source's version; the status step wrote on what the run saw.
    expect(reads).toEqual([[name, version]]);
    const ready = await deps.store.get(ns, name);
    expect(ready?.status?.state).toBe('Ready');
    // A health report at the version the source saw: read at it, written on what was read.
    reads.length = 0;
    const report = new CloudEvent({
      type: EventTypes.skrHealth,
      source: '/kcp-sync-resource/skr-source',
      data: {
        namespace: ns,
        name,
        uid: created.metadata.uid,
        kyma: 'kyma-1',
        resourceVersion: ready!.metadata.resourceVersion,
        objects: [
          {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            namespace: 'default',
            name,
            health: { status: 'Failed', message: 'reported' },
          },
        ],
      },
    });
    await readingThrough(recording, () => writeStatus(ctx, report));
    expect(reads).toEqual([[name, ready!.metadata.resourceVersion]]);
    expect((await deps.store.get(ns, name))?.status?.items?.[0]?.health).toMatchObject({
      status: 'Failed',
      message: 'reported',
    });
  });

  it('write-status trusts no event: a result for a generation the SyncResource never had, another uid, another namespace or items the spec does not name changes nothing', async () => {
    const name = uniqueName('forged');
    await create(name, 'kyma-1', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(name) }]);
    await pipeline(name);
    const before = await deps.store.get(ns, name);
    expect(before?.status).toMatchObject({ state: 'Ready', observedGeneration: 1 });
    const forged = (data: Record<string, unknown>, result: Record<string, unknown> = {}) =>
      new CloudEvent({
        type: EventTypes.itemsApplied,
        source: '/attacker',
        data: {
          namespace: ns,
          name,
          uid: before!.metadata.uid,
          kyma: 'kyma-1',
          ...data,
          result: {
            generation: 1,
            observedAt: new Date().toISOString(),
            items: [{ name: 'a', state: 'Error', reason: 'Forged', message: 'x' }],
            changes: [],
            inventory: [],
            pending: [],
            ...result,
          },
        },
      }) as CloudEvent<unknown>;
    await writeStatus(ctx, forged({}, { generation: 999999 }));
    // A claim of how the object looked (seen) that the object denies changes nothing either: the write's tests fail.
    const claim = { resourceVersion: before!.metadata.resourceVersion, labelled: true, status: {} };
    await writeStatus(ctx, forged({ seen: { ...claim, generation: 999999 } }, { generation: 999999 }));
    await writeStatus(ctx, forged({ seen: { ...claim, generation: 1 }, uid: 'not-the-uid' }));
    await writeStatus(
      ctx,
      forged(
        { seen: { ...claim, generation: 1 } },
        { items: [{ name: 'ghost', state: 'Error', reason: 'Forged', message: 'x' }] },
      ),
    );
    expect((await deps.store.get(ns, name))?.status?.items).toEqual(before!.status!.items);
    await writeStatus(ctx, forged({ uid: 'not-the-uid' }));
    await writeStatus(
      ctx,
      forged(
        {},
        {
          items: [
            { name: 'a', state: 'Ready', reason: 'Applied', message: 'ok' },
            { name: 'ghost', state: 'Error', reason: 'Forged', message: 'x' },
          ],
        },
      ),
    );
    const after = await deps.store.get(ns, name);
    expect(after?.status?.observedGeneration).toBe(1);
    expect(after?.status?.items?.map((i) => i.name)).toEqual(['a']);
    expect(after?.status?.items?.[0]).toMatchObject({ state: 'Ready' });
    // Malformed data is a 400 (the broker does not redeliver it).
    await expect(writeStatus(ctx, forged({ namespace: '../x' }))).rejects.toMatchObject({ code: 400 });
    await expect(writeStatus(ctx, forged({}, { items: 'all' }))).rejects.toMatchObject({ code: 400 });
    // Digests the run claims to have taken fill in entries the inventory holds where it holds
    // them: one aimed at another entry, or past the end, writes nothing, nor does a value
    // that is not a digest.
    const settled = (await deps.store.get(ns, name))!;
    const entry = settled.status!.synced![0]!;
    const asBefore = { items: settled.status!.items, generation: 1 };
    const seen = {
      resourceVersion: settled.metadata.resourceVersion,
      labelled: true,
      generation: 1,
      status: {},
    };
    for (const recorded of [
      [{ index: 0, kind: 'Secret', name: entry.name, digest: 'ab'.repeat(16) }],
      [{ index: 0, kind: entry.kind, name: 'someone-else', digest: 'ab'.repeat(16) }],
      [{ index: 7, kind: entry.kind, name: entry.name, digest: 'ab'.repeat(16) }],
    ])
      await writeStatus(ctx, forged({ seen }, { ...asBefore, recorded }));
    const bad = [{ index: 0, kind: entry.kind, name: entry.name, digest: '{"op":"remove"}' }];
    await expect(writeStatus(ctx, forged({ seen }, { ...asBefore, recorded: bad }))).rejects.toMatchObject({
      code: 400,
    });
    const last = (await deps.store.get(ns, name))!;
    expect(last.status!.synced).toEqual(settled.status!.synced);
    expect(last.metadata.resourceVersion).toBe(settled.metadata.resourceVersion);
  });

  it('write-status never lets an older result overwrite a newer status, even when it read before the newer one was written', async () => {
    const name = uniqueName('race');
    await create(name, 'kyma-1', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(name) }]);
    await pipeline(name);
    const edit = (v: string) =>
      kcp.client.call('PATCH', resourcePath(syncResourceInfo, ns, name), {
        body: {
          spec: {
            items: [{ name: 'a', strategy: 'CreateAndSync', resource: cm(name).replace('"1"', `"${v}"`) }],
          },
        },
        contentType: 'application/merge-patch+json',
      });
    await edit('2');
    const older = (await applyItems(
      ctx,
      (await resolveCluster(ctx, ref(name))) as CloudEvent<unknown>,
    )) as CloudEvent<unknown>;
    await edit('3');
    const newer = (await applyItems(
      ctx,
      (await resolveCluster(ctx, ref(name))) as CloudEvent<unknown>,
    )) as CloudEvent<unknown>;
    // The older result goes the reading way and reads first; the newer one is written meanwhile.
    const { seen: _seen, ...olderData } = older.data as ItemsApplied;
    let reads = 0;
    let proceed!: () => void;
    const newerWritten = new Promise<void>((r) => (proceed = r));
    const readFirst = async (namespace: string, n: string) => {
      const live = await deps.store.get(namespace, n);
      if (reads++ === 0) await newerWritten;
      return live;
    };
    await readingThrough(readFirst, async () => {
      const slow = writeStatus(
        ctx,
        new CloudEvent({ ...older.toJSON(), data: olderData }) as CloudEvent<unknown>,
      );
      await new Promise((r) => setTimeout(r, 50));
      await writeStatus(ctx, newer);
      expect((await deps.store.get(ns, name))?.status?.observedGeneration).toBe(3);
      proceed();
      await slow;
    });
    expect(reads).toBe(2);
    expect((await deps.store.get(ns, name))?.status).toMatchObject({ observedGeneration: 3, state: 'Ready' });
  });

  it('maps failures: a bad event is 400, a KCP failure is 503 (retry)', async () => {
    await expect(
      applyItems(ctx, new CloudEvent({ type: 'nope', source: 'x', data: {} })),
    ).rejects.toMatchObject({ code: 400 });
    const broken: Deps = {
      ...deps,
      store: new KcpStore(
        {
          ...kcp,
          client: {
            ...kcp.client,
            call: async () => {
              throw new (await import('../lib/kube/errors.ts')).KubeApiError('kcp', 'GET', '/x', 0);
            },
          } as never,
        },
        'x',
      ),
    };
    setDeps(broken);
    try {
      const err = await resolveCluster(ctx, ref('any')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(HttpError);
      expect((err as HttpError).code).toBe(503);
    } finally {
      setDeps(deps);
    }
  });

  it('ends a resolution failure in an Error status with its reason', async () => {
    const name = uniqueName('nokyma');
    await create(name, 'nope', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(name) }]);
    const { resolved } = await pipeline(name);
    expect(resolved.type).toBe(EventTypes.itemsApplied);
    expect((resolved.data as ItemsApplied).result.clusterError).toMatchObject({
      reason: 'KymaNotFound',
      transient: false,
    });
    const sr = await deps.store.get(ns, name);
    expect(sr?.status?.conditions?.[0]).toMatchObject({ status: 'False', reason: 'KymaNotFound' });
  });

  it('a run that loses races to another replica still writing (its guarded writes refused) starts over from what that replica wrote, without a 503', async () => {
    const name = uniqueName('race');
    await create(name, 'kyma-1', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(name) }]);
    await pipeline(name);
    await kcp.client.call('DELETE', resourcePath(syncResourceInfo, ns, name));
    const resolved = (await resolveCluster(ctx, ref(name))) as CloudEvent<unknown>;
    expect(resolved.type).toBe(EventTypes.clusterResolved);
    // Another replica's run of the same SyncResource writes it just before this run removes
    // the finalizer, twice: this run's write, guarded by the resourceVersion it read, is refused.
    let raced = 0;
    const store = Object.create(deps.store) as KcpStore;
    store.removeFinalizer = async (sr) => {
      if (raced++ < 2)
        await kcp.client.call('PATCH', resourcePath(syncResourceInfo, ns, name), {
          body: { metadata: { annotations: { 'other-replica': `wrote-${raced}` } } },
          contentType: 'application/merge-patch+json',
        });
      return deps.store.removeFinalizer(sr);
    };
    setDeps({ ...deps, store });
    try {
      // The SyncResource went with the finalizer: nothing goes on to the status step.
      expect(await applyItems(ctx, resolved)).toBeUndefined();
    } finally {
      setDeps(deps);
    }
    expect(raced).toBe(3);
    expect(await deps.store.get(ns, name)).toBeUndefined();
    // The deletion went through: the object it created in the SKR is gone.
    const skr = await cluster(0);
    const code = await skr.client
      .call('GET', `/api/v1/namespaces/default/configmaps/${name}`)
      .then(() => 200)
      .catch((e: { code?: number }) => e.code);
    expect(code).toBe(404);
  });

  it('apply-items reads the objects a change names while it reads the SyncResource, takes each read once, and reads anew after its first write', async () => {
    const name = uniqueName('ahead');
    const nsItem = (label: string) =>
      `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${name}, labels: {l: "${label}"}}\n`;
    const cmIn = (n: string, v: string) =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${n}, namespace: ${name}}\ndata: {v: "${v}"}\n`;
    const items = (label: string, v: string) => [
      { name: 'ns', strategy: 'CreateAndSync', resource: nsItem(label) },
      { name: 'a', strategy: 'CreateAndSync', resource: cmIn('a', v) },
      { name: 'b', strategy: 'CreateAndSync', resource: cmIn('b', '1') },
    ];
    // Every SKR request of the handlers, and the SyncResource's read held until release says.
    const requests: { method: string; path: string }[] = [];
    let release: (() => Promise<void>) | undefined;
    const store = Object.create(deps.store) as KcpStore;
    store.get = async (namespace, n) => {
      await release?.();
      return deps.store.get(namespace, n);
    };
    const cache = new ClientCache(deps.config, { onRequest: (r) => requests.push(r) });
    setDeps({ ...deps, store, cache, process: new ProcessState(deps.config) });
    try {
      await create(name, 'kyma-1', items('1', '1'));
      await pipeline(name);
      const sr = (await deps.store.get(ns, name))!;
      expect(sr.status?.state).toBe('Ready');
      const gets = (path: string) => requests.filter((r) => r.method === 'GET' && r.path === path).length;
      const paths = {
        ns: `/api/v1/namespaces/${name}`,
        a: `/api/v1/namespaces/${name}/configmaps/a`,
        b: `/api/v1/namespaces/${name}/configmaps/b`,
      };
      // The SKR source's change event names the inventory; its run is held at its read of the
      // SyncResource until the objects were read: they are read while it is.
      const change = async (label: string, v: string) => {
        await kcp.client.call('PATCH', resourcePath(syncResourceInfo, ns, name), {
          body: { spec: { items: items(label, v) } },
          contentType: 'application/merge-patch+json',
        });
        const live = (await deps.store.get(ns, name))!;
        requests.length = 0;
        release = () => eventually(async () => expect(gets(paths.a) * gets(paths.b)).toBeGreaterThan(0));
        const data = {
          namespace: ns,
          name,
          uid: live.metadata.uid,
          generation: live.metadata.generation,
          kyma: 'kyma-1',
          change: true,
          ahead: live.status!.synced!.map(({ apiVersion, kind, namespace, name: n }) => ({
            apiVersion,
            kind,
            ...(namespace ? { namespace } : {}),
            name: n,
          })),
        };
        const resolved = (await resolveCluster(
          ctx,
          new CloudEvent({ type: EventTypes.changed, source: '/kcp-sync-resource/skr-source', data }),
        )) as CloudEvent<unknown>;
        expect((resolved.data as ClusterResolved).ahead).toEqual(data.ahead);
        await writeStatus(ctx, (await applyItems(ctx, resolved)) as CloudEvent<unknown>);
        release = undefined;
        expect((await deps.store.get(ns, name))?.status?.state).toBe('Ready');
      };
      // Only a changed: nothing written before the reads, each object read once.
      await change('1', '2');
      expect([gets(paths.ns), gets(paths.a), gets(paths.b)]).toEqual([1, 1, 1]);
      const skr = await cluster(0);
      expect((await skr.client.call<{ data: unknown }>('GET', paths.a)).data).toEqual({ v: '2' });
      // The Namespace changed too: it is written first, and a and b are read again after it.
      await change('2', '3');
      expect([gets(paths.ns), gets(paths.a), gets(paths.b)]).toEqual([1, 2, 2]);
      expect((await skr.client.call<{ data: unknown }>('GET', paths.a)).data).toEqual({ v: '3' });
      await skr.client.call('DELETE', paths.ns);
    } finally {
      release = undefined;
      setDeps(deps);
      await cache.closeAll();
    }
  });

  it('deletions of one Kyma’s SyncResources at once share their reads of its holders, none older than its run', async () => {
    const names = Array.from({ length: 6 }, () => uniqueName('held'));
    for (const name of names) {
      await create(name, 'kyma-1', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(name) }]);
      await pipeline(name);
      await kcp.client.call('DELETE', resourcePath(syncResourceInfo, ns, name));
    }
    const resolved = await Promise.all(
      names.map(async (name) => (await resolveCluster(ctx, ref(name))) as CloudEvent<unknown>),
    );
    // Each holders read takes a second, so the runs ask while one is in flight.
    let reads = 0;
    const store = Object.create(deps.store) as KcpStore;
    store.holdersForKyma = async (...args) => {
      reads++;
      await new Promise((r) => setTimeout(r, 1_000));
      return deps.store.holdersForKyma(...args);
    };
    setDeps({ ...deps, store, process: new ProcessState(deps.config) });
    try {
      // Each SyncResource went with its finalizer: nothing goes on to the status step.
      const applied = await Promise.all(resolved.map((e) => applyItems(ctx, e)));
      expect(applied).toEqual(names.map(() => undefined));
    } finally {
      setDeps(deps);
    }
    // The first read, and the one the runs that asked meanwhile shared (one run late to ask may start a third).
    expect(reads).toBeGreaterThanOrEqual(1);
    expect(reads).toBeLessThanOrEqual(3);
    const skr = await cluster(0);
    for (const name of names) {
      expect(await deps.store.get(ns, name)).toBeUndefined();
      const code = await skr.client
        .call('GET', `/api/v1/namespaces/default/configmaps/${name}`)
        .then(() => 200)
        .catch((e: { code?: number }) => e.code);
      expect(code, name).toBe(404);
    }
  });

  it("a run whose SKR client another Kyma's run displaces from a full cache goes on to its end: its SKR is not reported unreachable", async () => {
    // One client per process (SYNC_MAX_CLUSTER_CLIENTS=1) and two Kymas: as the run's first
    // SKR request is about to go, another run takes the one place. The displaced client's
    // idle connections close; the run's requests go on (connecting afresh), and the next run
    // for kyma-1 connects a new client.
    await applyObjects(kcp, kymaObjects('kyma-displacer', inject('clusters').skrs[0]!.kubeconfig, ns));
    const name = uniqueName('displaced');
    await create(name, 'kyma-1', [
      { name: 'a', strategy: 'CreateAndSync', resource: cm(`${name}-a`) },
      { name: 'b', strategy: 'CreateAndSync', resource: cm(`${name}-b`) },
    ]);
    const config = { ...deps.config, maxClusterClients: 1 };
    let displace: (() => Promise<unknown>) | undefined;
    const cache: ClientCache = new ClientCache(config, {
      beforeRequest: () => {
        const d = displace;
        displace = undefined;
        return d?.().then(() => undefined);
      },
    });
    displace = async () => cache.get(await deps.lookups.accessSecret(ns, 'kyma-displacer'), 'kyma-displacer');
    setDeps({ ...deps, config, cache, process: new ProcessState(config) });
    try {
      await pipeline(name);
      expect(displace).toBeUndefined();
      expect(cache.stats.evictions).toBe(1);
      const sr = await deps.store.get(ns, name);
      expect({ state: sr?.status?.state, items: sr?.status?.items?.map((i) => [i.name, i.state]) }).toEqual({
        state: 'Ready',
        items: [
          ['a', 'Ready'],
          ['b', 'Ready'],
        ],
      });
      const skr = await cluster(0);
      for (const n of [`${name}-a`, `${name}-b`])
        expect(
          (await skr.client.call<{ data: unknown }>('GET', `/api/v1/namespaces/default/configmaps/${n}`))
            .data,
        ).toEqual({ a: '1' });
    } finally {
      setDeps(deps);
      await cache.closeAll();
    }
  });

  it('releases a SyncResource being deleted whose cluster is gone, with a Warning event', async () => {
    const name = uniqueName('gone');
    await applyObjects(kcp, kymaObjects('kyma-tmp', inject('clusters').skrs[0]!.kubeconfig, ns));
    await create(name, 'kyma-tmp', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(name) }]);
    await pipeline(name);
    expect((await deps.store.get(ns, name))?.metadata.finalizers).toContain(FINALIZER);
    await kcp.client.call('DELETE', resourcePath(kymaInfo, ns, 'kyma-tmp'));
    // The Kyma's own watch event has its lookups read afresh (a kyma request); until then a
    // deletion would still use the cluster resolved a moment ago and delete its objects.
    await expect(deps.lookups.resolve(ns, 'kyma-tmp', true)).rejects.toThrow(/does not exist/);
    await kcp.client.call('DELETE', resourcePath(syncResourceInfo, ns, name));
    expect(await resolveCluster(ctx, ref(name))).toBeUndefined();
    expect(await deps.store.get(ns, name)).toBeUndefined();
    const events = await kcp.client.call<{
      items: { reason: string; note: string; regarding: { name: string } }[];
    }>('GET', `/apis/events.k8s.io/v1/namespaces/${ns}/events`);
    expect(events.items.find((e) => e.regarding.name === name && e.reason === 'ClusterGone')?.note).toMatch(
      /Kyma .* does not exist/,
    );
  });

  it('a deletion resolves its cluster from the shared reads of the last moment, and lets go only on a read of its own', async () => {
    const kubeconfig = inject('clusters').skrs[0]!.kubeconfig;
    const [gone, back] = [uniqueName('share'), uniqueName('share')];
    await applyObjects(kcp, kymaObjects('kyma-share', kubeconfig, ns));
    await applyObjects(kcp, kymaObjects('kyma-back', kubeconfig, ns));
    await create(gone, 'kyma-share', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(gone) }]);
    await create(back, 'kyma-back', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(back) }]);
    await pipeline(gone);
    await pipeline(back);
    // Lookups of their own, on a KCP client whose requests are counted, sharing an answer for a minute.
    const reads = await connect(inject('clusters').kcp.kubeconfig, 'kcp-lookups');
    const lookups = new Lookups(reads, 60_000);
    setDeps({ ...deps, lookups, process: new ProcessState(deps.config) });
    try {
      // A Kyma resolved a moment ago: its SyncResource's deletion reads neither it nor its Secret again.
      await lookups.resolve(ns, 'kyma-share');
      const before = reads.client.requests;
      await kcp.client.call('DELETE', resourcePath(syncResourceInfo, ns, gone));
      const resolved = (await resolveCluster(ctx, ref(gone))) as CloudEvent<ClusterResolved>;
      expect(resolved.type).toBe(EventTypes.clusterResolved);
      expect(reads.client.requests - before).toBe(0);
      // Gone with the finalizer: nothing goes on to the status step.
      expect(await applyItems(ctx, resolved)).toBeUndefined();
      expect(await deps.store.get(ns, gone)).toBeUndefined();
      const skr = await cluster(0);
      await expect(skr.client.call('GET', `/api/v1/namespaces/default/configmaps/${gone}`)).rejects.toThrow(
        /not found/i,
      );

      // A Kyma found missing a moment ago and back since: the shared answer says gone, a read
      // of the deletion's own finds it, and the SyncResource's objects are deleted, not left.
      await kcp.client.call('DELETE', resourcePath(kymaInfo, ns, 'kyma-back'));
      await expect(lookups.resolve(ns, 'kyma-back', true)).rejects.toThrow(/does not exist/);
      await applyObjects(kcp, kymaObjects('kyma-back', kubeconfig, ns));
      await expect(lookups.resolve(ns, 'kyma-back')).rejects.toThrow(/does not exist/);
      await kcp.client.call('DELETE', resourcePath(syncResourceInfo, ns, back));
      const again = (await resolveCluster(ctx, ref(back))) as CloudEvent<ClusterResolved>;
      expect(again.type).toBe(EventTypes.clusterResolved);
      expect((await deps.store.get(ns, back))?.metadata.finalizers).toContain(FINALIZER);
      expect(await applyItems(ctx, again)).toBeUndefined();
      expect(await deps.store.get(ns, back)).toBeUndefined();
      await expect(skr.client.call('GET', `/api/v1/namespaces/default/configmaps/${back}`)).rejects.toThrow(
        /not found/i,
      );
      const events = await kcp.client.call<{ items: { reason: string; regarding: { name: string } }[] }>(
        'GET',
        `/apis/events.k8s.io/v1/namespaces/${ns}/events`,
      );
      expect(events.items.filter((e) => e.regarding.name === back).map((e) => e.reason)).not.toContain(
        'ClusterGone',
      );
    } finally {
      setDeps(deps);
      await reads.client.close();
    }
  });

  it('resync posts one request per Kyma (and per unlabelled SyncResource); the Kyma is resolved once and its SyncResources applied in one delivery; no-op runs post nothing', async () => {
    // A Kyma of this test's own: two settled SyncResources.
    await applyObjects(kcp, kymaObjects('kyma-batch', inject('clusters').skrs[0]!.kubeconfig, ns));
    const settledOnes = [uniqueName('settled'), uniqueName('settled')];
    for (const n of settledOnes) {
      await create(n, 'kyma-batch', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(n) }]);
      await pipeline(n);
    }
    // One being deleted whose deletion no event has run yet: the batch deletes it.
    const doomed = uniqueName('doomed');
    await create(doomed, 'kyma-batch', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(doomed) }]);
    await pipeline(doomed);
    await kcp.client.call('DELETE', resourcePath(syncResourceInfo, ns, doomed));
    // A SyncResource never run (no kyma-name label) is requested on its own.
    const fresh = uniqueName('unlabelled');
    await create(fresh, 'kyma-batch', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(fresh) }]);
    // One whose label (anyone may write it) names kyma-batch but whose spec names another Kyma runs on its own.
    const moved = uniqueName('moved');
    await create(moved, 'kyma-elsewhere', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(moved) }]);
    await kcp.client.call('PATCH', resourcePath(syncResourceInfo, ns, moved), {
      body: { metadata: { labels: { 'operator.kyma-project.io/kyma-name': 'kyma-batch' } } },
      contentType: 'application/merge-patch+json',
    });
    sent.length = 0;
    // A channel-based broker holds every post until the pipeline behind it has run: the
    // ping is answered while the posts of its fan-out are still held.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let posted = 0;
    setDeps({
      ...deps,
      send: async (e) => {
        posted++;
        await held;
        sent.push(e);
      },
    });
    try {
      await resync(
        ctx,
        new CloudEvent({
          type: 'dev.knative.sources.ping',
          source: '/apis/v1/namespaces/x/pingsources/p',
          data: {},
        }),
      );
      await eventually(async () => expect(posted).toBeGreaterThan(0));
      expect(sent).toEqual([]);
      release();
      await fanoutsDone(await getDeps());
    } finally {
      setDeps(deps);
    }
    const all = await listInNs();
    // The tick walks every namespace the product acts in: team namespaces other files make
    // meanwhile (tenancy) get their requests too. This test counts its own namespace's.
    const mine = sent.filter((e) => (e.data as { namespace?: string }).namespace === ns);
    const labelled = all.filter((s) => s.metadata.labels?.['operator.kyma-project.io/kyma-name']);
    const kymas = [
      ...new Set(labelled.map((s) => s.metadata.labels!['operator.kyma-project.io/kyma-name']!)),
    ].sort();
    expect(kymas).toContain('kyma-batch');
    expect(
      mine
        .filter((e) => e.type === EventTypes.reconcileKyma)
        .map((e) => (e.data as { name: string }).name)
        .sort(),
    ).toEqual(kymas);
    const unlabelled = all
      .filter((s) => !s.metadata.labels?.['operator.kyma-project.io/kyma-name'])
      .map((s) => s.metadata.name)
      .sort();
    expect(unlabelled).toContain(fresh);
    expect(
      mine
        .filter((e) => e.type === EventTypes.reconcile)
        .map((e) => (e.data as { name: string }).name)
        .sort(),
    ).toEqual(unlabelled);
    expect(mine.length).toBe(kymas.length + unlabelled.length);
    // One since for the whole fan-out, passed on by resolve-cluster (snapshots must be younger).
    const since = new Set(mine.map((e) => (e.data as { since: string }).since));
    expect(since.size).toBe(1);
    const at = [...since][0]!;
    expect(Date.parse(at)).toBeGreaterThan(Date.now() - 60_000);
    const request = mine.find(
      (e) => e.type === EventTypes.reconcileKyma && (e.data as { name: string }).name === 'kyma-batch',
    )!;
    const resolved = (await resolveCluster(ctx, request)) as CloudEvent<unknown>;
    expect(resolved.type).toBe(EventTypes.kymaResolved);
    expect(resolved.data).toEqual({
      namespace: ns,
      name: 'kyma-batch',
      trigger: 'resync',
      since: at,
      secret: expect.objectContaining({ namespace: ns, name: 'kyma-batch-kubeconfig' }),
    });
    // apply-items runs every SyncResource labelled kyma-batch from one list; the first resync
    // after creation changes the items' reasons (Created -> Unchanged), so their outcomes go
    // to the status step; the moved one gets its own request; the one being deleted goes,
    // its object with it, and with it nothing is left for the status step.
    sent.length = 0;
    expect(await applyItems(ctx, resolved)).toBeUndefined();
    expect(sent.map((e) => [e.type, (e.data as { name: string }).name]).sort()).toEqual(
      [[EventTypes.reconcile, moved], ...settledOnes.map((n) => [EventTypes.itemsApplied, n])].sort(),
    );
    expect(await deps.store.get(ns, doomed)).toBeUndefined();
    expect(
      await (
        await cluster(0)
      ).client
        .call('GET', `/api/v1/namespaces/default/configmaps/${doomed}`)
        .then(() => 200)
        .catch((e: { code?: number }) => e.code),
    ).toBe(404);
    for (const e of sent.filter((x) => x.type === EventTypes.itemsApplied)) await writeStatus(ctx, e);
    // The next one changes nothing: no SyncResource read on its own, nothing to the status step.
    sent.length = 0;
    const reads: string[] = [];
    const counting: KcpStore['get'] = (n, nm) => {
      reads.push(nm);
      return deps.store.get(n, nm);
    };
    expect(await readingThrough(counting, () => applyItems(ctx, resolved))).toBeUndefined();
    expect(reads).toEqual([]);
    expect(sent.map((e) => [e.type, (e.data as { name: string }).name])).toEqual([
      [EventTypes.reconcile, moved],
    ]);
    for (const n of settledOnes) expect((await deps.store.get(ns, n))?.status?.state).toBe('Ready');
    // Its own request resolves it for its new Kyma (which does not exist), and the status says so.
    const own = (await resolveCluster(ctx, sent[0]!)) as CloudEvent<unknown>;
    expect(own.type).toBe(EventTypes.itemsApplied);
    expect((own.data as ItemsApplied).result.clusterError?.reason).toBe('KymaNotFound');
    // An access Secret change: one request for its Kyma, read afresh.
    sent.length = 0;
    await resolveCluster(
      ctx,
      new CloudEvent({
        type: 'dev.knative.apiserver.ref.update',
        source: 'https://kcp',
        kind: 'Secret',
        data: { kind: 'Secret', apiVersion: 'v1', name: 'kyma-1-kubeconfig', namespace: ns },
      }),
    );
    await fanoutsDone(deps);
    // Team namespaces whose policy may target kyma-1 (tenancy's, meanwhile) get theirs too.
    expect(
      sent.filter((e) => (e.data as { namespace?: string }).namespace === ns).map((e) => [e.type, e.data]),
    ).toEqual([
      [
        EventTypes.reconcileKyma,
        expect.objectContaining({ namespace: ns, name: 'kyma-1', trigger: 'secret' }),
      ],
    ]);
    for (const n of [moved, fresh, ...settledOnes])
      await kcp.client.call('DELETE', resourcePath(syncResourceInfo, ns, n));
  });

  it('a Kyma batch whose SyncResource changed after the list writes nothing for the old spec: the run is reconciled on its own', async () => {
    const name = uniqueName('raced');
    await create(name, 'kyma-1', [{ name: 'a', strategy: 'CreateAndSync', resource: cm(name) }]);
    await pipeline(name);
    const skr = await cluster(0);
    const cmPath = `/api/v1/namespaces/default/configmaps/${name}`;
    // Drift in the SKR, so the batch's run has something to write.
    await skr.client.call('PATCH', cmPath, {
      body: { data: { a: 'drifted' } },
      contentType: 'application/merge-patch+json',
    });
    const batch = (await resolveCluster(
      ctx,
      new CloudEvent({
        type: EventTypes.reconcileKyma,
        source: '/test',
        data: { namespace: ns, name: 'kyma-1', trigger: 'kyma' },
      }),
    ))!;
    // The edit lands between the batch's list and its first write to the SKR.
    const edited = cm(name).replace('a: "1"', 'a: "2"');
    let editedOnce = false;
    const listing: KcpStore['get'] = async (n, nm) => {
      if (!editedOnce) {
        editedOnce = true;
        await kcp.client.call('PATCH', resourcePath(syncResourceInfo, ns, name), {
          body: { spec: { items: [{ name: 'a', strategy: 'CreateAndSync', resource: edited }] } },
          contentType: 'application/merge-patch+json',
        });
      }
      return deps.store.get(n, nm);
    };
    sent.length = 0;
    await readingThrough(listing, () => applyItems(ctx, batch));
    expect(editedOnce).toBe(true);
    // The drift was not corrected to the old value: the run stopped before writing and asked for its own run.
    expect((await skr.client.call<{ data: Record<string, string> }>('GET', cmPath)).data.a).toBe('drifted');
    expect(
      sent.filter((e) => e.type === EventTypes.reconcile).map((e) => (e.data as { name: string }).name),
    ).toEqual([name]);
    const { applied } = await pipeline(name);
    expect((applied.data as ItemsApplied).result.generation).toBe(2);
    expect((await skr.client.call<{ data: Record<string, string> }>('GET', cmPath)).data.a).toBe('2');
  });

  it('refuses a SyncResource of a namespace no SyncPolicy governs (NotPermitted), claiming nothing', async () => {
    const other = uniqueName('tenant');
    await applyObjects(kcp, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: other } }]);
    const name = uniqueName('sneaky');
    await kcp.client.call('POST', resourcePath(syncResourceInfo, other), {
      body: {
        apiVersion: 'operator.kyma-project.io/v1alpha1',
        kind: 'SyncResource',
        metadata: { name, namespace: other },
        spec: { kyma: 'kyma-1', items: [] },
      },
    });
    const e = ref(name);
    (e.data as { namespace: string }).namespace = other;
    const out = await resolveCluster(ctx, e);
    expect(out?.type).toBe(EventTypes.itemsApplied);
    expect((out?.data as ItemsApplied).result.clusterError).toEqual({
      reason: 'NotPermitted',
      message: `no SyncPolicy governs namespace ${other}: nothing is written to any SKR until an operator's SyncPolicy names it in spec.namespaces`,
      transient: false,
    });
    const sr = await kcp.client.call<SyncResource>('GET', resourcePath(syncResourceInfo, other, name));
    expect(sr.metadata.finalizers ?? []).toEqual([]);
  });
});
