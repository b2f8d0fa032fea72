// Objects several SyncResources name, end to end through the pipeline with kubectl: shared
// as server-side apply shares fields (each SyncResource its own field manager), a field set
// to another value by another SyncResource is a Conflict and never forced, a user's edit is
// drift, deletion lets go and the last to let go deletes, what existed before stays, a
// Delete item never takes a shared object, objects written by the former single field
// manager are taken over without a change, and the examples share one Kyma. The stack has
// clusters of its own: the examples live in kcp-system and write kyma-system.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeObject } from '../lib/kube/objects.ts';
import type { SyncResource } from '../lib/model.ts';
import { readYamlDocuments } from '../lib/yaml.ts';
import { getSr, kubectl, startStack, syncResourceYaml, waitSr, type Stack } from './e2e-helpers.ts';
import { eventually, uniqueName } from './helpers.ts';

let s: Stack;
let skr: string;

beforeAll(async () => {
  s = await startStack('shared', {}, { clusters: true });
  skr = s.skr[0]!;
}, 300_000);

afterAll(async () => {
  await s?.stop();
});

const MANAGER = (name: string) => `kcp-sync-resource/${s.ns}/${name}`;
const nsItem = (ns: string) => ({
  name: 'ns',
  strategy: 'CreateAndSync',
  resource: `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${ns}}\n`,
});
const cmItem = (
  item: string,
  name: string,
  ns: string,
  data: Record<string, string>,
  strategy = 'CreateAndSync',
) => ({
  name: item,
  strategy,
  resource: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: ${ns}}\ndata: ${JSON.stringify(data)}\n`,
});

async function apply(name: string, items: object[], extra: Record<string, unknown> = {}): Promise<void> {
  const sr = JSON.parse(syncResourceYaml(s.ns, name, 'kyma-1', items as never)) as SyncResource;
  Object.assign(sr.spec, extra);
  await kubectl(s.kcp, ['apply', '-f', '-'], JSON.stringify(sr));
}

async function skrGet(kind: string, name: string, ns?: string): Promise<KubeObject | undefined> {
  const out = await kubectl(skr, [
    'get',
    kind,
    name,
    ...(ns ? ['-n', ns] : []),
    '-o',
    'json',
    '--ignore-not-found',
    '--show-managed-fields',
  ]);
  return out.trim() ? (JSON.parse(out) as KubeObject) : undefined;
}

const managers = (o: KubeObject | undefined) =>
  ((o?.metadata.managedFields ?? []) as { manager: string }[]).map((f) => f.manager).sort();

const ready = (sr: SyncResource | undefined) => {
  expect(sr?.status?.observedGeneration).toBe(sr?.metadata.generation);
  expect(sr?.status?.items?.map((i) => [i.name, i.state, i.reason])).toEqual(
    sr?.spec.items.map((i) => [i.name, 'Ready', expect.any(String)]),
  );
  expect(sr?.status?.state).toBe('Ready');
};

async function remove(name: string): Promise<void> {
  await kubectl(s.kcp, ['delete', 'syncresource', name, '-n', s.ns, '--wait=false']);
  await waitSr(s, name, (x) => expect(x).toBeUndefined(), 120_000);
}

/** unchangedOver waits a few resync ticks (2 s apart) and checks that neither the object nor the SyncResources were written meanwhile. */
async function unchangedOver(obj: () => Promise<KubeObject | undefined>, srs: string[]): Promise<void> {
  const read = async () => ({
    object: (await obj())?.metadata.resourceVersion,
    srs: (await Promise.all(srs.map((n) => getSr(s, n)))).map((x) => ({
      resourceVersion: x?.metadata.resourceVersion,
      status: x?.status,
    })),
  });
  // Settled first: a second run reports Created or Applied as Unchanged, once.
  const before = await eventually(
    async () => {
      const first = await read();
      await sleep(2_500);
      const then = await read();
      expect(then).toEqual(first);
      return then;
    },
    60_000,
    0,
  );
  await sleep(7_000);
  expect(await read()).toEqual(before);
}

describe('objects several SyncResources name', () => {
  it('with the same values are shared and both Ready; a user edit is reverted once; deleting one leaves them to the other, deleting the last removes them; what existed before stays', async () => {
    const target = uniqueName('shared');
    const before = uniqueName('existing');
    await kubectl(skr, ['create', 'namespace', before]);
    const items = [
      nsItem(target),
      cmItem('config', 'config', target, { mode: 'production' }),
      {
        name: 'existing',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${before}}\n`,
      },
    ];
    const [a, b] = [uniqueName('a'), uniqueName('b')];
    await apply(a, items);
    await waitSr(s, a, ready, 60_000);
    await apply(b, items);
    const second = await waitSr(s, b, ready, 60_000);
    expect(second?.status?.items?.find((i) => i.name === 'existing')?.reason).toBe('Adopted');
    // Each SyncResource's field manager holds the shared fields.
    const cm = await skrGet('configmap', 'config', target);
    expect(managers(cm)).toEqual([MANAGER(a), MANAGER(b)].sort());
    expect(managers(await skrGet('namespace', target))).toEqual([MANAGER(a), MANAGER(b)].sort());

    // A user's edit of a shared field is drift: reverted, once, and then left as it is.
    await kubectl(skr, ['patch', 'configmap', 'config', '-n', target, '-p', '{"data":{"mode":"edited"}}']);
    await eventually(
      async () => expect((await skrGet('configmap', 'config', target))?.data).toEqual({ mode: 'production' }),
      30_000,
      250,
    );
    await eventually(
      async () => expect(managers(await skrGet('configmap', 'config', target))).toContain(MANAGER(a)),
      30_000,
      250,
    );
    await waitSr(s, a, ready);
    await waitSr(s, b, ready);
    await unchangedOver(() => skrGet('configmap', 'config', target), [a, b]);

    // Deleting one lets go: the objects stay, held by the other only, which stays Ready.
    await remove(a);
    const left = await skrGet('configmap', 'config', target);
    expect(left?.data).toEqual({ mode: 'production' });
    expect(managers(left)).toEqual([MANAGER(b)]);
    expect((await skrGet('namespace', target))?.metadata.deletionTimestamp).toBeUndefined();
    await sleep(3_000);
    await waitSr(s, b, ready);
    expect(await skrGet('configmap', 'config', target)).toMatchObject({
      metadata: { uid: cm?.metadata.uid },
    });

    // The last to let go deletes what a SyncResource created, and never what existed before.
    await remove(b);
    await eventually(async () => expect(await skrGet('namespace', target)).toBeUndefined(), 120_000, 500);
    const existing = await skrGet('namespace', before);
    expect(existing?.metadata.deletionTimestamp).toBeUndefined();
    expect(existing?.metadata.labels?.['kcp-sync.kyma-project.io/managed-by']).toBeUndefined();
    await kubectl(skr, ['delete', 'namespace', before, '--wait=false']);
  });

  it('a field set to another value by another SyncResource is a Conflict naming both, never forced, and written no more on every resync', async () => {
    const target = uniqueName('conflict');
    const [first, second] = [uniqueName('first'), uniqueName('second')];
    await apply(first, [nsItem(target), cmItem('config', 'config', target, { mode: 'one', a: '1' })]);
    await waitSr(s, first, ready, 60_000);
    await apply(second, [nsItem(target), cmItem('config', 'config', target, { mode: 'two', b: '2' })]);
    const sr = await waitSr(
      s,
      second,
      (x) => expect(x?.status?.items?.find((i) => i.name === 'config')?.reason).toBe('Conflict'),
      60_000,
    );
    const item = sr?.status?.items?.find((i) => i.name === 'config');
    expect(item?.state).toBe('Error');
    expect(item?.message).toContain('.data.mode');
    expect(item?.message).toContain(`SyncResource ${s.ns}/${first}`);
    expect(sr?.status?.items?.find((i) => i.name === 'ns')?.state).toBe('Ready');
    // Nothing of the second was written: neither its value nor its other field.
    const cm = await skrGet('configmap', 'config', target);
    expect(cm?.data).toEqual({ mode: 'one', a: '1' });
    expect(managers(cm)).toEqual([MANAGER(first)]);
    // Over several resyncs: no flip-flop, no write to the object or to either status.
    await unchangedOver(() => skrGet('configmap', 'config', target), [first, second]);
    expect((await skrGet('configmap', 'config', target))?.data).toEqual({ mode: 'one', a: '1' });

    // The first lets go: the second's next run applies its own values.
    await remove(first);
    await eventually(
      async () =>
        expect((await skrGet('configmap', 'config', target))?.data).toEqual({ mode: 'two', b: '2' }),
      60_000,
      500,
    );
    await waitSr(s, second, ready, 60_000);
    await remove(second);
    await eventually(async () => expect(await skrGet('namespace', target)).toBeUndefined(), 120_000, 500);
  });

  it('a Delete item on an object another SyncResource names is refused, and the object stays', async () => {
    const target = uniqueName('keep');
    const [owner, deleter] = [uniqueName('owner'), uniqueName('deleter')];
    await apply(owner, [nsItem(target), cmItem('config', 'config', target, { k: 'v' })]);
    await waitSr(s, owner, ready, 60_000);
    const before = await skrGet('configmap', 'config', target);
    await apply(deleter, [
      cmItem('drop', 'config', target, {}, 'Delete'),
      cmItem('other', 'other', target, { x: 'y' }),
    ]);
    const sr = await waitSr(
      s,
      deleter,
      (x) => expect(x?.status?.items?.find((i) => i.name === 'drop')?.reason).toBe('Conflict'),
      60_000,
    );
    expect(sr?.status?.items?.find((i) => i.name === 'drop')?.message).toContain(
      `SyncResource ${s.ns}/${owner}`,
    );
    expect(sr?.status?.items?.find((i) => i.name === 'other')?.state).toBe('Ready');
    await sleep(3_000);
    const after = await skrGet('configmap', 'config', target);
    expect(after?.metadata.uid).toBe(before?.metadata.uid);
    expect(after?.metadata.deletionTimestamp).toBeUndefined();
    await remove(deleter);
    await remove(owner);
    await eventually(async () => expect(await skrGet('namespace', target)).toBeUndefined(), 120_000, 500);
  });

  it('a mark forged in the SKR makes nothing ours: an object a customer labelled and annotated as ours, named by a SyncResource, is released when it lets go, never deleted', async () => {
    const target = uniqueName('forged');
    const name = uniqueName('victim');
    await kubectl(skr, ['create', 'namespace', target]);
    // The SKR's admin copies our label and the former owner annotation onto objects of their own.
    const forged = {
      labels: { 'kcp-sync.kyma-project.io/managed-by': 'kcp-sync-resource' },
      annotations: { 'kcp-sync.kyma-project.io/owned-by': `${s.ns}/${uniqueName('nobody')}` },
    };
    await kubectl(
      skr,
      ['apply', '--server-side', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'theirs', namespace: target, ...forged },
        data: { mine: 'customer' },
      }),
    );
    const before = await skrGet('configmap', 'theirs', target);
    await apply(name, [cmItem('config', 'theirs', target, { k: 'v' })]);
    const sr = await waitSr(s, name, ready, 60_000);
    // No SyncResource created it (the KCP's inventories say so): adopted, whatever its marks say.
    expect(sr?.status?.items?.[0]?.reason).toBe('Adopted');
    expect(sr?.status?.synced?.[0]?.adopted).toBe(true);
    await remove(name);
    const after = await skrGet('configmap', 'theirs', target);
    expect(after?.metadata.uid).toBe(before?.metadata.uid);
    expect(after?.metadata.deletionTimestamp).toBeUndefined();
    expect(after?.data).toEqual({ mine: 'customer', k: 'v' });
    expect(managers(after)).not.toContain(MANAGER(name));
    await kubectl(skr, ['delete', 'namespace', target, '--wait=false']);
  });

  it('objects written the former way (one field manager, an owner annotation) are taken over on the first run: no Conflict, no value changed', async () => {
    const target = uniqueName('former');
    const name = uniqueName('former');
    const owner = `${s.ns}/${name}`;
    const marks = {
      labels: { 'kcp-sync.kyma-project.io/managed-by': 'kcp-sync-resource' },
      annotations: {
        'kcp-sync.kyma-project.io/owned-by': owner,
        'kcp-sync.kyma-project.io/applied-digest': '0123456789abcdef0123456789abcdef',
      },
    };
    // As the former version wrote them: server-side apply (forced) as kcp-sync-resource.
    const former = [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: target, ...marks } },
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'config', namespace: target, ...marks },
        data: { k: 'v' },
      },
    ];
    for (const o of former)
      await kubectl(
        skr,
        ['apply', '--server-side', '--force-conflicts', '--field-manager=kcp-sync-resource', '-f', '-'],
        JSON.stringify(o),
      );
    const cmBefore = await skrGet('configmap', 'config', target);
    // Its SyncResource with the former inventory: created suspended, its inventory written as the former version did.
    const items = [nsItem(target), cmItem('config', 'config', target, { k: 'v' })];
    await apply(name, items, { suspend: true });
    await waitSr(s, name, (x) => expect(x?.status?.state).toBeDefined(), 60_000);
    const synced = [
      { item: 'ns', apiVersion: 'v1', kind: 'Namespace', name: target, digest: 'former' },
      {
        item: 'config',
        apiVersion: 'v1',
        kind: 'ConfigMap',
        namespace: target,
        name: 'config',
        digest: 'former',
      },
    ];
    await kubectl(s.kcp, [
      'patch',
      'syncresource',
      name,
      '-n',
      s.ns,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status: { synced } }),
    ]);
    await apply(name, items, { suspend: false });
    const sr = await waitSr(s, name, ready, 60_000);
    expect(
      sr?.status?.items?.map((i) => i.reason).filter((r) => r === 'Conflict' || r === 'Adopted'),
    ).toEqual([]);
    const cm = await skrGet('configmap', 'config', target);
    expect(cm?.data).toEqual(cmBefore?.data);
    expect(cm?.metadata.uid).toBe(cmBefore?.metadata.uid);
    // Its own manager holds the fields; the former manager and its owner and digest annotations are gone.
    expect(managers(cm)).toEqual([MANAGER(name)]);
    expect(cm?.metadata.annotations ?? {}).toEqual({});
    expect(cm?.metadata.labels).toEqual(marks.labels);
    expect(managers(await skrGet('namespace', target))).toEqual([MANAGER(name)]);
    await remove(name);
    await eventually(async () => expect(await skrGet('namespace', target)).toBeUndefined(), 120_000, 500);
  });

  it('the examples (one file per SyncResource) applied together on one Kyma end Ready, and each deletes cleanly', async () => {
    const dir = join(import.meta.dirname, '..', 'examples');
    // nfs-delete.yaml is the next revision of nfs.yaml (the same SyncResource): applied after it.
    // nfs-team.yaml onboards a team namespace of its own: test/tenancy.test.ts runs it.
    const files = (await readdir(dir))
      .filter((f) => f.endsWith('.yaml') && f !== 'nfs-delete.yaml' && f !== 'nfs-team.yaml')
      .sort();
    const names: string[] = [];
    for (const f of files) {
      const text = await readFile(join(dir, f), 'utf8');
      const sr = readYamlDocuments(text).find(
        (d): d is SyncResource => (d as KubeObject | null)?.kind === 'SyncResource',
      )!;
      names.push(sr.metadata.name);
      await kubectl(s.kcp, ['apply', '-f', '-'], text);
    }
    for (const n of names) await waitSr(s, n, ready, 180_000);
    await kubectl(s.kcp, ['apply', '-f', join(dir, 'nfs-delete.yaml')]);
    await waitSr(s, 'nfs-kyma-1', ready, 120_000);
    const synced = new Map<string, NonNullable<NonNullable<SyncResource['status']>['synced']>>();
    for (const n of names) synced.set(n, (await getSr(s, n))?.status?.synced ?? []);
    // Deleted one by one: the others stay Ready, holding what they share.
    for (const [i, n] of names.entries()) {
      await remove(n);
      await sleep(2_500);
      for (const other of names.slice(i + 1)) await waitSr(s, other, ready, 60_000);
    }
    // Nothing of theirs is left.
    for (const e of [...synced.values()].flat()) {
      const kind = e.apiVersion.includes('/')
        ? `${e.kind}.${e.apiVersion.split('/')[1]}.${e.apiVersion.split('/')[0]}`
        : e.kind;
      await eventually(
        async () => {
          const left = await skrGet(kind, e.name, e.namespace).catch(() => undefined);
          expect({ object: `${e.kind}/${e.namespace ?? ''}/${e.name}`, left }).toEqual({
            object: `${e.kind}/${e.namespace ?? ''}/${e.name}`,
            left: undefined,
          });
        },
        120_000,
        500,
      );
    }
  }, 900_000);
});
