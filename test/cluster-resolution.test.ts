// Resolving a SyncResource's target cluster in the real KCP, and connecting to the
// real SKR through the client cache.
import diagnostics from 'node:diagnostics_channel';
import { dump, load } from 'js-yaml';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { kymaObjects, applyObjects } from '../infra/kcp-setup.ts';
import { ClientCache } from '../lib/cluster/cache.ts';
import { findAccessSecret, getKyma, Lookups } from '../lib/cluster/resolve.ts';
import { parseConfig } from '../lib/config.ts';
import { KubeApiError } from '../lib/kube/errors.ts';
import { listObjects, mustFind, type Cluster } from '../lib/kube/objects.ts';
import { cluster, uniqueName } from './helpers.ts';

const clusters = inject('clusters');
let kcp: Cluster;
const ns = uniqueName('resolve');

async function secret(name: string, kyma: string, config?: string) {
  await applyObjects(kcp, [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace: ns, labels: { 'operator.kyma-project.io/kyma-name': kyma } },
      ...(config ? { stringData: { config } } : {}),
    },
  ]);
}

/** connecting runs fn and counts the connections it opened to the SKR of the tests' first Kyma. */
async function connecting(fn: () => Promise<unknown>): Promise<number> {
  const skr = new URL((await cluster(0)).client.server);
  let connects = 0;
  const counter = (m: unknown) => {
    const p = (m as { connectParams: { hostname: string; port: string } }).connectParams;
    if (p.hostname === skr.hostname && p.port === skr.port) connects++;
  };
  diagnostics.subscribe('undici:client:connected', counter);
  try {
    await fn();
    return connects;
  } finally {
    diagnostics.unsubscribe('undici:client:connected', counter);
  }
}

const failure = async (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e as { reason?: string; message: string; transient?: boolean },
  );

describe('cluster resolution', () => {
  beforeAll(async () => {
    kcp = await cluster('kcp');
    await applyObjects(kcp, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }]);
  });

  it('fails with KymaNotFound when spec.kyma names no Kyma', async () => {
    const err = await failure(getKyma(kcp, ns, 'nope'));
    expect(err).toMatchObject({
      reason: 'KymaNotFound',
      message: `Kyma ${ns}/nope does not exist`,
      transient: false,
    });
  });

  it('needs exactly one access Secret with key config', async () => {
    await applyObjects(kcp, kymaObjects('k-none', 'unused', ns).slice(0, 1));
    expect(await failure(findAccessSecret(kcp, ns, 'k-none'))).toMatchObject({
      reason: 'AccessSecretNotFound',
      message: `no Secret in ${ns} has label operator.kyma-project.io/kyma-name=k-none`,
    });
    await secret('two-a', 'k-two', 'x');
    await secret('two-b', 'k-two', 'y');
    expect(await failure(findAccessSecret(kcp, ns, 'k-two'))).toMatchObject({
      reason: 'AmbiguousAccessSecret',
      message: `2 Secrets in ${ns} have label operator.kyma-project.io/kyma-name=k-two (two-a, two-b); exactly one is allowed`,
    });
    await secret('empty', 'k-empty');
    expect(await failure(findAccessSecret(kcp, ns, 'k-empty'))).toMatchObject({
      reason: 'InvalidKubeconfig',
    });
  });

  it('connects through the cache, keyed by Secret uid and resourceVersion', async () => {
    const config = parseConfig({});
    const cache = new ClientCache(config);
    await applyObjects(kcp, kymaObjects('k-real', clusters.skrs[0]!.kubeconfig, ns));
    const s1 = await findAccessSecret(kcp, ns, 'k-real');
    const c1 = await cache.get(s1, 'k-real');
    const namespaces = await listObjects(c1, await mustFind(c1, 'v1', 'Namespace'));
    expect(namespaces.map((n) => n.metadata.name)).toContain('kube-system');
    expect(await cache.get(await findAccessSecret(kcp, ns, 'k-real'), 'k-real')).toBe(c1);
    expect(cache.stats).toMatchObject({ hits: 1, misses: 1 });
    // Rotation: a new resourceVersion gets a new client.
    await applyObjects(
      kcp,
      kymaObjects('k-real', clusters.skrs[0]!.kubeconfig + '\n# rotated\n', ns).slice(1),
    );
    const s2 = await findAccessSecret(kcp, ns, 'k-real');
    expect(s2.ref.resourceVersion).not.toBe(s1.ref.resourceVersion);
    const c2 = await cache.get(s2, 'k-real');
    expect(c2).not.toBe(c1);
    cache.evict(s2.ref);
    expect(cache.stats.evictions).toBe(1);
    expect(cache.size).toBe(0);
    await cache.closeAll();
  });

  it('keeps at most SYNC_MAX_CLUSTER_CLIENTS clients: the least recently used is retired (its idle connections closed, a run holding it goes on), and a new one connects when used again', async () => {
    const cache = new ClientCache(parseConfig({ SYNC_MAX_CLUSTER_CLIENTS: '2' }));
    await applyObjects(
      kcp,
      ['lru-a', 'lru-b', 'lru-c'].flatMap((k) => kymaObjects(k, clusters.skrs[0]!.kubeconfig, ns)),
    );
    const secret = (k: string) => findAccessSecret(kcp, ns, k);
    const use = async (k: string) => {
      const c = await cache.get(await secret(k), k);
      await c.client.call('GET', '/version');
      return c;
    };
    const a = await use('lru-a');
    const b = await use('lru-b');
    expect(await use('lru-a')).toBe(a);
    await use('lru-c');
    // b was used least recently: retired, and nothing else. A run that still holds it is
    // answered, on a connection of its own (b's idle one was closed); a's stays open.
    expect(cache.size).toBe(2);
    expect(cache.stats.evictions).toBe(1);
    expect(await connecting(() => b.client.call('GET', '/version'))).toBe(1);
    expect(await connecting(() => a.client.call('GET', '/version'))).toBe(0);
    const b2 = await use('lru-b');
    expect(b2).not.toBe(b);
    expect(cache.stats.evictions).toBe(2);
    await cache.closeAll();
  });

  it('keeps the connections of the SYNC_WARM_CLUSTER_CLIENTS clients used last open, and closes the idle ones of the others', async () => {
    const cache = new ClientCache(parseConfig({ SYNC_WARM_CLUSTER_CLIENTS: '2' }));
    await applyObjects(
      kcp,
      ['warm-a', 'warm-b', 'warm-c'].flatMap((k) => kymaObjects(k, clusters.skrs[0]!.kubeconfig, ns)),
    );
    try {
      const secrets = new Map<string, Awaited<ReturnType<typeof findAccessSecret>>>();
      for (const k of ['warm-a', 'warm-b', 'warm-c']) secrets.set(k, await findAccessSecret(kcp, ns, k));
      /** use sends a request through k's client and returns the connections it opened. */
      const use = (k: string) =>
        connecting(async () => (await cache.get(secrets.get(k)!, k)).client.call('GET', '/version'));
      expect(await use('warm-a')).toBe(1);
      expect(await use('warm-b')).toBe(1);
      // Two warm: a's connection is still open.
      expect(await use('warm-a')).toBe(0);
      // c displaces b, the least recently used: b's client stays cached and connects afresh.
      expect(await use('warm-c')).toBe(1);
      expect(await use('warm-a')).toBe(0);
      expect(await use('warm-b')).toBe(1);
      expect(cache.size).toBe(3);
      expect(cache.stats.evictions).toBe(0);
    } finally {
      await cache.closeAll();
    }
  });

  it('reads a source Secret afresh for every run: a value read a moment ago is never reused', async () => {
    // (Shared for two seconds, a value one replica read just before a rotation was applied by
    // its next run after another replica had applied the new one, turning the rotation back.)
    const lookups = new Lookups(kcp);
    const name = uniqueName('src');
    const put = (v: string) =>
      applyObjects(kcp, [
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: {
            name,
            namespace: ns,
            labels: {
              'operator.kyma-project.io/sync-source': 'true',
              'operator.kyma-project.io/kyma-name': 'k',
            },
          },
          stringData: { v },
        } as never,
      ]);
    await put('one');
    expect((await lookups.source(ns, name))?.data).toEqual({ v: Buffer.from('one').toString('base64') });
    await put('two');
    expect((await lookups.source(ns, name))?.data).toEqual({ v: Buffer.from('two').toString('base64') });
  });

  it("reads a Kyma and its Secret from the watch cache no older than an event's version; what that does not find is read from etcd", async () => {
    // Every read, with the version it asked at (undefined: from etcd) and its answer.
    const reads: { kind: string; at?: string; code: number }[] = [];
    const recording: Cluster = {
      ...kcp,
      client: new Proxy(kcp.client, {
        get: (target, prop, receiver) =>
          prop !== 'call'
            ? Reflect.get(target, prop, receiver)
            : async (method: string, path: string, opts?: { query?: Record<string, string> }) => {
                const kind = path.includes('/kymas') ? 'kyma' : 'secrets';
                const at = opts?.query?.resourceVersion;
                try {
                  const out: unknown = await target.call(method, path, opts);
                  reads.push({ kind, at, code: 200 });
                  return out;
                } catch (err) {
                  reads.push({ kind, at, code: err instanceof KubeApiError ? err.code : -1 });
                  throw err;
                }
              },
      }),
    };
    await applyObjects(kcp, kymaObjects('k-at', clusters.skrs[0]!.kubeconfig, ns));
    // The event's version: a write after the Kyma's and its Secret's, of another kind.
    const later = await kcp.client.call<{ metadata: { resourceVersion: string } }>(
      'POST',
      `/api/v1/namespaces/${ns}/configmaps`,
      { body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: uniqueName('event') } } },
    );
    const at = later.metadata.resourceVersion;
    const resolve = (kyma: string, fresh: boolean, version = at) => {
      reads.length = 0;
      return new Lookups(recording).resolve(ns, kyma, fresh, version);
    };

    // Found in the watch cache: one read each, at the event's version.
    expect((await resolve('k-at', false)).ref.name).toBe('k-at-kubeconfig');
    expect(reads.sort((a, b) => a.kind.localeCompare(b.kind))).toEqual([
      { kind: 'kyma', at, code: 200 },
      { kind: 'secrets', at, code: 200 },
    ]);
    // A change of the Kyma or its Secret (fresh): from etcd only.
    await resolve('k-at', true);
    expect(reads.map((r) => r.at)).toEqual([undefined, undefined]);
    // Not in the cache: the error is reported only after etcd says so too.
    expect(await failure(resolve('k-absent', false))).toMatchObject({ reason: 'KymaNotFound' });
    expect(reads.filter((r) => r.kind === 'kyma')).toEqual([
      { kind: 'kyma', at, code: 404 },
      { kind: 'kyma', at: undefined, code: 404 },
    ]);
    // A version the API server refuses: read from etcd.
    expect((await resolve('k-at', false, 'not-a-version')).ref.name).toBe('k-at-kubeconfig');
    expect(reads.filter((r) => r.code === 200).map((r) => r.at)).toEqual([undefined, undefined]);
  });

  it('classifies a wrong CA and a rejected token as authentication failures', async () => {
    const cache = new ClientCache(parseConfig({}));
    const good = load(clusters.skrs[0]!.kubeconfig) as {
      clusters: { cluster: Record<string, string> }[];
      users: { user: Record<string, string> }[];
    };
    const other = load(clusters.skrs[1]!.kubeconfig) as typeof good;
    const wrongCa = structuredClone(good);
    wrongCa.clusters[0]!.cluster['certificate-authority-data'] =
      other.clusters[0]!.cluster['certificate-authority-data']!;
    const badToken = structuredClone(good);
    badToken.users[0]!.user = { token: 'not-a-valid-token' };
    for (const [kc, code] of [
      [wrongCa, 0],
      [badToken, 401],
    ] as const) {
      const ref = { namespace: ns, name: uniqueName('s'), uid: uniqueName('u'), resourceVersion: '1' };
      const c = await cache.get({ ref, kubeconfig: dump(kc) }, 'bad');
      const err = await failure(c.client.call('GET', '/api/v1/namespaces'));
      expect(err).toBeInstanceOf(KubeApiError);
      expect((err as KubeApiError).code).toBe(code);
      expect((err as KubeApiError).authFailure).toBe(true);
      expect((err as KubeApiError).transient).toBe(code === 0);
    }
    await cache.closeAll();
  });
});
