// The local clusters are real: TLS + RBAC API servers that serve core and apps
// APIs, report the built version, and run a controller manager.
import { readFile } from 'node:fs/promises';
import { AppsV1Api, CoreV1Api, VersionApi } from '@kubernetes/client-node';
import { describe, expect, inject, it } from 'vitest';
import { httpsGet } from '../infra/net.ts';
import { eventually, kcpConfig, kubeConfig, uniqueName } from './helpers.ts';

const clusters = inject('clusters');

describe('local clusters', () => {
  it('write the state file and one kubeconfig per cluster', async () => {
    const state = JSON.parse(await readFile(`${clusters.stateDir}/state.json`, 'utf8'));
    expect(Object.keys(state.clusters)).toEqual(['kcp', 'skr-1', 'skr-2', 'skr-3']);
    for (const [name, c] of Object.entries<{ kubeconfig: string; url: string }>(state.clusters)) {
      expect(c.kubeconfig).toBe(`${clusters.stateDir}/kubeconfig/${name}.yaml`);
      expect(c.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      expect(await readFile(c.kubeconfig, 'utf8')).toContain(c.url);
    }
    const roles = state.processes
      .map((p: { role: string; cluster: string }) => `${p.role}/${p.cluster}`)
      .sort();
    expect(roles).toEqual([
      'etcd/shared',
      'kube-apiserver/kcp',
      'kube-apiserver/skr-1',
      'kube-apiserver/skr-2',
      'kube-apiserver/skr-3',
      'kube-controller-manager/kcp',
      'kube-controller-manager/skr-1',
      'kube-controller-manager/skr-2',
      'kube-controller-manager/skr-3',
      // Each SKR runs Pods: a scheduler and a KWOK Node.
      'kube-scheduler/skr-1',
      'kube-scheduler/skr-2',
      'kube-scheduler/skr-3',
      'kwok/skr-1',
      'kwok/skr-2',
      'kwok/skr-3',
    ]);
    for (const p of state.processes) expect(() => process.kill(p.pid, 0)).not.toThrow();
  });

  it('report the built Kubernetes version on /version', async () => {
    expect(clusters.kubernetesVersion).toMatch(/^v1\.(3[3-9]|[4-9]\d)\.\d+$/);
    for (const c of [clusters.kcp, ...clusters.skrs]) {
      const v = await kubeConfig(c.kubeconfig).makeApiClient(VersionApi).getCode();
      expect(v.gitVersion).toBe(clusters.kubernetesVersion);
    }
  });

  it('serve TLS from their own CA and refuse requests without the admin certificate (RBAC)', async () => {
    const kc = kubeConfig(clusters.kcp.kubeconfig);
    const ca = Buffer.from(kc.getCurrentCluster()!.caData!, 'base64').toString();
    const anonymous = await httpsGet(`${clusters.kcp.url}/api/v1/namespaces`, { ca });
    expect(anonymous.status).toBe(403);
    expect(anonymous.body).toContain('system:anonymous');
    const user = kc.getCurrentUser()!;
    const admin = await httpsGet(`${clusters.kcp.url}/api/v1/namespaces`, {
      ca,
      cert: Buffer.from(user.certData!, 'base64').toString(),
      key: Buffer.from(user.keyData!, 'base64').toString(),
    });
    expect(admin.status).toBe(200);
  });

  it.each(clusters.skrs.map((s) => [s.name, s] as const))(
    '%s serves core and apps APIs and runs controllers',
    async (_, skr) => {
      const kc = kubeConfig(skr.kubeconfig);
      const core = kc.makeApiClient(CoreV1Api);
      const apps = kc.makeApiClient(AppsV1Api);
      const ns = uniqueName('clusters');
      await core.createNamespace({ body: { metadata: { name: ns } } });
      await core.createNamespacedConfigMap({
        namespace: ns,
        body: { metadata: { name: 'cm' }, data: { a: '1' } },
      });
      expect((await core.readNamespacedConfigMap({ namespace: ns, name: 'cm' })).data).toEqual({ a: '1' });
      await apps.createNamespacedDeployment({
        namespace: ns,
        body: {
          metadata: { name: 'app' },
          spec: {
            selector: { matchLabels: { app: 'x' } },
            template: {
              metadata: { labels: { app: 'x' } },
              spec: { containers: [{ name: 'c', image: 'busybox' }] },
            },
          },
        },
      });
      expect((await apps.readNamespacedDeployment({ namespace: ns, name: 'app' })).spec?.replicas).toBe(1);
      // The controller manager makes a ReplicaSet for the Deployment ...
      const rs = await eventually(async () => {
        const list = await apps.listNamespacedReplicaSet({ namespace: ns });
        expect(list.items).toHaveLength(1);
        return list.items[0]!;
      });
      expect(rs.metadata?.ownerReferences?.[0]?.name).toBe('app');
      // ... garbage-collects it with its owner ...
      await apps.deleteNamespacedDeployment({ namespace: ns, name: 'app' });
      await eventually(async () =>
        expect((await apps.listNamespacedReplicaSet({ namespace: ns })).items).toHaveLength(0),
      );
      // ... and finishes deleting namespaces.
      await core.deleteNamespace({ name: ns });
      await eventually(async () => {
        const names = (await core.listNamespace()).items.map((n) => n.metadata?.name);
        expect(names).not.toContain(ns);
      }, 60_000);
    },
  );

  it('KCP holds the control-plane namespace, a Kyma and an access Secret per SKR', async () => {
    const core = kcpConfig().makeApiClient(CoreV1Api);
    const secrets = await core.listNamespacedSecret({
      namespace: 'kcp-system',
      labelSelector: 'operator.kyma-project.io/kyma-name',
    });
    const byKyma = Object.fromEntries(
      secrets.items.map((s) => [s.metadata!.labels!['operator.kyma-project.io/kyma-name'], s]),
    );
    for (const [i, skr] of clusters.skrs.entries()) {
      const secret = byKyma[`kyma-${i + 1}`];
      expect(secret, `secret for kyma-${i + 1}`).toBeDefined();
      expect(Buffer.from(secret!.data!.config!, 'base64').toString()).toBe(skr.kubeconfig);
    }
  });
});
