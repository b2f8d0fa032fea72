// Manifests as upstream projects write them, against a real SKR: cluster-scoped objects
// that carry a namespace, Kyma's own managed-by label, and objects marked by an earlier
// version of the product (the former operator.kyma-project.io/ keys).
import { describe, expect, it } from 'vitest';
import { PatchType } from '../lib/kube/client.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { applyObject, mustFind } from '../lib/kube/objects.ts';
import {
  HASH_ANNOTATION,
  LEGACY_MARKS,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  OWNER_ANNOTATION,
} from '../lib/model.ts';
import { Harness } from './engine-harness.ts';
import { heldBy } from './helpers.ts';

const item = Harness.item;

describe('engine: manifests as kubectl reads them', () => {
  it('applies a cluster-scoped object whose manifest names a namespace as kubectl does: without one', async () => {
    const h = await new Harness('clusterns').init();
    const role = (ns: string) =>
      `apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: ${h.name}, namespace: ${ns}}\nrules: []\n`;
    await h.put([{ name: 'role', strategy: 'CreateAndSync', resource: role('kyma-system') }]);
    let { sr } = await h.sync();
    expect(item(sr, 'role')).toMatchObject({ state: 'Ready', reason: 'Created' });
    expect(sr?.status?.synced).toEqual([expect.objectContaining({ kind: 'ClusterRole', name: h.name })]);
    expect(sr?.status?.synced?.[0]).not.toHaveProperty('namespace');
    const live = await h.skrGet('rbac.authorization.k8s.io/v1', 'ClusterRole', h.name);
    expect(heldBy(live!, `kcp-system/${h.name}`)).toBe(true);
    // No false drift over resyncs: the namespace the server ignores is not a difference.
    const writes = h.statusWrites;
    ({ sr } = await h.sync());
    ({ sr } = await h.sync());
    expect(item(sr, 'role')).toMatchObject({ state: 'Ready', reason: 'Unchanged' });
    expect(h.statusWrites).toBe(writes + 1);
    // The same object named with another namespace, or none, is the same object.
    await h.put([
      { name: 'role', strategy: 'CreateAndSync', resource: role('kyma-system') },
      {
        name: 'again',
        strategy: 'CreateAndSync',
        resource: role('other').replace('namespace: other', 'namespace: default'),
      },
    ]);
    ({ sr } = await h.sync());
    expect(item(sr, 'again')).toMatchObject({ state: 'Error', reason: 'DuplicateObject' });
    // Removing the item prunes the object.
    await h.put([]);
    ({ sr } = await h.sync());
    expect(await h.skrGet('rbac.authorization.k8s.io/v1', 'ClusterRole', h.name)).toBeUndefined();
    expect(sr?.status?.synced ?? []).toEqual([]);
  });

  it("lets a manifest set Kyma's own operator.kyma-project.io/managed-by label, next to the product's mark", async () => {
    const h = await new Harness('kymalabel').init();
    const cm = `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: busola\n  namespace: ${h.ns}\n  labels: {operator.kyma-project.io/managed-by: kyma, busola.io/extension: resource}\ndata: {k: v}\n`;
    await h.put([{ name: 'cm', strategy: 'CreateAndSync', resource: cm }]);
    let { sr } = await h.sync();
    expect(item(sr, 'cm')).toMatchObject({ state: 'Ready', reason: 'Created' });
    const live = await h.skrGet('v1', 'ConfigMap', 'busola', h.ns);
    expect(live?.metadata.labels).toMatchObject({
      [LEGACY_MARKS.label]: 'kyma',
      [MANAGED_BY_LABEL]: MANAGED_BY_VALUE,
    });
    ({ sr } = await h.sync());
    expect(item(sr, 'cm')).toMatchObject({ state: 'Ready', reason: 'Unchanged' });
  });

  it('takes objects marked by an earlier version as its own and moves them to the new marks', async () => {
    const h = await new Harness('upgrade').init();
    const owner = `kcp-system/${h.name}`;
    await h.skrCreate({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'found', namespace: h.ns },
      data: { theirs: 'x' },
    });
    await h.put([
      { name: 'made', strategy: 'CreateAndSync', resource: h.cm('made', { k: 'v' }) },
      { name: 'found', strategy: 'CreateAndSync', resource: h.cm('found', { k: 'v' }) },
      { name: 'once', strategy: 'CreateAndIgnore', resource: h.cm('once', { k: 'v' }) },
    ]);
    await h.sync();
    // Make the objects look as the earlier version left them: its server-side apply put
    // the former marks on what it created; a JSON patch put them on what it adopted.
    const info = await mustFind(h.skr, 'v1', 'ConfigMap');
    for (const name of ['made', 'once']) {
      await applyObject(
        h.skr,
        info,
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          data: { k: 'v' },
          metadata: {
            name,
            namespace: h.ns,
            labels: { [LEGACY_MARKS.label]: MANAGED_BY_VALUE },
            annotations: { [LEGACY_MARKS.owner]: owner, [LEGACY_MARKS.hash]: 'old' },
          },
        },
        h.config.fieldManager,
      );
    }
    const pointer = (k: string) => k.replace('/', '~1');
    await h.skr.client.call('PATCH', resourcePath(info, h.ns, 'found'), {
      contentType: PatchType.json,
      query: { fieldManager: h.config.fieldManager },
      body: [
        { op: 'remove', path: `/metadata/labels/${pointer(MANAGED_BY_LABEL)}` },
        { op: 'add', path: `/metadata/labels/${pointer(LEGACY_MARKS.label)}`, value: MANAGED_BY_VALUE },
        { op: 'add', path: `/metadata/annotations`, value: { [LEGACY_MARKS.owner]: owner } },
      ],
    });
    for (const name of ['made', 'found', 'once']) {
      const old = await h.skrGet('v1', 'ConfigMap', name, h.ns);
      expect(old?.metadata.annotations?.[OWNER_ANNOTATION]).toBeUndefined();
      expect(old?.metadata.annotations?.[LEGACY_MARKS.owner]).toBe(owner);
    }
    let { sr } = await h.sync();
    // made: its values and this SyncResource's field manager are there already: only the marks move.
    expect(sr?.status?.items?.map((i) => `${i.name}:${i.state}:${i.reason}`)).toEqual([
      'made:Ready:Unchanged',
      'found:Ready:Adopted',
      'once:Ready:Ignored',
    ]);
    for (const name of ['made', 'found', 'once']) {
      const live = await h.skrGet('v1', 'ConfigMap', name, h.ns);
      expect({ name, labels: live?.metadata.labels ?? {} }).toEqual({
        name,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
      });
      const annotations = live?.metadata.annotations ?? {};
      // No mark names a SyncResource now: its field manager does.
      expect({
        name,
        owner: annotations[OWNER_ANNOTATION],
        legacy: Object.keys(annotations).filter((a) => a.startsWith('operator.')),
      }).toEqual({ name, owner: undefined, legacy: [] });
    }
    const made = await h.skrGet('v1', 'ConfigMap', 'made', h.ns);
    expect(made?.metadata.annotations?.[HASH_ANNOTATION]).toBeUndefined();
    expect(made?.data).toEqual({ k: 'v' });
    expect(heldBy(made!, owner)).toBe(true);
    // The earlier version's one field manager holds nothing any more.
    expect(
      ((made?.metadata.managedFields ?? []) as { manager?: string }[]).map((f) => f.manager),
    ).not.toContain(h.config.fieldManager);
    // Settled: the next run writes nothing in the SKR.
    ({ sr } = await h.sync());
    expect(sr?.status?.items?.map((i) => i.reason)).toEqual(['Unchanged', 'Adopted', 'Ignored']);
    // Removal prunes what it created and releases what it adopted, as before the upgrade.
    await h.put([]);
    await h.sync();
    expect(await h.skrGet('v1', 'ConfigMap', 'made', h.ns)).toBeUndefined();
    expect(await h.skrGet('v1', 'ConfigMap', 'once', h.ns)).toBeUndefined();
    const found = await h.skrGet('v1', 'ConfigMap', 'found', h.ns);
    expect(found?.data).toMatchObject({ theirs: 'x' });
    expect(
      Object.keys({ ...found?.metadata.labels, ...found?.metadata.annotations }).filter((k) =>
        k.includes('kyma-project.io'),
      ),
    ).toEqual([]);
  });

  it('prunes an object the earlier version created and a later spec no longer names', async () => {
    const h = await new Harness('upgrade-prune').init();
    await h.put([{ name: 'made', strategy: 'CreateAndSync', resource: h.cm('gone-soon', { k: 'v' }) }]);
    await h.sync();
    const info = await mustFind(h.skr, 'v1', 'ConfigMap');
    await applyObject(
      h.skr,
      info,
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        data: { k: 'v' },
        metadata: {
          name: 'gone-soon',
          namespace: h.ns,
          labels: { [LEGACY_MARKS.label]: MANAGED_BY_VALUE },
          annotations: { [LEGACY_MARKS.owner]: `kcp-system/${h.name}` },
        },
      },
      h.config.fieldManager,
    );
    await h.put([]);
    const { sr } = await h.sync();
    expect(await h.skrGet('v1', 'ConfigMap', 'gone-soon', h.ns)).toBeUndefined();
    expect(sr?.status?.synced ?? []).toEqual([]);
  });
});

describe('engine: onImmutableChange and suspend', () => {
  // Service IPs are cluster-wide: each run takes its own from the SKR's service range (10.96.0.0/12).
  const octet = () => 1 + Math.floor(Math.random() * 250);
  const ip = (last: number, third = octet()) => `10.100.${third}.${last}`;
  const third = octet();
  const job = (ns: string, image: string) =>
    `apiVersion: batch/v1\nkind: Job\nmetadata: {name: once, namespace: ${ns}}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: ${image}}]\n`;
  const deploy = (ns: string, app: string) =>
    `apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ${ns}}\nspec:\n  selector: {matchLabels: {app: ${app}}}\n  template:\n    metadata: {labels: {app: ${app}}}\n    spec: {containers: [{name: c, image: nginx}]}\n`;
  const svc = (ns: string, ip: string) =>
    `apiVersion: v1\nkind: Service\nmetadata: {name: fixed, namespace: ${ns}}\nspec:\n  clusterIP: ${ip}\n  ports: [{port: 80}]\n`;
  const sc = (name: string, server: string) =>
    `apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: ${name}}\nprovisioner: nfs.csi.k8s.io\nparameters: {server: ${server}}\n`;
  const pvc = (ns: string, cls: string) =>
    `apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: ${ns}}\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: ${cls}\n  resources: {requests: {storage: 1Gi}}\n`;

  it('recreates a Job, Deployment, Service, StorageClass and claim when an apply changes an immutable field, only when asked', async () => {
    const h = await new Harness('recreate').init();
    const kinds = (v: number, recreate: boolean) =>
      [
        {
          name: 'job',
          strategy: 'CreateAndSync' as const,
          resource: job(h.ns, v ? 'busybox:2' : 'busybox:1'),
        },
        { name: 'deploy', strategy: 'CreateAndSync' as const, resource: deploy(h.ns, v ? 'b' : 'a') },
        {
          name: 'svc',
          strategy: 'CreateAndSync' as const,
          resource: svc(h.ns, v ? ip(61, third) : ip(60, third)),
        },
        {
          name: 'sc',
          strategy: 'CreateAndSync' as const,
          resource: sc(`${h.name}-sc`, v ? 'nfs-2' : 'nfs-1'),
        },
        { name: 'pvc', strategy: 'CreateAndSync' as const, resource: pvc(h.ns, v ? 'other' : 'first') },
      ].map((i) => (recreate ? { ...i, onImmutableChange: 'Recreate' as const } : i));
    await h.put(kinds(0, false));
    let { sr, result } = await h.sync();
    expect(sr?.status?.items?.map((i) => i.reason)).toEqual([
      'Created',
      'Created',
      'Created',
      'Created',
      'Created',
    ]);
    const uids = new Map<string, string | undefined>();
    const objects: [string, string, string, string, string | undefined][] = [
      ['job', 'batch/v1', 'Job', 'once', h.ns],
      ['deploy', 'apps/v1', 'Deployment', 'web', h.ns],
      ['svc', 'v1', 'Service', 'fixed', h.ns],
      ['sc', 'storage.k8s.io/v1', 'StorageClass', `${h.name}-sc`, undefined],
      ['pvc', 'v1', 'PersistentVolumeClaim', 'data', h.ns],
    ];
    for (const [item, av, kind, name, ns] of objects)
      uids.set(item, (await h.skrGet(av, kind, name, ns))?.metadata.uid);
    // Off by default: every change is refused, and nothing is deleted.
    await h.put(kinds(1, false));
    ({ sr } = await h.sync());
    for (const [item, av, kind, name, ns] of objects) {
      expect({ item, reason: Harness.item(sr, item)?.reason }).toEqual({ item, reason: 'ApplyFailed' });
      expect((await h.skrGet(av, kind, name, ns))?.metadata.uid).toBe(uids.get(item));
    }
    // Asked for: each is deleted and created anew with the new spec.
    await h.put(kinds(1, true));
    ({ sr, result } = await h.sync());
    if (sr?.status?.items?.some((i) => i.reason === 'Recreating')) ({ sr, result } = await h.sync());
    expect(sr?.status?.items?.map((i) => `${i.name}:${i.state}:${i.reason}`).sort()).toEqual(
      objects.map(([item]) => `${item}:Ready:Recreated`).sort(),
    );
    expect(Harness.item(sr, 'job')?.message).toMatch(
      /^Job .*\/once was deleted and created again: .*immutable/,
    );
    expect(
      result.changes
        .filter((c) => c.action === 'recreated')
        .map((c) => c.item)
        .sort(),
    ).toEqual(objects.map(([item]) => item).sort());
    for (const [item, av, kind, name, ns] of objects) {
      const live = await h.skrGet(av, kind, name, ns);
      expect({ item, same: live?.metadata.uid === uids.get(item) }).toEqual({ item, same: false });
      expect({ item, ours: heldBy(live!, `kcp-system/${h.name}`) }).toEqual({ item, ours: true });
    }
    expect((await h.skrGet('v1', 'Service', 'fixed', h.ns))?.spec).toMatchObject({
      clusterIP: ip(61, third),
    });
    // Settled again: the next run recreates nothing.
    ({ sr } = await h.sync());
    expect(sr?.status?.items?.map((i) => i.reason)).toEqual([
      'Unchanged',
      'Unchanged',
      'Unchanged',
      'Unchanged',
      'Unchanged',
    ]);
  });

  it('never recreates an adopted object', async () => {
    const h = await new Harness('recreate-adopted').init();
    const t = octet();
    await h.skrCreate({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'fixed', namespace: h.ns },
      spec: { clusterIP: ip(70, t), ports: [{ port: 80 }] },
    });
    await h.put([
      {
        name: 'svc',
        strategy: 'CreateAndSync',
        resource: svc(h.ns, ip(70, t)),
        onImmutableChange: 'Recreate',
      },
    ]);
    let { sr } = await h.sync();
    expect(Harness.item(sr, 'svc')?.reason).toBe('Adopted');
    const uid = (await h.skrGet('v1', 'Service', 'fixed', h.ns))?.metadata.uid;
    await h.put([
      {
        name: 'svc',
        strategy: 'CreateAndSync',
        resource: svc(h.ns, ip(71, t)),
        onImmutableChange: 'Recreate',
      },
    ]);
    ({ sr } = await h.sync());
    expect(Harness.item(sr, 'svc')).toMatchObject({ state: 'Error', reason: 'ApplyFailed' });
    expect((await h.skrGet('v1', 'Service', 'fixed', h.ns))?.metadata.uid).toBe(uid);
  });

  it('writes nothing to the SKR while suspended, says so, and applies again once lifted', async () => {
    const h = await new Harness('suspend').init();
    await h.put([
      { name: 'cm', strategy: 'CreateAndSync', resource: h.cm('kept', { k: 'v1' }) },
      { name: 'old', strategy: 'CreateAndSync', resource: h.cm('old', { k: 'v' }) },
    ]);
    await h.sync();
    const suspend = (on: boolean) =>
      h.kcp.client.call(
        'PATCH',
        resourcePath(
          {
            apiVersion: 'operator.kyma-project.io/v1alpha1',
            kind: 'SyncResource',
            resource: 'syncresources',
            namespaced: true,
            hasStatus: true,
          },
          'kcp-system',
          h.name,
        ),
        {
          body: { spec: { suspend: on } },
          contentType: PatchType.merge,
        },
      );
    await suspend(true);
    // A new text, a removed item and drift in the SKR: none is acted on.
    await h.put([{ name: 'cm', strategy: 'CreateAndSync', resource: h.cm('kept', { k: 'v2' }) }]);
    await h.skrPatch('v1', 'ConfigMap', 'kept', h.ns, { data: { k: 'edited' } });
    const before = { reads: h.skr.client.requests, writes: h.skr.client.writes };
    let { sr } = await h.sync();
    expect(h.skr.client.requests - before.reads).toBe(0);
    expect(h.skr.client.writes - before.writes).toBe(0);
    expect(sr?.status).toMatchObject({
      state: 'Warning',
      conditions: expect.arrayContaining([
        expect.objectContaining({ type: 'Resources', reason: 'Suspended' }),
      ]),
    });
    expect((await h.skrGet('v1', 'ConfigMap', 'kept', h.ns))?.data).toEqual({ k: 'edited' });
    expect(await h.skrGet('v1', 'ConfigMap', 'old', h.ns)).toBeDefined();
    await suspend(false);
    ({ sr } = await h.sync());
    expect(sr?.status?.state).toBe('Ready');
    expect((await h.skrGet('v1', 'ConfigMap', 'kept', h.ns))?.data).toEqual({ k: 'v2' });
    expect(await h.skrGet('v1', 'ConfigMap', 'old', h.ns)).toBeUndefined();
  });

  it('leaves the objects of a suspended SyncResource that is deleted as they are', async () => {
    const h = await new Harness('suspend-delete').init();
    await h.put([{ name: 'cm', strategy: 'CreateAndSync', resource: h.cm('stays', { k: 'v' }) }]);
    await h.sync();
    await h.kcp.client.call(
      'PATCH',
      resourcePath(
        {
          apiVersion: 'operator.kyma-project.io/v1alpha1',
          kind: 'SyncResource',
          resource: 'syncresources',
          namespaced: true,
          hasStatus: true,
        },
        'kcp-system',
        h.name,
      ),
      {
        body: { spec: { suspend: true } },
        contentType: PatchType.merge,
      },
    );
    await h.delete();
    const writes = h.skr.client.writes;
    await h.sync();
    expect(await h.get()).toBeUndefined();
    expect(h.skr.client.writes).toBe(writes);
    const stays = await h.skrGet('v1', 'ConfigMap', 'stays', h.ns);
    expect(stays?.metadata.labels?.[MANAGED_BY_LABEL]).toBe(MANAGED_BY_VALUE);
    expect(heldBy(stays!, `kcp-system/${h.name}`)).toBe(true);
  });
});
