// Every cell of the strategy table (docs/user/api.md) against a real SKR:
// object absent, present, edited by a user, deleted by a user, item removed.
import { describe, expect, it } from 'vitest';
import { FINALIZER, MANAGED_BY_LABEL } from '../lib/model.ts';
import { heldBy } from './helpers.ts';
import { Harness } from './engine-harness.ts';
import { eventually } from './helpers.ts';

const item = Harness.item;

describe('CreateAndSync', () => {
  it('creates, reverts user edits, recreates after user deletion, prunes when removed', async () => {
    const h = await new Harness('cas').init();
    await h.put([{ name: 'cfg', strategy: 'CreateAndSync', resource: h.cm('cfg', { a: '1' }) }]);
    let { sr, result } = await h.sync();
    expect(item(sr, 'cfg')).toMatchObject({ state: 'Ready', reason: 'Created' });
    expect(sr?.metadata.finalizers).toContain(FINALIZER);
    expect(sr?.status?.synced).toMatchObject([
      { item: 'cfg', apiVersion: 'v1', kind: 'ConfigMap', namespace: h.ns, name: 'cfg' },
    ]);
    expect(result.changes).toEqual([{ subject: `ConfigMap/${h.ns}/cfg`, action: 'created', item: 'cfg' }]);
    let live = await h.skrGet('v1', 'ConfigMap', 'cfg', h.ns);
    expect(live?.data).toEqual({ a: '1' });
    expect(live?.metadata.labels?.[MANAGED_BY_LABEL]).toBe('kcp-sync-resource');
    expect(heldBy(live!, `kcp-system/${h.name}`)).toBe(true);
    expect(live?.metadata.annotations).toBeUndefined(); // no mark names a SyncResource: its field manager does
    expect(sr?.status?.state).toBe('Ready');

    // Unchanged rerun: nothing written.
    ({ sr, result } = await h.sync());
    expect(item(sr, 'cfg')).toMatchObject({ state: 'Ready', reason: 'Unchanged' });

    // A user edits a field we set, and adds one we do not set.
    await h.skrPatch('v1', 'ConfigMap', 'cfg', h.ns, { data: { a: 'edited', mine: 'x' } });
    ({ sr, result } = await h.sync());
    expect(item(sr, 'cfg')).toMatchObject({ state: 'Ready', reason: 'Applied' });
    expect(result.changes[0]).toMatchObject({ action: 'configured', drift: true });
    live = await h.skrGet('v1', 'ConfigMap', 'cfg', h.ns);
    expect(live?.data).toEqual({ a: '1', mine: 'x' }); // fields nobody in the KCP sets are never touched

    // The manifest changes: applied, removed fields go away.
    await h.put([{ name: 'cfg', strategy: 'CreateAndSync', resource: h.cm('cfg', { b: '2' }) }]);
    ({ sr } = await h.sync());
    expect(item(sr, 'cfg')?.reason).toBe('Applied');
    expect((await h.skrGet('v1', 'ConfigMap', 'cfg', h.ns))?.data).toEqual({ b: '2', mine: 'x' });

    // A user deletes it: recreated.
    await h.skrDelete('v1', 'ConfigMap', 'cfg', h.ns);
    ({ sr } = await h.sync());
    expect(item(sr, 'cfg')?.reason).toBe('Created');
    expect(await h.skrGet('v1', 'ConfigMap', 'cfg', h.ns)).toBeDefined();

    // The item is removed: the object is pruned, then dropped from the inventory.
    await h.put([]);
    ({ sr, result } = await h.sync());
    expect(result.changes).toEqual([{ subject: `ConfigMap/${h.ns}/cfg`, action: 'deleted', item: 'cfg' }]);
    expect(await h.skrGet('v1', 'ConfigMap', 'cfg', h.ns)).toBeUndefined();
    expect(sr?.status?.synced).toEqual([]);
    expect(sr?.status?.state).toBe('Ready');
  });
});

describe('CreateAndIgnore', () => {
  it('creates, keeps user edits, recreates after user deletion, prunes when removed', async () => {
    const h = await new Harness('cai').init();
    await h.put([{ name: 'cfg', strategy: 'CreateAndIgnore', resource: h.cm('cfg', { a: '1' }) }]);
    let { sr } = await h.sync();
    expect(item(sr, 'cfg')).toMatchObject({ state: 'Ready', reason: 'Created' });
    await h.skrPatch('v1', 'ConfigMap', 'cfg', h.ns, { data: { a: 'edited' } });
    ({ sr } = await h.sync());
    expect(item(sr, 'cfg')).toMatchObject({ state: 'Ready', reason: 'Ignored' });
    expect((await h.skrGet('v1', 'ConfigMap', 'cfg', h.ns))?.data).toEqual({ a: 'edited' });
    // A spec change is ignored too: the object exists.
    await h.put([{ name: 'cfg', strategy: 'CreateAndIgnore', resource: h.cm('cfg', { a: 'new' }) }]);
    ({ sr } = await h.sync());
    expect((await h.skrGet('v1', 'ConfigMap', 'cfg', h.ns))?.data).toEqual({ a: 'edited' });
    await h.skrDelete('v1', 'ConfigMap', 'cfg', h.ns);
    ({ sr } = await h.sync());
    expect(item(sr, 'cfg')?.reason).toBe('Created');
    expect((await h.skrGet('v1', 'ConfigMap', 'cfg', h.ns))?.data).toEqual({ a: 'new' });
    await h.put([]);
    ({ sr } = await h.sync());
    expect(await h.skrGet('v1', 'ConfigMap', 'cfg', h.ns)).toBeUndefined();
    expect(sr?.status?.synced).toEqual([]);
  });
});

describe('Delete', () => {
  it('is Ready when absent, deletes when present, waits while it is being deleted, does nothing when removed', async () => {
    const h = await new Harness('del').init();
    const text = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old, namespace: ${h.ns}}\n`;
    await h.put([{ name: 'old', strategy: 'Delete', resource: text }]);
    let { sr } = await h.sync();
    expect(item(sr, 'old')).toMatchObject({
      state: 'Ready',
      reason: 'Deleted',
      message: 'resource has been deleted',
    });

    // Present, held by a finalizer: Deleting until really gone.
    await h.skrCreate({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'old', namespace: h.ns, finalizers: ['test/hold'] },
    });
    ({ sr } = await h.sync());
    expect(item(sr, 'old')).toMatchObject({ state: 'Deleting', reason: 'DeletionInProgress' });
    expect(sr?.status?.state).toBe('Processing');
    expect((await h.skrGet('v1', 'ConfigMap', 'old', h.ns))?.metadata.deletionTimestamp).toBeDefined();
    await h.skrPatch('v1', 'ConfigMap', 'old', h.ns, { metadata: { finalizers: null } });
    ({ sr } = await h.sync());
    expect(item(sr, 'old')).toMatchObject({ state: 'Ready', reason: 'Deleted' });

    // Present without finalizers: deleted within the run.
    await h.skrCreate({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'old', namespace: h.ns } });
    ({ sr } = await h.sync());
    expect(item(sr, 'old')).toMatchObject({ state: 'Ready', reason: 'Deleted' });
    expect(await h.skrGet('v1', 'ConfigMap', 'old', h.ns)).toBeUndefined();

    // Item removed: nothing happens to an object of that name.
    await h.skrCreate({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'old', namespace: h.ns } });
    await h.put([]);
    ({ sr } = await h.sync());
    expect(await h.skrGet('v1', 'ConfigMap', 'old', h.ns)).toBeDefined();
    expect(sr?.status?.state).toBe('Ready');
  });
});

describe('UpdateAndDelete', () => {
  it('never creates, syncs while present, stops once deletion started, does nothing when removed', async () => {
    const h = await new Harness('uad').init();
    await h.put([{ name: 'peer', strategy: 'UpdateAndDelete', resource: h.cm('peer', { a: '1' }) }]);
    let { sr } = await h.sync();
    expect(item(sr, 'peer')).toMatchObject({ state: 'Ready', reason: 'NotFound' });
    expect(await h.skrGet('v1', 'ConfigMap', 'peer', h.ns)).toBeUndefined();
    expect(sr?.status?.synced ?? []).toEqual([]);

    // Someone else creates it: kept in sync.
    await h.skrCreate({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'peer', namespace: h.ns, finalizers: ['test/hold'] },
      data: { a: '0', b: 'theirs' },
    });
    ({ sr } = await h.sync());
    expect(item(sr, 'peer')).toMatchObject({ state: 'Ready', reason: 'Applied' });
    let live = await h.skrGet('v1', 'ConfigMap', 'peer', h.ns);
    expect(live?.data).toEqual({ a: '1', b: 'theirs' });
    expect(live?.metadata.labels?.[MANAGED_BY_LABEL]).toBeUndefined(); // not ours: never pruned
    await h.skrPatch('v1', 'ConfigMap', 'peer', h.ns, { data: { a: 'edited' } });
    ({ sr } = await h.sync());
    expect(((await h.skrGet('v1', 'ConfigMap', 'peer', h.ns))?.data as Record<string, string>).a).toBe('1');

    // Deletion starts (held by a finalizer): sync stops, Deleting.
    await h.skrDelete('v1', 'ConfigMap', 'peer', h.ns);
    await h.put([{ name: 'peer', strategy: 'UpdateAndDelete', resource: h.cm('peer', { a: '2' }) }]);
    ({ sr } = await h.sync());
    expect(item(sr, 'peer')).toMatchObject({ state: 'Deleting', reason: 'DeletionInProgress' });
    live = await h.skrGet('v1', 'ConfigMap', 'peer', h.ns);
    expect((live?.data as Record<string, string>).a).toBe('1');

    // Gone: NotFound, so the owner can drop the item.
    await h.skrPatch('v1', 'ConfigMap', 'peer', h.ns, { metadata: { finalizers: null } });
    ({ sr } = await h.sync());
    expect(item(sr, 'peer')).toMatchObject({ state: 'Ready', reason: 'NotFound' });

    // Item removed: nothing happens to a present object.
    await h.skrCreate({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'peer', namespace: h.ns },
      data: { a: 'x' },
    });
    await h.put([]);
    ({ sr } = await h.sync());
    expect((await h.skrGet('v1', 'ConfigMap', 'peer', h.ns))?.data).toEqual({ a: 'x' });
  });
});

describe('UpdateAndDelete over an object that carries our marks', () => {
  it('takes our marks off even when a dry run finds its values already there, and never reports Adopted', async () => {
    const h = await new Harness('uad-marks').init();
    // A text the server stores differently (an empty map it drops): only a dry run can tell it changes nothing.
    const text = `${h.cm('peer', { a: '1' })}binaryData: {}\n`;
    await h.skrCreate({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'peer', namespace: h.ns },
      data: { a: '0' },
    });
    await h.put([{ name: 'y', strategy: 'UpdateAndDelete', resource: text }]);
    let { sr } = await h.sync();
    expect(item(sr, 'y')).toMatchObject({ reason: 'Applied' });
    // Adopted by CreateAndIgnore (our marks, no digest of values), then UpdateAndDelete again with the same text.
    await h.put([{ name: 'x', strategy: 'CreateAndIgnore', resource: h.cm('peer', { a: '1' }) }]);
    ({ sr } = await h.sync());
    expect(item(sr, 'x')).toMatchObject({ reason: 'Adopted' });
    expect((await h.skrGet('v1', 'ConfigMap', 'peer', h.ns))?.metadata.labels?.[MANAGED_BY_LABEL]).toBe(
      'kcp-sync-resource',
    );
    await h.put([{ name: 'y', strategy: 'UpdateAndDelete', resource: text }]);
    ({ sr } = await h.sync());
    expect(item(sr, 'y')).toMatchObject({ state: 'Ready', reason: 'Unchanged' });
    const live = await h.skrGet('v1', 'ConfigMap', 'peer', h.ns);
    expect(live?.metadata.labels?.[MANAGED_BY_LABEL]).toBeUndefined();
    expect(live?.data).toEqual({ a: '1' });
    expect(sr?.status?.synced ?? []).toEqual([]);
  });
});

describe('values by reference', () => {
  it('a run whose source Secret changed while it applied fails transiently, so an older value is never the last word', async () => {
    const h = await new Harness('byref').init();
    const text = `apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: ${h.ns}}\ntype: Opaque\n`;
    await h.put([
      { name: 's', strategy: 'CreateAndSync', resource: text, dataFrom: { secretRef: { name: 'src' } } },
    ]);
    let version = 1;
    // The source moves on between the read that fills the item and the check after the write.
    const rotating = async () => ({
      data: { k: Buffer.from(`v${version}`).toString('base64') },
      version: String(version++),
    });
    await expect(h.sync({ sources: rotating })).rejects.toMatchObject({ reason: 'SecretSourceChanged' });
    // A stable source: applied, and the SKR Secret holds its value.
    const stable = async () => ({ data: { k: Buffer.from('v9').toString('base64') }, version: '9' });
    const { sr } = await h.sync({ sources: stable });
    expect(item(sr, 's')).toMatchObject({ state: 'Ready' });
    expect((await h.skrGet('v1', 'Secret', 'creds', h.ns))?.data).toEqual({
      k: Buffer.from('v9').toString('base64'),
    });
  });
});

describe('request budget', () => {
  it('a 5-item SyncResource: first apply, then an unchanged rerun that writes nothing anywhere', async () => {
    const h = await new Harness('budget').init();
    await h.put([
      { name: 'cm1', strategy: 'CreateAndSync', resource: h.cm('cm1', { a: '1' }) },
      { name: 'cm2', strategy: 'CreateAndSync', resource: h.cm('cm2', { b: '2' }) },
      {
        name: 'svc',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: Service\nmetadata: {name: svc, namespace: ${h.ns}}\nspec: {ports: [{port: 80}]}\n`,
      },
      {
        name: 'deploy',
        strategy: 'CreateAndSync',
        resource: `apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app, namespace: ${h.ns}}\nspec:\n  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x}}\n    spec: {containers: [{name: c, image: nginx}]}\n`,
      },
      { name: 'ignored', strategy: 'CreateAndIgnore', resource: h.cm('ignored', {}) },
    ]);
    const count = () => ({
      skr: h.skr.client.requests,
      skrWrites: h.skr.client.writes,
      kcpWrites: h.kcp.client.writes,
    });
    const delta = (a: ReturnType<typeof count>, b: ReturnType<typeof count>) => ({
      skr: b.skr - a.skr,
      skrWrites: b.skrWrites - a.skrWrites,
      kcpWrites: b.kcpWrites - a.kcpWrites,
    });
    let before = count();
    let { sr } = await h.sync();
    const first = delta(before, count());
    // Written, not yet working: the Deployment has just been created.
    expect(sr?.status).toMatchObject({
      state: 'Processing',
      conditions: [
        { type: 'Resources', status: 'True' },
        { type: 'Healthy', reason: 'Progressing' },
        { type: 'Progressing', status: 'True' },
      ],
    });
    // 5 reads, 5 applies; in the KCP the claim (finalizer and label), the inventory (before
    // the creates) and the status, which carries the digests taken after them.
    expect(first.skrWrites).toBe(5);
    expect(first.kcpWrites).toBe(3);
    for (const e of sr!.status!.synced!) expect(e, e.name).toMatchObject({ digest: expect.any(String) });
    // The SKR's KWOK Node runs its Pod; the second run sees it Available (and reasons go from Created to Unchanged: one status write).
    await eventually(
      async () =>
        expect(
          (
            (await h.skrGet('apps/v1', 'Deployment', 'app', h.ns)) as {
              status?: { availableReplicas?: number };
            }
          )?.status?.availableReplicas,
        ).toBe(1),
      60_000,
    );
    ({ sr } = await h.sync());
    expect(sr?.status?.state).toBe('Ready');
    before = count();
    ({ sr } = await h.sync());
    const rerun = delta(before, count());
    expect(rerun).toEqual({ skr: 5, skrWrites: 0, kcpWrites: 0 });
    console.log(
      `request budget (5 items): first apply ${JSON.stringify(first)}, unchanged rerun ${JSON.stringify(rerun)}`,
    );
  });
});
