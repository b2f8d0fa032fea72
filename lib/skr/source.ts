// source.ts is the SKR source: for each Kyma this replica is given (shard.ts), it keeps
// label-selected watches on the kinds that the Kyma's SyncResources hold in its SKR (their
// KCP inventories say which) and posts one event per SyncResource when one of its objects
// is gone, a field its manager owns was changed by someone else, or its health is not what
// its status says (judge.ts), coalesced per SyncResource (coalesce.ts). Which SyncResource
// holds an object comes from the KCP only; an SKR object no inventory names costs nothing
// but its watch event. Memory per watched object is a few short strings (view.ts).
import type { CloudEvent } from 'cloudevents';
import { SKR_KEEPALIVE_MS } from '../cluster/cache.ts';
import { cachedFirst, findAccessSecret, ResolutionError } from '../cluster/resolve.ts';
import type { Config } from '../config.ts';
import { KubeClient } from '../kube/client.ts';
import { resourcePath, RestMapper, type ResourceInfo } from '../kube/discovery.ts';
import { informer } from '../kube/informer.ts';
import type { Cluster, KubeObject } from '../kube/objects.ts';
import { KYMA_NAME_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, type SyncResource } from '../model.ts';
import type { Logger } from '../pipeline/deps.ts';
import { validateKubeconfig } from '../policy/kubeconfig.ts';
import { Priority, PriorityGate } from '../concurrency.ts';
import { Findings, type Finding } from './findings.ts';
import {
  gone,
  holderOf,
  kindKey,
  listed,
  observed,
  recheck,
  watchOf,
  type KindWatch,
  type KymaWatch,
  type WatchContext,
} from './watch.ts';
import { ControlPlaneWatch } from './control-plane.ts';
import type { Entry, SrView } from './view.ts';

/**
 * SKR_WATCH_SECONDS: each watch on an SKR lasts 30 to 60 minutes, what the API server gives
 * a client that asks for none (--min-request-timeout 1800 s, up to twice): resumed as often
 * as client-go's 5 to 10 minutes, the 2,000 watches of a replica given 500 Kymas cost about
 * 4 requests a second at rest. A connection that dies meanwhile is found by HTTP/2's ping
 * (undici: every minute), which ends its watches. They ask for no bookmarks: the API server
 * sends one per watch every minute, 2,000 a minute to a replica at rest, and all a bookmark
 * saves is a list when a watch is resumed (at its end, or after a break) from a version the
 * server no longer keeps (410): at a watch's end at most once in 30 minutes
 * (BENCHMARKS.md, "CPU at rest at 1,000 Kymas").
 */
const SKR_WATCH_SECONDS: [number, number] = [1800, 3600];

/**
 * NS_WATCHES is how many namespaces a kind's objects may lie in and still be watched
 * namespace by namespace; beyond it, or for a cluster-scoped kind, one watch on the whole
 * cluster. A module's objects mostly lie in one or two namespaces: its watches then see
 * only them, not every object of the kind that carries our label.
 */
const NS_WATCHES = 4;

/** SourceOptions are what the source needs; emit posts an event to the broker. */
export interface SourceOptions {
  kcp: KubeClient;
  config: Config;
  emit(event: CloudEvent<unknown>): Promise<void>;
  log: Logger;
  /** qps and burst limit each SKR client (its lists; watches are long-lived). */
  qps?: number;
  /** syncResources is told every SyncResource listed or watched, and every one gone (changes.ts), and asked to run again those of a namespace whose policy changed. */
  syncResources?: { put(sr: SyncResource): void; drop(key: string): void; rerun(namespace: string): void };
}

/** SkrSource watches the SKRs of the Kymas it is given. */
export class SkrSource {
  private readonly opts: SourceOptions;
  private readonly kcp: Cluster;
  private readonly kymas = new Map<string, KymaWatch>();
  /** access Secret versions by Kyma key ("<namespace>/<kyma>"). */
  private readonly secrets = new Map<string, string>();
  /** findings posts what the watches judged, per SyncResource (findings.ts). */
  private readonly findings: Findings;
  /** ctx is what judging a watch event needs (watch.ts). */
  private readonly ctx: WatchContext;
  private readonly abort = new AbortController();
  /** cp is the KCP side: the SyncResources' views (cp.srs), policies, namespaces, access Secrets. */
  private readonly cp: ControlPlaneWatch;
  private owns: (kyma: string) => boolean = () => true;
  /** over are the Kymas of this replica's share it has no room to watch. */
  private readonly over = new Set<string>();
  /**
   * listing paces first lists: a replica given hundreds of Kymas at once (a start, a
   * takeover) lists them a few at a time, so their responses are never all in memory.
   */
  private readonly listing = new PriorityGate(8, { braked: 8, headroom: 0 });
  /** counters for metrics and tests. */
  readonly stats = { events: 0, ignored: 0, findings: 0, posts: 0, watchErrors: 0 };

  constructor(opts: SourceOptions) {
    this.opts = opts;
    this.kcp = { client: opts.kcp, mapper: new RestMapper(opts.kcp) };
    this.cp = new ControlPlaneWatch(
      opts,
      {
        put: (view, old) => this.put(view, old),
        drop: (old) => this.drop(old),
        secret: (ns, s, deleted) => this.putSecret(ns, s, deleted),
      },
      this.abort.signal,
    );
    this.findings = new Findings({
      view: (sr) => this.cp.srs.get(sr),
      stillHolds: (sr, f) => this.stillHolds(sr, f),
      emit: opts.emit,
      log: opts.log,
      stats: this.stats,
    });
    this.ctx = {
      views: this.cp.srs,
      kymas: this.kymas,
      findings: this.findings,
      stats: this.stats,
      fieldManager: opts.config.fieldManager,
    };
  }

  /** start lists and watches the KCP (control-plane.ts); the SKRs are watched as SyncResources name them. */
  async start(): Promise<void> {
    await this.cp.start();
  }

  /** shard sets which Kymas this replica watches ("<namespace>/<kyma>"); the others are let go. */
  shard(owns: (kyma: string) => boolean): void {
    this.owns = owns;
    this.over.clear();
    for (const k of [...this.kymas.keys()]) if (!owns(k)) this.stopKyma(k);
    const wanted = new Set([...this.cp.srs.values()].map((v) => v.kyma));
    for (const k of wanted) if (this.watchable(k)) this.ensureKyma(k);
  }

  /** status lists what this replica watches, per Kyma. */
  status(): { kyma: string; state: string; kinds: { kind: string; state: string; objects: number }[] }[] {
    return [...this.kymas.values()].map((k) => ({
      kyma: k.key,
      state: k.state,
      kinds: [...k.kinds.values()].map((w) => ({
        kind: w.namespace ? `${w.gk} in ${w.namespace}` : w.gk,
        state: w.state,
        objects: w.objects.size,
      })),
    }));
  }

  /** watched counts Kymas, kind watches and objects held, and the Kymas of its share left unwatched for want of room. */
  watched(): { kymas: number; watches: number; objects: number; unwatched: number } {
    let watches = 0;
    let objects = 0;
    for (const k of this.kymas.values())
      for (const w of k.kinds.values()) {
        watches++;
        objects += w.objects.size;
      }
    return { kymas: this.kymas.size, watches, objects, unwatched: this.over.size };
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.findings.stop();
    for (const k of [...this.kymas.keys()]) this.stopKyma(k);
  }

  private putSecret(ns: string, s: KubeObject, deleted = false): void {
    const kyma = s.metadata.labels?.[KYMA_NAME_LABEL];
    if (!kyma) return;
    const key = `${ns}/${kyma}`;
    const version = deleted ? '' : `${s.metadata.uid}/${s.metadata.resourceVersion}`;
    if (this.secrets.get(key) === version) return;
    this.secrets.set(key, version);
    const w = this.kymas.get(key);
    // A rotated (or removed) access Secret: connect afresh; the watches list again and resume.
    if (w && w.secretVersion !== undefined && w.secretVersion !== version) this.reconnect(w);
  }

  /** put holds a SyncResource's objects in its Kyma's watch (and lets go of those it no longer names). */
  private put(view: SrView, old: SrView | undefined): void {
    if (old) this.unhold(old, view);
    this.hold(view);
    if (old) recheck(this.ctx, old, view);
  }

  /** drop lets go of a SyncResource's objects. */
  private drop(old: SrView): void {
    this.unhold(old);
    this.findings.forget(old.key);
  }

  /**
   * watchable tells whether this replica watches kyma: its share, and room for it. At most
   * SYNC_MAX_CLUSTER_CLIENTS SKRs are watched per replica (memory stays bounded); the rest
   * are left to the resync tick, counted in the Lease and /watches, and taken up as room frees.
   */
  private watchable(kyma: string): boolean {
    if (!this.owns(kyma)) return false;
    if (this.kymas.has(kyma) || this.kymas.size < this.opts.config.maxClusterClients) return true;
    if (!this.over.has(kyma)) {
      this.over.add(kyma);
      this.opts.log.warn(
        { cluster: kyma, limit: this.opts.config.maxClusterClients },
        'SKR not watched: over capacity',
      );
    }
    return false;
  }

  /** hold records view's entries in its Kyma's index and starts what is now needed. */
  private hold(view: SrView): void {
    if (!this.watchable(view.kyma)) return;
    const w = this.ensureKyma(view.kyma);
    this.index(w, view);
    this.syncKinds(w);
  }

  /** unhold removes old's entries (those next no longer has) from its Kyma's index. */
  private unhold(old: SrView, next?: SrView): void {
    const w = this.kymas.get(old.kyma);
    if (!w) return;
    const keep = new Set(next && next.kyma === old.kyma ? next.entries.map((e) => e.key) : []);
    for (const e of old.entries) {
      if (keep.has(e.key)) continue;
      const set = w.holders.get(e.key);
      if (!set?.delete(old.key)) continue;
      if (set.size === 0) w.holders.delete(e.key);
      const at = kindKey(e.gk, e.namespace);
      const h = w.held.get(at);
      if (h && --h.n === 0) w.held.delete(at);
    }
    if (!next || next.kyma !== old.kyma) w.srs.delete(old.key);
    if (w.srs.size === 0) this.stopKyma(w.key);
    else this.syncKinds(w);
  }

  private ensureKyma(key: string): KymaWatch {
    let w = this.kymas.get(key);
    if (w) return w;
    const [namespace, kyma] = key.split('/') as [string, string];
    w = {
      key,
      namespace,
      kyma,
      srs: new Set(),
      holders: new Map(),
      held: new Map(),
      kinds: new Map(),
      abort: new AbortController(),
      state: 'connecting',
      retryMs: 5_000,
    };
    this.kymas.set(key, w);
    for (const v of this.cp.srs.values()) if (v.kyma === key) this.index(w, v);
    void this.connect(w);
    return w;
  }

  /** index records view and its inventory entries in its Kyma's watch. */
  private index(w: KymaWatch, view: SrView): void {
    w.srs.add(view.key);
    for (const e of view.entries) {
      let set = w.holders.get(e.key);
      if (!set) w.holders.set(e.key, (set = new Set()));
      if (set.has(view.key)) continue;
      set.add(view.key);
      const at = kindKey(e.gk, e.namespace);
      const h = w.held.get(at);
      if (h) h.n++;
      else w.held.set(at, { e, n: 1 });
    }
  }

  /** disconnect ends a Kyma's watches and closes its client. */
  private disconnect(w: KymaWatch): void {
    w.abort.abort();
    for (const k of w.kinds.values()) k.abort.abort();
    void w.client?.close().catch(() => {});
  }

  private stopKyma(key: string): void {
    const w = this.kymas.get(key);
    if (!w) return;
    this.kymas.delete(key);
    // Room freed: a Kyma left unwatched for want of it is taken up.
    const next = this.over.values().next();
    if (!next.done && this.owns(next.value)) {
      this.over.delete(next.value);
      queueMicrotask(() => {
        if (this.watchable(next.value) && [...this.cp.srs.values()].some((v) => v.kyma === next.value))
          this.ensureKyma(next.value);
      });
    } else if (!next.done) this.over.delete(next.value);
    this.disconnect(w);
  }

  private reconnect(w: KymaWatch): void {
    this.disconnect(w);
    delete w.client;
    delete w.mapper;
    w.abort = new AbortController();
    for (const k of w.kinds.values()) k.abort = new AbortController();
    w.state = 'connecting';
    void this.connect(w);
  }

  /** connect resolves the Kyma's access Secret and starts its watches; a failure is retried with a growing back-off. */
  private async connect(w: KymaWatch): Promise<void> {
    const signal = w.abort.signal;
    try {
      // From the KCP's watch cache, no older than the version this replica's watch of access
      // Secrets saw: Kymas moving between replicas are hundreds of these reads at once.
      const seen = this.secrets.get(w.key)?.split('/')[1];
      const secret = await cachedFirst((at) => findAccessSecret(this.kcp, w.namespace, w.kyma, at), seen);
      const creds = validateKubeconfig(secret.kubeconfig, {
        allowInsecure: this.opts.config.allowInsecureKubeconfigs,
      });
      if (signal.aborted) return;
      w.client = KubeClient.create(creds, {
        name: w.kyma,
        http2: true,
        qps: this.opts.qps ?? 5,
        burst: (this.opts.qps ?? 5) * 2,
        keepAliveMs: SKR_KEEPALIVE_MS,
      });
      w.mapper = new RestMapper(w.client);
      w.secretVersion = `${secret.ref.uid}/${secret.ref.resourceVersion}`;
      this.secrets.set(w.key, w.secretVersion);
      w.state = 'connected';
      w.retryMs = 5_000;
      for (const k of w.kinds.values()) void this.watchKind(w, k);
      this.syncKinds(w);
    } catch (err) {
      if (signal.aborted) return;
      w.state = `failed: ${err instanceof ResolutionError ? err.message : 'cannot connect'}`;
      this.opts.log.warn({ cluster: w.kyma, reason: w.state }, 'SKR not watched');
      await new Promise((r) => setTimeout(r, w.retryMs).unref());
      w.retryMs = Math.min(w.retryMs * 2, 300_000);
      if (!signal.aborted) void this.connect(w);
    }
  }

  /**
   * syncKinds starts a watch for each kind the Kyma's inventories hold (one per namespace
   * while they lie in at most NS_WATCHES, else one for the cluster) and stops the rest.
   * It reads the counts index and unhold keep (w.held), not every inventory: a change of
   * one SyncResource costs its kinds and namespaces, not the Kyma's thousand SyncResources.
   */
  private syncKinds(w: KymaWatch): void {
    const byKind = new Map<string, { e: Entry; namespaces: Set<string>; cluster: boolean }>();
    for (const { e } of w.held.values()) {
      let g = byKind.get(e.gk);
      if (!g) byKind.set(e.gk, (g = { e, namespaces: new Set(), cluster: false }));
      if (e.namespace) g.namespaces.add(e.namespace);
      else g.cluster = true;
    }
    const wanted = new Map<string, { e: Entry; namespace?: string }>();
    for (const [gk, g] of byKind) {
      if (g.cluster || g.namespaces.size > NS_WATCHES) wanted.set(kindKey(gk), { e: g.e });
      else for (const namespace of g.namespaces) wanted.set(kindKey(gk, namespace), { e: g.e, namespace });
    }
    for (const [key, k] of w.kinds)
      if (!wanted.has(key)) {
        k.abort.abort();
        w.kinds.delete(key);
      }
    for (const [key, { e, namespace }] of wanted) {
      if (w.kinds.has(key)) continue;
      const k: KindWatch = {
        key,
        gk: e.gk,
        ...(namespace ? { namespace } : {}),
        apiVersion: e.apiVersion,
        kind: e.kind,
        abort: new AbortController(),
        objects: new Map(),
        state: 'listing',
      };
      w.kinds.set(key, k);
      if (w.client) void this.watchKind(w, k);
    }
  }

  /** watchKind lists and watches one kind (in one namespace, or the whole cluster) of a Kyma's SKR, our label selected. */
  private async watchKind(w: KymaWatch, k: KindWatch): Promise<void> {
    const client = w.client!;
    const signal = k.abort.signal;
    const info = await this.served(w, k);
    if (!info || signal.aborted) return;
    await this.listing
      .run(Priority.bulk, () =>
        informer<KubeObject>(
          client,
          resourcePath(info, k.namespace),
          {
            list: (items) => listed(this.ctx, w, k, info, items),
            event: (type, o) => (type === 'DELETED' ? gone(this.ctx, w, k, o) : observed(this.ctx, w, k, o)),
            error: (err) => {
              this.stats.watchErrors++;
              k.state = `failing: ${err instanceof Error ? err.message.slice(0, 200) : 'error'}`;
            },
            watching: () => {
              k.state = 'watching';
            },
          },
          signal,
          {
            retryFirstList: true,
            minBackoffMs: 1_000,
            maxBackoffMs: 30_000,
            watchSeconds: SKR_WATCH_SECONDS,
            bookmarks: false,
            query: { labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}` },
          },
        ),
      )
      .catch(() => {});
  }

  /** served waits (backing off up to five minutes) until the SKR's discovery serves the kind. */
  private async served(w: KymaWatch, k: KindWatch): Promise<ResourceInfo | undefined> {
    for (let delay = 2_000; !k.abort.signal.aborted; delay = Math.min(delay * 2, 300_000)) {
      try {
        const info = await w.mapper!.find(k.apiVersion, k.kind);
        if (info) return info;
        k.state = 'not served';
      } catch {
        k.state = 'discovery failed';
      }
      await new Promise((r) => setTimeout(r, delay).unref());
    }
    return undefined;
  }

  /** stillHolds drops a health finding that the status has caught up with while it waited. */
  private stillHolds(sr: string, f: Finding): boolean {
    if (f.change !== 'health') return true;
    const view = this.cp.srs.get(sr);
    const w = view && this.kymas.get(view.kyma);
    const e = view?.entries.find((x) => x.key === f.key);
    if (!view || !w || !e) return true;
    const seen = watchOf(w, e)?.objects.get(f.key);
    const h = holderOf(view, e);
    return !seen || !h || h.rules !== undefined || h.health === undefined || seen.health.status !== h.health;
  }
}
