// Manifests as upstream projects write them, against a real SKR: cluster-scoped objects
// that carry a namespace, Kyma's own managed-by label, and objects marked by an earlier
// version of the product (the former operator.kyma-project.io/ keys).
import { describe, expect, it } from 'vitest';
import { PatchType } from '../lib/kube/client.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { applyObject, mustFind } from '../lib/kube/objects.ts';
import { HASH_ANNOTATION, LEGACY_MARKS, MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER_ANNOTATION } from '../lib/model.ts';
import { Harness } from './engine-harness.ts';

const item = Harness.item;

describe('engine: manifests as kubectl reads them', () => {
  it('applies a cluster-scoped object whose manifest names a namespace as kubectl does: without one', async () => {
    const h = await new Harness('clusterns').init();
    const role = (ns: string) => `apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: ${h.name}, namespace: ${ns}}\nrules: []\n`;
    await h.put([{ name: 'role', strategy: 'CreateAndSync', resource: role('kyma-system') }]);
    let { sr } = await h.sync();
    expect(item(sr, 'role')).toMatchObject({ state: 'Ready', reason: 'Created' });
    expect(sr?.status?.synced).toEqual([expect.objectContaining({ kind: 'ClusterRole', name: h.name })]);
    expect(sr?.status?.synced?.[0]).not.toHaveProperty('namespace');
    const live = await h.skrGet('rbac.authorization.k8s.io/v1', 'ClusterRole', h.name);
    expect(live?.metadata.annotations?.[OWNER_ANNOTATION]).toBe(`kcp-system/${h.name}`);
    // No false drift over resyncs: the namespace the server ignores is not a difference.
    const writes = h.statusWrites;
    ({ sr } = await h.sync());
    ({ sr } = await h.sync());
    expect(item(sr, 'role')).toMatchObject({ state: 'Ready', reason: 'Unchanged' });
    expect(h.statusWrites).toBe(writes + 1);
    // The same object named with another namespace, or none, is the same object.
    await h.put([
      { name: 'role', strategy: 'CreateAndSync', resource: role('kyma-system') },
      { name: 'again', strategy: 'CreateAndSync', resource: role('other').replace('namespace: other', 'namespace: default') },
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
    expect(live?.metadata.labels).toMatchObject({ [LEGACY_MARKS.label]: 'kyma', [MANAGED_BY_LABEL]: MANAGED_BY_VALUE });
    ({ sr } = await h.sync());
    expect(item(sr, 'cm')).toMatchObject({ state: 'Ready', reason: 'Unchanged' });
  });

  it('takes objects marked by an earlier version as its own and moves them to the new marks', async () => {
    const h = await new Harness('upgrade').init();
    const owner = `kcp-system/${h.name}`;
    await h.skrCreate({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'found', namespace: h.ns }, data: { theirs: 'x' } });
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
      await applyObject(h.skr, info, {
        apiVersion: 'v1', kind: 'ConfigMap', data: { k: 'v' },
        metadata: {
          name, namespace: h.ns, labels: { [LEGACY_MARKS.label]: MANAGED_BY_VALUE },
          annotations: { [LEGACY_MARKS.owner]: owner, [LEGACY_MARKS.hash]: 'old' },
        },
      }, h.config.fieldManager);
    }
    const pointer = (k: string) => k.replace('/', '~1');
    await h.skr.client.call('PATCH', resourcePath(info, h.ns, 'found'), {
      contentType: PatchType.json,
      query: { fieldManager: h.config.fieldManager },
      body: [
        { op: 'remove', path: `/metadata/labels/${pointer(MANAGED_BY_LABEL)}` },
        { op: 'remove', path: `/metadata/annotations/${pointer(OWNER_ANNOTATION)}` },
        { op: 'add', path: `/metadata/labels/${pointer(LEGACY_MARKS.label)}`, value: MANAGED_BY_VALUE },
        { op: 'add', path: `/metadata/annotations/${pointer(LEGACY_MARKS.owner)}`, value: owner },
      ],
    });
    for (const name of ['made', 'found', 'once']) {
      const old = await h.skrGet('v1', 'ConfigMap', name, h.ns);
      expect(old?.metadata.annotations?.[OWNER_ANNOTATION]).toBeUndefined();
      expect(old?.metadata.annotations?.[LEGACY_MARKS.owner]).toBe(owner);
    }
    let { sr } = await h.sync();
    expect(sr?.status?.items?.map((i) => `${i.name}:${i.state}:${i.reason}`)).toEqual(['made:Ready:Applied', 'found:Ready:Adopted', 'once:Ready:Ignored']);
    for (const name of ['made', 'found', 'once']) {
      const live = await h.skrGet('v1', 'ConfigMap', name, h.ns);
      expect({ name, labels: live?.metadata.labels ?? {} }).toEqual({ name, labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE } });
      const annotations = live?.metadata.annotations ?? {};
      expect({ name, owner: annotations[OWNER_ANNOTATION], legacy: Object.keys(annotations).filter((a) => a.startsWith('operator.')) })
        .toEqual({ name, owner, legacy: [] });
    }
    expect((await h.skrGet('v1', 'ConfigMap', 'made', h.ns))?.metadata.annotations?.[HASH_ANNOTATION]).toBeDefined();
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
    expect(Object.keys({ ...found?.metadata.labels, ...found?.metadata.annotations }).filter((k) => k.includes('kyma-project.io'))).toEqual([]);
  });

  it('prunes an object the earlier version created and a later spec no longer names', async () => {
    const h = await new Harness('upgrade-prune').init();
    await h.put([{ name: 'made', strategy: 'CreateAndSync', resource: h.cm('gone-soon', { k: 'v' }) }]);
    await h.sync();
    const info = await mustFind(h.skr, 'v1', 'ConfigMap');
    await applyObject(h.skr, info, {
      apiVersion: 'v1', kind: 'ConfigMap', data: { k: 'v' },
      metadata: {
        name: 'gone-soon', namespace: h.ns, labels: { [LEGACY_MARKS.label]: MANAGED_BY_VALUE },
        annotations: { [LEGACY_MARKS.owner]: `kcp-system/${h.name}` },
      },
    }, h.config.fieldManager);
    await h.put([]);
    const { sr } = await h.sync();
    expect(await h.skrGet('v1', 'ConfigMap', 'gone-soon', h.ns)).toBeUndefined();
    expect(sr?.status?.synced ?? []).toEqual([]);
  });
});
