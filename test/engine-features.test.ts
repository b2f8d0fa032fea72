// Engine behaviour beyond the strategy table, against a real SKR: subresources,
// ownership conflicts, restricted kinds, ordering with CRDs, rename and move,
// isolation of bad items, unknown kinds, namespaces, deletion policies.
import { describe, expect, it } from 'vitest';
import { ListCache } from '../lib/kube/listcache.ts';
import { FINALIZER, MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../lib/model.ts';
import { heldBy } from './helpers.ts';
import { Harness } from './engine-harness.ts';
import { eventually } from './helpers.ts';

const item = Harness.item;

const crd = Harness.crd;

describe('engine', () => {
  it('applies Namespace, CRD and CR of one SyncResource in order, and the module CR status (the seed case)', async () => {
    const h = await new Harness('order').init();
    const group = `${h.name}.example.io`;
    const ns = `${h.name}-sys`;
    const cr = `apiVersion: ${group}/v1alpha1\nkind: SomeModule\nmetadata: {name: module-cr-name, namespace: ${ns}}\nspec: {size: 1}\n`;
    const status = `apiVersion: ${group}/v1alpha1\nkind: SomeModule\nmetadata: {name: module-cr-name, namespace: ${ns}}\nstatus: {state: Ready}\n`;
    // Listed in the wrong order on purpose.
    await h.put([
      { name: 'module-cr', strategy: 'CreateAndSync', resource: cr, subresource: status },
      { name: 'crd', strategy: 'CreateAndSync', resource: crd(group, 'SomeModule', 'somemodules') },
      {
        name: 'ns',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${ns}}\n`,
      },
    ]);
    let { sr } = await h.sync();
    expect(sr?.status?.items?.map((i) => `${i.name}:${i.state}:${i.reason}`)).toEqual([
      'module-cr:Ready:Created',
      'crd:Ready:Created',
      'ns:Ready:Created',
    ]);
    const live = await h.skrGet(`${group}/v1alpha1`, 'SomeModule', 'module-cr-name', ns);
    expect(live?.status).toEqual({ state: 'Ready' });
    expect(live?.spec).toEqual({ size: 1 });
    // Someone changes the status in the SKR: CreateAndSync writes it back.
    await h.skrPatchStatus(`${group}/v1alpha1`, 'SomeModule', 'module-cr-name', ns, {
      status: { state: 'Error' },
    });
    ({ sr } = await h.sync());
    expect(item(sr, 'module-cr')).toMatchObject({ state: 'Ready', reason: 'Applied' });
    expect((await h.skrGet(`${group}/v1alpha1`, 'SomeModule', 'module-cr-name', ns))?.status).toEqual({
      state: 'Ready',
    });
    // A subresource-only item patches the status of an existing object, never creates it.
    await h.put([
      { name: 'module-cr', strategy: 'CreateAndSync', resource: cr },
      { name: 'crd', strategy: 'CreateAndSync', resource: crd(group, 'SomeModule', 'somemodules') },
      {
        name: 'ns',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${ns}}\n`,
      },
      { name: 'status-only', strategy: 'CreateAndSync', subresource: status.replace('Ready', 'Warning') },
      {
        name: 'status-missing',
        strategy: 'CreateAndSync',
        subresource: status.replace('module-cr-name', 'absent'),
      },
    ]);
    ({ sr } = await h.sync());
    expect(item(sr, 'status-only')).toMatchObject({ state: 'Ready', reason: 'Applied' });
    expect((await h.skrGet(`${group}/v1alpha1`, 'SomeModule', 'module-cr-name', ns))?.status).toEqual({
      state: 'Warning',
    });
    expect(item(sr, 'status-missing')).toMatchObject({ state: 'Warning', reason: 'NotFound' });
    expect(await h.skrGet(`${group}/v1alpha1`, 'SomeModule', 'absent', ns)).toBeUndefined();
    // Deleting everything goes in reverse order: CR, CRD, then Namespace.
    await h.delete();
    ({ sr } = await h.sync());
    await eventually(
      async () => {
        const r = await h.sync().catch(() => undefined);
        expect(r?.sr).toBeUndefined();
      },
      60_000,
      500,
    );
    expect(
      await h.skrGet('apiextensions.k8s.io/v1', 'CustomResourceDefinition', `somemodules.${group}`),
    ).toBeUndefined();
  });

  it('fails an item that would set another value on a field another SyncResource holds with Conflict, and never overwrites it', async () => {
    const a = await new Harness('own-a').init();
    const b = await new Harness('own-b').init();
    await a.put([{ name: 'x', strategy: 'CreateAndSync', resource: a.cm('shared', { by: 'a' }) }]);
    await a.sync();
    await b.put([{ name: 'y', strategy: 'CreateAndSync', resource: a.cm('shared', { by: 'b', more: 'b' }) }]);
    const { sr } = await b.sync();
    expect(item(sr, 'y')).toMatchObject({
      state: 'Error',
      reason: 'Conflict',
      message: `ConfigMap ${a.ns}/shared: field .data.by is set to another value by SyncResource kcp-system/${a.name}; nothing was forced`,
    });
    expect(sr?.status?.state).toBe('Error');
    const live = await a.skrGet('v1', 'ConfigMap', 'shared', a.ns);
    // Nothing of B's was written, not even the field A does not set.
    expect(live?.data).toEqual({ by: 'a' });
    expect(heldBy(live!, `kcp-system/${a.name}`)).toBe(true);
    expect(heldBy(live!, `kcp-system/${b.name}`)).toBe(false);
    // B removing its item must not prune A's object, nor take A's fields or marks.
    await b.put([]);
    await b.sync();
    const after = await a.skrGet('v1', 'ConfigMap', 'shared', a.ns);
    expect(after?.metadata.uid).toBe(live?.metadata.uid);
    expect(after?.data).toEqual({ by: 'a' });
    expect(after?.metadata.labels?.[MANAGED_BY_LABEL]).toBe(MANAGED_BY_VALUE);
    expect((await a.sync()).sr?.status?.state).toBe('Ready');
  });

  it('restricts Secrets (Warning/Restricted) and isolates invalid and unknown items', async () => {
    const h = await new Harness('bad').init();
    await h.put([
      { name: 'good', strategy: 'CreateAndSync', resource: h.cm('good', { a: '1' }) },
      {
        name: 'secret',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ${h.ns}}\nstringData: {password: hunter2}\n`,
      },
      {
        name: 'typo',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: Configmap\nmetadata: {name: config-update, namespace: ${h.ns}}\ndata: {a: b}\n`,
      },
      {
        name: 'broken',
        strategy: 'CreateAndSync',
        resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: [oops\n',
      },
      { name: 'two', strategy: 'CreateAndSync', resource: `${h.cm('t1', {})}---\n${h.cm('t2', {})}` },
      { name: 'rejected', strategy: 'CreateAndSync', resource: h.cm('Not_A_DNS_Name', {}) },
      {
        name: 'scoped',
        strategy: 'CreateAndSync',
        resource: `apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: sc-${h.name}, namespace: ${h.ns}}\nprovisioner: x\n`,
      },
    ]);
    const { sr } = await h.sync();
    const byName = Object.fromEntries((sr?.status?.items ?? []).map((i) => [i.name, i]));
    expect(byName.good).toMatchObject({ state: 'Ready', reason: 'Created' });
    expect(byName.secret).toMatchObject({
      state: 'Warning',
      reason: 'Restricted',
      message:
        'kind v1/Secret is restricted and never synced; ship Secret values by reference (dataFrom.secretRef)',
    });
    expect(byName.typo).toMatchObject({
      state: 'Error',
      reason: 'UnknownKind',
      message: 'the SKR does not serve kind Configmap in v1',
    });
    expect(byName.broken).toMatchObject({ state: 'Error', reason: 'InvalidManifest' });
    expect(byName.broken!.message).toMatch(/^resource is not valid YAML: /);
    expect(byName.two).toMatchObject({
      state: 'Error',
      reason: 'InvalidManifest',
      message: 'resource holds 2 documents; an item takes exactly one object',
    });
    expect(byName.rejected).toMatchObject({ state: 'Error', reason: 'ApplyFailed' });
    expect(byName.rejected!.message).toMatch(/Not_A_DNS_Name.*(invalid|must consist)/i);
    // A cluster-scoped object's namespace is ignored, as kubectl and the API server ignore it.
    expect(byName.scoped).toMatchObject({ state: 'Ready', reason: 'Created' });
    expect(sr?.status?.state).toBe('Error');
    expect(sr?.status?.conditions?.[0]).toMatchObject({
      type: 'Resources',
      status: 'False',
      reason: 'Error',
    });
    expect(await h.skrGet('v1', 'ConfigMap', 'good', h.ns)).toBeDefined();
    expect(await h.skrGet('v1', 'Secret', 's', h.ns)).toBeUndefined();
    // The inventory holds exactly the created objects.
    expect(sr?.status?.synced?.map((e) => e.name).sort()).toEqual(['good', `sc-${h.name}`].sort());
  });

  it('puts namespaced objects without a namespace into the default namespace', async () => {
    const h = await new Harness('defns', {}).init();
    const local = { ...h.config, defaultNamespace: h.ns };
    Object.assign(h.config, local);
    await h.put([
      {
        name: 'cfg',
        strategy: 'CreateAndSync',
        resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: no-ns}\n',
      },
    ]);
    const { sr } = await h.sync();
    expect(item(sr, 'cfg')?.reason).toBe('Created');
    expect(await h.skrGet('v1', 'ConfigMap', 'no-ns', h.ns)).toBeDefined();
    expect(sr?.status?.synced?.[0]?.namespace).toBe(h.ns);
  });

  it('prunes the old object when an item renames it, and keeps an object moved to another item', async () => {
    const h = await new Harness('rename').init();
    await h.put([{ name: 'a', strategy: 'CreateAndSync', resource: h.cm('one', { v: '1' }) }]);
    await h.sync();
    // Rename the object within item a.
    await h.put([{ name: 'a', strategy: 'CreateAndSync', resource: h.cm('two', { v: '1' }) }]);
    let { sr } = await h.sync();
    expect(await h.skrGet('v1', 'ConfigMap', 'one', h.ns)).toBeUndefined();
    expect(await h.skrGet('v1', 'ConfigMap', 'two', h.ns)).toBeDefined();
    expect(sr?.status?.synced?.map((e) => `${e.item}:${e.name}`)).toEqual(['a:two']);
    // Move the same object to item b: not deleted, inventory follows.
    const uid = (await h.skrGet('v1', 'ConfigMap', 'two', h.ns))?.metadata.uid;
    await h.put([{ name: 'b', strategy: 'CreateAndSync', resource: h.cm('two', { v: '1' }) }]);
    ({ sr } = await h.sync());
    expect((await h.skrGet('v1', 'ConfigMap', 'two', h.ns))?.metadata.uid).toBe(uid);
    expect(sr?.status?.synced?.map((e) => `${e.item}:${e.name}`)).toEqual(['b:two']);
    // Move it to another namespace: the old one is pruned.
    const other = `${h.ns}-b`;
    await h.skrCreate({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: other } });
    await h.put([{ name: 'b', strategy: 'CreateAndSync', resource: h.cm('two', { v: '1' }, other) }]);
    ({ sr } = await h.sync());
    expect(await h.skrGet('v1', 'ConfigMap', 'two', h.ns)).toBeUndefined();
    expect(await h.skrGet('v1', 'ConfigMap', 'two', other)).toBeDefined();
    // An item whose text breaks keeps its object: nothing is lost to a typo.
    await h.put([{ name: 'b', strategy: 'CreateAndSync', resource: 'kind: [' }]);
    ({ sr } = await h.sync());
    expect(item(sr, 'b')?.reason).toBe('InvalidManifest');
    expect(await h.skrGet('v1', 'ConfigMap', 'two', other)).toBeDefined();
    expect(sr?.status?.synced?.map((e) => e.name)).toEqual(['two']);
  });

  it.each(['Delete', 'Orphan'] as const)('deletionPolicy %s', async (policy) => {
    const h = await new Harness(`dp-${policy.toLowerCase()}`).init();
    await h.put(
      [
        { name: 'a', strategy: 'CreateAndSync', resource: h.cm('a', {}) },
        { name: 'b', strategy: 'CreateAndIgnore', resource: h.cm('b', {}) },
      ],
      { deletionPolicy: policy },
    );
    await h.sync();
    await h.delete();
    const kcpWrites = h.kcp.client.writes;
    const skrRequests = h.skr.client.requests;
    let { result, sr } = await h.sync();
    expect(result.deleting).toEqual({ finalizerRemoved: true, policy });
    expect(sr).toBeUndefined(); // finalizer removed: the SyncResource is gone
    // One KCP write, the finalizer's: all gone, no inventory is written first. Under Delete,
    // each object is read and deleted; the API server's answer says it is gone.
    expect(h.kcp.client.writes - kcpWrites).toBe(1);
    if (policy === 'Delete') expect(h.skr.client.requests - skrRequests).toBe(4);
    const a = await h.skrGet('v1', 'ConfigMap', 'a', h.ns);
    const b = await h.skrGet('v1', 'ConfigMap', 'b', h.ns);
    if (policy === 'Delete') {
      expect([a, b]).toEqual([undefined, undefined]);
    } else {
      expect(a?.metadata.name).toBe('a');
      expect(b?.metadata.name).toBe('b');
    }
    void result;
  });

  it('a deletion whose finalizer removal fails is finished by the next run, its objects gone', async () => {
    const h = await new Harness('unfinalized').init();
    await h.put([{ name: 'a', strategy: 'CreateAndSync', resource: h.cm('a', {}) }]);
    await h.sync();
    await h.delete();
    const failing = Object.assign(Object.create(h.store) as typeof h.store, {
      removeFinalizer: () => Promise.reject(new Error('injected: the KCP refused')),
    });
    await expect(h.sync({ kcp: failing })).rejects.toThrow(/writing the SyncResource in the KCP failed/);
    expect(await h.skrGet('v1', 'ConfigMap', 'a', h.ns)).toBeUndefined();
    // Still finalized, its inventory as before; the next run finds the object gone.
    const left = await h.get();
    expect(left?.metadata.finalizers).toContain(FINALIZER);
    expect(left?.status?.synced?.map((e) => e.name)).toEqual(['a']);
    const { result, sr } = await h.sync();
    expect(result.deleting).toEqual({ finalizerRemoved: true, policy: 'Delete' });
    expect(result.changes).toEqual([]);
    expect(sr).toBeUndefined();
  });

  it('keeps the finalizer and reports Deleting while a synced object is held by a finalizer in the SKR', async () => {
    const h = await new Harness('held').init();
    await h.put([{ name: 'a', strategy: 'CreateAndSync', resource: h.cm('a', {}) }]);
    await h.sync();
    await h.skrPatch('v1', 'ConfigMap', 'a', h.ns, { metadata: { finalizers: ['test/hold'] } });
    await h.delete();
    let { result, sr } = await h.sync();
    expect(result.deleting?.finalizerRemoved).toBe(false);
    expect(result.pending).toEqual([`ConfigMap/${h.ns}/a`]);
    expect(sr?.metadata.finalizers).toContain(FINALIZER);
    await h.skrPatch('v1', 'ConfigMap', 'a', h.ns, { metadata: { finalizers: null } });
    ({ result, sr } = await h.sync());
    expect(result.deleting?.finalizerRemoved).toBe(true);
    expect(sr).toBeUndefined();
  });

  it('confirms unchanged objects from a LIST snapshot only if it was taken after the resync began', async () => {
    const h = await new Harness('snapshot').init();
    h.skr = {
      ...h.skr,
      lists: new ListCache(h.skr.client, `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`, 60_000),
    };
    const cm = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: snap, namespace: ${h.ns}}\ndata: {a: "1"}\n`;
    await h.put([{ name: 'cm', strategy: 'CreateAndSync', resource: cm }]);
    await h.sync();
    // A resync takes a snapshot; then someone edits the object in the SKR.
    const before = Date.now();
    expect(item((await h.sync({ snapshots: true, snapshotsSince: before })).sr, 'cm')).toMatchObject({
      reason: 'Unchanged',
    });
    await h.skrPatch('v1', 'ConfigMap', 'snap', h.ns, { data: { a: 'drifted' } });
    // A run of the same resync may confirm from its snapshot ...
    let { result } = await h.sync({ snapshots: true, snapshotsSince: before });
    expect(result.changes.filter((c) => c.drift)).toEqual([]);
    expect((await h.skrGet('v1', 'ConfigMap', 'snap', h.ns))?.data).toEqual({ a: 'drifted' });
    // ... a resync that began after the edit never does: it lists afresh and reverts the edit.
    await new Promise((r) => setTimeout(r, 5));
    ({ result } = await h.sync({ snapshots: true, snapshotsSince: Date.now() }));
    expect(result.changes.filter((c) => c.drift).map((c) => c.item)).toEqual(['cm']);
    expect((await h.skrGet('v1', 'ConfigMap', 'snap', h.ns))?.data).toEqual({ a: '1' });
  });
});
