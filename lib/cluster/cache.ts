// cache.ts keeps one SKR client per access Secret version, per process: keyed by
// the Secret's uid and resourceVersion, so a rotated kubeconfig gets a new client
// (and the old one retired); evicted when the credential or TLS trust fails, and
// bounded: beyond maxClusterClients the least recently used client is retired and
// counted; a later run connects afresh. A retired client is no longer handed out and its
// idle connections close, but a run that holds it goes on to its end: its next requests
// connect afresh (a closed pool would fail them as an unreachable SKR).
import type { Config } from '../config.ts';
import { KubeClient, type ClientOptions } from '../kube/client.ts';
import { RestMapper } from '../kube/discovery.ts';
import { ListCache } from '../kube/listcache.ts';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../model.ts';
import type { Cluster } from '../kube/objects.ts';
import { validateKubeconfig } from '../policy/kubeconfig.ts';
import type { AccessSecret, SecretRef } from './resolve.ts';
import { Metrics } from '../telemetry.ts';

/**
 * SKR_KEEPALIVE_MS keeps an idle SKR connection open for a minute (under the API server's
 * 90 s), so that an edit on an SKR used in that minute finds it open; a new one costs a TLS
 * handshake, about 5 ms on a local API server. The SKR source's watch clients use it too.
 */
export const SKR_KEEPALIVE_MS = 60_000;

/** CacheStats counts hits, misses and evictions, for metrics. */
export interface CacheStats {
  hits: number;
  misses: number;
  evictions: number;
}

/** ClientHooks are the options of a client that the pipeline, not the cluster, decides. */
export type ClientHooks = Pick<ClientOptions, 'onRequest' | 'beforeRequest'>;

/** ClientCache maps access Secrets to connected SKR clusters. */
export class ClientCache {
  /** entries by Secret; kyma is the Kyma the Secret version was resolved for. */
  private readonly entries = new Map<string, { version: string; kyma: string; cluster: Promise<Cluster> }>();
  /**
   * warm holds the keys of the entries used last (config.warmClusterClients), in use order:
   * only their idle connections stay open. A connection holds about 190 KiB, so a process
   * that talks to a thousand SKRs in turn (a resync) keeps at most this many open (128 by
   * default, about 24 MiB) and closes the others as it moves on.
   */
  private readonly warm = new Set<string>();
  private readonly config: Config;
  private readonly hooks: ClientHooks;
  readonly stats: CacheStats = { hits: 0, misses: 0, evictions: 0 };

  /** hooks are given to every client: onRequest sees each request, beforeRequest paces them (the pipeline's scheduler). */
  constructor(config: Config, hooks: ClientHooks = {}) {
    this.config = config;
    this.hooks = hooks;
  }

  /** get returns the cluster for secret, validating and connecting on first use of this version. */
  async get(secret: AccessSecret, name: string): Promise<Cluster> {
    const key = `${secret.ref.namespace}/${secret.ref.name}`;
    const version = `${secret.ref.uid}/${secret.ref.resourceVersion}`;
    const hit = this.entries.get(key);
    if (hit && hit.version === version && hit.kyma === name) {
      this.stats.hits++;
      Metrics.cacheHits.add(1, { cluster: name });
      this.touch(key, hit);
      return hit.cluster;
    }
    this.stats.misses++;
    Metrics.cacheMisses.add(1, { cluster: name });
    if (hit) this.retire(hit.cluster);
    const cluster = (async () => {
      const creds = validateKubeconfig(secret.kubeconfig, {
        allowInsecure: this.config.allowInsecureKubeconfigs,
      });
      const client = KubeClient.create(creds, {
        name,
        qps: this.config.clusterQps,
        burst: this.config.clusterBurst,
        keepAliveMs: SKR_KEEPALIVE_MS,
        ...this.hooks,
      });
      return {
        client,
        mapper: new RestMapper(client),
        lists: new ListCache(client, `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`),
      };
    })();
    this.entries.delete(key);
    this.entries.set(key, { version, kyma: name, cluster });
    this.warmUp(key);
    cluster.catch(() => {
      if (this.entries.get(key)?.cluster === cluster) this.drop(key);
      this.report();
    });
    // Map order is use order: the first entries are the least recently used.
    for (const [old, e] of this.entries) {
      if (this.entries.size <= this.config.maxClusterClients) break;
      this.drop(old);
      this.stats.evictions++;
      Metrics.cacheEvictions.add(1, { why: 'capacity' });
      this.retire(e.cluster);
    }
    this.report();
    return cluster;
  }

  private reported = 0;
  /** report keeps the clients gauge equal to the number of entries. */
  private report(): void {
    if (this.entries.size === this.reported) return;
    Metrics.cacheClients.add(this.entries.size - this.reported);
    this.reported = this.entries.size;
  }

  private touch(key: string, e: { version: string; kyma: string; cluster: Promise<Cluster> }): void {
    this.entries.delete(key);
    this.entries.set(key, e);
    this.warmUp(key);
  }

  /** drop forgets the entry of key; its client is the caller's to retire. */
  private drop(key: string): void {
    this.entries.delete(key);
    this.warm.delete(key);
  }

  /** warmUp marks key used; the entry it displaces from the warm set closes its idle connections. */
  private warmUp(key: string): void {
    this.warm.delete(key);
    this.warm.add(key);
    if (this.warm.size <= this.config.warmClusterClients) return;
    const [cold] = this.warm;
    this.warm.delete(cold!);
    const e = this.entries.get(cold!);
    if (e) this.retire(e.cluster);
  }

  /**
   * peek returns the cached cluster for exactly this Secret version, if it was resolved
   * for the Kyma name, without reading the Secret. A look that is not a use (use false)
   * counts no hit and leaves the entry's place in the use order.
   */
  peek(ref: SecretRef, name: string, use = true): Promise<Cluster> | undefined {
    const hit = this.entries.get(`${ref.namespace}/${ref.name}`);
    if (!hit || hit.version !== `${ref.uid}/${ref.resourceVersion}` || hit.kyma !== name) return undefined;
    if (!use) return hit.cluster;
    this.stats.hits++;
    Metrics.cacheHits.add(1, { cluster: name });
    this.touch(`${ref.namespace}/${ref.name}`, hit);
    return hit.cluster;
  }

  /** evict drops the client of a Secret (after 401 or a TLS failure). */
  evict(ref: SecretRef): void {
    const key = `${ref.namespace}/${ref.name}`;
    const hit = this.entries.get(key);
    if (!hit) return;
    this.drop(key);
    this.stats.evictions++;
    Metrics.cacheEvictions.add(1, { why: 'failure' });
    this.report();
    this.retire(hit.cluster);
  }

  /** size is the number of cached clients. */
  get size(): number {
    return this.entries.size;
  }

  /** closeAll closes every pooled connection. */
  async closeAll(): Promise<void> {
    const all = [...this.entries.values()];
    this.entries.clear();
    this.warm.clear();
    this.report();
    await Promise.all(all.map((e) => this.close(e.cluster)));
  }

  /** retire closes a client's idle connections; its next request (a run still holding it, or a warm-up) connects afresh. */
  private retire(c: Promise<Cluster>): void {
    c.then((x) => x.client.rest()).catch(() => {});
  }

  private async close(c: Promise<Cluster>): Promise<void> {
    try {
      await (await c).client.close();
    } catch {
      /* a failed connect has nothing to close */
    }
  }
}
