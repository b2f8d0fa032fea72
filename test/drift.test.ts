// Drift you can trust, against a real SKR: manifests whose stored form differs from their
// text (quantities, int-or-string, empty maps, defaulted fields, key order, YAML number
// forms) are never drift — three resyncs write nothing anywhere — while a change by any
// other field manager to a field we own is reverted and named (manager and path), and a
// change to a field we do not own is left alone.
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { describeCorrection } from '../lib/changeset.ts';
import type { SyncItem, SyncResource } from '../lib/model.ts';
import { reconcile } from '../lib/engine/reconcile.ts';
import { Harness } from './engine-harness.ts';
import { eventually } from './helpers.ts';

const item = Harness.item;

/** kubectl runs kubectl against SKR 2 as its admin, with an optional editor for `kubectl edit`. */
function kubectl(args: string[], opts: { stdin?: string; editor?: string } = {}): Promise<string> {
  const kubeconfig = `${inject('clusters').stateDir}/kubeconfig/skr-2.yaml`;
  return new Promise((resolve, reject) => {
    const child = execFile(
      'kubectl',
      ['--kubeconfig', kubeconfig, ...args],
      { env: { ...process.env, ...(opts.editor ? { KUBE_EDITOR: opts.editor } : {}) } },
      (err, stdout, stderr) =>
        err ? reject(new Error(`kubectl ${args.join(' ')}: ${stderr}`)) : resolve(stdout),
    );
    child.stdin!.end(opts.stdin ?? '');
  });
}

/** corpus returns manifests whose stored form differs from their text, each a different way (fixtures/drift-corpus.yaml). */
async function corpus(ns: string): Promise<Record<string, string>> {
  const text = await readFile(join(import.meta.dirname, 'fixtures', 'drift-corpus.yaml'), 'utf8');
  const docs = text.split(/^---\n/m).slice(1);
  return Object.fromEntries(
    docs.map((d) => [/^# (\S+)\n/.exec(d)![1]!, d.replace(/^# \S+\n/, '').replaceAll('NS', ns)]),
  );
}

async function writesDuring(h: Harness, fn: () => Promise<void>): Promise<{ skr: number; kcp: number }> {
  const before = { skr: h.skr.client.writes, kcp: h.kcp.client.writes };
  await fn();
  return { skr: h.skr.client.writes - before.skr, kcp: h.kcp.client.writes - before.kcp };
}

type Status = SyncResource['status'];
/** applied is what a run applied and recorded, health aside. */
const applied = (s: Status) => ({
  items: s?.items?.map(({ health: _h, ...i }) => i),
  resources: s?.conditions
    ?.filter((c) => c.type === 'Resources')
    .map(({ lastTransitionTime: _t, ...c }) => c),
  synced: s?.synced,
});
const healthOf = (s: Status) => s?.items?.map((i) => [i.name, i.health]);

describe('drift', () => {
  it('is never what the server normalizes: 28 non-canonical manifests, three resyncs, no write to the SKR and none to the KCP but for health moving on', async () => {
    // A name that is also a valid DNS label and group part (the corpus uses it in cluster-scoped names).
    const h = await new Harness('drift').init(1);
    const items: SyncItem[] = Object.entries(await corpus(h.ns)).map(([name, resource]) => ({
      name,
      strategy: 'CreateAndSync',
      resource,
    }));
    expect(items.length).toBeGreaterThanOrEqual(25);
    // UpdateAndDelete keeps someone else's object in sync: no digest of ours is stored, a dry run confirms instead (no write).
    await kubectl(['apply', '-f', '-'], {
      stdin: `apiVersion: v1\nkind: LimitRange\nmetadata: {name: theirs, namespace: ${h.ns}}\nspec:\n  limits:\n  - type: Container\n    default: {cpu: 2}\n`,
    });
    items.push({
      name: 'uad-limits',
      strategy: 'UpdateAndDelete',
      resource: `apiVersion: v1\nkind: LimitRange\nmetadata: {name: theirs, namespace: ${h.ns}}\nspec:\n  limits:\n  - type: Container\n    default: {cpu: 1000m, memory: 1024Mi}\n`,
    });
    await h.put(items);
    let { sr } = await h.sync();
    expect(sr?.status?.items?.filter((i) => i.state !== 'Ready')).toEqual([]);
    ({ sr } = await h.sync());
    expect(sr?.status?.items?.filter((i) => i.reason !== 'Unchanged')).toEqual([]);
    // Health moves by itself (the SKR's controllers roll the Deployments out, run the Job):
    // its status changes are written; wait until a run finds it settled.
    await eventually(
      async () => expect((await writesDuring(h, async () => void (await h.sync()))).kcp).toBe(0),
      90_000,
      2_000,
    );
    for (let run = 0; run < 3; run++) {
      const prev = (await h.get())?.status;
      let next: typeof prev;
      const writes = await writesDuring(h, async () => {
        const { sr: again, result } = await h.sync();
        next = again?.status;
        expect(
          again?.status?.items?.filter((i) => i.reason !== 'Unchanged'),
          `run ${run}`,
        ).toEqual([]);
        expect(result.changes.filter((c) => c.action !== 'unchanged')).toEqual([]);
      });
      expect(writes.skr, `run ${run}`).toBe(0);
      // A status write only for an object's health moving on by itself (a controller's
      // status): what the run applied, decided and recorded is unchanged.
      if (writes.kcp > 0) {
        expect(applied(next), `run ${run}`).toEqual(applied(prev));
        expect(healthOf(next), `run ${run}: a write without a health change`).not.toEqual(healthOf(prev));
      }
    }
    expect(sr?.status?.synced?.every((e) => typeof e.digest === 'string' && e.digest.length > 0)).toBe(true);
    expect(
      JSON.parse(await kubectl(['get', 'limitrange', 'theirs', '-n', h.ns, '-o', 'json'])).spec.limits[0]
        .default,
    ).toEqual({ cpu: '1', memory: '1Gi' });
    await h.put([]);
    await h.sync();
  }, 240_000);

  it('reverts what other field managers change in our fields, names them and the path, and leaves their own fields alone', async () => {
    const h = await new Harness('drift-who').init(1);
    const cm = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned, namespace: ${h.ns}}\ndata: {a: "1", b: "1"}\n`;
    const widgetCrd = (await corpus(h.ns))['crd-defaults']!;
    const status = `apiVersion: ${h.ns}.example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: ${h.ns}}\nstatus: {state: Ready}\n`;
    await h.put([
      { name: 'crd', strategy: 'CreateAndSync', resource: widgetCrd },
      { name: 'cm', strategy: 'CreateAndSync', resource: cm },
      {
        name: 'w',
        strategy: 'CreateAndSync',
        resource: `apiVersion: ${h.ns}.example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: ${h.ns}}\nspec: {size: large}\n`,
        subresource: status,
      },
    ]);
    await h.sync();
    await h.sync();
    const data = async () =>
      JSON.parse(await kubectl(['get', 'configmap', 'owned', '-n', h.ns, '-o', 'json'])).data as Record<
        string,
        string
      >;
    const check = async (how: string, manager: string, path: string) => {
      const { sr, result } = await h.sync();
      expect(item(sr, 'cm'), how).toMatchObject({ state: 'Ready', reason: 'Applied' });
      const c = result.changes.find((x) => x.item === 'cm')!;
      expect(c, how).toMatchObject({ drift: true, cause: { managers: [manager] } });
      expect(c.cause!.paths, how).toContain(path);
      expect(describeCorrection(c), how).toContain(`ConfigMap ${h.ns}/owned: `);
      expect(describeCorrection(c), how).toMatch(
        new RegExp(`${path.replace('.', '\\.')}.* changed by ${manager}; reverted$`),
      );
      expect((await data()).a, how).toBe('1');
      expect((await data()).b, how).toBe('1');
      // Reverted once: the next run writes nothing.
      const again = await writesDuring(h, async () => {
        await h.sync();
      });
      expect(again.skr, `${how}: settled`).toBe(0);
    };

    await kubectl(['edit', 'configmap', 'owned', '-n', h.ns], {
      editor: `sed -i -e 's/^  a: "1"/  a: edited/'`,
    });
    await check('kubectl edit', 'kubectl-edit', 'data.a');
    const file = join(tmpdir(), `${h.ns}-csa.yaml`);
    await writeFile(
      file,
      `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned, namespace: ${h.ns}}\ndata: {a: "1", b: client-side}\n`,
    );
    await kubectl(['apply', '-f', file]);
    await check('client-side kubectl apply', 'kubectl-client-side-apply', 'data.b');
    await kubectl(
      ['apply', '--server-side', '--force-conflicts', '--field-manager', 'other-operator', '-f', '-'],
      {
        stdin: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned, namespace: ${h.ns}}\ndata: {a: ssa}\n`,
      },
    );
    await check('server-side apply by another manager', 'other-operator', 'data.a');
    await kubectl([
      'patch',
      'configmap',
      'owned',
      '-n',
      h.ns,
      '--field-manager',
      'patcher',
      '--type',
      'merge',
      '-p',
      '{"data":{"b":"patched"}}',
    ]);
    await check('kubectl patch --field-manager', 'patcher', 'data.b');

    // Fields we do not own: left alone, no drift, no write.
    await kubectl([
      'patch',
      'configmap',
      'owned',
      '-n',
      h.ns,
      '--field-manager',
      'patcher',
      '--type',
      'merge',
      '-p',
      '{"data":{"mine":"x"},"metadata":{"labels":{"theirs":"y"}}}',
    ]);
    const untouched = await writesDuring(h, async () => {
      const { result } = await h.sync();
      expect(result.changes.filter((c) => c.drift)).toEqual([]);
    });
    expect(untouched.skr).toBe(0);
    expect((await data()).mine).toBe('x');

    // A controller writing the status: a field of ours is written back, one of its own is not drift.
    await kubectl([
      'patch',
      `widgets.${h.ns}.example.com`,
      'w',
      '-n',
      h.ns,
      '--subresource',
      'status',
      '--field-manager',
      'widget-controller',
      '--type',
      'merge',
      '-p',
      '{"status":{"phase":"Running"}}',
    ]);
    const own = await writesDuring(h, async () => {
      const { sr } = await h.sync();
      expect(item(sr, 'w')).toMatchObject({ reason: 'Unchanged' });
    });
    expect(own.skr).toBe(0);
    await kubectl([
      'patch',
      `widgets.${h.ns}.example.com`,
      'w',
      '-n',
      h.ns,
      '--subresource',
      'status',
      '--field-manager',
      'widget-controller',
      '--type',
      'merge',
      '-p',
      '{"status":{"state":"Broken"}}',
    ]);
    const { sr } = await h.sync();
    expect(item(sr, 'w')).toMatchObject({ reason: 'Applied' });
    const w = JSON.parse(
      await kubectl(['get', `widgets.${h.ns}.example.com`, 'w', '-n', h.ns, '-o', 'json']),
    ) as {
      status: Record<string, string>;
    };
    expect(w.status).toEqual({ state: 'Ready', phase: 'Running' });
    await h.put([]);
    await h.sync();
  });

  it("reports drift on an object whose creating run's digests were never recorded: the run that finds it as written records them", async () => {
    // Two runs of a new SyncResource (two replicas): the creating run's result loses the
    // status to the second run's, which found the objects as the first had written them.
    const h = await new Harness('drift-unrecorded').init(1);
    const cm = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned, namespace: ${h.ns}}\ndata: {a: "1"}\n`;
    await h.put([{ name: 'cm', strategy: 'CreateAndSync', resource: cm }]);
    const created = await reconcile((await h.get())!, { skr: h.skr, kcp: h.store, config: h.config });
    expect(created.items.map((i) => i.reason)).toEqual(['Created']);
    const entry = () => h.get().then((sr) => sr?.status?.synced?.[0]);
    expect(await entry()).not.toHaveProperty('digest');
    const { result } = await h.sync();
    expect(result.items.map((i) => i.reason)).toEqual(['Unchanged']);
    expect(await entry()).toMatchObject({ digest: expect.any(String), manifest: expect.any(String) });
    await kubectl(
      ['apply', '--server-side', '--force-conflicts', '--field-manager', 'other-operator', '-f', '-'],
      { stdin: cm.replace('a: "1"', 'a: theirs') },
    );
    const { result: corrected } = await h.sync();
    expect(corrected.changes).toMatchObject([
      { item: 'cm', drift: true, cause: { managers: ['other-operator'] } },
    ]);
    expect(JSON.parse(await kubectl(['get', 'configmap', 'owned', '-n', h.ns, '-o', 'json'])).data).toEqual({
      a: '1',
    });
  });
});
