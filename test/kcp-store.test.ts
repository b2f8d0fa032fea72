// KcpStore.get against the real KCP: given the resourceVersion an event saw, a
// SyncResource is read from the API server's watch cache at that version or a newer one;
// a version the server cannot serve so costs a quorum read, never a failure.
import { describe, expect, inject, it } from 'vitest';
import { KubeClient, PatchType, type RequestInfo } from '../lib/kube/client.ts';
import { credentialsFromKubeconfig } from '../lib/kube/credentials.ts';
import { RestMapper } from '../lib/kube/discovery.ts';
import { applyObjects } from '../infra/kcp-setup.ts';
import { KcpStore } from '../lib/kcp.ts';
import type { SyncResource } from '../lib/model.ts';
import { uniqueName } from './helpers.ts';

describe('KcpStore.get at no older version than an event saw', () => {
  it('reads at the version, never older; a malformed version or one far ahead is read from etcd', async () => {
    const requests: RequestInfo[] = [];
    const client = KubeClient.create(credentialsFromKubeconfig(inject('clusters').kcp.kubeconfig), {
      name: 'kcp',
      onRequest: (r) => requests.push(r),
    });
    const store = new KcpStore({ client, mapper: new RestMapper(client) }, 'test');
    try {
      const ns = uniqueName('store');
      const path = `/apis/operator.kyma-project.io/v1alpha1/namespaces/${ns}/syncresources/s`;
      await applyObjects({ client, mapper: new RestMapper(client) }, [
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
      ]);
      const item = (v: string) => ({ name: 'a', strategy: 'CreateAndSync', resource: `data: {v: "${v}"}` });
      const created = await client.call<SyncResource>(
        'POST',
        `/apis/operator.kyma-project.io/v1alpha1/namespaces/${ns}/syncresources`,
        {
          body: {
            apiVersion: 'operator.kyma-project.io/v1alpha1',
            kind: 'SyncResource',
            metadata: { name: 's', namespace: ns },
            spec: { kyma: 'k', items: [item('1')] },
          },
        },
      );
      const edited = await client.call<SyncResource>('PATCH', path, {
        body: { spec: { items: [item('2')] } },
        contentType: PatchType.merge,
      });
      const gets = () => requests.filter((r) => r.method === 'GET' && r.path === path);
      const read = async (version: string) => {
        requests.length = 0;
        const sr = await store.get(ns, 's', version);
        return { sr, codes: gets().map((r) => r.code) };
      };

      // At the edit's version: the edit, in one request (the watch cache answers).
      const atEdit = await read(edited.metadata.resourceVersion!);
      expect(atEdit.sr?.spec.items[0]?.resource).toBe('data: {v: "2"}');
      expect(atEdit.codes).toEqual([200]);
      // At the creation's: never older than it, and here the edit is long in the cache.
      const atCreate = await read(created.metadata.resourceVersion!);
      expect(atCreate.sr?.metadata.resourceVersion).toBe(edited.metadata.resourceVersion);
      expect(atCreate.codes).toEqual([200]);
      // A malformed version: refused (the API server answers 500), then a quorum read.
      const malformed = await read('not-a-version');
      expect(malformed.sr?.metadata.resourceVersion).toBe(edited.metadata.resourceVersion);
      expect(malformed.codes).toEqual([500, 200]);
      // A version the KCP has not reached: the cache waits for it, gives up (504), then a quorum read.
      const ahead = await read(String(Number(edited.metadata.resourceVersion) + 1_000_000_000));
      expect(ahead.sr?.metadata.resourceVersion).toBe(edited.metadata.resourceVersion);
      expect(ahead.codes).toEqual([504, 200]);
      // None of that name: none, in one request.
      requests.length = 0;
      expect(await store.get(ns, 'none', edited.metadata.resourceVersion)).toBeUndefined();
      expect(requests.map((r) => [r.method, r.code])).toEqual([['GET', 404]]);
      await client.call('DELETE', `/api/v1/namespaces/${ns}`);
    } finally {
      await client.close();
    }
  });
});
