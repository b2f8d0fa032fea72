// The ServiceAccounts of knative.yaml get only what each function needs: checked with
// a `kubectl auth can-i --as=...` matrix against the real KCP with that RBAC applied.
import { readFile } from 'node:fs/promises';
import { loadAll } from 'js-yaml';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { applyObjects, knativeYaml } from '../infra/kcp-setup.ts';
import type { KubeObject } from '../lib/kube/objects.ts';
import { join } from 'node:path';
import { getSr, kubectl, serviceLog, startStack, syncResourceYaml, waitSr } from './e2e-helpers.ts';
import { cluster, eventually, uniqueName } from './helpers.ts';

/** canAs asks the real KCP whether user may verb resource in ns (undefined: in every namespace). */
const canAs = async (user: string, verb: string, resource: string, ns?: string): Promise<boolean> => {
  const kcp = `${inject('clusters').stateDir}/kubeconfig/kcp.yaml`;
  const [res, sub] = resource.split('/');
  const args = [
    'auth',
    'can-i',
    verb,
    res!,
    ...(sub ? [`--subresource=${sub}`] : []),
    `--as=${user}`,
    ...(ns ? ['-n', ns] : ['--all-namespaces']),
  ];
  const out = await kubectl(kcp, args).catch((err: Error) => err.message);
  return /^yes\b/m.test(out);
};
/** sa is a ServiceAccount of knative.yaml as a user name. */
const sa = (name: string) => `system:serviceaccount:kcp-system:${name}`;
const can = (name: string, verb: string, resource: string, ns?: string) =>
  canAs(sa(name), verb, resource, ns);

// [service account, verb, resource, namespace (undefined: cluster-wide), allowed]
const matrix: [string, string, string, string | undefined, boolean][] = [
  // Only the two functions that load kubeconfigs read Secrets, only in kcp-system.
  ['sync-resolve-cluster', 'list', 'secrets', 'kcp-system', true],
  ['sync-apply-items', 'list', 'secrets', 'kcp-system', true],
  ['sync-resolve-cluster', 'list', 'secrets', 'default', false],
  // Only apply-items reads the ConfigMaps of resourceFrom items, only in kcp-system, only by list.
  ['sync-apply-items', 'list', 'configmaps', 'kcp-system', true],
  ['sync-apply-items', 'get', 'configmaps', 'kcp-system', false],
  ['sync-apply-items', 'list', 'configmaps', 'default', false],
  ['sync-resolve-cluster', 'list', 'configmaps', 'kcp-system', false],
  ['sync-write-status', 'list', 'configmaps', 'kcp-system', false],
  ['sync-apiserversource', 'watch', 'configmaps', 'kcp-system', true],
  // apply-items also reads source Secrets (dataFrom), with the same list by name: no new verb.
  ['sync-apply-items', 'get', 'secrets', 'kcp-system', false],
  ['sync-apply-items', 'watch', 'secrets', 'kcp-system', false],
  ['sync-resolve-cluster', 'get', 'secrets', 'kcp-system', false],
  ['sync-apply-items', 'get', 'secrets', 'kube-system', false],
  ['sync-apply-items', 'list', 'secrets', undefined, false],
  ['sync-resync', 'get', 'secrets', 'kcp-system', false],
  ['sync-resync', 'list', 'secrets', 'kcp-system', false],
  ['sync-write-status', 'get', 'secrets', 'kcp-system', false],
  ['sync-write-status', 'list', 'secrets', 'kcp-system', false],
  ['sync-dead-letter', 'get', 'secrets', 'kcp-system', false],
  ['sync-apply-items', 'create', 'secrets', 'kcp-system', false],
  ['sync-apply-items', 'update', 'secrets', 'kcp-system', false],
  // Writes: SyncResource status, finalizers (patch), labels (patch), Events.
  ['sync-apply-items', 'patch', 'syncresources.operator.kyma-project.io/status', 'kcp-system', true],
  ['sync-apply-items', 'patch', 'syncresources.operator.kyma-project.io', 'kcp-system', true],
  ['sync-write-status', 'patch', 'syncresources.operator.kyma-project.io/status', 'kcp-system', true],
  ['sync-write-status', 'create', 'events.events.k8s.io', 'kcp-system', true],
  ['sync-resolve-cluster', 'create', 'events.events.k8s.io', 'kcp-system', true],
  ['sync-resync', 'patch', 'syncresources.operator.kyma-project.io', 'kcp-system', false],
  ['sync-resync', 'patch', 'syncresources.operator.kyma-project.io/status', 'kcp-system', false],
  ['sync-resolve-cluster', 'patch', 'syncresources.operator.kyma-project.io/status', 'kcp-system', false],
  ['sync-write-status', 'delete', 'syncresources.operator.kyma-project.io', 'kcp-system', false],
  ['sync-apply-items', 'create', 'syncresources.operator.kyma-project.io', 'kcp-system', false],
  ['sync-apply-items', 'update', 'syncresources.operator.kyma-project.io', 'kcp-system', false],
  // Reads each step needs.
  ['sync-resync', 'list', 'syncresources.operator.kyma-project.io', 'kcp-system', true],
  ['sync-resolve-cluster', 'get', 'kymas.operator.kyma-project.io', 'kcp-system', true],
  ['sync-write-status', 'get', 'kymas.operator.kyma-project.io', 'kcp-system', false],
  // SyncResources are the SKR source's to watch (their changes are its events), not the adapters'.
  ['sync-apiserversource', 'watch', 'syncresources.operator.kyma-project.io', 'kcp-system', false],
  ['sync-skr-source', 'watch', 'syncresources.operator.kyma-project.io', 'kcp-system', true],
  ['sync-skr-source', 'patch', 'syncresources.operator.kyma-project.io', 'kcp-system', false],
  ['sync-apiserversource', 'watch', 'secrets', 'kcp-system', true],
  ['sync-apiserversource', 'watch', 'secrets', 'default', false],
  // Nothing cluster-wide, nothing elsewhere.
  ['sync-resync', 'list', 'syncresources.operator.kyma-project.io', 'default', false],
  ['sync-apply-items', 'list', 'namespaces', undefined, false],
  ['sync-apply-items', 'create', 'clusterroles', undefined, false],
  ['sync-resolve-cluster', 'create', 'rolebindings', 'kcp-system', false],
  ['sync-dead-letter', 'get', 'syncresources.operator.kyma-project.io', 'kcp-system', false],
  // SyncPolicies: read by the steps that decide and the SKR source, written by none.
  ['sync-resync', 'list', 'syncpolicies.operator.kyma-project.io', undefined, true],
  ['sync-resolve-cluster', 'list', 'syncpolicies.operator.kyma-project.io', undefined, true],
  ['sync-apply-items', 'list', 'syncpolicies.operator.kyma-project.io', undefined, true],
  ['sync-skr-source', 'watch', 'syncpolicies.operator.kyma-project.io', undefined, true],
  ['sync-write-status', 'list', 'syncpolicies.operator.kyma-project.io', undefined, false],
  ['sync-dead-letter', 'list', 'syncpolicies.operator.kyma-project.io', undefined, false],
  ['sync-apply-items', 'patch', 'syncpolicies.operator.kyma-project.io', undefined, false],
  ['sync-apiserversource', 'list', 'syncpolicies.operator.kyma-project.io', undefined, false],
  // Which namespaces are onboarded (their label): the SKR source only.
  ['sync-skr-source', 'watch', 'namespaces', undefined, true],
  ['sync-skr-source', 'get', 'secrets', 'default', false],
  ['sync-resync', 'list', 'namespaces', undefined, false],
  // apply-items reads a Kyma's labels (a team SyncResource's policy), never writes one.
  ['sync-apply-items', 'get', 'kymas.operator.kyma-project.io', 'kcp-system', true],
  ['sync-apply-items', 'patch', 'kymas.operator.kyma-project.io', 'kcp-system', false],
  // A team namespace nobody onboarded: nothing. (One onboarded: below.)
  ['sync-apply-items', 'list', 'syncresources.operator.kyma-project.io', 'default', false],
  ['sync-write-status', 'patch', 'syncresources.operator.kyma-project.io/status', 'default', false],
];

/** TEAM is a team namespace onboarded as examples/nfs-team.yaml does (its RoleBindings, moved). */
const TEAM = uniqueName('rbac-team');
/** team is the team's ServiceAccount in its namespace. */
const team = `system:serviceaccount:${TEAM}:nfs-team`;
// [who, verb, resource, namespace, allowed]: what onboarding gives in the team namespace, and what it does not.
const teamMatrix: [string, string, string, () => string, boolean][] = [
  [sa('sync-resync'), 'list', 'syncresources.operator.kyma-project.io', () => TEAM, true],
  [sa('sync-resync'), 'patch', 'syncresources.operator.kyma-project.io', () => TEAM, false],
  [sa('sync-resolve-cluster'), 'patch', 'syncresources.operator.kyma-project.io', () => TEAM, true],
  [sa('sync-resolve-cluster'), 'list', 'secrets', () => TEAM, false],
  [sa('sync-apply-items'), 'list', 'secrets', () => TEAM, true],
  [sa('sync-apply-items'), 'get', 'secrets', () => TEAM, false],
  [sa('sync-apply-items'), 'list', 'configmaps', () => TEAM, true],
  [sa('sync-apply-items'), 'patch', 'syncresources.operator.kyma-project.io/status', () => TEAM, true],
  [sa('sync-write-status'), 'patch', 'syncresources.operator.kyma-project.io/status', () => TEAM, true],
  [sa('sync-write-status'), 'create', 'events.events.k8s.io', () => TEAM, true],
  [sa('sync-write-status'), 'list', 'secrets', () => TEAM, false],
  [sa('sync-skr-source'), 'watch', 'syncresources.operator.kyma-project.io', () => TEAM, true],
  [sa('sync-skr-source'), 'list', 'secrets', () => TEAM, false],
  [sa('sync-dead-letter'), 'get', 'syncresources.operator.kyma-project.io', () => TEAM, false],
  // The team: its SyncResources and sources, their status to read only; nothing of kcp-system, no policy.
  [team, 'create', 'syncresources.operator.kyma-project.io', () => TEAM, true],
  [team, 'get', 'syncresources.operator.kyma-project.io/status', () => TEAM, true],
  [team, 'patch', 'syncresources.operator.kyma-project.io/status', () => TEAM, false],
  [team, 'create', 'secrets', () => TEAM, true],
  [team, 'list', 'secrets', () => 'kcp-system', false],
  [team, 'get', 'kymas.operator.kyma-project.io', () => 'kcp-system', false],
  [team, 'create', 'syncpolicies.operator.kyma-project.io', () => TEAM, false],
  [team, 'create', 'syncresources.operator.kyma-project.io', () => 'kcp-system', false],
  [team, 'create', 'rolebindings', () => TEAM, false],
];

describe('RBAC of knative.yaml', () => {
  beforeAll(async () => {
    const docs = (loadAll(await readFile(knativeYaml, 'utf8')) as KubeObject[]).filter(
      (d) =>
        d && ['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'].includes(d.kind),
    );
    // Cluster-wide: reading SyncPolicies only; the other ClusterRoles are bound per team namespace.
    expect(docs.filter((d) => d.kind === 'ClusterRoleBinding').map((d) => d.metadata.name)).toEqual([
      'kcp-sync-policy-reader',
      'kcp-sync-team-namespaces',
    ]);
    await applyObjects(await cluster('kcp'), docs);
    const onboarding = (
      loadAll(
        await readFile(join(import.meta.dirname, '..', 'examples', 'nfs-team.yaml'), 'utf8'),
      ) as KubeObject[]
    )
      .filter((d) => ['Namespace', 'ServiceAccount', 'RoleBinding'].includes(d.kind))
      .map((d) => JSON.parse(JSON.stringify(d).replaceAll('"nfs-manager"', `"${TEAM}"`)) as KubeObject);
    await applyObjects(await cluster('kcp'), onboarding);
  });

  it.each(matrix)('%s %s %s in %s: %s', async (sa, verb, resource, ns, allowed) => {
    expect(await can(sa, verb, resource, ns)).toBe(allowed);
  });

  it.each(teamMatrix)(
    'in an onboarded team namespace, %s %s %s (in %s): %s',
    async (who, verb, resource, ns, allowed) => {
      expect(await canAs(who, verb, resource, ns())).toBe(allowed);
    },
  );
});

describe.each(['emulated', 'real'] as const)(
  'RBAC in use: each function runs as its own ServiceAccount (knative: %s)',
  (knative) => {
    it('a function whose Role misses one rule fails at that request, and the one without a token has no KCP access', async () => {
      // write-status without "patch syncresources/status": the run happens, the status never comes.
      const s = await startStack('rbac-cut', {
        knative,
        pingIntervalMs: 3_600_000,
        rbacEdit: (docs) =>
          docs.map((d) =>
            d.kind === 'Role' && d.metadata.name === 'sync-write-status'
              ? ({
                  ...d,
                  rules: (d as unknown as { rules: { resources: string[] }[] }).rules.filter(
                    (r) => !r.resources.includes('syncresources/status'),
                  ),
                } as typeof d)
              : d,
          ),
      });
      try {
        const name = uniqueName('cut');
        await kubectl(
          s.kcp,
          ['apply', '-f', '-'],
          syncResourceYaml(s.ns, name, 'kyma-1', [
            {
              name: 'cm',
              strategy: 'CreateAndSync',
              resource: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: default}\n`,
            },
          ]),
        );
        // apply-items ran as itself (the object is in the SKR, the inventory in the KCP) ...
        await eventually(async () =>
          expect(
            await kubectl(s.skr[0]!, ['get', 'configmap', name, '-n', 'default', '-o', 'name']),
          ).toContain(name),
        );
        await waitSr(s, name, (x) => expect(x?.status?.synced?.map((e) => e.name)).toEqual([name]));
        // ... and write-status was refused by the API server as sync-write-status.
        await eventually(async () =>
          expect(await serviceLog(s.stateDir, 'sync-write-status')).toMatch(
            new RegExp(
              `system:serviceaccount:${s.ns}:sync-write-status.*cannot patch resource \\\\"syncresources/status\\\\"`,
            ),
          ),
        );
        expect((await getSr(s, name))?.status?.state).toBeUndefined();
        // Every function serves its probes with exactly its Pod's identity (dead-letter's has no Role:
        // the table above shows it reads nothing; its token only reads the issuer's keys).
        for (const f of s.runtime.functions)
          expect((await fetch(`${f.url}health/readiness`)).ok, f.service).toBe(true);
        expect(
          await readFile(
            join(s.stateDir, 'serviceaccounts', s.ns, 'sync-write-status', 'kubeconfig.yaml'),
            'utf8',
          ),
        ).toContain('tokenFile');
        expect(
          await readFile(
            join(s.stateDir, 'serviceaccounts', s.ns, 'sync-dead-letter', 'kubeconfig.yaml'),
            'utf8',
          ),
        ).toContain('tokenFile');
      } finally {
        await s.stop();
      }
    });
  },
);
