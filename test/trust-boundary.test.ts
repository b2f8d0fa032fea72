// The trust boundary, tried from the attacker's side: hostile SyncResources go in with
// kubectl and forged events through the broker, against the whole pipeline (the local
// runtime, the four functions as real HTTP servers). Every case asserts its exact item or
// cluster reason; the test then compares every object of the kinds below in an SKR no
// other test touches, before and after, and only the intended objects may differ. No
// hostile case makes a function answer 5xx, and deliveries per SyncResource stay few.
import { CloudEvent, HTTP } from 'cloudevents';
import { writeFile } from 'node:fs/promises';
import { dump, load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { accessSecretName, applyObjects, kymaObjects } from '../infra/kcp-setup.ts';
import { EventTypes } from '../lib/events/contract.ts';
import { MAX_MESSAGE } from '../lib/policy/rules.ts';
import { RECONCILE_ANNOTATION, type SyncResource } from '../lib/model.ts';
import {
  getSr,
  kubeEvents,
  kubectl,
  startStack,
  syncResourceYaml,
  waitSr,
  type Stack,
} from './e2e-helpers.ts';
import { cluster, eventually, uniqueName } from './helpers.ts';

type Item = { name: string; strategy: string; resource?: string };
/** Case is one hostile SyncResource and what must come of each of its items (state/reason) or of the whole (cluster reason). */
interface Case {
  title: string;
  kyma?: string;
  items: Item[];
  want: Record<string, string> | { cluster: string };
}

let s: Stack;
let iso: string;
const P = uniqueName('tb');
const V = `${P}-victim`;
const A = `${P}-adopt`;
const A2 = `${P}-adopt2`;
const manifest = (
  apiVersion: string,
  kind: string,
  meta: Record<string, unknown>,
  rest: Record<string, unknown> = {},
) => dump({ apiVersion, kind, metadata: meta, ...rest });
const cm = (name: string, namespace: string, data: Record<string, string> = { a: '1' }) =>
  manifest('v1', 'ConfigMap', { name, namespace }, { data });
const one = (strategy: string, resource: string): Item[] => [{ name: 'x', strategy, resource }];
const strategies = ['CreateAndSync', 'CreateAndIgnore', 'Delete', 'UpdateAndDelete'];

/** The identity cases: each field, each trick, each strategy in turn; all end InvalidManifest. */
function identityCases(): Case[] {
  const names = [
    '.',
    '..',
    'c1/..',
    '../c1',
    'c1%2F..',
    '%2e%2e',
    'c1?watch=1',
    'c1#x',
    'c1 ',
    'c1\tx',
    'с1' /* Cyrillic es */,
    '',
  ];
  const namespaces = ['.', '..', `${V}/..`, `${V}%2F..`, `${V} `, `vісtim` /* Cyrillic i and es */];
  const apiVersions = ['../api/v1', 'v1/..', 'v1%2F..', 'apps/v1/../../api/v1', '/v1', 'V1', 'v1 '];
  const kinds = ['ConfigMap/..', 'ConfigMap?x', 'CоnfigMap' /* Cyrillic o */, 'Config Map'];
  const cases: Case[] = [];
  let i = 0;
  const next = () => strategies[i++ % strategies.length]!;
  for (const n of names)
    cases.push({
      title: `name ${JSON.stringify(n)}`,
      items: one(next(), cm(n, V)),
      want: { x: 'Error/InvalidManifest' },
    });
  for (const ns of namespaces)
    cases.push({
      title: `namespace ${JSON.stringify(ns)}`,
      items: one(next(), cm('c1', ns)),
      want: { x: 'Error/InvalidManifest' },
    });
  for (const av of apiVersions) {
    cases.push({
      title: `apiVersion ${JSON.stringify(av)} of a Secret`,
      items: one(next(), manifest(av, 'Secret', { name: 's1', namespace: V })),
      want: { x: 'Error/InvalidManifest' },
    });
  }
  for (const k of kinds)
    cases.push({
      title: `kind ${JSON.stringify(k)}`,
      items: one(next(), manifest('v1', k, { name: 'c1', namespace: V })),
      want: { x: 'Error/InvalidManifest' },
    });
  cases.push({
    title: 'cluster-scoped Namespace named ".."',
    items: one('Delete', manifest('v1', 'Namespace', { name: '..' })),
    want: { x: 'Error/InvalidManifest' },
  });
  cases.push({
    title: 'cluster-scoped ClusterRole "role/.."',
    items: one('Delete', manifest('rbac.authorization.k8s.io/v1', 'ClusterRole', { name: `${P}-role/..` })),
    want: { x: 'Error/InvalidManifest' },
  });
  return cases;
}

function restrictedCases(): Case[] {
  const secret = (kind: string, strategy: string): Case => ({
    title: `restricted kind spelled ${kind} (${strategy})`,
    items: one(strategy, manifest('v1', kind, { name: 's1', namespace: V })),
    want: { x: 'Warning/Restricted' },
  });
  const protectedNs = (title: string, strategy: string, resource: string): Case => ({
    title,
    items: one(strategy, resource),
    want: { x: 'Warning/Restricted' },
  });
  return [
    secret('Secret', 'Delete'),
    secret('secret', 'Delete'),
    secret('SECRET', 'UpdateAndDelete'),
    secret('Secret', 'CreateAndSync'),
    protectedNs('a ConfigMap created in kube-system', 'CreateAndSync', cm(`${P}-x`, 'kube-system')),
    protectedNs(
      'a ConfigMap of kube-system deleted',
      'Delete',
      cm('extension-apiserver-authentication', 'kube-system'),
    ),
    protectedNs('a ConfigMap of kube-public updated', 'UpdateAndDelete', cm('cluster-info', 'kube-public')),
    protectedNs('a ConfigMap in kube-node-lease', 'CreateAndIgnore', cm(`${P}-x`, 'kube-node-lease')),
    protectedNs(
      'Namespace default taken over',
      'CreateAndSync',
      manifest('v1', 'Namespace', { name: 'default', labels: { owned: 'yes' } }),
    ),
    protectedNs(
      'Namespace kube-system deleted',
      'Delete',
      manifest('v1', 'Namespace', { name: 'kube-system' }),
    ),
    protectedNs(
      'Namespace kube-public updated',
      'UpdateAndDelete',
      manifest('v1', 'Namespace', { name: 'kube-public', labels: { owned: 'yes' } }),
    ),
    protectedNs(
      'a new Namespace kube-anything',
      'CreateAndSync',
      manifest('v1', 'Namespace', { name: `kube-${P}` }),
    ),
  ];
}

/** postForged posts an event as an attacker would, straight to the broker, which must take it (2xx). */
async function postForged(event: { type: string; data: unknown } & Record<string, unknown>, title?: string) {
  const msg = HTTP.binary(new CloudEvent({ source: '/attacker', ...event }));
  const res = await fetch(s.runtime.broker.url, {
    method: 'POST',
    headers: msg.headers as Record<string, string>,
    body: msg.body as string,
  });
  expect(res.status, title).toBeLessThan(300);
}

describe('trust boundary', () => {
  const sr = (title: string) =>
    `${P}-${title
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-|-$/g, '')
      .slice(0, 40)}-${Math.abs(hash(title)) % 10_000}`;
  const cases: Case[] = [];
  let before: Map<string, string>;

  beforeAll(async () => {
    const clusters = inject('clusters');
    // No resync during the test: every delivery counted comes from the case itself.
    s = await startStack('trust', { pingIntervalMs: 3_600_000 });
    const kcp = await cluster('kcp');
    iso = `${s.stateDir}/iso.yaml`;
    await writeFile(iso, clusters.isolated.kubeconfig);
    // Access kubeconfigs that must be refused: the isolated SKR's own, each with one field made hostile.
    const variant = (edit: (cluster: Record<string, unknown>, user: Record<string, unknown>) => void) => {
      const doc = load(clusters.isolated.kubeconfig) as {
        clusters: [{ cluster: Record<string, unknown> }];
        users: [{ user: Record<string, unknown> }];
      };
      edit(doc.clusters[0].cluster, doc.users[0].user);
      return dump(doc);
    };
    const server = (c: Record<string, unknown>) => c.server as string;
    const hostileKubeconfigs: Record<string, string> = {
      'kc-port': variant((c) => {
        c.server = 'https://127.0.0.1:99999';
      }),
      'kc-path': variant((c) => {
        c.server = `${server(c)}/api/v1/namespaces`;
      }),
      'kc-userinfo': variant((c) => {
        c.server = server(c).replace('https://', 'https://admin:pw@');
      }),
      'kc-http': variant((c) => {
        c.server = server(c).replace('https://', 'http://');
      }),
      'kc-query': variant((c) => {
        c.server = `${server(c)}?x=1`;
      }),
      'kc-token': variant((_, u) => {
        for (const k of Object.keys(u)) delete u[k];
        u.token = 'has whitespace in it';
      }),
      'kc-exec': variant((_, u) => {
        u.exec = { apiVersion: 'client.authentication.k8s.io/v1', command: '/bin/sh' };
      }),
    };
    await applyObjects(kcp, [
      ...kymaObjects('iso', clusters.isolated.kubeconfig, s.ns),
      ...Object.entries(hostileKubeconfigs).flatMap(([k, text]) => kymaObjects(k, text, s.ns)),
    ]);
    // What exists in the SKR before: objects a hostile item could reach, objects to adopt,
    // and a policy that makes "undeletable-*" ConfigMaps impossible to delete.
    await kubectl(
      iso,
      ['apply', '-f', '-'],
      [
        manifest('v1', 'Namespace', { name: V }),
        manifest('v1', 'Namespace', { name: A }),
        manifest('v1', 'Namespace', { name: A2 }),
        cm('c1', V),
        cm('c2', V),
        cm('c3', V),
        manifest('v1', 'Secret', { name: 's1', namespace: V }, { stringData: { k: 'v' } }),
        ...['pre1', 'pre2', 'pre3', 'pre4', 'pre5'].map((n) => cm(n, A, { origin: 'user' })),
        manifest('v1', 'Namespace', { name: 'kyma-system' }),
        manifest('rbac.authorization.k8s.io/v1', 'ClusterRole', { name: `${P}-role` }, { rules: [] }),
        manifest(
          'admissionregistration.k8s.io/v1',
          'ValidatingAdmissionPolicy',
          { name: `${P}-undeletable` },
          {
            spec: {
              failurePolicy: 'Fail',
              matchConstraints: {
                resourceRules: [
                  { apiGroups: [''], apiVersions: ['v1'], operations: ['DELETE'], resources: ['configmaps'] },
                ],
              },
              validations: [
                {
                  expression: "!oldObject.metadata.name.startsWith('undeletable')",
                  message: 'undeletable ConfigMaps may not be deleted',
                },
              ],
            },
          },
        ),
        manifest(
          'admissionregistration.k8s.io/v1',
          'ValidatingAdmissionPolicyBinding',
          { name: `${P}-undeletable` },
          {
            spec: {
              policyName: `${P}-undeletable`,
              validationActions: ['Deny'],
              matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': A } } },
            },
          },
        ),
      ].join('---\n'),
    );
    // The controller-manager fills new namespaces (ServiceAccount, root CA ConfigMap): wait for it before the snapshot.
    await eventually(async () => {
      for (const ns of [V, A, A2, 'kyma-system'])
        expect(
          await kubectl(iso, [
            'get',
            'serviceaccount/default',
            'configmap/kube-root-ca.crt',
            '-n',
            ns,
            '-o',
            'name',
          ]),
        ).toMatch(/serviceaccount.*\n.*configmap/s);
    });
    before = await snapshot();
  });
  afterAll(async () => {
    await s?.stop();
  });

  cases.push(...identityCases(), ...restrictedCases());
  cases.push(
    {
      title: 'CreateAndSync and Delete naming one ConfigMap',
      items: [
        { name: 'keep', strategy: 'CreateAndSync', resource: cm('dup1', A2) },
        { name: 'kill', strategy: 'Delete', resource: cm('dup1', A2) },
      ],
      want: { keep: 'Ready/Created|Unchanged', kill: 'Error/DuplicateObject' },
    },
    {
      title: 'one ConfigMap with and without its namespace',
      items: [
        {
          name: 'first',
          strategy: 'CreateAndIgnore',
          resource: manifest('v1', 'ConfigMap', { name: `${P}-dup2` }),
        },
        { name: 'second', strategy: 'CreateAndSync', resource: cm(`${P}-dup2`, 'default') },
      ],
      want: { first: 'Ready/Created|Ignored', second: 'Error/DuplicateObject' },
    },
    {
      title: 'an oversized API message',
      items: [
        {
          name: 'big',
          strategy: 'CreateAndSync',
          resource: cm(
            'big',
            A2,
            Object.fromEntries(
              Array.from({ length: 60 }, (_, i) => [`not a valid key number ${i} ${'x'.repeat(40)}`, 'v']),
            ),
          ),
        },
      ],
      want: { big: 'Error/ApplyFailed' },
    },
    ...['kc-port', 'kc-path', 'kc-userinfo', 'kc-http', 'kc-query', 'kc-token', 'kc-exec'].map((k): Case => ({
      title: `access kubeconfig ${k}`,
      kyma: k,
      items: one('CreateAndSync', cm('never', V)),
      want: { cluster: 'InvalidKubeconfig' },
    })),
  );
  // Adoption: objects that existed are adopted, then released (never deleted) by prune, rename, move and deletion under both policies.
  const adoption: Record<string, Item[]> = {
    'adopt-prune': [{ name: 'p', strategy: 'CreateAndSync', resource: cm('pre1', A, { origin: 'sync' }) }],
    'adopt-delete': [
      { name: 'p', strategy: 'CreateAndIgnore', resource: cm('pre2', A) },
      {
        name: 'ns',
        strategy: 'CreateAndSync',
        resource: manifest('v1', 'Namespace', { name: 'kyma-system', labels: { synced: 'yes' } }),
      },
      {
        name: 'role',
        strategy: 'CreateAndSync',
        resource: manifest(
          'rbac.authorization.k8s.io/v1',
          'ClusterRole',
          { name: `${P}-role` },
          { rules: [] },
        ),
      },
    ],
    'adopt-rename': [{ name: 'p', strategy: 'CreateAndSync', resource: cm('pre3', A) }],
    'adopt-move': [{ name: 'p', strategy: 'CreateAndSync', resource: cm('pre4', A) }],
    'adopt-orphan': [{ name: 'p', strategy: 'CreateAndSync', resource: cm('pre5', A) }],
    'undeletable-prune': [
      { name: 'u', strategy: 'CreateAndSync', resource: cm('undeletable-b', A) },
      { name: 'v', strategy: 'CreateAndSync', resource: cm('prunable', A) },
    ],
    'undeletable-delete': [{ name: 'u', strategy: 'CreateAndSync', resource: cm('undeletable-a', A) }],
  };

  it(`${cases.length} hostile SyncResources end with their exact reasons and touch nothing`, async () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
    const docs = cases.map((c) => syncResourceYaml(s.ns, sr(c.title), c.kyma ?? 'iso', c.items));
    docs.push(
      ...Object.entries(adoption).map(([n, items]) => syncResourceYaml(s.ns, `${P}-${n}`, 'iso', items)),
    );
    await kubectl(s.kcp, ['apply', '-f', '-'], stream(docs));
    for (const c of cases) {
      await waitSr(s, sr(c.title), (x) => {
        expect(x?.status?.observedGeneration, c.title).toBe(x?.metadata.generation);
        if ('cluster' in c.want) {
          expect(x?.status?.conditions?.[0]?.reason, c.title).toBe(c.want.cluster);
        } else {
          // A want may allow alternatives ("Ready/Created|Unchanged": a later run of the same spec says Unchanged).
          const got = Object.fromEntries(
            (x?.status?.items ?? []).map((i) => [i.name, `${i.state}/${i.reason}`]),
          );
          expect(Object.keys(got).sort(), c.title).toEqual(Object.keys(c.want).sort());
          for (const [k, v] of Object.entries(c.want))
            expect(got[k], `${c.title}: ${k}`).toMatch(new RegExp(`^(${v.replace('/', '/(')}))$`));
        }
      });
    }
    const big = (await getSr(s, sr('an oversized API message')))!.status!.items![0]!;
    expect(big.message.length).toBeLessThanOrEqual(MAX_MESSAGE);
    expect(big.message.endsWith('…')).toBe(true);

    // Adopted: recorded as such, reported Adopted.
    for (const n of ['adopt-prune', 'adopt-delete', 'adopt-rename', 'adopt-move', 'adopt-orphan']) {
      await waitSr(s, `${P}-${n}`, (x) => {
        expect(
          x?.status?.items?.every((i) => i.reason === 'Adopted'),
          n,
        ).toBe(true);
        expect(
          x?.status?.synced?.every((e) => e.adopted === true),
          n,
        ).toBe(true);
      });
    }
    await waitSr(s, `${P}-undeletable-prune`, (x) => expect(x?.status?.state).toBe('Ready'));
    await waitSr(s, `${P}-undeletable-delete`, (x) => expect(x?.status?.state).toBe('Ready'));

    // Then: item removed (prune), renamed and moved objects, SyncResources deleted under both policies.
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      stream([
        syncResourceYaml(s.ns, `${P}-adopt-prune`, 'iso', []),
        syncResourceYaml(s.ns, `${P}-adopt-rename`, 'iso', [
          { name: 'p', strategy: 'CreateAndSync', resource: cm('renamed3', A) },
        ]),
        syncResourceYaml(s.ns, `${P}-adopt-move`, 'iso', [
          { name: 'p', strategy: 'CreateAndSync', resource: cm('pre4', A2) },
        ]),
        syncResourceYaml(s.ns, `${P}-undeletable-prune`, 'iso', []),
        JSON.stringify({
          ...JSON.parse(syncResourceYaml(s.ns, `${P}-adopt-orphan`, 'iso', [])),
          spec: { kyma: 'iso', deletionPolicy: 'Orphan', items: adoption['adopt-orphan'] },
        }),
      ]),
    );
    await waitSr(s, `${P}-adopt-orphan`, (x) => expect(x?.spec.deletionPolicy).toBe('Orphan'));
    await kubectl(s.kcp, [
      'delete',
      'syncresource',
      '-n',
      s.ns,
      '--wait=false',
      `${P}-adopt-delete`,
      `${P}-adopt-orphan`,
      `${P}-undeletable-delete`,
    ]);
    for (const n of ['adopt-delete', 'adopt-orphan'])
      await waitSr(s, `${P}-${n}`, (x) => expect(x).toBeUndefined());
    await waitSr(s, `${P}-adopt-prune`, (x) => {
      expect(x?.status?.state).toBe('Ready');
      expect(x?.status?.synced ?? []).toEqual([]);
    });
    await waitSr(s, `${P}-adopt-rename`, (x) =>
      expect(x?.status?.synced).toMatchObject([
        { item: 'p', apiVersion: 'v1', kind: 'ConfigMap', namespace: A, name: 'renamed3' },
      ]),
    );
    await waitSr(s, `${P}-adopt-move`, (x) =>
      expect(x?.status?.synced).toMatchObject([
        { item: 'p', apiVersion: 'v1', kind: 'ConfigMap', namespace: A2, name: 'pre4' },
      ]),
    );
    // A prune or a deletion that the SKR refuses is reported, names the object and the API's message, and blocks nothing else.
    const pruneFailed = await waitSr(s, `${P}-undeletable-prune`, (x) => {
      expect(x?.status?.state).toBe('Error');
      expect(x?.status?.conditions?.[0]?.message).toMatch(
        new RegExp(`ConfigMap ${A}/undeletable-b: .*undeletable ConfigMaps may not be deleted`),
      );
    });
    expect(pruneFailed?.status?.synced?.map((e) => e.name)).toEqual(['undeletable-b']);
    const deleteFailed = await waitSr(s, `${P}-undeletable-delete`, (x) => {
      expect(x?.status).toMatchObject({ state: 'Error' });
      expect(x?.status?.conditions?.[0]).toMatchObject({ type: 'Resources', reason: 'DeletionFailed' });
      expect(x?.status?.conditions?.[0]?.message).toMatch(
        new RegExp(`ConfigMap ${A}/undeletable-a: .*undeletable ConfigMaps may not be deleted`),
      );
    });
    expect(deleteFailed?.metadata.finalizers).toContain('operator.kyma-project.io/sync-resource');

    // The whole isolated SKR: only the intended objects differ.
    const after = await snapshot();
    const changed = diff(before, after);
    const released = ['pre1', 'pre2', 'pre3', 'pre4', 'pre5'].map((n) => `ConfigMap/${A}/${n}`);
    expect(changed).toEqual(
      [
        ...released.map((k) => `~${k}`),
        `+ConfigMap/${A}/undeletable-a`,
        `+ConfigMap/${A}/undeletable-b`,
        `+ConfigMap/${A2}/dup1`,
        `+ConfigMap/${A2}/pre4`,
        `+ConfigMap/${A}/renamed3`,
        `+ConfigMap/default/${P}-dup2`,
        `~ClusterRole//${P}-role`,
        '~Namespace//kyma-system',
      ].sort(),
    );
    // Released objects carry none of our marks and keep what we last applied; nothing else of them went.
    for (const k of [...released, `ClusterRole//${P}-role`, 'Namespace//kyma-system']) {
      const [kind, ns, name] = k.split('/');
      const o = JSON.parse(
        await kubectl(iso, ['get', kind!, name!, ...(ns ? ['-n', ns] : []), '-o', 'json']),
      ) as SyncResource;
      // Neither the product's marks nor those of versions before 0.2.
      const ours = (key: string) =>
        key.startsWith('kcp-sync.kyma-project.io/') || key.startsWith('operator.kyma-project.io/');
      expect(Object.keys(o.metadata.labels ?? {}).filter(ours), k).toEqual([]);
      expect(Object.keys(o.metadata.annotations ?? {}).filter(ours), k).toEqual([]);
    }
    expect(JSON.parse(await kubectl(iso, ['get', 'configmap', 'pre1', '-n', A, '-o', 'json'])).data).toEqual({
      origin: 'sync',
    });

    // No 5xx for any of it, and few deliveries each.
    for (const name of [...cases.map((c) => sr(c.title)), ...Object.keys(adoption).map((n) => `${P}-${n}`)]) {
      const count = s.runtime.broker.byObject.get(`${s.ns}/${name}`);
      expect(count, name).toBeDefined();
      const failed = s.runtime.broker.failedBy.get(`${s.ns}/${name}`) ?? [];
      expect(count!.failures, `${name}: non-2xx answers (${failed.join('; ')})`).toBe(0);
      expect(count!.attempts, `${name}: deliveries`).toBeLessThanOrEqual(24);
    }

    // Once the SKR allows it, the deletion completes (asked for now, as a user would, rather than at the next tick).
    await kubectl(iso, ['delete', 'validatingadmissionpolicybinding', `${P}-undeletable`]);
    await eventually(
      async () => {
        await kubectl(s.kcp, [
          'annotate',
          'syncresource',
          `${P}-undeletable-delete`,
          '-n',
          s.ns,
          '--overwrite',
          `${RECONCILE_ANNOTATION}=${Date.now()}`,
        ]).catch(() => undefined);
        expect(await getSr(s, `${P}-undeletable-delete`)).toBeUndefined();
      },
      60_000,
      2_000,
    );
    expect(await kubectl(iso, ['get', 'configmap', 'undeletable-a', '-n', A, '--ignore-not-found'])).toBe('');
  });

  it('spec.kyma is immutable at admission', async () => {
    const name = `${P}-immutable`;
    await kubectl(s.kcp, ['apply', '-f', '-'], syncResourceYaml(s.ns, name, 'iso', []));
    const err = await kubectl(s.kcp, [
      'patch',
      'syncresource',
      name,
      '-n',
      s.ns,
      '--type',
      'merge',
      '-p',
      '{"spec":{"kyma":"kyma-1"}}',
    ]).catch((e: Error) => e.message);
    expect(err).toMatch(/spec.kyma is immutable/);
    expect((await getSr(s, name))?.spec.kyma).toBe('iso');
  });

  it('forged events to each function change nothing', async () => {
    const clusters = inject('clusters');
    const kcp = await cluster('kcp');
    const name = `${P}-forged`;
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, name, 'iso', [
        { name: 'x', strategy: 'CreateAndSync', resource: cm('forged', A2) },
      ]),
    );
    const real = await waitSr(s, name, (x) => expect(x?.status?.state).toBe('Ready'));
    // A SyncResource in a namespace that is not a control-plane namespace, with its own Kyma and Secret.
    const tenant = uniqueName('tenant');
    await applyObjects(kcp, [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: tenant } },
      ...kymaObjects('iso', clusters.isolated.kubeconfig, tenant),
    ]);
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(tenant, 'tenant', 'iso', [
        { name: 'x', strategy: 'CreateAndSync', resource: cm('tenant', A2) },
      ]),
    );
    const tenantSr = JSON.parse(
      await kubectl(s.kcp, ['get', 'syncresource', 'tenant', '-n', tenant, '-o', 'json']),
    ) as SyncResource;
    // Another Kyma's access Secret, used by an earlier run of this process (so its client is cached).
    const other = JSON.parse(
      await kubectl(s.kcp, ['get', 'secret', accessSecretName('kyma-1'), '-n', s.ns, '-o', 'json']),
    ) as SyncResource;
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, `${P}-warm`, 'kyma-1', [
        { name: 'x', strategy: 'CreateAndSync', resource: cm(`${P}-warm`, 'default') },
      ]),
    );
    await waitSr(s, `${P}-warm`, (x) => expect(x?.status?.state).toBe('Ready'));
    const otherRef = {
      namespace: s.ns,
      name: other.metadata.name,
      uid: other.metadata.uid,
      resourceVersion: other.metadata.resourceVersion,
    };
    const isoSecret = JSON.parse(
      await kubectl(s.kcp, ['get', 'secret', accessSecretName('iso'), '-n', tenant, '-o', 'json']),
    ) as SyncResource;
    const base = {
      namespace: s.ns,
      name,
      uid: real!.metadata.uid,
      generation: real!.metadata.generation,
      kyma: 'iso',
      trigger: 'resync',
    };
    const applied = (over: Record<string, unknown>, result: Record<string, unknown> = {}) => ({
      namespace: s.ns,
      name,
      uid: real!.metadata.uid,
      kyma: 'iso',
      ...over,
      result: {
        generation: 1,
        observedAt: new Date().toISOString(),
        items: [{ name: 'x', state: 'Error', reason: 'Forged', message: 'forged' }],
        changes: [],
        inventory: [],
        pending: [],
        ...result,
      },
    });
    const healthOf = (object: Record<string, unknown> = {}) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      namespace: A2,
      name: 'forged',
      health: { status: 'Failed', message: 'forged' },
      ...object,
    });
    const health = (over: Record<string, unknown>, object: Record<string, unknown> = {}) => ({
      namespace: s.ns,
      name,
      uid: real!.metadata.uid,
      kyma: 'iso',
      objects: [healthOf(object)],
      ...over,
    });
    // The SKR source's account of an edit of the real SyncResource.
    const edit = (over: Record<string, unknown>) => ({
      namespace: s.ns,
      name,
      uid: real!.metadata.uid,
      generation: real!.metadata.generation,
      kyma: 'iso',
      change: true,
      ...over,
    });
    const forged: [string, string, Record<string, unknown>][] = [
      ['the secret of another Kyma', EventTypes.clusterResolved, { ...base, secret: otherRef }],
      [
        'the secret and Kyma of another Kyma',
        EventTypes.clusterResolved,
        { ...base, kyma: 'kyma-1', secret: otherRef },
      ],
      [
        'a generation from the future',
        EventTypes.clusterResolved,
        { ...base, generation: 999999, secret: otherRef },
      ],
      [
        'a tenant SyncResource',
        EventTypes.clusterResolved,
        {
          ...base,
          namespace: tenant,
          name: 'tenant',
          uid: tenantSr.metadata.uid,
          secret: {
            namespace: tenant,
            name: isoSecret.metadata.name,
            uid: isoSecret.metadata.uid,
            resourceVersion: isoSecret.metadata.resourceVersion,
          },
        },
      ],
      ['a path in the name', EventTypes.clusterResolved, { ...base, name: '../x', secret: otherRef }],
      [
        'status of a generation from the future',
        EventTypes.itemsApplied,
        applied({}, { generation: 999999 }),
      ],
      ['status for another uid', EventTypes.itemsApplied, applied({ uid: 'forged-uid' })],
      [
        'status for a tenant SyncResource',
        EventTypes.itemsApplied,
        applied({ namespace: tenant, name: 'tenant', uid: tenantSr.metadata.uid }),
      ],
      ['status with an item list that is not one', EventTypes.itemsApplied, applied({}, { items: 'all' })],
      [
        'a reconcile request for a tenant SyncResource',
        EventTypes.reconcile,
        { namespace: tenant, name: 'tenant', trigger: 'resync' },
      ],
      [
        'a reconcile request with a path',
        EventTypes.reconcile,
        { namespace: `${s.ns}/..`, name, trigger: 'resync' },
      ],
      [
        'a Kyma request for a tenant namespace',
        EventTypes.reconcileKyma,
        { namespace: tenant, name: 'iso', trigger: 'resync' },
      ],
      [
        'a Kyma request whose name is a label selector',
        EventTypes.reconcileKyma,
        { namespace: s.ns, name: 'iso,operator.kyma-project.io/kyma-name!=y', trigger: 'resync' },
      ],
      // The SKR source's events name the Kyma, resolved with no read: a Kyma the live spec
      // does not name is resolved again from the live object, never written as its failure.
      [
        'an SKR change naming a Kyma that does not exist',
        EventTypes.skrChanged,
        {
          namespace: s.ns,
          name,
          uid: real!.metadata.uid,
          kyma: 'no-such-kyma',
          changes: [{ apiVersion: 'v1', kind: 'ConfigMap', namespace: A2, name: 'forged', change: 'gone' }],
        },
      ],
      ['an edit naming a Kyma that does not exist', EventTypes.changed, edit({ kyma: 'no-such-kyma' })],
      // A version only says where the read is served from: one far ahead or malformed costs
      // a quorum read, and the run (asked for: never taken for an echo) does what the live
      // object says (here: nothing).
      ...[String(Number(real!.metadata.resourceVersion) + 1_000_000_000), 'not-a-version'].map(
        (resourceVersion): [string, string, Record<string, unknown>] => [
          `a run asked for at the version ${resourceVersion}`,
          EventTypes.changed,
          edit({ resourceVersion, requested: true }),
        ],
      ),
      // Health reports: only an object the live inventory holds under an item of the live spec
      // is written; anything else asks for a run, which reads the objects itself.
      [
        'health of an object its inventory does not hold',
        EventTypes.skrHealth,
        health({}, { namespace: A2, name: `${P}-warm` }),
      ],
      ['health for another uid', EventTypes.skrHealth, health({ uid: 'forged-uid' })],
      [
        'health for a tenant SyncResource',
        EventTypes.skrHealth,
        health({ namespace: tenant, name: 'tenant', uid: tenantSr.metadata.uid }, { name: 'tenant' }),
      ],
      [
        'health naming an object twice',
        EventTypes.skrHealth,
        { ...health({ name: `${P}-twice` }), objects: [healthOf(), healthOf()] },
      ],
      [
        'a resolved Kyma with the Secret of another Kyma',
        EventTypes.kymaResolved,
        { namespace: s.ns, name: 'iso', trigger: 'resync', secret: otherRef },
      ],
      [
        'a resolved Kyma of a tenant namespace',
        EventTypes.kymaResolved,
        {
          namespace: tenant,
          name: 'iso',
          trigger: 'resync',
          secret: {
            namespace: tenant,
            name: isoSecret.metadata.name,
            uid: isoSecret.metadata.uid,
            resourceVersion: isoSecret.metadata.resourceVersion,
          },
        },
      ],
    ];
    // Events shaped like the sources' (ApiServerSource Reference mode, PingSource), with the extensions the Triggers filter on.
    const sourced: [string, string, Record<string, unknown>, Record<string, string>][] = [
      [
        'a Kyma event whose name is a label selector',
        'dev.knative.apiserver.ref.update',
        {
          apiVersion: 'operator.kyma-project.io/v1beta2',
          kind: 'Kyma',
          namespace: s.ns,
          name: 'iso,operator.kyma-project.io/kyma-name!=x',
        },
        { kind: 'Kyma' },
      ],
      [
        'a Kyma event of a tenant namespace',
        'dev.knative.apiserver.ref.update',
        { apiVersion: 'operator.kyma-project.io/v1beta2', kind: 'Kyma', namespace: tenant, name: 'iso' },
        { kind: 'Kyma' },
      ],
      [
        'a SyncResource event of a tenant namespace',
        'dev.knative.apiserver.ref.update',
        {
          apiVersion: 'operator.kyma-project.io/v1alpha1',
          kind: 'SyncResource',
          namespace: tenant,
          name: 'tenant',
        },
        { kind: 'SyncResource' },
      ],
      [
        'a Secret event of a tenant namespace',
        'dev.knative.apiserver.ref.update',
        { apiVersion: 'v1', kind: 'Secret', namespace: tenant, name: isoSecret.metadata.name },
        { kind: 'Secret' },
      ],
      [
        'a Secret event with a path',
        'dev.knative.apiserver.ref.add',
        { apiVersion: 'v1', kind: 'Secret', namespace: s.ns, name: '../secrets' },
        { kind: 'Secret' },
      ],
    ];
    const retries = s.runtime.broker.stats.retries;
    for (const [title, type, data] of forged) await postForged({ type, data }, title);
    for (const [title, type, data, ext] of sourced) await postForged({ type, data, ...ext }, title);
    await s.runtime.broker.idle();
    // Nothing reached kyma-1's SKR or the tenant's, and the real status is as it was.
    expect(
      await kubectl(s.skr[0]!, ['get', 'configmap', 'forged', 'tenant', '-n', A2, '--ignore-not-found']),
    ).toBe('');
    expect(await kubectl(iso, ['get', 'configmap', 'tenant', '-n', A2, '--ignore-not-found'])).toBe('');
    const now = await getSr(s, name);
    // Every run the forged events caused found it as it was: its spec and inventory as they were
    // (a run after its first may only turn its item's reason from Created to Unchanged).
    expect(now?.spec).toEqual(real!.spec);
    expect(now?.status?.synced).toEqual(real!.status!.synced);
    expect(now?.status).toMatchObject({
      state: 'Ready',
      observedGeneration: real!.metadata.generation,
      items: [{ name: 'x', state: 'Ready' }],
    });
    // Never, not even for a moment, the failure of a Kyma its spec does not name.
    expect((await kubeEvents(s, name)).filter((e) => e.note.includes('no-such-kyma'))).toEqual([]);
    expect(
      JSON.parse(await kubectl(s.kcp, ['get', 'syncresource', 'tenant', '-n', tenant, '-o', 'json'])).status,
    ).toBeUndefined();
    expect((await kubectl(iso, ['get', 'configmap', 'forged', '-n', A2, '-o', 'name'])).trim()).toBe(
      'configmap/forged',
    );
    // Malformed data is refused (400) once, never redelivered; nothing forged was retried.
    for (const key of [
      `${s.ns}/${P}-twice`,
      `${s.ns}/../x`,
      `${s.ns}/iso,operator.kyma-project.io/kyma-name!=x`,
      `${s.ns}/iso,operator.kyma-project.io/kyma-name!=y`,
      `${s.ns}/../secrets`,
    ]) {
      expect(s.runtime.broker.byObject.get(key), key).toEqual({ attempts: 1, failures: 1 });
    }
    const failing = [...s.runtime.broker.byObject]
      .filter(([, c]) => c.failures > 0)
      .map(([k, c]) => `${k} ${c.failures}/${c.attempts}`);
    expect(s.runtime.broker.stats.retries - retries, failing.join(', ')).toBe(0);
  });

  it('an SKR change that names no object of its inventory runs nothing; one that names its object runs it', async () => {
    const name = `${P}-held`;
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, name, 'iso', [{ name: 'x', strategy: 'CreateAndSync', resource: cm(name, A2) }]),
    );
    const sr = (await waitSr(s, name, (x) => expect(x?.status?.state).toBe('Ready')))!;
    const post = async (changes: Record<string, unknown>[]) => {
      const data = { namespace: s.ns, name, uid: sr.metadata.uid, kyma: 'iso', changes };
      await postForged({ type: EventTypes.skrChanged, data });
      await s.runtime.broker.idle();
    };
    const seen = (type: string) =>
      s.runtime.broker.observed.filter(
        (e) => e.attributes.type === type && (e.data as { name?: string }).name === name,
      ).length;
    const gone = (n: string, kind = 'ConfigMap') => ({
      apiVersion: 'v1',
      kind,
      namespace: A2,
      name: n,
      change: 'gone',
    });
    s.runtime.broker.observe = true;
    try {
      // Another SyncResource's object, one that does not exist, and this one's under another kind.
      await post([gone('forged'), gone(`${P}-nothing`), gone(name, 'Secret')]);
      // Resolved as named (no read), then refused by apply-items on the live inventory: no run, no status.
      expect(seen(EventTypes.clusterResolved)).toBe(1);
      expect(seen(EventTypes.itemsApplied)).toBe(0);
      expect((await getSr(s, name))?.metadata.resourceVersion).toBe(sr.metadata.resourceVersion);
      expect(await kubectl(iso, ['get', 'configmap', `${P}-nothing`, '-n', A2, '--ignore-not-found'])).toBe(
        '',
      );
      // Its own object: a run.
      await post([gone(name)]);
      expect(seen(EventTypes.itemsApplied)).toBe(1);
    } finally {
      s.runtime.broker.observe = false;
      s.runtime.broker.observed.length = 0;
    }
  });

  it('objects an SKR change names to read ahead are at most read: a run for its own object changes nothing else', async () => {
    const name = `${P}-ahead`;
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, name, 'iso', [{ name: 'x', strategy: 'CreateAndSync', resource: cm(name, A2) }]),
    );
    const sr = (await waitSr(s, name, (x) => expect(x?.status?.state).toBe('Ready')))!;
    // Someone else's Secret and ConfigMap in the SKR, which the forged event names to read ahead.
    await kubectl(iso, ['create', 'secret', 'generic', `${P}-theirs`, '-n', A2, '--from-literal=k=v']);
    await kubectl(iso, ['create', 'configmap', `${P}-theirs`, '-n', A2, '--from-literal=k=v']);
    const state = async () =>
      kubectl(iso, ['get', 'secret,configmap', `${P}-theirs`, '-n', A2, '-o', 'json']).then((t) =>
        (JSON.parse(t) as { items: { metadata: unknown; data: unknown }[] }).items.map((o) => [
          o.metadata,
          o.data,
        ]),
      );
    const before = await state();
    await kubectl(iso, ['delete', 'configmap', name, '-n', A2]);
    const id = (kind: string, n: string, namespace = A2) => ({ apiVersion: 'v1', kind, namespace, name: n });
    const data = {
      namespace: s.ns,
      name,
      uid: sr.metadata.uid,
      kyma: 'iso',
      changes: [{ ...id('ConfigMap', name), change: 'gone' }],
      ahead: [
        id('Secret', `${P}-theirs`),
        id('ConfigMap', `${P}-theirs`),
        id('Secret', name),
        id('ConfigMap', name),
      ],
    };
    await postForged({ type: EventTypes.skrChanged, data });
    await s.runtime.broker.idle();
    // Its own object is back; the others are as they were, to the resourceVersion and managers.
    await eventually(async () =>
      expect(await kubectl(iso, ['get', 'configmap', name, '-n', A2, '-o', 'name'])).toContain(name),
    );
    expect(await state()).toEqual(before);
    const after = await getSr(s, name);
    expect(after?.status?.state).toBe('Ready');
    expect(JSON.stringify(after?.status)).not.toContain(`${P}-theirs`);
    await kubectl(iso, ['delete', 'secret,configmap', `${P}-theirs`, '-n', A2]);
  });

  it('an access Secret for a Kyma without SyncResources is handled on creation, change and deletion', async () => {
    const kyma = uniqueName('nosr');
    const secret = accessSecretName(kyma);
    const clusters = inject('clusters');
    s.runtime.broker.observe = true;
    const requested = () =>
      s.runtime.broker.observed.filter(
        (e) =>
          e.attributes.type === EventTypes.reconcileKyma &&
          // Only this namespace's: a SyncPolicy of another test that selects Kymas by label adds its own.
          (e.data as { namespace?: string }).namespace === s.ns &&
          (e.data as { name?: string; trigger?: string }).name === kyma &&
          (e.data as { trigger?: string }).trigger === 'secret',
      ).length;
    try {
      await applyObjects(
        await cluster('kcp'),
        kymaObjects(kyma, clusters.isolated.kubeconfig, s.ns).slice(1),
      );
      // Created, then changed: each maps to its Kyma and requests that Kyma's reconcile (which finds no SyncResource).
      await eventually(async () => expect(requested()).toBe(1));
      await kubectl(s.kcp, ['label', 'secret', secret, '-n', s.ns, 'rotated=yes']);
      await eventually(async () => expect(requested()).toBe(2));
      await kubectl(s.kcp, ['delete', 'secret', secret, '-n', s.ns]);
      await eventually(async () =>
        expect(s.runtime.broker.byObject.get(`${s.ns}/${secret}`)?.attempts).toBeGreaterThanOrEqual(3),
      );
      await s.runtime.broker.idle();
      // Deleted: no Secret left to map to a Kyma, nothing requested.
      expect(requested()).toBe(2);
      expect(s.runtime.broker.byObject.get(`${s.ns}/${secret}`)?.failures).toBe(0);
    } finally {
      s.runtime.broker.observe = false;
    }
  });
});

/** stream joins JSON documents into one YAML stream for kubectl. */
const stream = (docs: string[]) => docs.map((d) => dump(JSON.parse(d))).join('---\n');

function hash(text: string): number {
  let h = 0;
  for (const ch of text) h = (Math.imul(31, h) + ch.codePointAt(0)!) | 0;
  return h;
}

const kinds = [
  'namespaces',
  'configmaps',
  'secrets',
  'serviceaccounts',
  'roles',
  'rolebindings',
  'clusterroles',
  'clusterrolebindings',
  'customresourcedefinitions',
  'priorityclasses',
  'storageclasses',
];

/** snapshot lists every object of kinds in the isolated SKR: kind/namespace/name -> uid and resourceVersion. */
async function snapshot(): Promise<Map<string, string>> {
  const out = JSON.parse(await kubectl(iso, ['get', kinds.join(','), '-A', '-o', 'json'])) as {
    items: SyncResource[];
  };
  return new Map(
    out.items.map((o) => [
      `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`,
      `${o.metadata.uid} ${o.metadata.resourceVersion}`,
    ]),
  );
}

/** diff lists what changed: +created, -deleted, ~modified (same uid), -+ replaced. */
function diff(a: Map<string, string>, b: Map<string, string>): string[] {
  const out: string[] = [];
  for (const [k, v] of a) {
    const w = b.get(k);
    if (w === undefined) out.push(`-${k}`);
    else if (w !== v) out.push(w.split(' ')[0] === v.split(' ')[0] ? `~${k}` : `-+${k}`);
  }
  for (const k of b.keys()) if (!a.has(k)) out.push(`+${k}`);
  return out.sort();
}
