// apply.ts is the apply-items step: cluster resolved in, the engine run against the
// SKR, the outcome out. The kubeconfig and the source Secrets of dataFrom items are read
// here, used in this process, and never leave it.
import { resourceText, sourceData } from '../cluster/sources.ts';
import { reconcileRun } from '../engine/reconcile.ts';
import type { ClusterResolved, ItemsApplied, KymaResolved, Seen, SyncRef } from '../events.ts';
import { KYMA_NAME_LABEL, RECONCILE_ANNOTATION, type SyncResource } from '../model.ts';
import { isResolutionFailure, lostRace, TransientError } from '../kube/errors.ts';
import type { Cluster } from '../kube/objects.ts';
import { computeStatus, sameStatus } from '../status.ts';
import { Metrics } from '../telemetry.ts';
import { KeyedQueue, mapLimit } from '../concurrency.ts';
import type { Deps } from './deps.ts';
import { unresolved } from './resolve.ts';
import { previewRun } from './preview.ts';
import { forEachPage } from './resync.ts';
import { bounded, claimRefusal, mayUseResolvedSecret } from '../policy/rules.ts';
import { admit, getIfBound, holderNamespaces, policiesOnce, unbound } from '../cluster/policies.ts';
import { kymaHome, type SyncPolicy } from '../policy/tenancy.ts';

/** ApplyOutcome is what the step replies with; retry asks the broker to redeliver. */
export type ApplyOutcome =
  { kind: 'applied'; data: ItemsApplied; retry: boolean } | { kind: 'none'; why: string };

/**
 * RunRequest is a run's request in this process: a cluster.resolved event's data, and
 * for a run of a Kyma's batch the SyncResource as the batch listed it (no read of its own).
 */
type RunRequest = ClusterResolved & { listed?: SyncResource };

/** mergeRequests combines requests for one SyncResource into one run: the newest identity, a reconcile request's trigger over a watch event's, the latest since. */
export function mergeRequests(queued: ClusterResolved, incoming: ClusterResolved): ClusterResolved {
  const newer = incoming.uid !== queued.uid || incoming.generation >= queued.generation ? incoming : queued;
  const triggers = [queued.trigger ?? 'resync', incoming.trigger ?? 'resync'];
  const trigger = triggers.includes('secret') ? 'secret' : (triggers.find((t) => t !== 'watch') ?? 'watch');
  const urgent = queued.urgent === true || incoming.urgent === true;
  const since = [queued.since, incoming.since]
    .filter((s) => s !== undefined)
    .sort()
    .pop();
  // A merged run starts later than either request: it reads the SyncResource itself.
  const { listed: _listed, ...identity } = newer as RunRequest;
  return { ...identity, trigger, ...(urgent ? { urgent } : {}), ...(since ? { since } : {}) };
}

/**
 * applyStep reconciles the SyncResource named in data. Runs for one SyncResource are
 * serialized in this process, and requests arriving during a run share the next one.
 */
export function applyStep(deps: Deps, data: RunRequest): Promise<ApplyOutcome> {
  return queueFor(deps).run(`${data.namespace}/${data.name}`, { deps, request: data });
}

// Per process (process.ts): one queue of runs per SyncResource, and the gate that bounds
// the runs in progress and starts urgent ones (edits) first. A queued run carries the
// Deps it was asked with.
type Queued = { deps: Deps; request: RunRequest };
function queueFor(deps: Deps): KeyedQueue<Queued, ApplyOutcome> {
  return deps.process.queue(
    () =>
      new KeyedQueue<Queued, ApplyOutcome>(
        ({ deps: d, request }) =>
          isEcho(d, request)
            ? Promise.resolve(echo)
            : d.process.runs.run(request.urgent === true, () => applyRaced(d, request)),
        (queued, incoming) => ({
          deps: incoming.deps,
          request: mergeRequests(queued.request, incoming.request),
        }),
      ),
  );
}

const echo: ApplyOutcome = { kind: 'none', why: 'echo of our own writes' };
/**
 * isEcho tells whether a watch event follows a run that left its SyncResource fully Ready
 * for the same generation (as resolve-cluster read it): the echo of our own writes, which
 * needs no second run, not even a read. Reconcile requests (resync, Kyma or Secret change)
 * always run; so does a new generation (deletion bumps it too).
 */
function isEcho(deps: Deps, data: ClusterResolved): boolean {
  return (
    data.trigger === 'watch' &&
    deps.process.echoes.isReadyEcho(`${data.namespace}/${data.name}`, data.uid, data.generation)
  );
}

/**
 * applyRaced runs once more, from the SyncResource as it is now, a run whose guarded KCP
 * write another run (another replica's, for the same SyncResource) beat: what that run
 * wrote is the new starting point, not a failure to redeliver. A second loss is.
 */
async function applyRaced(deps: Deps, data: RunRequest): Promise<ApplyOutcome> {
  try {
    return await applyOnce(deps, data);
  } catch (err) {
    if (!(err instanceof TransientError) || !lostRace(err)) throw err;
    const { listed: _listed, ...live } = data;
    return applyOnce(deps, live);
  }
}

async function applyOnce(deps: Deps, data: RunRequest): Promise<ApplyOutcome> {
  const key = `${data.namespace}/${data.name}`;
  // Events are not trusted: only a live SyncResource of the uid and no newer generation than
  // the event names is reconciled; one of a team namespace only as its policy allows now.
  const sr = data.listed ?? (await getIfBound(deps.store, deps.config, data));
  const refused = claimRefusal(sr, data);
  if (refused || !sr) return { kind: 'none', why: refused ?? 'gone or replaced' };
  const home = kymaHome(data.namespace, deps.config);
  // The client for the Secret version resolve-cluster saw needs no Secret read, if that
  // version was resolved for this Kyma where its SyncResource's Kymas are; any other case
  // reads the Secret (shared for a moment, afresh after it changed).
  let secretRef = data.secret;
  let skr;
  let policy: SyncPolicy | undefined;
  // The SyncPolicies, read at most once in this run (its admission and who else names its objects).
  const policies = policiesOnce(deps.kcp);
  try {
    // What a policy allows is read afresh for every run; a deletion removes what it created whatever it says now.
    if (!sr.metadata.deletionTimestamp)
      policy = await admit(policies, deps.lookups, deps.config, data.namespace, sr.spec.kyma, true);
    const cached =
      mayUseResolvedSecret(sr, data, home) && data.secret
        ? deps.cache.peek(data.secret, sr.spec.kyma)
        : undefined;
    if (cached) {
      skr = await cached;
    } else {
      const secret = await deps.lookups.accessSecret(home, sr.spec.kyma, data.trigger === 'secret');
      secretRef = secret.ref;
      skr = await deps.cache.get(secret, sr.spec.kyma);
    }
  } catch (err) {
    if (!isResolutionFailure(err)) throw err;
    return { kind: 'applied', data: unresolved(sr, err), retry: false };
  }
  // Source Secrets of dataFrom items: read by this run, checked for this Kyma.
  const sources = (name: string) =>
    deps.lookups.source(data.namespace, name).then((s) => ({
      data: sourceData(s, data.namespace, name, sr.spec.kyma),
      version: s!.metadata.resourceVersion!,
    }));
  // A listed SyncResource may have changed since its batch listed it: it is read once before
  // the run's first write to the SKR (a no-op run writes nothing and reads nothing). Its
  // writes to the KCP test the listed resourceVersion anyway.
  if (data.listed) skr = confirmingWrites(skr, () => confirmCurrent(deps, data.listed!));
  // Texts of resourceFrom items: read by this run from ConfigMaps of this namespace.
  const resourceSources = (name: string, key: string) =>
    deps.lookups
      .configMap(data.namespace, name)
      .then((c) =>
        resourceText(c, data.namespace, name, key, sr.spec.kyma, deps.config.maxReferencedManifestBytes),
      );
  // A preview writes its status and nothing else: no claim, no inventory, nothing in the SKR.
  if (sr.spec.preview && !sr.metadata.deletionTimestamp) {
    const preview = await previewRun(deps, sr, skr, policy, resourceSources);
    return { kind: 'none', why: `preview of ${preview.items.length} items written` };
  }
  const { result, sr: last } = await reconcileRun(sr, {
    skr,
    kcp: deps.store,
    config: deps.config,
    ...(policy ? { policy } : {}),
    holderNamespaces: () => holderNamespaces(policies, deps.config),
    sources,
    resourceSources,
    // Runs for a change seen in the KCP or the SKR read live state, never a snapshot.
    snapshots: data.trigger !== 'watch' && data.trigger !== 'skr',
    ...(data.since ? { snapshotsSince: Date.parse(data.since) } : {}),
  });
  const requested = sr.metadata.annotations?.[RECONCILE_ANNOTATION];
  if (requested !== undefined) result.requested = bounded(requested, 256);
  if (result.clusterError) {
    // The credential or the trust may have been rotated: connect afresh next time.
    deps.cache.evict(secretRef);
  }
  const allReady =
    !result.clusterError &&
    !result.deleting &&
    result.pending.length === 0 &&
    (result.failed?.length ?? 0) === 0 &&
    result.items.every((i) => i.state === 'Ready');
  deps.process.echoes.leftReady(key, sr.metadata.uid!, result.generation, allReady);
  const strategies = new Map(sr.spec.items.map((i) => [i.name, i.strategy]));
  for (const i of result.items)
    Metrics.items.add(1, { strategy: strategies.get(i.name) ?? '', reason: i.reason, state: i.state });
  for (const c of result.changes) {
    if (!c.drift) continue;
    const managers = c.cause?.managers.join(',') || 'unknown';
    Metrics.driftCorrections.add(1, { cluster: sr.spec.kyma, manager: managers });
  }
  // What the status step may write on without reading (not once the finalizer is gone: the object may be too).
  const { synced: _inventory, ...status } = last.status ?? {};
  const seen: Seen | undefined = result.deleting?.finalizerRemoved
    ? undefined
    : {
        resourceVersion: last.metadata.resourceVersion!,
        generation: last.metadata.generation ?? 0,
        labelled: last.metadata.labels?.[KYMA_NAME_LABEL] === last.spec.kyma,
        ...(last.status ? { status } : {}),
      };
  const out: ItemsApplied = {
    namespace: data.namespace,
    name: data.name,
    uid: data.uid,
    kyma: sr.spec.kyma,
    result,
    ...(data.urgent ? { urgent: true } : {}),
    ...(seen ? { seen } : {}),
  };
  Metrics.runs.add(1, { outcome: result.clusterError ? 'unreachable' : 'done' });
  // The broker redelivers only a first finding: once the status says so, the resync tick
  // tries again (the circuit is open; knownUnreachable).
  return {
    kind: 'applied',
    data: out,
    retry: result.clusterError?.transient === true && !knownUnreachable(sr),
  };
}

/**
 * knownUnreachable tells whether a SyncResource's status already reports its SKR
 * unreachable: a run before this one found it so, and the status step wrote it. The
 * status is the breaker's state, shared by every replica: a run that finds the SKR still
 * unreachable asks for no redelivery, so an SKR that stays down costs each of its
 * SyncResources one run per resync interval (the tick is the probe), not a run per
 * broker retry; its first finding is redelivered with the broker's back-off, as a blip
 * deserves.
 */
export function knownUnreachable(sr: SyncResource): boolean {
  return (
    sr.status?.conditions?.some((c) => c.type === 'Resources' && c.reason === 'ClusterUnreachable') === true
  );
}

/**
 * confirmingWrites wraps an SKR cluster so that confirm runs (once) before its first
 * request that may write (every method but GET; dry runs change nothing).
 */
function confirmingWrites(skr: Cluster, confirm: () => Promise<void>): Cluster {
  let confirmed: Promise<void> | undefined;
  const target = skr.client;
  const call: typeof target.call = (method, path, opts) =>
    method === 'GET' || opts?.query?.dryRun !== undefined
      ? target.call(method, path, opts)
      : (confirmed ??= confirm()).then(() => target.call(method, path, opts));
  const client = new Proxy(target, {
    get: (t, prop) => {
      if (prop === 'call') return call;
      const v = Reflect.get(t, prop, t) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  return { ...skr, client };
}

/** confirmCurrent fails transiently unless the SyncResource is still the listed one's uid and generation (its spec unchanged). */
async function confirmCurrent(deps: Deps, listed: SyncResource): Promise<void> {
  const live = await deps.store.get(listed.metadata.namespace!, listed.metadata.name);
  if (
    !live ||
    live.metadata.uid !== listed.metadata.uid ||
    live.metadata.generation !== listed.metadata.generation
  ) {
    throw new TransientError(
      `SyncResource ${listed.metadata.namespace}/${listed.metadata.name} changed since its Kyma's batch listed it`,
      'SyncResourceChanged',
    );
  }
}

/** KymaApplied is what a run of a Kyma's batch comes to. */
export interface KymaApplied {
  /** outcomes are the results the status step must see (a status, label or event to write); the rest changed nothing. */
  outcomes: ItemsApplied[];
  /** unchanged counts runs that need nothing written. */
  unchanged: number;
  /** redirect names SyncResources to reconcile on their own: labelled for this Kyma but targeting another, or whose run failed transiently. */
  redirect: SyncRef[];
  /** retry asks the broker to redeliver the batch (the SKR was unreachable). */
  retry: boolean;
}

/** BATCH_RUNS bounds the runs of one Kyma's batch started at a time (the process gate bounds all runs). */
const BATCH_RUNS = 8;

/**
 * applyKymaStep reconciles every SyncResource labelled for the Kyma data names, from one
 * LIST of them: each run goes through the SyncResource's queue (serialized with its other
 * runs in this process) and the process gate, with the SyncResource as listed. A run that
 * changes nothing needs no status step and posts nothing.
 */
export async function applyKymaStep(deps: Deps, data: KymaResolved): Promise<KymaApplied> {
  const out: KymaApplied = { outcomes: [], unchanged: 0, redirect: [], retry: false };
  const kyma = data.name;
  const srs: SyncResource[] = [];
  try {
    await forEachPage<SyncResource>(
      deps,
      data.namespace,
      `${KYMA_NAME_LABEL}=${kyma}`,
      async (page) => {
        srs.push(...page);
      },
      true,
    );
  } catch (err) {
    if (unbound(deps.config, data.namespace, err)) return out;
    throw err;
  }
  const q = queueFor(deps);
  // The batch's breaker: once a run finds the SKR unreachable, the runs not started yet
  // are not started (one SKR, one answer); each gets that finding as its outcome, written
  // only where its status does not say so already.
  let tripped: ItemsApplied['result']['clusterError'];
  await mapLimit(srs, BATCH_RUNS, async (sr) => {
    const ref = { namespace: data.namespace, name: sr.metadata.name };
    if (sr.spec.kyma !== kyma) {
      out.redirect.push(ref);
      return;
    }
    if (tripped) {
      Metrics.runs.add(1, { outcome: 'skipped' });
      if (knownUnreachable(sr)) out.unchanged++;
      else {
        out.outcomes.push(unresolved(sr, tripped));
        out.retry = true;
      }
      return;
    }
    const request: RunRequest = {
      ...ref,
      trigger: data.trigger,
      uid: sr.metadata.uid!,
      generation: sr.metadata.generation ?? 0,
      kyma,
      secret: data.secret,
      ...(data.since ? { since: data.since } : {}),
      listed: sr,
    };
    let run: ApplyOutcome;
    try {
      run = await q.run(`${ref.namespace}/${ref.name}`, { deps, request });
    } catch (err) {
      // KCP trouble or a changed SyncResource: its own request retries it, with the broker's back-off.
      deps.log.warn(
        {
          step: 'apply-items',
          syncResource: `${ref.namespace}/${ref.name}`,
          cluster: kyma,
          error: err instanceof Error ? err.message : String(err),
        },
        'run of a batch failed; reconciling it on its own',
      );
      out.redirect.push(ref);
      return;
    }
    if (run.kind === 'none') return;
    if (run.data.result.clusterError?.transient) tripped ??= run.data.result.clusterError;
    if (run.retry) out.retry = true;
    if (needsStatusStep(run.data)) out.outcomes.push(run.data);
    else out.unchanged++;
  });
  return out;
}

/**
 * needsStatusStep tells whether the status step would write anything for a run's outcome
 * (status, label, Kubernetes Events): not when the run changed nothing, its SyncResource
 * is labelled, and the status it saw is the status the outcome computes to.
 */
export function needsStatusStep(data: ItemsApplied): boolean {
  const r = data.result;
  const seen = data.seen;
  if (!seen?.status || !seen.labelled || r.clusterError || r.deleting || r.generation !== seen.generation)
    return true;
  if (r.changes.some((c) => c.action !== 'unchanged') || (r.recorded?.length ?? 0) > 0) return true;
  const next = computeStatus(r, seen.status, new Date());
  return !sameStatus(seen.status, next);
}
