// Reads ahead against a real SKR API server: a run's GET of an object read ahead takes that
// read's answer once (the API server is asked once), a NotFound is answered as NotFound,
// and from the run's first write on every read is asked anew, so a run never decides on a
// state older than its own writes.
import { describe, expect, inject, it } from 'vitest';
import { KubeClient, PatchType, type RequestInfo } from '../lib/kube/client.ts';
import { credentialsFromKubeconfig } from '../lib/kube/credentials.ts';
import { RestMapper } from '../lib/kube/discovery.ts';
import {
  applyObject,
  getObject,
  mustFind,
  readAhead,
  usingReadsAhead,
  type Cluster,
} from '../lib/kube/objects.ts';
import { uniqueName } from './helpers.ts';

describe('reads ahead', () => {
  it('a GET takes the answer read ahead once; after the first write every GET is asked anew', async () => {
    const requests: RequestInfo[] = [];
    const client = KubeClient.create(credentialsFromKubeconfig(inject('clusters').skrs[0]!.kubeconfig), {
      name: 'skr-1',
      onRequest: (r) => requests.push(r),
    });
    const skr: Cluster = { client, mapper: new RestMapper(client) };
    try {
      const ns = uniqueName('ahead');
      const nsInfo = await mustFind(skr, 'v1', 'Namespace');
      const cmInfo = await mustFind(skr, 'v1', 'ConfigMap');
      await applyObject(skr, nsInfo, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }, 'test');
      const cm = (name: string, v: string) => ({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, namespace: ns },
        data: { v },
      });
      await applyObject(skr, cmInfo, cm('a', '1'), 'test');
      const gets = (name: string) =>
        requests.filter((r) => r.method === 'GET' && r.path === `/api/v1/namespaces/${ns}/configmaps/${name}`)
          .length;
      const id = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name });

      // Read ahead: a, one that does not exist, a kind the SKR does not serve, a namespaced
      // kind named without a namespace (left out).
      const ahead = readAhead(skr, [
        id('a'),
        id('missing'),
        { apiVersion: 'example.com/v1', kind: 'Nothing', namespace: ns, name: 'a' },
        { apiVersion: 'v1', kind: 'ConfigMap', name: 'a' },
      ]);
      expect([...(await ahead.answers).keys()]).toEqual([
        `/api/v1/namespaces/${ns}/configmaps/a`,
        `/api/v1/namespaces/${ns}/configmaps/missing`,
      ]);
      const run = usingReadsAhead(skr, ahead);
      await Promise.allSettled((await ahead.answers).values());
      expect([gets('a'), gets('missing')]).toEqual([1, 1]);
      // The run's reads take the answers: no request.
      expect((await getObject(run, cmInfo, ns, 'a'))?.data).toEqual({ v: '1' });
      expect(await getObject(run, cmInfo, ns, 'missing')).toBeUndefined();
      expect([gets('a'), gets('missing')]).toEqual([1, 1]);
      // Taken once: a second read asks.
      expect((await getObject(run, cmInfo, ns, 'a'))?.data).toEqual({ v: '1' });
      expect(gets('a')).toBe(2);

      // A read ahead of b, then another change of b by someone else, then the run's first write
      // (to c): the run's read of b is asked anew and sees the change.
      await applyObject(skr, cmInfo, cm('b', '1'), 'test');
      const again = readAhead(skr, [id('b'), id('a')]);
      const second = usingReadsAhead(skr, again);
      await Promise.allSettled((await again.answers).values());
      await client.call('PATCH', `/api/v1/namespaces/${ns}/configmaps/b`, {
        body: { data: { v: '2' } },
        contentType: PatchType.merge,
      });
      // A dry run writes nothing: the answers still stand (a's is taken here).
      await applyObject(second, cmInfo, cm('c', '0'), 'test', undefined, true);
      const readsOfA = gets('a');
      expect((await getObject(second, cmInfo, ns, 'a'))?.data).toEqual({ v: '1' });
      expect(gets('a')).toBe(readsOfA);
      await applyObject(second, cmInfo, cm('c', '1'), 'test');
      const readsOfB = gets('b');
      expect((await getObject(second, cmInfo, ns, 'b'))?.data).toEqual({ v: '2' });
      expect(gets('b')).toBe(readsOfB + 1);
      await client.call('DELETE', `/api/v1/namespaces/${ns}`);
    } finally {
      await client.close();
    }
  });
});
