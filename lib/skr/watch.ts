// watch.ts is what the SKR source keeps per watched Kyma and kind, and how it judges what a
// watch sees: an object observed, gone, or found (or not) by a relist; a SyncResource's new
// status checked against what its objects look like now. Which SyncResource holds an object
// comes from the views (the KCP's inventories) only; what to post is findings.ts's.
import type { KubeClient } from '../kube/client.ts';
import type { ResourceInfo, RestMapper } from '../kube/discovery.ts';
import type { KubeObject } from '../kube/objects.ts';
import type { Health } from '../model.ts';
import type { Findings } from './findings.ts';
import { healthSeen, ourStamp, ownWrite, type Holder } from './judge.ts';
import { keyOf, sameMap, type Entry, type SrView } from './view.ts';

/** Seen is what is kept of a watched object: our field managers' stamp and its health (kstatus's rules; shared, judge.ts healthSeen). */
export interface Seen {
  stamp: string;
  health: Health;
}

/** KindWatch is the watch of one kind, in one namespace or the whole cluster. */
export interface KindWatch {
  /** key is the group-kind and the namespace watched ("" for the whole cluster), e.g. "ConfigMap.|kyma-system". */
  key: string;
  gk: string;
  namespace?: string;
  apiVersion: string;
  kind: string;
  abort: AbortController;
  objects: Map<string, Seen>;
  state: string;
}

/** KymaWatch is one Kyma's SKR: its client, the SyncResources that hold objects there, and its kinds' watches. */
export interface KymaWatch {
  key: string;
  namespace: string;
  kyma: string;
  srs: Set<string>;
  holders: Map<string, Set<string>>;
  /** held counts the (SyncResource, object) pairs per kind and namespace (kindKey): what the watches must cover. */
  held: Map<string, { e: Entry; n: number }>;
  kinds: Map<string, KindWatch>;
  client?: KubeClient;
  mapper?: RestMapper;
  secretVersion?: string;
  abort: AbortController;
  state: string;
  retryMs: number;
}

/** WatchContext is what judging a watch event needs. */
export interface WatchContext {
  views: ReadonlyMap<string, SrView>;
  kymas: ReadonlyMap<string, KymaWatch>;
  findings: Findings;
  stats: { events: number; ignored: number };
  fieldManager: string;
}

/** kindKey keys a kind's watch in one namespace, or (none) in the whole cluster: KymaWatch.kinds and .held. */
export const kindKey = (gk: string, namespace?: string): string => `${gk}|${namespace ?? ''}`;

/** watchOf is the watch that sees entry e's object: its namespace's, else the cluster-wide one. */
export const watchOf = (w: KymaWatch, e: Entry): KindWatch | undefined =>
  (e.namespace ? w.kinds.get(kindKey(e.gk, e.namespace)) : undefined) ?? w.kinds.get(kindKey(e.gk));

/**
 * recheck compares a SyncResource's new status with what its objects look like now: a
 * status written from a read older than the last watch event would otherwise stay wrong
 * until the next resync.
 */
export function recheck(ctx: WatchContext, old: SrView, view: SrView): void {
  if (old.state === view.state && sameMap(old.health, view.health) && old.deleting === view.deleting) return;
  const w = ctx.kymas.get(view.kyma);
  if (!w) return;
  for (const e of view.entries) {
    const watch = watchOf(w, e);
    if (!watch || watch.state === 'listing') continue;
    // Not seen (yet): an object just created whose watch event is still on its way. Gone
    // is decided from the watch alone (a deletion, a relist), never from the KCP's news.
    const seen = watch.objects.get(e.key);
    const h = holderOf(view, e);
    if (!seen || !h || h.health === undefined || h.rules || seen.health.status === h.health) continue;
    ctx.findings.found(h.sr, e, {
      change: 'health',
      mark: `health:${seen.health.status}`,
      health: seen.health,
    });
  }
}

/**
 * listed judges a (re)list: what it finds, and what a SyncResource holds that it no longer
 * finds (gone while nobody watched; for a SyncResource not in sync, once it has not
 * appeared for ABSENT_GRACE_MS: the first list of a new Kyma's SKR races its first run).
 */
export function listed(
  ctx: WatchContext,
  w: KymaWatch,
  k: KindWatch,
  info: ResourceInfo,
  items: KubeObject[],
): void {
  const listed = new Set<string>();
  for (const o of items) {
    // List items of built-in kinds come without apiVersion and kind.
    o.apiVersion ??= info.apiVersion;
    o.kind ??= info.kind;
    listed.add(keyOf(o));
    observed(ctx, w, k, o);
  }
  for (const [key, holders] of w.holders) {
    if (listed.has(key) || holders.size === 0) continue;
    const e = entryOf(ctx, w, key, k.gk);
    if (!e || watchOf(w, e) !== k) continue;
    k.objects.delete(key);
    // A SyncResource not in sync may have a run in flight that recorded the object
    // (write-ahead) and has not created it yet: its absence counts once it stays absent.
    const settled = [...holders].filter((sr) => ctx.views.get(sr)?.inSync !== false);
    const running = [...holders].filter((sr) => ctx.views.get(sr)?.inSync === false);
    goneFor(ctx, e, settled);
    if (running.length === 0) continue;
    setTimeout(() => {
      if (!k.abort.signal.aborted && !k.objects.has(key)) goneFor(ctx, e, running);
    }, ABSENT_GRACE_MS).unref();
  }
  k.state = 'watching';
}

/** ABSENT_GRACE_MS is how long an object a list did not find may take to appear, for a SyncResource not in sync. */
export const ABSENT_GRACE_MS = 2_000;

/** goneFor judges entry e's object gone for each of srs that holds it. */
function goneFor(ctx: WatchContext, e: Entry, srs: string[]): void {
  for (const sr of srs) {
    const h = holderOf(ctx.views.get(sr), e);
    if (h) ctx.findings.consider(h, e, undefined, false);
  }
}

export function entryOf(ctx: WatchContext, w: KymaWatch, key: string, gk?: string): Entry | undefined {
  for (const sr of w.holders.get(key) ?? []) {
    const e = ctx.views.get(sr)?.entries.find((x) => x.key === key && (gk === undefined || x.gk === gk));
    if (e) return e;
  }
  return undefined;
}

export function holderOf(view: SrView | undefined, e: Entry): Holder | undefined {
  if (!view) return undefined;
  const own = view.entries.find((x) => x.key === e.key) ?? e;
  const item = view.items.get(own.item);
  const health = view.health.get(own.item);
  const itemReason = view.reasons.get(own.item);
  return {
    sr: view.key,
    manager: view.manager,
    deleting: view.deleting,
    ...(item ? { strategy: item.strategy } : {}),
    ...(item?.rules ? { rules: item.rules } : {}),
    ...(own.digest ? { digest: own.digest } : {}),
    ...(health ? { health } : {}),
    ...(itemReason ? { itemReason } : {}),
    ...(view.state ? { state: view.state } : {}),
  };
}

export function observed(ctx: WatchContext, w: KymaWatch, k: KindWatch, o: KubeObject): void {
  ctx.stats.events++;
  const key = keyOf(o);
  const holders = w.holders.get(key);
  const stamp = ourStamp(o, ctx.fieldManager);
  const prev = k.objects.get(key);
  const health = healthSeen(o);
  // Kept even when no inventory names it yet: an object just created may come before the
  // inventory that records it (the KCP's watch event is later than the SKR's), and its
  // next event may never come (a Deployment Available at once). The status that follows
  // is then compared with what was seen (recheck).
  k.objects.set(key, { stamp, health });
  if (!holders || holders.size === 0) {
    // Our label on an object no inventory names (a customer's, or one being pruned): not ours to judge.
    ctx.stats.ignored++;
    return;
  }
  const e = entryOf(ctx, w, key, k.gk);
  if (!e) return;
  for (const sr of holders) {
    const h = holderOf(ctx.views.get(sr), e);
    if (h) ctx.findings.consider(h, e, o, ownWrite(prev?.stamp, stamp, h.manager));
  }
  // A CRD established may let the Kyma's waiting SyncResources go on.
  if (
    k.kind === 'CustomResourceDefinition' &&
    health.status === 'Current' &&
    prev?.health.status !== 'Current'
  )
    for (const sr of w.srs) {
      const v = ctx.views.get(sr);
      if (v && v.state === 'Processing' && !holders.has(sr))
        ctx.findings.found(sr, e, { change: 'health', mark: `crd:${o.metadata.resourceVersion}` });
    }
}

export function gone(ctx: WatchContext, w: KymaWatch, k: KindWatch, o: KubeObject): void {
  ctx.stats.events++;
  const key = keyOf(o);
  k.objects.delete(key);
  const e = entryOf(ctx, w, key, k.gk);
  if (e) goneFor(ctx, e, [...(w.holders.get(key) ?? [])]);
}
