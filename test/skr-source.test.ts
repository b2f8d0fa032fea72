// The SKR source end to end, with kubectl on the SKRs and the resync tick held for the whole
// file: every correction here comes from the source's watches. An object deleted is back; a
// CreateAndSync edit is reverted with its manager named; a CreateAndIgnore edit is kept; a
// forged mark changes nothing beyond the spec of the SyncResource the inventory names; an
// object flipped hundreds of times costs a few runs; the source killed and started again
// catches up; its two replicas watch each Kyma once, and one that dies has its Kymas taken.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from '../lib/kube/objects.ts';
import type { SyncItem, SyncResource } from '../lib/model.ts';
import { EventTypes } from '../lib/events/contract.ts';
import { kubeEvents, kubectl, startStack, syncResourceYaml, waitSr, type Stack } from './e2e-helpers.ts';
import { cluster, eventually, uniqueName } from './helpers.ts';

let s: Stack;
let skr1: Cluster;
const P = uniqueName('skrsrc');

const cm = (name: string, data: Record<string, string>) =>
  JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: P }, data });
const item = (name: string, strategy: SyncItem['strategy'], resource: string): SyncItem => ({
  name,
  strategy,
  resource,
});
const getCm = async (kubeconfig: string, name: string) => {
  const out = await kubectl(kubeconfig, [
    'get',
    'configmap',
    name,
    '-n',
    P,
    '-o',
    'json',
    '--ignore-not-found',
  ]);
  return out.trim()
    ? (JSON.parse(out) as {
        data?: Record<string, string>;
        metadata: { resourceVersion: string; uid: string };
      })
    : undefined;
};
const ready = (x: SyncResource | undefined) => {
  expect(x?.status?.state).toBe('Ready');
  expect(x?.status?.observedGeneration).toBe(x?.metadata.generation);
};
/** skrChanged counts the skr.changed events the broker took for a SyncResource. */
const skrChanged = (name: string) =>
  s.runtime.broker.observed.filter(
    (o) => o.attributes.type === EventTypes.skrChanged && (o.data as { name?: string }).name === name,
  ).length;
type Watches = {
  identity: string;
  kymas: { kyma: string; state: string; kinds: { kind: string; state: string; objects: number }[] }[];
};
const watches = async (): Promise<Watches[]> =>
  Promise.all(
    s.runtime.skrSources.map(async (a) => (await (await fetch(`${a.url}watches`)).json()) as Watches),
  );

beforeAll(async () => {
  s = await startStack('skrsrc', { pingIntervalMs: 3_600_000 });
  s.runtime.broker.observe = true;
  skr1 = await cluster(0);
  await kubectl(s.skr[0]!, ['create', 'namespace', P]);
  await kubectl(s.skr[1]!, ['create', 'namespace', P]);
}, 300_000);

afterAll(async () => {
  await s?.stop();
});

describe('the SKR source', () => {
  it('brings back a deleted object, reverts a CreateAndSync edit naming its manager, keeps a CreateAndIgnore edit', async () => {
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, `${P}-a`, 'kyma-1', [
        item('sync', 'CreateAndSync', cm(`${P}-sync`, { k: 'v' })),
        item('ignore', 'CreateAndIgnore', cm(`${P}-ignore`, { k: 'v' })),
      ]),
    );
    await waitSr(s, `${P}-a`, ready, 60_000);
    const first = await getCm(s.skr[0]!, `${P}-sync`);

    await kubectl(s.skr[0]!, ['delete', 'configmap', `${P}-sync`, '-n', P]);
    const back = await eventually(async () => {
      const c = await getCm(s.skr[0]!, `${P}-sync`);
      expect(c?.data).toEqual({ k: 'v' });
      return c!;
    }, 30_000);
    expect(back.metadata.uid).not.toBe(first!.metadata.uid);

    await kubectl(s.skr[0]!, ['patch', 'configmap', `${P}-sync`, '-n', P, '-p', '{"data":{"k":"edited"}}']);
    await kubectl(s.skr[0]!, ['patch', 'configmap', `${P}-ignore`, '-n', P, '-p', '{"data":{"k":"mine"}}']);
    await eventually(
      async () => expect((await getCm(s.skr[0]!, `${P}-sync`))?.data).toEqual({ k: 'v' }),
      30_000,
    );
    // The correction's Event names the manager that changed the field.
    await eventually(
      async () =>
        expect(await kubeEvents(s, `${P}-a`)).toContainEqual({
          reason: 'DriftCorrected',
          note: `ConfigMap ${P}/${P}-sync: data.k changed by kubectl-patch; reverted`,
        }),
      30_000,
    );
    await s.runtime.broker.idle();
    expect((await getCm(s.skr[0]!, `${P}-ignore`))?.data).toEqual({ k: 'mine' });
    await waitSr(s, `${P}-a`, ready);
  }, 150_000);

  it('finishes a deletion that waited for an object held by a finalizer in the SKR once the object goes, with no tick', async () => {
    const name = `${P}-held`;
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, name, 'kyma-1', [item('held', 'CreateAndSync', cm(`${P}-held`, { k: 'v' }))]),
    );
    await waitSr(s, name, ready, 60_000);
    await kubectl(s.skr[0]!, [
      'patch',
      'configmap',
      `${P}-held`,
      '-n',
      P,
      '-p',
      '{"metadata":{"finalizers":["test/hold"]}}',
    ]);
    await kubectl(s.kcp, ['delete', 'syncresource', name, '-n', s.ns, '--wait=false']);
    await waitSr(
      s,
      name,
      (x) => {
        expect(x?.status?.state).toBe('Deleting');
        expect(x?.status?.lastOperation?.operation).toContain(`ConfigMap/${P}/${P}-held`);
      },
      60_000,
    );
    // The SKR lets the object go: its gone event finishes the deletion.
    await kubectl(s.skr[0]!, [
      'patch',
      'configmap',
      `${P}-held`,
      '-n',
      P,
      '-p',
      '{"metadata":{"finalizers":null}}',
    ]);
    await eventually(
      async () =>
        expect(
          await kubectl(s.kcp, ['get', 'syncresource', name, '-n', s.ns, '--ignore-not-found', '-o', 'name']),
        ).toBe(''),
      30_000,
    );
    expect(await getCm(s.skr[0]!, `${P}-held`)).toBeUndefined();
  }, 150_000);

  it('lets a forged mark change nothing beyond the spec of the SyncResource its inventory names', async () => {
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, `${P}-b`, 'kyma-1', [item('b', 'CreateAndSync', cm(`${P}-b`, { k: 'b' }))]),
    );
    // Ready and labelled: the status step's last write for its first run is done.
    const b = await waitSr(
      s,
      `${P}-b`,
      (x) => {
        ready(x);
        expect(x?.metadata.labels?.['operator.kyma-project.io/kyma-name']).toBe('kyma-1');
      },
      60_000,
    );
    const bObject = await getCm(s.skr[0]!, `${P}-b`);
    // The customer's own object, marked as ours and as SyncResource b's; and a's object marked as b's.
    await kubectl(
      s.skr[0]!,
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: `${P}-forged`,
          namespace: P,
          labels: { 'kcp-sync.kyma-project.io/managed-by': 'kcp-sync-resource' },
          annotations: { 'kcp-sync.kyma-project.io/owned-by': `${s.ns}/${P}-b` },
        },
        data: { k: 'customer' },
      }),
    );
    await kubectl(s.skr[0]!, [
      'annotate',
      'configmap',
      `${P}-sync`,
      '-n',
      P,
      `kcp-sync.kyma-project.io/owned-by=${s.ns}/${P}-b`,
    ]);
    await kubectl(s.skr[0]!, ['patch', 'configmap', `${P}-sync`, '-n', P, '-p', '{"data":{"k":"forged"}}']);
    await kubectl(s.skr[0]!, ['patch', 'configmap', `${P}-forged`, '-n', P, '-p', '{"data":{"k":"again"}}']);
    // a's run puts a's object back to a's spec: the inventory, not the annotation, names it.
    await eventually(
      async () => expect((await getCm(s.skr[0]!, `${P}-sync`))?.data).toEqual({ k: 'v' }),
      30_000,
    );
    await kubectl(s.skr[0]!, ['delete', 'configmap', `${P}-forged`, '-n', P]);
    await new Promise((r) => setTimeout(r, 2_000));
    await s.runtime.broker.idle();
    // Nothing of b's moved; the customer's object was neither written nor brought back. (A
    // run of b itself would be allowed, doing only what its spec says; none was asked for.)
    expect(skrChanged(`${P}-b`)).toBe(0);
    expect((await waitSr(s, `${P}-b`, ready))?.metadata.generation).toBe(b!.metadata.generation);
    expect((await getCm(s.skr[0]!, `${P}-b`))?.metadata.resourceVersion).toBe(
      bObject!.metadata.resourceVersion,
    );
    expect(await getCm(s.skr[0]!, `${P}-forged`)).toBeUndefined();
  }, 150_000);

  it('coalesces an object flipped hundreds of times into a few runs and no write storm', async () => {
    const path = `/api/v1/namespaces/${P}/configmaps/${P}-sync`;
    const before = { events: skrChanged(`${P}-a`) };
    const flips = 300;
    for (let i = 0; i < flips; i++)
      await skr1.client.call('PATCH', path, {
        body: { data: { k: `flip-${i}` } },
        contentType: 'application/merge-patch+json',
        query: { fieldManager: 'flipper' },
      });
    await eventually(
      async () => expect((await getCm(s.skr[0]!, `${P}-sync`))?.data).toEqual({ k: 'v' }),
      90_000,
    );
    await s.runtime.broker.idle();
    const runs = skrChanged(`${P}-a`) - before.events;
    // Growing gaps (0.5 s doubling) over the seconds the flips took: a handful of runs, each one write.
    expect(runs).toBeGreaterThanOrEqual(1);
    expect(runs).toBeLessThanOrEqual(12);
  }, 150_000);

  it('catches up after it was down: what was deleted and edited meanwhile is corrected', async () => {
    const replicas = s.runtime.skrSources.map((a) => a.replica);
    for (const r of replicas) await s.runtime.stopSkrSource(r);
    await kubectl(s.skr[0]!, ['delete', 'configmap', `${P}-b`, '-n', P]);
    await kubectl(s.skr[0]!, [
      'patch',
      'configmap',
      `${P}-sync`,
      '-n',
      P,
      '-p',
      '{"data":{"k":"while-down"}}',
    ]);
    for (const r of replicas) await s.runtime.startSkrSource(r);
    await eventually(async () => {
      expect((await getCm(s.skr[0]!, `${P}-b`))?.data).toEqual({ k: 'b' });
      expect((await getCm(s.skr[0]!, `${P}-sync`))?.data).toEqual({ k: 'v' });
    }, 60_000);
  }, 150_000);

  it('watches each Kyma from one replica, and a replica that dies has its Kymas taken over', async () => {
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, `${P}-c`, 'kyma-2', [item('c', 'CreateAndSync', cm(`${P}-c`, { k: 'c' }))]),
    );
    await waitSr(s, `${P}-c`, ready, 60_000);
    const kymas = [`${s.ns}/kyma-1`, `${s.ns}/kyma-2`];
    const once = await eventually(async () => {
      const w = await watches();
      expect(w).toHaveLength(2);
      expect(w.flatMap((x) => x.kymas.map((k) => k.kyma)).sort()).toEqual(kymas);
      return w;
    }, 30_000);
    // The replica that watches kyma-2 dies (SIGKILL: its Lease is not given back).
    const holder = s.runtime.skrSources[once.findIndex((x) => x.kymas.some((k) => k.kyma === kymas[1]))]!;
    await s.runtime.stopSkrSource(holder.replica);
    await eventually(async () => {
      const w = await watches();
      expect(w.flatMap((x) => x.kymas.map((k) => k.kyma)).sort()).toEqual(kymas);
      expect(w.every((x) => x.kymas.every((k) => k.kinds.every((kind) => kind.state === 'watching')))).toBe(
        true,
      );
    }, 60_000);
    await kubectl(s.skr[1]!, ['delete', 'configmap', `${P}-c`, '-n', P]);
    await eventually(
      async () => expect((await getCm(s.skr[1]!, `${P}-c`))?.data).toEqual({ k: 'c' }),
      30_000,
    );
    await s.runtime.startSkrSource(holder.replica);
  }, 150_000);

  it('watches a kind in the namespaces its objects lie in, and the whole cluster beyond four', async () => {
    const kindsOf = async (kyma: string) => {
      const w = await watches();
      return w.flatMap((x) => x.kymas.filter((k) => k.kyma === kyma).flatMap((k) => k.kinds));
    };
    const kyma2 = `${s.ns}/kyma-2`;
    await eventually(
      async () =>
        expect(await kindsOf(kyma2)).toEqual([{ kind: `ConfigMap. in ${P}`, state: 'watching', objects: 1 }]),
      30_000,
    );
    // Five more namespaces: one cluster-wide watch instead of six.
    const spread = Array.from({ length: 5 }, (_, i) => `${P}-ns${i}`);
    for (const ns of spread) await kubectl(s.skr[1]!, ['create', 'namespace', ns]);
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(
        s.ns,
        `${P}-d`,
        'kyma-2',
        spread.map((ns) =>
          item(
            ns,
            'CreateAndSync',
            JSON.stringify({
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name: `${P}-d`, namespace: ns },
              data: { k: 'd' },
            }),
          ),
        ),
      ),
    );
    await waitSr(s, `${P}-d`, ready, 60_000);
    await eventually(async () => {
      const kinds = await kindsOf(kyma2);
      expect(kinds.map((k) => [k.kind, k.state])).toEqual([['ConfigMap.', 'watching']]);
    }, 30_000);
    // That watch corrects in every namespace, the first one's too.
    await kubectl(s.skr[1]!, ['delete', 'configmap', `${P}-d`, '-n', spread[3]!]);
    await kubectl(s.skr[1]!, ['delete', 'configmap', `${P}-c`, '-n', P]);
    await eventually(async () => {
      const out = await kubectl(s.skr[1]!, [
        'get',
        'configmap',
        `${P}-d`,
        '-n',
        spread[3]!,
        '-o',
        'jsonpath={.data.k}',
      ]);
      expect(out).toBe('d');
      expect((await getCm(s.skr[1]!, `${P}-c`))?.data).toEqual({ k: 'c' });
    }, 30_000);
    // The SyncResource gone (its objects pruned), the watch narrows again.
    await kubectl(s.kcp, ['delete', 'syncresource', `${P}-d`, '-n', s.ns]);
    await eventually(
      async () => expect((await kindsOf(kyma2)).map((k) => k.kind)).toEqual([`ConfigMap. in ${P}`]),
      60_000,
    );
  }, 180_000);
});
