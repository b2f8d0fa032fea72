// apply.ts is the apply-items step: cluster resolved in, the engine run against the
// SKR, the outcome out. The kubeconfig and the source Secrets of dataFrom items are read
// here, used in this process, and never leave it.
import { sourceData } from '../cluster/sources.ts';
import { reconcileRun } from '../engine/reconcile.ts';
import type { ClusterResolved, ItemsApplied, Seen } from '../events.ts';
import { KYMA_NAME_LABEL } from '../model.ts';
import { TerminalError } from '../kube/errors.ts';
import { Metrics } from '../telemetry.ts';
import { KeyedQueue } from '../util.ts';
import { gateFor, type Deps } from './deps.ts';
import { failure } from './resolve.ts';

/** ApplyOutcome is what the step replies with; retry asks the broker to redeliver. */
export type ApplyOutcome = { kind: 'applied'; data: ItemsApplied; retry: boolean } | { kind: 'none'; why: string };

// Runs that left a SyncResource fully Ready, by key: a watch event that follows such a
// run for the same generation (as resolve-cluster read it) is the echo of our own
// writes (finalizer, inventory) and needs no second run, not even a read. Reconcile
// requests (resync, Kyma or Secret change) always run; so does a new generation
// (deletion bumps it too).
const ECHO_WINDOW_MS = 2_000;
const recent = new Map<string, { uid: string; generation: number; at: number }>();

/** mergeRequests combines requests for one SyncResource into one run: the newest identity, a reconcile request's trigger over a watch event's, the latest since. */
export function mergeRequests(queued: ClusterResolved, incoming: ClusterResolved): ClusterResolved {
  const newer = incoming.uid !== queued.uid || incoming.generation >= queued.generation ? incoming : queued;
  const triggers = [queued.trigger ?? 'resync', incoming.trigger ?? 'resync'];
  const trigger = triggers.includes('secret') ? 'secret' : triggers.find((t) => t !== 'watch') ?? 'watch';
  const urgent = queued.urgent === true || incoming.urgent === true;
  const since = [queued.since, incoming.since].filter((s) => s !== undefined).sort().pop();
  return { ...newer, trigger, ...(urgent ? { urgent } : {}), ...(since ? { since } : {}) };
}

/**
 * applyStep reconciles the SyncResource named in data. Runs for one SyncResource are
 * serialized in this process, and requests arriving during a run share the next one.
 */
export function applyStep(deps: Deps, data: ClusterResolved): Promise<ApplyOutcome> {
  return queueFor(deps).run(`${data.namespace}/${data.name}`, data);
}

// Per process: one queue of runs per SyncResource, and one gate that bounds the runs
// in progress and starts urgent ones (edits) first.
const queues = new WeakMap<Deps, KeyedQueue<ClusterResolved, ApplyOutcome>>();
function queueFor(deps: Deps): KeyedQueue<ClusterResolved, ApplyOutcome> {
  let q = queues.get(deps);
  if (!q) {
    const gate = gateFor(deps);
    const work = (data: ClusterResolved) =>
      isEcho(data) ? Promise.resolve(echo) : gate.run(data.urgent === true, () => applyOnce(deps, data));
    queues.set(deps, q = new KeyedQueue(work, mergeRequests));
  }
  return q;
}

const echo: ApplyOutcome = { kind: 'none', why: 'echo of our own writes' };
function isEcho(data: ClusterResolved): boolean {
  const last = recent.get(`${data.namespace}/${data.name}`);
  return data.trigger === 'watch' && last !== undefined && last.uid === data.uid && last.generation === data.generation && Date.now() - last.at < ECHO_WINDOW_MS;
}

async function applyOnce(deps: Deps, data: ClusterResolved): Promise<ApplyOutcome> {
  const key = `${data.namespace}/${data.name}`;
  // Events are not trusted: only a live SyncResource in a control-plane namespace, of the
  // uid and no newer generation than the event names, is reconciled.
  if (!deps.config.controlPlaneNamespaces.includes(data.namespace)) return { kind: 'none', why: 'namespace not allowed' };
  const sr = await deps.store.get(data.namespace, data.name);
  if (!sr || sr.metadata.uid !== data.uid) return { kind: 'none', why: 'gone or replaced' };
  if (!(data.generation <= (sr.metadata.generation ?? 0))) return { kind: 'none', why: 'generation from the future' };
  // The client for the Secret version resolve-cluster saw needs no Secret read, if that
  // version was resolved for this Kyma in this namespace; any other case reads the Secret
  // (shared for a moment, afresh after it changed).
  let secretRef = data.secret;
  let skr;
  try {
    const cached = sr.spec.kyma === data.kyma && data.secret?.namespace === data.namespace ? deps.cache.peek(data.secret, sr.spec.kyma) : undefined;
    if (cached) {
      skr = await cached;
    } else {
      const secret = await deps.lookups.accessSecret(data.namespace, sr.spec.kyma, data.trigger === 'secret');
      secretRef = secret.ref;
      skr = await deps.cache.get(secret, sr.spec.kyma);
    }
  } catch (err) {
    if (!(err instanceof TerminalError)) throw err;
    return { kind: 'applied', data: failure(sr, err), retry: false };
  }
  // Source Secrets of dataFrom items: read by this run, checked for this Kyma.
  const sources = (name: string) => deps.lookups.source(data.namespace, name)
    .then((s) => ({ data: sourceData(s, data.namespace, name, sr.spec.kyma), version: s!.metadata.resourceVersion! }));
  const { result, sr: last } = await reconcileRun(sr, { skr, kcp: deps.store, config: deps.config, sources, snapshots: data.trigger !== 'watch', ...(data.since ? { snapshotsSince: Date.parse(data.since) } : {}) });
  if (result.clusterError) {
    // The credential or the trust may have been rotated: connect afresh next time.
    deps.cache.evict(secretRef);
  }
  const allReady = !result.clusterError && !result.deleting && result.pending.length === 0 && result.items.every((i) => i.state === 'Ready');
  if (allReady) recent.set(key, { uid: sr.metadata.uid!, generation: result.generation, at: Date.now() });
  else recent.delete(key);
  if (recent.size > 50_000) recent.clear();
  const strategies = new Map(sr.spec.items.map((i) => [i.name, i.strategy]));
  for (const i of result.items) Metrics.items.add(1, { strategy: strategies.get(i.name) ?? '', reason: i.reason, state: i.state });
  for (const c of result.changes) {
    if (!c.drift) continue;
    const managers = c.cause?.managers.join(',') || 'unknown';
    Metrics.driftCorrections.add(1, { cluster: sr.spec.kyma, manager: managers });
  }
  // What the status step may write on without reading (not once the finalizer is gone: the object may be too).
  const { synced: _inventory, ...status } = last.status ?? {};
  const seen: Seen | undefined = result.deleting?.finalizerRemoved ? undefined : {
    resourceVersion: last.metadata.resourceVersion!, generation: last.metadata.generation ?? 0,
    labelled: last.metadata.labels?.[KYMA_NAME_LABEL] === last.spec.kyma, ...(last.status ? { status } : {}),
  };
  const out: ItemsApplied = {
    namespace: data.namespace, name: data.name, uid: data.uid, kyma: sr.spec.kyma, result,
    ...(data.urgent ? { urgent: true } : {}), ...(seen ? { seen } : {}),
  };
  return { kind: 'applied', data: out, retry: result.clusterError?.transient === true };
}

