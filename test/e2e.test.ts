// End to end through the whole pipeline: kubectl against the real KCP, the local
// runtime (ApiServerSource, Broker, Triggers, PingSource) and the four functions as
// real HTTP servers, objects checked in the real SKRs; once on each Knative.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { dump } from 'js-yaml';
import { getSr, kubectl, startStack, syncResourceYaml, waitSr, type Stack } from './e2e-helpers.ts';
import { eventually, uniqueName } from './helpers.ts';
import type { SyncResource } from '../lib/model.ts';

const cm = (name: string, ns: string, data: Record<string, string>) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: ${ns}}\ndata: ${JSON.stringify(data)}\n`;
const nsItem = (ns: string) => ({
  name: 'ns',
  strategy: 'CreateAndSync',
  resource: `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${ns}}\n`,
});
const ready = (
  sr:
    | { status?: { state?: string; observedGeneration?: number }; metadata: { generation?: number } }
    | undefined,
) => {
  expect(sr?.status?.state).toBe('Ready');
  expect(sr?.status?.observedGeneration).toBe(sr?.metadata.generation);
};
// write-status labels a SyncResource just after its first status (lib/pipeline/write-status.ts), so Ready comes a moment before the label.
const readyFor = (kyma: string) => (sr: SyncResource | undefined) => {
  ready(sr);
  expect(sr?.metadata.labels?.['operator.kyma-project.io/kyma-name']).toBe(kyma);
};

async function skrGet(
  skr: string,
  kind: string,
  name: string,
  ns: string,
): Promise<{ data?: Record<string, string>; metadata: { uid: string } } | undefined> {
  const out = await kubectl(skr, ['get', kind, name, '-n', ns, '-o', 'json', '--ignore-not-found']);
  return out.trim() ? JSON.parse(out) : undefined;
}

// On the stand-in (the default of npm start and the benchmark) and on Knative's own
// eventing (its controllers, channel-based broker and adapters; Serving's queue-proxy in
// front of every replica: infra/runtime/real.ts), which gets a KCP and SKRs of its own.
describe.each(['emulated', 'real'] as const)('end to end (knative: %s)', (knative) => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack('e2e', { knative });
  }, 600_000);
  afterAll(async () => {
    await s?.stop();
  });

  it('syncs, updates, reverts drift, keeps ignored edits, recreates, prunes and deletes', async () => {
    const name = uniqueName('sr');
    const target = uniqueName('target');
    const items = [
      nsItem(target),
      { name: 'sync', strategy: 'CreateAndSync', resource: cm('synced', target, { a: '1' }) },
      { name: 'ignore', strategy: 'CreateAndIgnore', resource: cm('ignored', target, { a: '1' }) },
      { name: 'extra', strategy: 'CreateAndSync', resource: cm('extra', target, {}) },
    ];
    // kyma-2: the objects must land in the second SKR, and only there.
    await kubectl(s.kcp, ['apply', '-f', '-'], syncResourceYaml(s.ns, name, 'kyma-2', items));
    let sr = await waitSr(s, name, readyFor('kyma-2'));
    expect((await skrGet(s.skr[1]!, 'configmap', 'synced', target))?.data).toEqual({ a: '1' });
    expect(await skrGet(s.skr[0]!, 'namespace', target, '')).toBeUndefined();

    // Change an item: updated.
    items[1] = { name: 'sync', strategy: 'CreateAndSync', resource: cm('synced', target, { a: '2' }) };
    await kubectl(s.kcp, ['apply', '-f', '-'], syncResourceYaml(s.ns, name, 'kyma-2', items));
    await eventually(async () =>
      expect((await skrGet(s.skr[1]!, 'configmap', 'synced', target))?.data).toEqual({ a: '2' }),
    );
    await waitSr(s, name, ready);

    // Edits in the SKR: the CreateAndSync one is reverted at the next resync, the CreateAndIgnore one is kept.
    await kubectl(s.skr[1]!, [
      'patch',
      'configmap',
      'synced',
      '-n',
      target,
      '--type',
      'merge',
      '-p',
      '{"data":{"a":"user"}}',
    ]);
    await kubectl(s.skr[1]!, [
      'patch',
      'configmap',
      'ignored',
      '-n',
      target,
      '--type',
      'merge',
      '-p',
      '{"data":{"a":"user"}}',
    ]);
    await eventually(async () =>
      expect((await skrGet(s.skr[1]!, 'configmap', 'synced', target))?.data).toEqual({ a: '2' }),
    );
    expect((await skrGet(s.skr[1]!, 'configmap', 'ignored', target))?.data).toEqual({ a: 'user' });
    // The correction's Kubernetes Event names the field manager and the path.
    await eventually(async () => {
      const events = JSON.parse(
        await kubectl(s.kcp, ['get', 'events.events.k8s.io', '-n', s.ns, '-o', 'json']),
      ) as { items: { reason: string; note: string; regarding: { name: string } }[] };
      const notes = events.items
        .filter((e) => e.reason === 'DriftCorrected' && e.regarding.name === name)
        .map((e) => e.note);
      expect(notes).toContain(`ConfigMap ${target}/synced: data.a changed by kubectl-patch; reverted`);
    });

    // A deleted synced object is recreated.
    const uid = (await skrGet(s.skr[1]!, 'configmap', 'extra', target))!.metadata.uid;
    await kubectl(s.skr[1]!, ['delete', 'configmap', 'extra', '-n', target]);
    await eventually(async () => {
      const again = await skrGet(s.skr[1]!, 'configmap', 'extra', target);
      expect(again?.metadata.uid).toBeDefined();
      expect(again?.metadata.uid).not.toBe(uid);
    });

    // A removed item is pruned.
    await kubectl(s.kcp, ['apply', '-f', '-'], syncResourceYaml(s.ns, name, 'kyma-2', items.slice(0, 3)));
    await eventually(async () =>
      expect(await skrGet(s.skr[1]!, 'configmap', 'extra', target)).toBeUndefined(),
    );
    sr = await waitSr(s, name, (x) => {
      ready(x);
      expect(x?.status?.synced?.map((e) => e.name).sort()).toEqual(['ignored', 'synced', target].sort());
    });

    // Deleting the SyncResource removes its objects and then it disappears.
    await kubectl(s.kcp, ['delete', 'syncresource', name, '-n', s.ns, '--wait=false']);
    await waitSr(s, name, (x) => expect(x).toBeUndefined());
    expect(await skrGet(s.skr[1]!, 'configmap', 'synced', target)).toBeUndefined();
    await eventually(
      async () => expect(await skrGet(s.skr[1]!, 'namespace', target, '')).toBeUndefined(),
      60_000,
    );
  });

  it('the source killed mid-change: what changed while it was down runs once it is back, with no tick; a broken watch resumes without loss', async () => {
    expect(s.runtime.proxy, 'the source reaches the KCP through the proxy').toBeDefined();
    const names = Array.from({ length: 5 }, () => uniqueName('source'));
    const target = 'default';
    const item = (n: string, v: string) => [
      { name: 'cm', strategy: 'CreateAndSync', resource: cm(n, target, { v }) },
    ];
    const apply = (n: string, v: string) =>
      kubectl(s.kcp, ['apply', '-f', '-'], syncResourceYaml(s.ns, n, 'kyma-1', item(n, v)));
    const converged = (v: string) =>
      eventually(
        async () => {
          for (const n of names)
            expect((await skrGet(s.skr[0]!, 'configmap', n, target))?.data, n).toEqual({ v });
        },
        60_000,
        250,
      );
    const replicas = s.runtime.skrSources.map((a) => a.replica);
    expect(replicas.length).toBeGreaterThan(0);
    // The resync timer is held: nothing below is caught up by a tick.
    for (const p of s.runtime.ping) p.stop();
    try {
      await Promise.all(names.map((n) => apply(n, '1')));
      await converged('1');
      // Every replica dies while a burst of edits is under way, and one more edit happens while they are down.
      const burst = Promise.all(names.map((n) => apply(n, '2')));
      for (const r of replicas) await s.runtime.stopSkrSource(r);
      await burst;
      await s.runtime.broker.idle();
      await apply(names[0]!, '3');
      await s.runtime.broker.idle();
      expect((await getSr(s, names[0]!))?.status?.observedGeneration).toBeLessThan(3);
      // Back, the source lists the SyncResources and posts each one not settled.
      for (const r of replicas) await s.runtime.startSkrSource(r);
      await eventually(
        async () => {
          expect((await skrGet(s.skr[0]!, 'configmap', names[0]!, target))?.data).toEqual({ v: '3' });
          for (const n of names.slice(1))
            expect((await skrGet(s.skr[0]!, 'configmap', n, target))?.data, n).toEqual({ v: '2' });
        },
        60_000,
        250,
      );
      for (const n of names) await waitSr(s, n, ready);
      // A broken watch (the connection cut, the source alive) resumes from its last
      // resourceVersion: the edits made meanwhile arrive as events, no tick needed.
      expect(s.runtime.proxy!.breakWatches()).toBeGreaterThan(0);
      await Promise.all(names.map((n) => apply(n, '4')));
      await converged('4');
    } finally {
      for (const p of s.runtime.ping) p.start();
    }
  });

  it('an edit of an established SyncResource is not queued behind new ones: the source posts it first', async () => {
    // Named to be listed after the new ones: in the order it finds them, it would come last.
    const established = `zz-${uniqueName('est')}`;
    const apply = (n: string, v: string) =>
      kubectl(
        s.kcp,
        ['apply', '-f', '-'],
        syncResourceYaml(s.ns, n, 'kyma-1', [
          { name: 'cm', strategy: 'CreateAndSync', resource: cm(n, 'default', { v }) },
        ]),
      );
    await apply(established, '1');
    await waitSr(s, established, readyFor('kyma-1'));
    // The source stands still (its watch stays open, what it would post waits) while forty
    // SyncResources are created and then the established one is edited.
    const fresh = Array.from({ length: 40 }, () => uniqueName('new'));
    for (const p of s.runtime.ping) p.stop();
    const replicas = s.runtime.skrSources.map((a) => a.replica);
    try {
      for (const r of replicas) await s.runtime.stopSkrSource(r);
      await kubectl(
        s.kcp,
        ['apply', '-f', '-'],
        fresh
          .map((n) =>
            syncResourceYaml(s.ns, n, 'kyma-1', [
              { name: 'cm', strategy: 'CreateAndSync', resource: cm(n, 'default', { v: '1' }) },
            ]),
          )
          .join('\n'),
      );
      await apply(established, '2');
      for (const r of replicas) await s.runtime.startSkrSource(r);
      await waitSr(s, established, (x) => {
        ready(x);
        expect(x?.metadata.generation).toBe(2);
      });
      for (const n of fresh) await waitSr(s, n, readyFor('kyma-1'));
      // The edit was posted at once, not after the creations it was found with (at most the
      // sixteen the source posts at a time went before it), in the order the replica that
      // posted it took its posts (/watches; the broker may deliver concurrent posts in any
      // order), among this test's SyncResources (others still unsettled are posted again).
      const ours = new Set([...fresh, established].map((n) => `${s.ns}/${n}`));
      const orders = await Promise.all(
        s.runtime.skrSources.map(
          async (a) =>
            ((await (await fetch(`${a.url}watches`)).json()) as { stats: { changes: { lately: string[] } } })
              .stats.changes.lately,
        ),
      );
      const posted = orders.find((o) => o.includes(`${s.ns}/${established}`))?.filter((k) => ours.has(k));
      expect(posted).toBeDefined();
      expect(posted!.indexOf(`${s.ns}/${established}`)).toBeLessThanOrEqual(16);
    } finally {
      for (const p of s.runtime.ping) p.start();
    }
    await kubectl(s.kcp, ['delete', 'syncresource', established, ...fresh, '-n', s.ns, '--wait=false']);
    for (const n of fresh) await waitSr(s, n, (x) => expect(x).toBeUndefined());
  });

  it('runs when asked with the reconcile annotation, and kubectl wait sees the request handled', async () => {
    const name = uniqueName('asked');
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, name, 'kyma-1', [
        { name: 'a', strategy: 'CreateAndSync', resource: cm(name, 'default', { k: 'ours' }) },
      ]),
    );
    await waitSr(s, name, (x) => expect(x?.status?.state).toBe('Ready'));
    // A change the SKR source does not report (a field it does not own: a label added) is not drift;
    // asking for a run is answered with a run, which the status says it handled.
    const asked = `asked-${Date.now()}`;
    await kubectl(s.kcp, [
      'annotate',
      'syncresource',
      name,
      '-n',
      s.ns,
      '--overwrite',
      `kcp-sync.kyma-project.io/reconcile-requested-at=${asked}`,
    ]);
    // As docs/user/api.md "Reconcile now, and wait for it" says.
    await kubectl(s.kcp, [
      'wait',
      `syncresource/${name}`,
      '-n',
      s.ns,
      '--timeout=60s',
      `--for=jsonpath={.status.lastHandledReconcileAt}=${asked}`,
    ]);
    const sr = await getSr(s, name);
    expect(sr?.status?.state).toBe('Ready');
    expect(sr?.status?.lastHandledReconcileAt).toBe(asked);
    await kubectl(s.kcp, ['delete', 'syncresource', name, '-n', s.ns, '--wait=false']);
  });

  it('reports an unknown Kyma, and a bad item while the others are Ready', async () => {
    const lost = uniqueName('lost');
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, lost, 'no-such-kyma', [
        { name: 'a', strategy: 'CreateAndSync', resource: cm('a', 'default', {}) },
      ]),
    );
    const sr = await waitSr(s, lost, (x) => expect(x?.status?.state).toBe('Error'));
    expect(sr?.status?.conditions?.[0]).toMatchObject({
      reason: 'KymaNotFound',
      message: `Kyma ${s.ns}/no-such-kyma does not exist`,
    });
    const described = await kubectl(s.kcp, ['describe', 'syncresource', lost, '-n', s.ns]);
    expect(described).toMatch(/Warning\s+Error\s+.*Kyma .* does not exist/);

    const mixed = uniqueName('mixed');
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, mixed, 'kyma-1', [
        { name: 'good', strategy: 'CreateAndSync', resource: cm(mixed, 'default', { ok: 'yes' }) },
        {
          name: 'typo',
          strategy: 'CreateAndSync',
          resource: 'apiVersion: v1\nkind: Configmap\nmetadata: {name: x, namespace: default}\n',
        },
      ]),
    );
    const m = await waitSr(s, mixed, (x) => expect(x?.status?.items).toHaveLength(2));
    expect(m?.status?.state).toBe('Error');
    expect(m?.status?.items?.find((i) => i.name === 'good')).toMatchObject({ state: 'Ready' });
    expect(m?.status?.items?.find((i) => i.name === 'typo')).toMatchObject({
      state: 'Error',
      reason: 'UnknownKind',
    });
    expect((await skrGet(s.skr[0]!, 'configmap', mixed, 'default'))?.data).toEqual({ ok: 'yes' });
    await kubectl(s.kcp, ['delete', 'syncresource', mixed, lost, '-n', s.ns, '--wait=false']);
    await waitSr(s, mixed, (x) => expect(x).toBeUndefined());
  });

  it('keeps syncing after the access Secret is rotated to a new credential and the old one is revoked', async () => {
    const skr = s.skr[0]!;
    const id = uniqueName('rot');
    const token = async (sa: string) => {
      await kubectl(skr, ['create', 'serviceaccount', sa, '-n', 'default']);
      await kubectl(skr, [
        'create',
        'clusterrolebinding',
        sa,
        '--clusterrole=cluster-admin',
        `--serviceaccount=default:${sa}`,
      ]);
      return (await kubectl(skr, ['create', 'token', sa, '-n', 'default', '--duration=1h'])).trim();
    };
    const view = JSON.parse(await kubectl(skr, ['config', 'view', '--raw', '-o', 'json'])) as {
      clusters: { cluster: { server: string; 'certificate-authority-data': string } }[];
    };
    const kubeconfigFor = (t: string) =>
      dump({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'skr',
        clusters: [{ name: 'skr', cluster: view.clusters[0]!.cluster }],
        users: [{ name: 'sa', user: { token: t } }],
        contexts: [{ name: 'skr', context: { cluster: 'skr', user: 'sa' } }],
      });
    const secret = (t: string) =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name: 'kyma-1-kubeconfig',
          namespace: s.ns,
          labels: { 'operator.kyma-project.io/kyma-name': 'kyma-1' },
        },
        stringData: { config: kubeconfigFor(t) },
      });
    const old = await token(`${id}-a`);
    await kubectl(s.kcp, ['apply', '-f', '-'], secret(old));
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, id, 'kyma-1', [
        { name: 'c', strategy: 'CreateAndSync', resource: cm(id, 'default', { v: '1' }) },
      ]),
    );
    await waitSr(s, id, ready);
    // Rotate: new credential in the Secret, then revoke the old one and wait until the
    // API server really refuses it (it caches successful authentications for seconds).
    await kubectl(s.kcp, ['apply', '-f', '-'], secret(await token(`${id}-b`)));
    await kubectl(skr, ['delete', 'serviceaccount', `${id}-a`, '-n', 'default']);
    const oldFile = join(s.stateDir, 'old-kubeconfig.yaml');
    await writeFile(oldFile, kubeconfigFor(old));
    await eventually(
      () => expect(kubectl(oldFile, ['get', 'ns'])).rejects.toThrow(/Unauthorized|must be logged in/),
      30_000,
      500,
    );
    // The next reconcile can only succeed with the new credential.
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, id, 'kyma-1', [
        { name: 'c', strategy: 'CreateAndSync', resource: cm(id, 'default', { v: '2' }) },
      ]),
    );
    await eventually(async () =>
      expect((await skrGet(skr, 'configmap', id, 'default'))?.data).toEqual({ v: '2' }),
    );
    await waitSr(s, id, ready);
    await kubectl(s.kcp, ['delete', 'syncresource', id, '-n', s.ns, '--wait=false']);
    await waitSr(s, id, (x) => expect(x).toBeUndefined());
    expect(await getSr(s, id)).toBeUndefined();
  });
});
