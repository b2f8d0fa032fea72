// Team namespaces under an operator's SyncPolicy, end to end and from the attacker's side:
// the team works with kubectl as its own ServiceAccount (examples/nfs-team.yaml binds it),
// which can read no Secret of the control-plane namespace and write no policy. Each rule of
// the policy refuses what it should, and nothing outside the named objects changes in any
// SKR: no object the refused items name exists, and no object anywhere carries the field
// manager of a refused team SyncResource.
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { dump, load, loadAll } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { KubeObject } from '../lib/kube/objects.ts';
import type { SyncItem, SyncResource } from '../lib/model.ts';
import { kubectl, kubectlGet, startStack, type Stack } from './e2e-helpers.ts';
import { eventually, uniqueName } from './helpers.ts';

const bin = join(import.meta.dirname, '..', 'dist', 'cli', 'kcp-sync.js');

/** cli runs the built kcp-sync as a module team would, returning its exit code and output. */
const cli = (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { maxBuffer: 8 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr }),
    );
  });

let s: Stack;
/** team is the kubeconfig of the team's ServiceAccount; P prefixes every name of this file. */
let team: string;
const P = uniqueName('tnt');
const T = `${P}-team`;
const T2 = `${P}-other`;
const D = `${P}-dst`;

const example = join(import.meta.dirname, '..', 'examples', 'nfs-team.yaml');

/** ours renames the example's names to this file's (and its control-plane namespace to the stack's). */
const ours = (text: string) =>
  text
    .replaceAll('kcp-system', s.ns)
    .replaceAll('nfs-manager', T)
    .replaceAll('nfs-system', D)
    .replaceAll('pv-nfs', `${P}-pv`)
    .replaceAll('nfs-csi', `${P}-sc`)
    .replace(/^  name: nfs$/m, `  name: ${P}-nfs`);

const srOf = (ns: string, name: string, kyma: string, items: SyncItem[]): string =>
  JSON.stringify({
    apiVersion: 'operator.kyma-project.io/v1alpha1',
    kind: 'SyncResource',
    metadata: { name, namespace: ns },
    spec: { kyma, items },
  });

const getSr = (ns: string, name: string) => kubectlGet<SyncResource>(s.kcp, 'syncresource', name, ns);
const waitFor = (ns: string, name: string, check: (sr: SyncResource | undefined) => void, ms = 60_000) =>
  eventually(
    async () => {
      const sr = await getSr(ns, name);
      check(sr);
      return sr!;
    },
    ms,
    250,
  );
/**
 * reasons are the items' reasons; an object the run created and a later run of the same
 * generation found as it left it (the SKR source's health finding can run it again before
 * the first status is written, on a loaded machine) reads Created either way.
 */
const reasons = (sr: SyncResource | undefined) =>
  Object.fromEntries(
    (sr?.status?.items ?? []).map((i) => [i.name, i.reason === 'Unchanged' ? 'Created' : i.reason]),
  );
const ready = (sr: SyncResource | undefined) => {
  expect(sr?.status?.state).toBe('Ready');
  expect(sr?.status?.observedGeneration).toBe(sr?.metadata.generation);
};
const condition = (sr: SyncResource | undefined) =>
  sr?.status?.conditions?.find((c) => c.type === 'Resources');

/** skrGet reads an object in an SKR with kubectl (undefined when absent). */
const skrGet = (skr: number, kind: string, name: string, ns?: string) =>
  kubectlGet(s.skr[skr]!, kind, name, ns);

/** writtenBy lists the objects of kinds in an SKR whose managedFields name manager. */
const writtenBy = async (skr: number, manager: string): Promise<string[]> => {
  const out = JSON.parse(
    await kubectl(s.skr[skr]!, [
      'get',
      'configmaps,persistentvolumeclaims,persistentvolumes,storageclasses,namespaces,clusterroles,clusterrolebindings',
      '-A',
      '-o',
      'json',
      '--show-managed-fields',
    ]),
  ) as { items: (KubeObject & { metadata: { managedFields?: { manager: string }[] } })[] };
  return out.items
    .filter((o) => o.metadata.managedFields?.some((f) => f.manager.includes(manager)))
    .map((o) => `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`);
};

const cm = (name: string, ns?: string) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}${ns ? `, namespace: ${ns}` : ''}}\ndata: {k: v}\n`;
const pvc = (name: string, ns?: string, size = '1Gi') =>
  `apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: ${name}${ns ? `, namespace: ${ns}` : ''}}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: ${size}}}, storageClassName: ${P}-none}\n`;

/** teamKubeconfig is the kubeconfig of a team's ServiceAccount (nfs-team in ns): its token, the KCP's server and CA. */
const teamKubeconfig = async (ns: string): Promise<string> => {
  const admin = load(await readFile(s.kcp, 'utf8')) as { clusters: { cluster: Record<string, string> }[] };
  const token = (await kubectl(s.kcp, ['create', 'token', 'nfs-team', '-n', ns])).trim();
  const file = join(s.stateDir, `${ns}.yaml`);
  await writeFile(
    file,
    dump({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'kcp', cluster: admin.clusters[0]!.cluster }],
      users: [{ name: 'team', user: { token } }],
      contexts: [{ name: 'team', context: { cluster: 'kcp', user: 'team', namespace: ns } }],
      'current-context': 'team',
    }),
  );
  return file;
};

/** onboard binds the product's functions and a team ServiceAccount in ns, as the example does for its namespace. */
const onboard = async (ns: string) => {
  const docs = loadAll(ours(await readFile(example, 'utf8'))) as KubeObject[];
  const rbac = docs.filter(
    (d) => d.kind === 'RoleBinding' || d.kind === 'ServiceAccount' || d.kind === 'Namespace',
  );
  const moved = rbac.map((d) => {
    const o = JSON.parse(JSON.stringify(d).replaceAll(`"${T}"`, `"${ns}"`)) as KubeObject;
    return dump(o);
  });
  await kubectl(s.kcp, ['apply', '-f', '-'], moved.join('---\n'));
};

/** policy applies a SyncPolicy labelled for this file. */
const policy = (name: string, spec: Record<string, unknown>) =>
  kubectl(
    s.kcp,
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'operator.kyma-project.io/v1alpha1',
      kind: 'SyncPolicy',
      metadata: { name, labels: { 'tenancy-test': P } },
      spec,
    }),
  );

beforeAll(async () => {
  s = await startStack('tenancy', { pingIntervalMs: 3_600_000 });
  // The operator's part of the example (everything but the team's SyncResource).
  const docs = loadAll(ours(await readFile(example, 'utf8'))) as KubeObject[];
  await kubectl(
    s.kcp,
    ['apply', '-f', '-'],
    docs
      .filter((d) => d.kind !== 'SyncResource')
      .map((d) => dump(d))
      .join('---\n'),
  );
  team = await teamKubeconfig(T);
  // A second team, onboarded the same way, whose policy overlaps the first's destination.
  await onboard(T2);
  await policy(`${P}-other`, {
    namespaces: [T2],
    kymas: { names: ['kyma-1'] },
    destinationNamespaces: [D],
    clusterResources: [{ group: '', kind: 'PersistentVolume' }],
    strategies: ['CreateAndSync', 'Delete'],
  });
}, 300_000);

afterAll(async () => {
  await kubectl(s.kcp, ['delete', 'syncpolicy', '-l', `tenancy-test=${P}`, '--ignore-not-found']).catch(
    () => {},
  );
  await kubectl(s.kcp, ['delete', 'syncpolicy', `${P}-nfs`, '--ignore-not-found']).catch(() => {});
  await s?.stop();
});

describe('team namespaces under a SyncPolicy', () => {
  it("runs the NFS example from the team's namespace, applied by the team, which can read no access Secret and write no policy", async () => {
    const srText = ours(await readFile(example, 'utf8'))
      .split('\n---\n')
      .find((d) => d.includes('kind: SyncResource'))!;
    await kubectl(team, ['apply', '-f', '-'], srText);
    const sr = await waitFor(T, 'nfs-kyma-1', ready);
    expect(sr.status?.items?.map((i) => i.state)).toEqual(['Ready', 'Ready', 'Ready', 'Ready']);
    expect(await skrGet(0, 'namespace', D)).toBeDefined();
    expect(await skrGet(0, 'persistentvolume', `${P}-pv`)).toBeDefined();
    expect(await skrGet(0, 'persistentvolumeclaim', 'pvc-nfs-static', D)).toBeDefined();
    expect(await skrGet(0, 'storageclass', `${P}-sc`)).toBeDefined();
    // The team reads its status, and nothing of the control plane's.
    expect(await kubectl(team, ['get', 'syncresource', 'nfs-kyma-1', '-o', 'jsonpath={.status.state}'])).toBe(
      'Ready',
    );
    await expect(kubectl(team, ['get', 'secrets', '-n', s.ns])).rejects.toThrow(/forbidden/i);
    await expect(
      kubectl(
        team,
        ['apply', '-f', '-'],
        JSON.stringify({
          apiVersion: 'operator.kyma-project.io/v1alpha1',
          kind: 'SyncPolicy',
          metadata: { name: `${P}-mine` },
          spec: { namespaces: [T], destinationNamespaces: ['kube-system'] },
        }),
      ),
    ).rejects.toThrow(/forbidden/i);
    await expect(
      kubectl(team, [
        'patch',
        'syncresource',
        'nfs-kyma-1',
        '--subresource=status',
        '--type=merge',
        '-p',
        '{"status":{"state":"Ready"}}',
      ]),
    ).rejects.toThrow(/forbidden/i);
  }, 120_000);
  it('refuses each item its policy does not allow, and writes nothing it names', async () => {
    const name = `${P}-dims`;
    const items: SyncItem[] = [
      { name: 'ok', strategy: 'CreateAndSync', resource: pvc(`${P}-ok`, D) },
      { name: 'kind', strategy: 'CreateAndSync', resource: cm(`${P}-cm`, D) },
      { name: 'elsewhere', strategy: 'CreateAndSync', resource: pvc(`${P}-elsewhere`, 'default') },
      { name: 'no-namespace', strategy: 'CreateAndSync', resource: pvc(`${P}-nons`) },
      {
        name: 'cluster-kind',
        strategy: 'CreateAndSync',
        resource: `apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: ${P}-cr}\nrules: []\n`,
      },
      {
        // A cluster-scoped kind carrying a namespace of the policy's: scope is the SKR's, not the manifest's.
        name: 'cluster-with-namespace',
        strategy: 'CreateAndSync',
        resource: `apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: ${P}-crb, namespace: ${D}}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: Group, name: system:authenticated, apiGroup: rbac.authorization.k8s.io}]\n`,
      },
      { name: 'strategy', strategy: 'Delete', resource: pvc(`${P}-del`, D) },
      {
        // Kind spoofing: an allowed kind's name in another group, and in another letter case.
        name: 'spoof-group',
        strategy: 'CreateAndSync',
        resource: `apiVersion: rbac.authorization.k8s.io/v1\nkind: PersistentVolumeClaim\nmetadata: {name: ${P}-spoof, namespace: ${D}}\n`,
      },
      {
        name: 'spoof-case',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: persistentvolumeclaim\nmetadata: {name: ${P}-spoof2, namespace: ${D}}\n`,
      },
      {
        name: 'other-namespace',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${P}-ns}\n`,
      },
    ];
    await kubectl(team, ['apply', '-f', '-'], srOf(T, name, 'kyma-1', items));
    const sr = await waitFor(T, name, (x) => {
      expect(x?.status?.observedGeneration).toBe(1);
      expect(reasons(x).ok).toBe('Created');
    });
    const policyName = `SyncPolicy ${P}-nfs`;
    expect(
      sr.status?.items?.filter((i) => i.name !== 'ok').map((i) => [i.name, i.state, i.reason, i.message]),
    ).toEqual([
      [
        'kind',
        'Error',
        'NotPermitted',
        `${policyName}: kind ConfigMap is not allowed (spec.namespacedResources)`,
      ],
      [
        'elsewhere',
        'Error',
        'NotPermitted',
        `${policyName}: namespace default is not allowed (spec.destinationNamespaces)`,
      ],
      [
        'no-namespace',
        'Error',
        'NotPermitted',
        `${policyName}: namespace default is not allowed (spec.destinationNamespaces)`,
      ],
      [
        'cluster-kind',
        'Error',
        'NotPermitted',
        `${policyName}: cluster-scoped kind ClusterRole.rbac.authorization.k8s.io is not allowed (spec.clusterResources)`,
      ],
      [
        'cluster-with-namespace',
        'Error',
        'NotPermitted',
        `${policyName}: cluster-scoped kind ClusterRoleBinding.rbac.authorization.k8s.io is not allowed (spec.clusterResources)`,
      ],
      [
        'strategy',
        'Error',
        'NotPermitted',
        `${policyName}: strategy Delete is not allowed (spec.strategies)`,
      ],
      [
        'spoof-group',
        'Error',
        'UnknownKind',
        expect.stringContaining('does not serve kind PersistentVolumeClaim'),
      ],
      ['spoof-case', 'Error', expect.stringMatching(/UnknownKind|InvalidManifest/), expect.any(String)],
      [
        'other-namespace',
        'Error',
        'NotPermitted',
        `${policyName}: Namespace ${P}-ns is not allowed (spec.destinationNamespaces)`,
      ],
    ]);
    // Nothing the refused items name exists, in either SKR; the one allowed object is all this SyncResource wrote.
    for (const skr of [0, 1]) {
      expect(await skrGet(skr, 'configmap', `${P}-cm`, D)).toBeUndefined();
      expect(await skrGet(skr, 'persistentvolumeclaim', `${P}-elsewhere`, 'default')).toBeUndefined();
      expect(await skrGet(skr, 'persistentvolumeclaim', `${P}-nons`, 'default')).toBeUndefined();
      expect(await skrGet(skr, 'clusterrole', `${P}-cr`)).toBeUndefined();
      expect(await skrGet(skr, 'clusterrolebinding', `${P}-crb`)).toBeUndefined();
      expect(await skrGet(skr, 'namespace', `${P}-ns`)).toBeUndefined();
    }
    expect(await writtenBy(0, `${T}/${name}`)).toEqual([`PersistentVolumeClaim ${D}/${P}-ok`]);
    expect(await writtenBy(1, `${T}/${name}`)).toEqual([]);
  }, 120_000);

  it('targets only the Kymas its policy allows: a Kyma labelled into the selector, then out of it after the SyncResource settled', async () => {
    const name = `${P}-k2`;
    const kymaPath = ['kyma', 'kyma-2', '-n', s.ns];
    await kubectl(
      team,
      ['apply', '-f', '-'],
      srOf(T, name, 'kyma-2', [
        {
          name: 'ns',
          strategy: 'CreateAndSync',
          resource: `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${D}}\n`,
        },
        { name: 'claim', strategy: 'CreateAndSync', resource: pvc(`${P}-k2`, D) },
      ]),
    );
    const refused = await waitFor(T, name, (x) => expect(condition(x)?.reason).toBe('NotPermitted'));
    expect(refused.status?.state).toBe('Error');
    expect(condition(refused)?.message).toContain(
      `SyncPolicy ${P}-nfs: Kyma kyma-2 is not allowed (spec.kymas)`,
    );
    expect(refused.metadata.finalizers ?? []).toEqual([]);
    expect(await skrGet(1, 'persistentvolumeclaim', `${P}-k2`, D)).toBeUndefined();
    expect(await writtenBy(1, `${T}/${name}`)).toEqual([]);
    // Labelled into the policy's selector: the Kyma's change runs its team SyncResources.
    await kubectl(s.kcp, ['label', ...kymaPath, 'kyma-project.io/region=eu']);
    await waitFor(T, name, (x) => expect(reasons(x)).toEqual({ ns: 'Created', claim: 'Created' }));
    expect(await skrGet(1, 'persistentvolumeclaim', `${P}-k2`, D)).toBeDefined();
    // Labelled out of it after it settled: refused again; what it made stays as it is.
    await kubectl(s.kcp, ['label', ...kymaPath, 'kyma-project.io/region-']);
    await waitFor(T, name, (x) => expect(condition(x)?.reason).toBe('NotPermitted'));
    expect(await skrGet(1, 'persistentvolumeclaim', `${P}-k2`, D)).toBeDefined();
  }, 120_000);

  it("previews a change through the KCP with the team's credentials alone (kcp-sync diff --kcp), writing nothing to the SKR", async () => {
    const name = `${P}-prev`;
    // The destination namespace exists (the NFS example's SyncResource creates it when the whole file runs).
    if (!(await skrGet(0, 'namespace', D))) await kubectl(s.skr[0]!, ['create', 'namespace', D]);
    const labelled = (n: string, v: string) =>
      pvc(n, D).replace(
        `metadata: {name: ${n}, namespace: ${D}}`,
        `metadata: {name: ${n}, namespace: ${D}, labels: {v: "${v}"}}`,
      );
    await kubectl(
      team,
      ['apply', '-f', '-'],
      srOf(T, name, 'kyma-1', [
        { name: 'a', strategy: 'CreateAndSync', resource: labelled(`${P}-pa`, '1') },
        { name: 'b', strategy: 'CreateAndSync', resource: pvc(`${P}-pb`, D) },
      ]),
    );
    // Applied (claims that wait for a volume keep it Processing).
    const live = await waitFor(T, name, (x) =>
      expect(x?.status?.items?.map((i) => i.state)).toEqual(['Ready', 'Ready']),
    );
    // The text of one item comes from a ConfigMap of the team's namespace (resourceFrom).
    await kubectl(
      team,
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: `${P}-text`,
          namespace: T,
          labels: { 'operator.kyma-project.io/sync-source': 'true' },
        },
        data: { pvc: pvc(`${P}-pf`, D) },
      }),
    );
    const changed = srOf(T, name, 'kyma-1', [
      { name: 'a', strategy: 'CreateAndSync', resource: labelled(`${P}-pa`, '2') },
      { name: 'c', strategy: 'CreateAndSync', resource: pvc(`${P}-pc`, D) },
      { name: 'far', strategy: 'CreateAndSync', resource: pvc(`${P}-far`, 'default') },
      {
        name: 'from',
        strategy: 'CreateAndSync',
        resourceFrom: { configMapKeyRef: { name: `${P}-text`, key: 'pvc' } },
      } as SyncItem,
    ]);
    const file = join(s.stateDir, `${name}.json`);
    await writeFile(file, changed);
    const before = await Promise.all(
      [`${P}-pa`, `${P}-pb`].map((n) => skrGet(0, 'persistentvolumeclaim', n, D)),
    );
    const out = await cli(['diff', file, '--kcp', team, '-o', 'json']);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(1); // something would change
    const report = JSON.parse(out.stdout) as {
      changes: boolean;
      syncResources: {
        syncResource: string;
        items: { item: string; outcome: string; reason?: string; diff?: string }[];
      }[];
    };
    expect(report.syncResources.map((r) => r.syncResource)).toEqual([`${T}/${name}`]);
    const items = report.syncResources[0]!.items;
    expect(Object.fromEntries(items.map((i) => [i.item, i.outcome]))).toEqual({
      a: 'update',
      c: 'create',
      far: 'restricted',
      from: 'create',
      b: 'prune',
    });
    expect(items.find((i) => i.item === 'a')!.diff).toMatch(/-\s+v: ['"]1['"][\s\S]*\+\s+v: ['"]2['"]/);
    expect(items.find((i) => i.item === 'far')!.reason).toBe('NotPermitted');
    // Nothing was written to the SKR, the SyncResource previewed is as it was, and no preview is left.
    expect(await skrGet(0, 'persistentvolumeclaim', `${P}-pc`, D)).toBeUndefined();
    expect(await skrGet(0, 'persistentvolumeclaim', `${P}-pf`, D)).toBeUndefined();
    const after = await Promise.all(
      [`${P}-pa`, `${P}-pb`].map((n) => skrGet(0, 'persistentvolumeclaim', n, D)),
    );
    expect(after.map((o) => o?.metadata.resourceVersion)).toEqual(
      before.map((o) => o?.metadata.resourceVersion),
    );
    expect((await getSr(T, name))?.metadata.resourceVersion).toBe(live.metadata.resourceVersion);
    expect(await kubectl(team, ['get', 'syncresources', '-o', 'name'])).not.toContain('-preview-');
    // The same with kubectl alone: the team creates a preview, waits for it, reads it and deletes it.
    const preview = JSON.parse(changed) as SyncResource;
    preview.metadata.name = `${name}-mine`;
    preview.spec.preview = { of: name };
    await kubectl(team, ['apply', '-f', '-'], JSON.stringify(preview));
    await kubectl(team, [
      'wait',
      `syncresource/${name}-mine`,
      '--timeout=60s',
      '--for=jsonpath={.status.preview.observedGeneration}=1',
    ]);
    const read = JSON.parse(
      await kubectl(team, ['get', 'syncresource', `${name}-mine`, '-o', 'jsonpath={.status.preview}']),
    ) as { of: string; changes: boolean; items: { item: string; outcome: string }[] };
    expect(read.of).toBe(name);
    expect(read.changes).toBe(true);
    expect(read.items.map((i) => `${i.item}:${i.outcome}`).sort()).toEqual(
      ['a:update', 'b:prune', 'c:create', 'far:restricted', 'from:create'].sort(),
    );
    await kubectl(team, ['delete', 'syncresource', `${name}-mine`]);
    expect(await skrGet(0, 'persistentvolumeclaim', `${P}-pc`, D)).toBeUndefined();
    // A preview of a SyncResource for a Kyma the policy does not allow says why, and writes nothing either.
    await writeFile(file, changed.replace('"kyma":"kyma-1"', '"kyma":"kyma-2"'));
    const refused = await cli(['diff', file, '--kcp', team]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/the preview of .* failed: NotPermitted: /);
  }, 180_000);

  it('never adopts an object the product did not create', async () => {
    await kubectl(s.skr[0]!, ['apply', '-f', '-'], pvc(`${P}-theirs`, D));
    const before = await skrGet(0, 'persistentvolumeclaim', `${P}-theirs`, D);
    const name = `${P}-adopt`;
    await kubectl(
      team,
      ['apply', '-f', '-'],
      srOf(T, name, 'kyma-1', [
        { name: 'take', strategy: 'CreateAndSync', resource: pvc(`${P}-theirs`, D, '2Gi') },
        { name: 'keep', strategy: 'CreateAndIgnore', resource: pvc(`${P}-theirs`, D) },
      ]),
    );
    const sr = await waitFor(T, name, (x) => expect(x?.status?.observedGeneration).toBe(1));
    expect(sr.status?.items?.map((i) => [i.name, i.reason])).toEqual([
      ['take', 'NotPermitted'],
      ['keep', expect.stringMatching(/NotPermitted|DuplicateObject/)],
    ]);
    expect(sr.status?.items?.[0]?.message).toContain('never adopts it');
    const after = await skrGet(0, 'persistentvolumeclaim', `${P}-theirs`, D);
    expect(after?.metadata.resourceVersion).toBe(before?.metadata.resourceVersion);
    expect(sr.status?.synced ?? []).toEqual([]);
  }, 120_000);

  it("lets a second team neither take over nor delete the first team's objects, nor read a Secret outside its namespace", async () => {
    const pv = await skrGet(0, 'persistentvolume', `${P}-pv`);
    const claim = await skrGet(0, 'persistentvolumeclaim', 'pvc-nfs-static', D);
    expect(pv && claim).toBeTruthy();
    // A source Secret in the control-plane namespace, labelled for the Kyma: not the team's to read.
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name: `${P}-src`,
          namespace: s.ns,
          labels: {
            'operator.kyma-project.io/sync-source': 'true',
            'operator.kyma-project.io/kyma-name': 'kyma-1',
          },
        },
        stringData: { password: 'not-for-teams' },
      }),
    );
    const name = `${P}-intruder`;
    // The second team, with its own ServiceAccount.
    await kubectl(
      await teamKubeconfig(T2),
      ['apply', '-f', '-'],
      srOf(T2, name, 'kyma-1', [
        { name: 'take', strategy: 'CreateAndSync', resource: pvc('pvc-nfs-static', D, '5Gi') },
        {
          name: 'remove',
          strategy: 'Delete',
          resource: `apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: ${P}-pv}\n`,
        },
        {
          name: 'steal',
          strategy: 'CreateAndSync',
          resource: `apiVersion: v1\nkind: Secret\nmetadata: {name: ${P}-stolen, namespace: ${D}}\n`,
          dataFrom: { secretRef: { name: `${P}-src` } },
        } as SyncItem,
      ]),
    );
    const sr = await waitFor(T2, name, (x) => expect(x?.status?.observedGeneration).toBe(1));
    const byName = Object.fromEntries((sr.status?.items ?? []).map((i) => [i.name, i]));
    expect(byName.take?.reason).toBe('NotPermitted');
    expect(byName.take?.message).toContain(`SyncResource ${T}/nfs-kyma-1 of another namespace`);
    expect(byName.remove?.reason).toBe('Conflict');
    expect(byName.steal?.state).toBe('Error');
    expect(JSON.stringify(sr.status)).not.toContain('not-for-teams');
    // The first team's objects are as they were; no Secret was made.
    expect((await skrGet(0, 'persistentvolume', `${P}-pv`))?.metadata.resourceVersion).toBe(
      pv!.metadata.resourceVersion,
    );
    expect((await skrGet(0, 'persistentvolumeclaim', 'pvc-nfs-static', D))?.metadata.resourceVersion).toBe(
      claim!.metadata.resourceVersion,
    );
    expect(await skrGet(0, 'secret', `${P}-stolen`, D)).toBeUndefined();
    expect(await writtenBy(0, `${T2}/${name}`)).toEqual([]);
  }, 120_000);

  it('tells a SyncResource of an onboarded namespace that no policy governs it, and runs it once a policy does, untouched', async () => {
    const T3 = `${P}-waiting`;
    await onboard(T3);
    const name = `${P}-waits`;
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      srOf(T3, name, 'kyma-1', [
        { name: 'claim', strategy: 'CreateAndSync', resource: pvc(`${P}-waits`, D) },
      ]),
    );
    const waiting = await waitFor(T3, name, (x) => expect(condition(x)?.reason).toBe('NotPermitted'));
    expect(condition(waiting)?.message).toContain(`no SyncPolicy governs namespace ${T3}`);
    expect(waiting.metadata.finalizers ?? []).toEqual([]);
    expect(await skrGet(0, 'persistentvolumeclaim', `${P}-waits`, D)).toBeUndefined();
    await policy(`${P}-waiting`, {
      namespaces: [T3],
      kymas: { names: ['kyma-1'] },
      destinationNamespaces: [D],
      namespacedResources: [{ group: '', kind: 'PersistentVolumeClaim' }],
    });
    const running = await waitFor(T3, name, (x) => expect(reasons(x)).toEqual({ claim: 'Created' }));
    expect(running.metadata.generation).toBe(waiting.metadata.generation);
    expect(await skrGet(0, 'persistentvolumeclaim', `${P}-waits`, D)).toBeDefined();
  }, 120_000);

  it('refuses a namespace two policies name, and one whose policy is removed; its objects stay, and its deletion still removes them', async () => {
    // The policy narrowed (StorageClasses no more): the item is refused, its object stays;
    // the item removed, its object is still not pruned, and the status says why.
    const nfs = JSON.parse(await kubectl(s.kcp, ['get', 'syncpolicy', `${P}-nfs`, '-o', 'json'])) as {
      spec: { clusterResources: { group: string; kind: string }[] };
    };
    const narrowed = nfs.spec.clusterResources.filter((r) => r.kind !== 'StorageClass');
    await kubectl(s.kcp, [
      'patch',
      'syncpolicy',
      `${P}-nfs`,
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { clusterResources: narrowed } }),
    ]);
    const sc = await waitFor(T, 'nfs-kyma-1', (x) => expect(reasons(x)['nfs-1-sc']).toBe('NotPermitted'));
    expect(sc.status?.items?.find((i) => i.name === 'nfs-1-sc')?.message).toContain(
      `SyncPolicy ${P}-nfs: cluster-scoped kind StorageClass.storage.k8s.io is not allowed (spec.clusterResources)`,
    );
    expect(await skrGet(0, 'storageclass', `${P}-sc`)).toBeDefined();
    const live = (await getSr(T, 'nfs-kyma-1'))!;
    await kubectl(team, [
      'patch',
      'syncresource',
      'nfs-kyma-1',
      '--type=json',
      '-p',
      JSON.stringify([
        { op: 'remove', path: `/spec/items/${live.spec.items.findIndex((i) => i.name === 'nfs-1-sc')}` },
      ]),
    ]);
    const kept = await waitFor(T, 'nfs-kyma-1', (x) =>
      expect(x?.status?.observedGeneration).toBe(live.metadata.generation! + 1),
    );
    expect(JSON.stringify(kept.status?.conditions)).toContain(`StorageClass ${P}-sc is not pruned`);
    expect(kept.status?.synced?.some((e) => e.kind === 'StorageClass')).toBe(true);
    expect(await skrGet(0, 'storageclass', `${P}-sc`)).toBeDefined();
    await kubectl(s.kcp, [
      'patch',
      'syncpolicy',
      `${P}-nfs`,
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { clusterResources: nfs.spec.clusterResources } }),
    ]);
    const pvRv = (await skrGet(0, 'persistentvolume', `${P}-pv`))?.metadata.resourceVersion;
    // A second policy for the same namespace: never their union, none applies.
    await policy(`${P}-dup`, { namespaces: [T], kymas: { names: ['kyma-1'] }, strategies: ['Delete'] });
    const two = await waitFor(T, 'nfs-kyma-1', (x) => expect(condition(x)?.reason).toBe('NotPermitted'));
    expect(condition(two)?.message).toContain(`named by 2 SyncPolicies (${P}-dup, ${P}-nfs)`);
    expect((await skrGet(0, 'persistentvolume', `${P}-pv`))?.metadata.resourceVersion).toBe(pvRv);
    await kubectl(s.kcp, ['delete', 'syncpolicy', `${P}-dup`]);
    await waitFor(T, 'nfs-kyma-1', ready);
    // Its policy removed: refused, nothing pruned.
    await kubectl(s.kcp, ['delete', 'syncpolicy', `${P}-nfs`]);
    const none = await waitFor(T, 'nfs-kyma-1', (x) => expect(condition(x)?.reason).toBe('NotPermitted'));
    expect(condition(none)?.message).toContain(`no SyncPolicy governs namespace ${T}`);
    expect(await skrGet(0, 'persistentvolume', `${P}-pv`)).toBeDefined();
    expect(await skrGet(0, 'persistentvolumeclaim', 'pvc-nfs-static', D)).toBeDefined();
    // Deleted by the team: what it created goes, policy or none.
    await kubectl(team, ['delete', 'syncresource', 'nfs-kyma-1', '--wait=false']);
    await eventually(async () => expect(await getSr(T, 'nfs-kyma-1')).toBeUndefined(), 60_000);
    expect(await skrGet(0, 'persistentvolumeclaim', 'pvc-nfs-static', D)).toBeUndefined();
    expect(await skrGet(0, 'storageclass', `${P}-sc`)).toBeUndefined();
  }, 180_000);
});
