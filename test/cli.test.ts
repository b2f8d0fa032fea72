// The kcp-sync CLI as a module team runs it (the built bin, a real process): validate on
// the examples and from standard input, diff against a real local SKR for every outcome,
// exit codes, JSON output, masked Secret values, and a cluster left exactly as it was.
import { execFile } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump, load } from 'js-yaml';
import { describe, expect, inject, it } from 'vitest';
import { applyObject, listObjects, mustFind } from '../lib/kube/objects.ts';
import { SYNC_API_VERSION, type SyncItem } from '../lib/model.ts';
import { Harness } from './engine-harness.ts';

const root = join(import.meta.dirname, '..');
const bin = join(root, 'dist', 'cli', 'kcp-sync.js');

/** cli runs the built kcp-sync with args (and stdin), returning its exit code and output. */
function cli(
  args: string[],
  opts: { stdin?: string; env?: Record<string, string> } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [bin, ...args],
      { cwd: root, env: { ...process.env, ...opts.env }, maxBuffer: 8 << 20 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr }),
    );
    child.stdin!.end(opts.stdin ?? '');
  });
}

const srDoc = (name: string, items: SyncItem[]) =>
  dump({
    apiVersion: SYNC_API_VERSION,
    kind: 'SyncResource',
    metadata: { name, namespace: 'kcp-system' },
    spec: { kyma: 'kyma-1', items },
  });

describe('kcp-sync validate', () => {
  it('finds every example clean (exit 0), as text and as JSON', async () => {
    // A team's example is checked against its own policy.
    const examples = (await readdir(join(root, 'examples')))
      .filter((f) => f.endsWith('.yaml') && f !== 'nfs-team.yaml')
      .map((f) => join('examples', f));
    const team = await cli(['validate', 'examples/nfs-team.yaml', '--policy', 'examples/nfs-team.yaml']);
    expect(team.stdout).toMatch(/^1 SyncResources valid$/m);
    expect(team.code).toBe(0);
    const text = await cli(['validate', ...examples]);
    expect(text.stdout).toMatch(/^\d+ SyncResources valid$/m);
    expect(text.code).toBe(0);
    const json = await cli(['validate', '-o', 'json', ...examples]);
    expect(json.code).toBe(0);
    const out = JSON.parse(json.stdout) as {
      ok: boolean;
      reports: { source: string; syncResources: string[]; findings: unknown[] }[];
    };
    expect(out.ok).toBe(true);
    expect(out.reports.map((r) => r.source)).toEqual(examples);
    expect(out.reports.every((r) => r.syncResources.length > 0 && r.findings.length === 0)).toBe(true);
  });

  it('reads standard input, skips other kinds, and reports each problem with item, state, reason and message (exit 1)', async () => {
    const input = [
      dump({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'other' } }),
      srDoc('bad', [
        {
          name: 'dot',
          strategy: 'Delete',
          resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ".", namespace: x}\n',
        },
        {
          name: 'secret',
          strategy: 'CreateAndSync',
          resource: 'apiVersion: v1\nkind: secret\nmetadata: {name: s, namespace: x}\n',
        },
        {
          name: 'sys',
          strategy: 'CreateAndSync',
          resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: kube-system}\n',
        },
        {
          name: 'first',
          strategy: 'CreateAndSync',
          resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: x}\n',
        },
        {
          name: 'second',
          strategy: 'Delete',
          resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: x}\n',
        },
        {
          name: 'odd',
          strategy: 'Sync' as never,
          resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d, namespace: x}\n',
        },
        {
          name: 'cel',
          strategy: 'CreateAndSync',
          resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: e, namespace: x}\n',
          health: { current: "data.ready = 'yes'" },
        },
        {
          name: 'path',
          strategy: 'CreateAndSync',
          resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: f, namespace: x}\n',
          feedback: [{ name: 'a', jsonPath: '.data..x' }],
        },
      ]),
    ].join('---\n');
    const json = await cli(['validate', '-o', 'json', '-'], { stdin: input });
    expect(json.code).toBe(1);
    const out = JSON.parse(json.stdout) as {
      ok: boolean;
      reports: {
        skipped: string[];
        findings: { item?: string; state: string; reason: string; message: string }[];
      }[];
    };
    expect(out.ok).toBe(false);
    expect(out.reports[0]!.skipped).toEqual(['ConfigMap other']);
    const byItem = Object.fromEntries(
      out.reports[0]!.findings.map((f) => [f.item ?? '', `${f.state}/${f.reason}: ${f.message}`]),
    );
    expect(byItem).toEqual({
      '': 'Rejected/Rejected: spec.items[5].strategy: Unsupported value: "Sync": supported values: "CreateAndSync", "CreateAndIgnore", "Delete", "UpdateAndDelete"',
      dot: 'Error/InvalidManifest: resource metadata.name "." is not a valid object name',
      secret:
        'Warning/Restricted: kind v1/secret is restricted and never synced; ship Secret values by reference (dataFrom.secretRef)',
      sys: 'Warning/Restricted: namespace kube-system is protected: nothing is created, changed or deleted in it',
      second:
        'Error/DuplicateObject: ConfigMap x/c is already named by item first; an object belongs to one item',
      cel: expect.stringMatching(/^Error\/InvalidManifest: health.current does not compile: /),
      path: 'Error/InvalidManifest: feedback a: jsonPath ".data..x" is not supported at "..x" (fields, [\'key\'], [n] and [?(@.field=="value")] are)',
    });
    const text = await cli(['validate', '-'], { stdin: input });
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/^FILE\s+SYNCRESOURCE\s+ITEM\s+STATE\s+REASON\s+MESSAGE$/m);
    expect(text.stdout).toMatch(
      /^-\s+kcp-system\/bad\s+second\s+Error\s+DuplicateObject\s+ConfigMap x\/c is already named by item first/m,
    );
    expect(text.stdout).toContain('skipped ConfigMap other (not a SyncResource)');
  });

  it("checks the rules of values by reference (dataFrom): admission rules and the engine's", async () => {
    const secret = (extra = '') =>
      `apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: x}\n${extra}`;
    const ref = () => ({ secretRef: { name: 'src' } });
    const good = srDoc('good', [
      { name: 'ok', strategy: 'CreateAndSync', resource: secret('type: Opaque\n'), dataFrom: ref() },
    ]);
    expect((await cli(['validate', '-'], { stdin: good })).code).toBe(0);
    const bad = [
      srDoc('engine', [
        {
          name: 'cm',
          strategy: 'CreateAndSync',
          resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: x}\n',
          dataFrom: ref(),
        },
        { name: 'data', strategy: 'CreateAndSync', resource: secret('data: {k: dg==}\n'), dataFrom: ref() },
      ]),
      srDoc('admission', [{ name: 'del', strategy: 'Delete', resource: secret(), dataFrom: ref() }]),
    ].join('---\n');
    const out = JSON.parse((await cli(['validate', '-o', 'json', '-'], { stdin: bad })).stdout) as {
      reports: { findings: { syncResource: string; item?: string; reason: string; message: string }[] }[];
    };
    expect(
      out.reports[0]!.findings.map((f) => `${f.syncResource} ${f.item ?? ''} ${f.reason}: ${f.message}`),
    ).toEqual([
      'kcp-system/engine cm InvalidManifest: dataFrom is allowed only on a v1 Secret, not on v1/ConfigMap',
      'kcp-system/engine data InvalidManifest: resource sets data, but a Secret with dataFrom takes its data from the source Secret only; remove data',
      'kcp-system/admission  Rejected: spec.items[0]: Invalid value: "object": an item with strategy Delete takes no dataFrom',
    ]);
  });

  it("takes the restricted kinds and protected namespaces from the product's variables", async () => {
    const input = srDoc('cfg', [
      {
        name: 'cm',
        strategy: 'CreateAndSync',
        resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: team-ns}\n',
      },
    ]);
    expect((await cli(['validate', '-'], { stdin: input })).code).toBe(0);
    const out = await cli(['validate', '-'], {
      stdin: input,
      env: { SYNC_RESTRICTED_KINDS: 'v1/ConfigMap' },
    });
    expect(out.code).toBe(1);
    expect(out.stdout).toContain('kind v1/ConfigMap is restricted and never synced');
    expect(
      (await cli(['validate', '-'], { stdin: input, env: { SYNC_PROTECTED_NAMESPACES: 'team-ns' } })).stdout,
    ).toContain('namespace team-ns is protected');
  });

  it("checks a team's SyncResource against a SyncPolicy with the product's rule, and says it needs one", async () => {
    const team = dump({
      apiVersion: SYNC_API_VERSION,
      kind: 'SyncResource',
      metadata: { name: 'nfs', namespace: 'nfs-manager' },
      spec: {
        kyma: 'kyma-1',
        items: [
          {
            name: 'ok',
            strategy: 'CreateAndSync',
            resource:
              'apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c, namespace: nfs-system}\n',
          },
          {
            name: 'cm',
            strategy: 'CreateAndSync',
            resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: nfs-system}\n',
          },
          {
            name: 'away',
            strategy: 'CreateAndSync',
            resource: 'apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: d}\n',
          },
          {
            name: 'role',
            strategy: 'CreateAndSync',
            resource:
              'apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r, namespace: nfs-system}\n',
          },
          {
            name: 'del',
            strategy: 'Delete',
            resource:
              'apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: e, namespace: nfs-system}\n',
          },
        ],
      },
    });
    const out = await cli(['validate', '-', '--policy', 'examples/nfs-team.yaml', '-o', 'json'], {
      stdin: team,
    });
    expect(out.code).toBe(1);
    const findings = (
      JSON.parse(out.stdout) as {
        reports: { findings: { item?: string; reason: string; message: string }[] }[];
      }
    ).reports[0]!.findings;
    expect(findings.map((f) => [f.item, f.reason, f.message])).toEqual([
      ['cm', 'NotPermitted', 'SyncPolicy nfs: kind ConfigMap is not allowed (spec.namespacedResources)'],
      [
        'away',
        'NotPermitted',
        'SyncPolicy nfs: namespace default is not allowed (spec.destinationNamespaces)',
      ],
      [
        'role',
        'NotPermitted',
        'SyncPolicy nfs: cluster-scoped kind ClusterRole.rbac.authorization.k8s.io is not allowed (spec.clusterResources)',
      ],
      ['del', 'NotPermitted', 'SyncPolicy nfs: strategy Delete is not allowed (spec.strategies)'],
    ]);
    const none = await cli(['validate', '-'], { stdin: team });
    expect(none.code).toBe(1);
    expect(none.stdout).toContain('no SyncPolicy governs namespace nfs-manager');
    expect((await cli(['validate', '-', '--policy', 'examples/nfs.yaml'], { stdin: team })).code).toBe(2);
  });

  it('answers --help on each command and 2 on usage errors', async () => {
    for (const cmd of [['--help'], ['validate', '--help'], ['diff', '--help']]) {
      const r = await cli(cmd);
      expect(r.code, cmd.join(' ')).toBe(0);
      expect(r.stdout).toMatch(/^kcp-sync/);
    }
    expect((await cli(['validate'])).code).toBe(2);
    expect((await cli(['validate', '/nonexistent.yaml'])).code).toBe(2);
    expect((await cli(['frobnicate'])).code).toBe(2);
  });
});

describe('kcp-sync diff', () => {
  it("shows what a SyncPolicy refuses as restricted (NotPermitted), after the SKR's discovery, and writes nothing", async () => {
    const h = await new Harness('clipol').init();
    const skrKubeconfig = `${inject('clusters').stateDir}/kubeconfig/skr-1.yaml`;
    await h.skrCreate({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'theirs', namespace: h.ns },
      data: { a: 'x' },
    } as never);
    const policyFile = join(tmpdir(), `${h.name}-policy.yaml`);
    await writeFile(
      policyFile,
      dump({
        apiVersion: SYNC_API_VERSION,
        kind: 'SyncPolicy',
        metadata: { name: 'team' },
        spec: {
          namespaces: ['team-x'],
          destinationNamespaces: [h.ns],
          namespacedResources: [{ group: '', kind: 'ConfigMap' }],
        },
      }),
    );
    const file = join(tmpdir(), `${h.name}.yaml`);
    await writeFile(
      file,
      dump({
        apiVersion: SYNC_API_VERSION,
        kind: 'SyncResource',
        metadata: { name: h.name, namespace: 'team-x' },
        spec: {
          kyma: 'kyma-1',
          items: [
            { name: 'new', strategy: 'CreateAndSync', resource: h.cm('new', { a: '1' }) },
            {
              name: 'pvc',
              strategy: 'CreateAndSync',
              resource: `apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: p, namespace: ${h.ns}}\n`,
            },
            {
              name: 'role',
              strategy: 'CreateAndSync',
              resource:
                'apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r, namespace: x}\n',
            },
            { name: 'adopt', strategy: 'CreateAndSync', resource: h.cm('theirs', { a: 'ours' }) },
          ],
        },
      }),
    );
    const out = await cli([
      'diff',
      file,
      '--kubeconfig',
      skrKubeconfig,
      '--policy',
      policyFile,
      '-o',
      'json',
    ]);
    const items = (
      JSON.parse(out.stdout) as {
        syncResources: { items: { item: string; outcome: string; reason?: string; message?: string }[] }[];
      }
    ).syncResources[0]!.items;
    expect(items.map((i) => [i.item, i.outcome, i.reason ?? '', i.message ?? ''])).toEqual([
      ['new', 'create', '', ''],
      [
        'pvc',
        'restricted',
        'NotPermitted',
        'SyncPolicy team: kind PersistentVolumeClaim is not allowed (spec.namespacedResources)',
      ],
      [
        'role',
        'restricted',
        'NotPermitted',
        'SyncPolicy team: cluster-scoped kind ClusterRole.rbac.authorization.k8s.io is not allowed (spec.clusterResources)',
      ],
      ['adopt', 'restricted', 'NotPermitted', expect.stringContaining('never adopts it')],
    ]);
    expect(out.code).toBe(1);
    expect(await h.skrGet('v1', 'ConfigMap', 'new', h.ns)).toBeUndefined();
    expect((await h.skrGet('v1', 'ConfigMap', 'theirs', h.ns))?.data).toEqual({ a: 'x' });
  });

  it('tells every outcome against a real SKR, masks Secret values, and writes nothing', async () => {
    const h = await new Harness('cli').init();
    const skrKubeconfig = `${inject('clusters').stateDir}/kubeconfig/skr-1.yaml`;
    // The product has synced two ConfigMaps; others exist, made by someone else.
    await h.put([
      { name: 'same', strategy: 'CreateAndSync', resource: h.cm('same', { a: '1' }) },
      { name: 'changed', strategy: 'CreateAndSync', resource: h.cm('changed', { a: '1', keep: 'k' }) },
    ]);
    await h.sync();
    await h.skrCreate({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'foreign', namespace: h.ns },
      data: { a: 'theirs' },
    } as never);
    await h.skrCreate({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'victim', namespace: h.ns },
    } as never);
    // Another SyncResource's object: its field manager holds data.k with another value.
    await applyObject(
      h.skr,
      await mustFind(h.skr, 'v1', 'ConfigMap'),
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'taken', namespace: h.ns },
        data: { k: 'theirs' },
      },
      'kcp-sync-resource/kcp-system/another',
    );
    await h.skrCreate({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'creds', namespace: h.ns },
      stringData: { password: 'old-secret-value-1' },
    } as never);
    await h.skrCreate({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'refd', namespace: h.ns },
      stringData: { token: 'skr-held-value-3' },
    } as never);
    const items: SyncItem[] = [
      { name: 'same', strategy: 'CreateAndSync', resource: h.cm('same', { a: '1' }) },
      { name: 'changed', strategy: 'CreateAndSync', resource: h.cm('changed', { a: '2', keep: 'k' }) },
      { name: 'new', strategy: 'CreateAndSync', resource: h.cm('new', { a: '1' }) },
      { name: 'adopt', strategy: 'CreateAndSync', resource: h.cm('foreign', { a: 'ours' }) },
      { name: 'gone', strategy: 'Delete', resource: h.cm('victim', {}) },
      { name: 'theirs', strategy: 'CreateAndSync', resource: h.cm('taken', { k: 'ours' }) },
      {
        name: 'secret',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: ${h.ns}}\nstringData: {password: new-secret-value-2}\n`,
      },
      { name: 'peer', strategy: 'UpdateAndDelete', resource: h.cm('absent', {}) },
      {
        name: 'byref',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: Secret\nmetadata: {name: refd, namespace: ${h.ns}}\ntype: Opaque\n`,
        dataFrom: { secretRef: { name: 'btp-source' } },
      },
      {
        name: 'typo',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: Configmap\nmetadata: {name: t, namespace: ${h.ns}}\n`,
      },
    ];
    const file = join(tmpdir(), `${h.name}.yaml`);
    await writeFile(file, srDoc(h.name, items));
    const info = async (kind: string) => mustFind(h.skr, 'v1', kind);
    const state = async () =>
      Object.fromEntries(
        (
          await Promise.all(
            ['ConfigMap', 'Secret'].map(async (k) => listObjects(h.skr, await info(k), { namespace: h.ns })),
          )
        )
          .flat()
          .map((o) => [`${o.kind}/${o.metadata.name}`, o.metadata.resourceVersion]),
      );
    const before = await state();

    const json = await cli(['diff', file, '--kubeconfig', skrKubeconfig, '-o', 'json']);
    expect(json.stderr).toBe('');
    expect(json.code).toBe(2); // an item would fail (typo) and one is another's (conflict)
    const out = JSON.parse(json.stdout) as {
      changes: boolean;
      syncResources: {
        syncResource: string;
        items: { item: string; outcome: string; reason?: string; diff?: string }[];
      }[];
    };
    expect(out.changes).toBe(true);
    expect(out.syncResources[0]!.syncResource).toBe(`kcp-system/${h.name}`);
    const outcomes = Object.fromEntries(out.syncResources[0]!.items.map((i) => [i.item, i.outcome]));
    expect(outcomes).toEqual({
      same: 'unchanged',
      changed: 'update',
      new: 'create',
      adopt: 'adopt',
      gone: 'delete',
      theirs: 'conflict',
      secret: 'restricted',
      peer: 'not found',
      byref: 'adopt',
      typo: 'error',
    });
    expect(Object.keys(outcomes)).toEqual(items.map((i) => i.name));
    const diffOf = (item: string) => out.syncResources[0]!.items.find((i) => i.item === item)!.diff!;
    expect(diffOf('changed')).toMatch(/^-\s+a: '1'$/m);
    expect(diffOf('changed')).toMatch(/^\+\s+a: '2'$/m);
    expect(diffOf('changed')).not.toMatch(/^[-+]\s+keep:/m);
    expect(diffOf('new')).toMatch(/^\+\s+a: '1'$/m);
    expect(diffOf('adopt')).toMatch(/^\+\s+kcp-sync.kyma-project.io\/managed-by: kcp-sync-resource$/m);
    expect(
      (out.syncResources[0]!.items.find((i) => i.item === 'theirs') as { message?: string }).message,
    ).toBe(
      `ConfigMap ${h.ns}/taken: field .data.k is set to another value by SyncResource kcp-system/another; nothing was forced`,
    );
    expect(out.syncResources[0]!.items.find((i) => i.item === 'typo')!.reason).toBe('UnknownKind');
    // Values by reference live in the KCP: compared as the cluster holds them, never shown.
    expect(out.syncResources[0]!.items.find((i) => i.item === 'byref')).toMatchObject({
      message: expect.stringContaining('Secret btp-source in the KCP by reference'),
    });
    for (const v of ['skr-held-value-3', Buffer.from('skr-held-value-3').toString('base64')])
      expect(json.stdout).not.toContain(v);

    // With Secrets allowed, a Secret's values are masked: changed ones say so, none appears.
    const secrets = await cli(['diff', file, '--kubeconfig', skrKubeconfig], {
      env: { SYNC_RESTRICTED_KINDS: '' },
    });
    expect(secrets.stdout).toMatch(/^\+\s+password: '\*\*\* \(changed\)'$/m);
    expect(secrets.stdout).toMatch(/^-\s+password: '\*\*\*'$/m);
    for (const v of ['old-secret-value-1', 'new-secret-value-2']) {
      expect(secrets.stdout).not.toContain(v);
      expect(secrets.stdout).not.toContain(Buffer.from(v).toString('base64'));
    }
    expect(secrets.stdout).toMatch(/^secret\s+adopt\s+Secret /m);

    // Exit 0 when nothing would change, 1 when something would.
    await writeFile(file, srDoc(h.name, items.slice(0, 1)));
    const none = await cli(['diff', file, '--kubeconfig', skrKubeconfig]);
    expect(none.stdout).toMatch(/^same\s+unchanged\s+ConfigMap /m);
    expect(none.code).toBe(0);
    await writeFile(file, srDoc(h.name, items.slice(0, 3)));
    expect((await cli(['diff', file, '--kubeconfig', skrKubeconfig])).code).toBe(1);
    expect((await cli(['diff', file, '--kubeconfig', '/nonexistent'])).code).toBe(2);

    // A person's kubeconfig with a credential plugin (refused in access Secrets) works here.
    const admin = load(await readFile(skrKubeconfig, 'utf8')) as {
      clusters: [{ cluster: Record<string, string> }];
      users: [{ user: Record<string, string> }];
    };
    const credential = join(tmpdir(), `${h.name}-cred.json`);
    await writeFile(
      credential,
      JSON.stringify({
        apiVersion: 'client.authentication.k8s.io/v1',
        kind: 'ExecCredential',
        status: {
          clientCertificateData: Buffer.from(
            admin.users[0].user['client-certificate-data']!,
            'base64',
          ).toString(),
          clientKeyData: Buffer.from(admin.users[0].user['client-key-data']!, 'base64').toString(),
        },
      }),
    );
    const withPlugin = join(tmpdir(), `${h.name}-exec.yaml`);
    await writeFile(
      withPlugin,
      dump({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'skr',
        clusters: [{ name: 'skr', cluster: admin.clusters[0].cluster }],
        users: [
          {
            name: 'me',
            user: {
              exec: {
                apiVersion: 'client.authentication.k8s.io/v1',
                command: 'cat',
                args: [credential],
                interactiveMode: 'Never',
              },
            },
          },
        ],
        contexts: [{ name: 'skr', context: { cluster: 'skr', user: 'me' } }],
      }),
    );
    await writeFile(file, srDoc(h.name, items.slice(0, 1)));
    const viaPlugin = await cli(['diff', file, '--kubeconfig', withPlugin]);
    expect(viaPlugin.stderr).toBe('');
    expect(viaPlugin.stdout).toMatch(/^same\s+unchanged\s+ConfigMap /m);
    expect(viaPlugin.code).toBe(0);

    // Nothing was written: every object as it was, the new one still absent.
    expect(await state()).toEqual(before);
  });
});
