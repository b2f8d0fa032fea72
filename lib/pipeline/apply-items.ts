// apply.ts is the apply-items step: cluster resolved in, the engine run against the
// SKR, the outcome out. The kubeconfig and the source Secrets of dataFrom items are read
// here, used in this process, and never leave it.
import { setTimeout as sleep } from 'node:timers/promises';
import { resourceText, sourceData } from '../cluster/sources.ts';
import { reconcileRun } from '../engine/reconcile.ts';
import {
  EventTypes,
  MAX_AHEAD,
  type ClusterResolved,
  type ItemsApplied,
  type Seen,
} from '../events/contract.ts';
import type { ApplyResult } from '../engine/result.ts';
import { summarize } from '../changeset.ts';
import type { Answer } from './answer.ts';
import {
  KYMA_NAME_LABEL,
  objectKey,
  RECONCILE_ANNOTATION,
  type ObjectId,
  type SyncResource,
} from '../model.ts';
import { isResolutionFailure, lostRace, TransientError } from '../kube/errors.ts';
import {
  confirmingWrites,
  readAhead,
  usingReadsAhead,
  type Cluster,
  type ReadsAhead,
} from '../kube/objects.ts';
import { computeStatus } from '../status.ts';
import { Metrics } from '../telemetry.ts';
import { KeyedQueue, Priority } from '../concurrency.ts';
import { runPriority } from './requests.ts';
import type { Deps, Logger } from './deps.ts';
import { unresolved } from './resolve-cluster.ts';
import { bounded, claimRefusal, heldBy, mayUseResolvedSecret } from '../policy/rules.ts';
import { admit, getIfBound, holderNamespaces, policiesOnce } from '../cluster/policies.ts';
import { kymaHome, type SyncPolicy } from '../policy/tenancy.ts';

/**
 * ApplyOutcome is what the step replies with; retry asks the broker to redeliver; gone: the
 * SyncResource went with its finalizer, and no status is left to write.
 */
export type ApplyOutcome =
  { kind: 'applied'; data: ItemsApplied; retry: boolean; gone?: boolean } | { kind: 'none'; why: string };

/**
 * RunRequest is a run's request in this process: a cluster.resolved event's data, and
 * for a run of a Kyma's batch the SyncResource as the batch listed it (no read of its own).
 */
export type RunRequest = ClusterResolved & { listed?: SyncResource };

/** mergeRequests combines requests for one SyncResource into one run: the newest identity, a reconcile request's trigger over a watch event's, the higher priority, the latest since. */
export function mergeRequests(queued: ClusterResolved, incoming: ClusterResolved): ClusterResolved {
  const newer = incoming.uid !== queued.uid || incoming.generation >= queued.generation ? incoming : queued;
  const triggers = [queued.trigger ?? 'resync', incoming.trigger ?? 'resync'];
  const trigger = triggers.includes('secret') ? 'secret' : (triggers.find((t) => t !== 'watch') ?? 'watch');
  const priority = Math.max(
    runPriority(queued.urgent, queued.deleting),
    runPriority(incoming.urgent, incoming.deleting),
  );
  const since = [queued.since, incoming.since]
    .filter((s) => s !== undefined)
    .sort()
    .pop();
  const held = mergeHeld(queued.held, incoming.held);
  const ahead = unique([...(incoming.ahead ?? []), ...(queued.ahead ?? [])]).slice(0, MAX_AHEAD);
  // A merged run starts later than either request: it reads the SyncResource itself, from etcd.
  const {
    listed: _listed,
    held: _held,
    ahead: _ahead,
    resourceVersion: _version,
    urgent: _urgent,
    deleting: _deleting,
    ...identity
  } = newer as RunRequest;
  return {
    ...identity,
    trigger,
    ...(priority > Priority.bulk ? { urgent: true } : {}),
    ...(priority === Priority.deletion ? { deleting: true } : {}),
    ...(since ? { since } : {}),
    ...(held ? { held } : {}),
    ...(ahead.length > 0 ? { ahead } : {}),
  };
}

/** unique is each object once, in order. */
const unique = (ids: ObjectId[]): ObjectId[] => [...new Map(ids.map((o) => [objectKey(o), o])).values()];

/** MAX_HELD bounds the objects a merged SKR change names; beyond it the run is not conditional on them. */
const MAX_HELD = 64;

/**
 * mergeHeld: an SKR change runs only for objects its inventory holds, so merged changes
 * name each object once; merged with any other request (undefined), or naming more than
 * MAX_HELD objects, the run is not conditional (it reads live state, as every run does).
 */
function mergeHeld(a: ObjectId[] | undefined, b: ObjectId[] | undefined): ObjectId[] | undefined {
  if (!a || !b) return undefined;
  const merged = unique([...a, ...b]);
  return merged.length <= MAX_HELD ? merged : undefined;
}

/**
 * applyStep reconciles the SyncResource named in data. Runs for one SyncResource are
 * serialized in this process, and requests arriving during a run share the next one.
 */
export async function applyStep(deps: Deps, data: ClusterResolved, log: Logger): Promise<Answer> {
  const out = await queueFor(deps).run(`${data.namespace}/${data.name}`, { deps, request: data });
  if (out.kind === 'none') {
    const fields = {
      step: 'apply-items',
      syncResource: `${data.namespace}/${data.name}`,
      cluster: data.kyma,
    };
    log.info({ ...fields, why: out.why }, 'nothing to apply');
    return {};
  }
  logApplied(log, out.data);
  // Gone with the finalizer: no status to write (the status step would read, find nothing, stop).
  if (out.gone) return {};
  const applied = { type: EventTypes.itemsApplied, data: out.data };
  // Unreachable: the outcome is still sent on (so status shows it) and the answer is 503.
  return out.retry
    ? { send: [applied], retry: `${out.data.result.clusterError!.reason}: retry later` }
    : { reply: applied };
}

/** logApplied logs a run's outcome and each drift it corrected (fields and managers, never values). */
export function logApplied(log: Logger, data: ItemsApplied): void {
  const fields = { step: 'apply-items', syncResource: `${data.namespace}/${data.name}`, cluster: data.kyma };
  log.info(
    {
      ...fields,
      generation: data.result.generation,
      ...summarize(data.result.changes),
      clusterError: data.result.clusterError?.reason,
    },
    'items applied',
  );
  for (const c of data.result.changes) {
    if (c.drift)
      log.info(
        { ...fields, object: c.subject, paths: c.cause?.paths ?? [], managers: c.cause?.managers ?? [] },
        'drift corrected',
      );
  }
}

// Per process (process.ts): one queue of runs per SyncResource, and the gate that bounds
// the runs in progress and starts edits first, then deletions. A queued run carries the
// Deps it was asked with.
type Queued = { deps: Deps; request: RunRequest };
export function queueFor(deps: Deps): KeyedQueue<Queued, ApplyOutcome> {
  return deps.process.queue(
    () =>
      new KeyedQueue<Queued, ApplyOutcome>(
        ({ deps: d, request }) =>
          isEcho(d, request)
            ? Promise.resolve(echo)
            : d.process.runs.run(runPriority(request.urgent, request.deleting), () => applyRaced(d, request)),
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

/** RACES bounds the runs of one request that lose their guarded KCP write to another run. */
const RACES = 5;

/**
 * applyRaced runs again, from the SyncResource as it is now, a run whose guarded KCP write
 * another run (another replica's, for the same SyncResource) beat: what that run wrote is
 * the new starting point, not a failure to redeliver. The other run may still be writing,
 * so each attempt waits longer (100 ms doubling, 1.5 s in all); only the fifth loss is a
 * failure (503, redelivered).
 */
async function applyRaced(deps: Deps, data: RunRequest): Promise<ApplyOutcome> {
  // A run again after a lost race reads the SyncResource from etcd: the watch cache may not have the winner's write yet.
  const { listed: _listed, resourceVersion: _version, ...live } = data;
  for (let attempt = 0; ; attempt++) {
    try {
      return await applyOnce(deps, attempt === 0 ? data : live);
    } catch (err) {
      if (!(err instanceof TransientError) || !lostRace(err) || attempt >= RACES - 1) throw err;
      await sleep(100 * 2 ** attempt);
    }
  }
}

async function applyOnce(deps: Deps, data: RunRequest): Promise<ApplyOutcome> {
  // The objects the event names are read while the SyncResource is (readsAheadOf).
  const early = readsAheadOf(deps, data);
  // Events are not trusted: only a live SyncResource of the uid and no newer generation than
  // the event names is reconciled; one of a team namespace only as its policy allows now.
  const sr = data.listed ?? (await getIfBound(deps.store, deps.config, data, data.resourceVersion));
  const refused = claimRefusal(sr, data);
  if (refused || !sr) return { kind: 'none', why: refused ?? 'gone or replaced' };
  if (data.held && !heldBy(sr, data.held)) return { kind: 'none', why: 'not in its inventory' };
  const target = await targetOf(deps, data, sr);
  if ('unresolved' in target) return { kind: 'applied', data: target.unresolved, retry: false };
  const { policy, policies, secretRef } = target;
  // A listed SyncResource may have changed since its batch listed it: it is read once before
  // the run's first write to the SKR (a no-op run writes nothing and reads nothing). Its
  // writes to the KCP test the listed resourceVersion anyway.
  let skr = data.listed ? confirmingWrites(target.skr, () => confirmCurrent(deps, data.listed!)) : target.skr;
  const ahead = await early;
  if (ahead?.cluster === target.skr) skr = usingReadsAhead(skr, ahead);
  const { sources, resourceSources } = readersOf(deps, data, sr);
  // A preview writes its status and nothing else: no claim, no inventory, nothing in the SKR.
  // Its code (the diff and its library) is loaded by the first preview, not at start-up.
  if (sr.spec.preview && !sr.metadata.deletionTimestamp) {
    const { previewRun } = await import('./preview.ts');
    const preview = await previewRun(deps, sr, skr, policy, resourceSources);
    return { kind: 'none', why: `preview of ${preview.items.length} items written` };
  }
  const {
    result,
    sr: last,
    gone,
  } = await reconcileRun(sr, {
    skr,
    kcp: deps.store,
    config: deps.config,
    ...(policy ? { policy } : {}),
    holderNamespaces: () => holderNamespaces(policies, deps.config),
    holdersReads: deps.process.holders,
    sources,
    resourceSources,
    // Runs for a change seen in the KCP or the SKR read live state, never a snapshot.
    snapshots: data.trigger !== 'watch' && data.trigger !== 'skr',
    ...(data.since ? { snapshotsSince: Date.parse(data.since) } : {}),
  });
  const requested = sr.metadata.annotations?.[RECONCILE_ANNOTATION];
  if (requested !== undefined) result.requested = bounded(requested, 256);
  // The credential or the trust may have been rotated: connect afresh next time.
  if (result.clusterError) deps.cache.evict(secretRef);
  return outcomeOf(deps, data, sr, result, last, gone);
}

/**
 * readsAheadOf starts reading the objects an event names (ahead: the SyncResource's
 * inventory as the SKR source saw it) on the client already connected for the Secret
 * version and Kyma the event names, if there is one; no Secret is read for it. The run
 * takes an answer only if it runs on that very client, for its own read of the same object
 * before its first write (usingReadsAhead): a false or stale list costs at most MAX_AHEAD
 * reads and changes nothing.
 */
async function readsAheadOf(deps: Deps, data: RunRequest): Promise<ReadsAhead | undefined> {
  if (!data.ahead?.length || data.listed || data.secret?.namespace !== kymaHome(data.namespace, deps.config))
    return undefined;
  try {
    const cluster = deps.cache.peek(data.secret, data.kyma, false);
    return cluster && readAhead(await cluster, data.ahead);
  } catch {
    return undefined; // The run connects (and fails) on its own.
  }
}

/** Target is the SKR a run writes to, the policy it runs under, and the access Secret version it used. */
type Target = {
  skr: Cluster;
  policy: SyncPolicy | undefined;
  policies: ReturnType<typeof policiesOnce>;
  secretRef: ClusterResolved['secret'];
};

/**
 * targetOf admits the run under its namespace's policy and connects to its SKR. The client
 * for the Secret version resolve-cluster saw needs no Secret read, if that version was
 * resolved for this Kyma where its SyncResource's Kymas are; any other case reads the
 * Secret (shared for a moment, afresh after it changed). A resolution failure is the run's
 * outcome (unresolved).
 */
async function targetOf(
  deps: Deps,
  data: RunRequest,
  sr: SyncResource,
): Promise<Target | { unresolved: ItemsApplied }> {
  const home = kymaHome(data.namespace, deps.config);
  // The SyncPolicies, read at most once in this run (its admission and who else names its objects).
  const policies = policiesOnce(deps.kcp);
  try {
    // What a policy allows is read afresh for every run; a deletion removes what it created whatever it says now.
    const policy = sr.metadata.deletionTimestamp
      ? undefined
      : await admit(policies, deps.lookups, deps.config, data.namespace, sr.spec.kyma, true);
    const cached =
      mayUseResolvedSecret(sr, data, home) && data.secret
        ? deps.cache.peek(data.secret, sr.spec.kyma)
        : undefined;
    if (cached) return { skr: await cached, policy, policies, secretRef: data.secret };
    const secret = await deps.lookups.accessSecret(home, sr.spec.kyma, data.trigger === 'secret');
    return { skr: await deps.cache.get(secret, sr.spec.kyma), policy, policies, secretRef: secret.ref };
  } catch (err) {
    if (!isResolutionFailure(err)) throw err;
    return { unresolved: unresolved(sr, err) };
  }
}

/**
 * readersOf reads what items take by reference, for this run only: the source Secrets of
 * dataFrom items (checked for this Kyma) and the texts of resourceFrom items (ConfigMaps of
 * the SyncResource's own namespace).
 */
function readersOf(deps: Deps, data: RunRequest, sr: SyncResource) {
  const sources = (name: string) =>
    deps.lookups.source(data.namespace, name).then((s) => ({
      data: sourceData(s, data.namespace, name, sr.spec.kyma),
      version: s!.metadata.resourceVersion!,
    }));
  const resourceSources = (name: string, key: string) =>
    deps.lookups
      .configMap(data.namespace, name)
      .then((c) =>
        resourceText(c, data.namespace, name, key, sr.spec.kyma, deps.config.maxReferencedManifestBytes),
      );
  return { sources, resourceSources };
}

/**
 * outcomeOf counts a run and makes its outcome for the status step, with what the status
 * step may write on without reading: the SyncResource as the run last wrote it (not once
 * the finalizer is gone: the object may be too; gone, when the SyncResource went with
 * it). The broker redelivers only a first finding of an unreachable SKR: once the status
 * says so, the resync tick tries again (the circuit is open; knownUnreachable).
 */
function outcomeOf(
  deps: Deps,
  data: RunRequest,
  sr: SyncResource,
  result: ApplyResult,
  last: SyncResource,
  gone: boolean,
): ApplyOutcome {
  const allReady =
    !result.clusterError &&
    !result.deleting &&
    result.pending.length === 0 &&
    (result.failed?.length ?? 0) === 0 &&
    result.items.every((i) => i.state === 'Ready');
  deps.process.echoes.leftReady(
    `${data.namespace}/${data.name}`,
    sr.metadata.uid!,
    result.generation,
    allReady,
  );
  countRun(sr, result);
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
    ...(seen ? { seen, status: computeStatus(result, seen.status, new Date()) } : {}),
  };
  return {
    kind: 'applied',
    data: out,
    retry: result.clusterError?.transient === true && !knownUnreachable(sr),
    ...(gone ? { gone } : {}),
  };
}

/** countRun adds a run to the metrics: its items by strategy and reason, its drift corrections by manager. */
function countRun(sr: SyncResource, result: ApplyResult): void {
  const strategies = new Map(sr.spec.items.map((i) => [i.name, i.strategy]));
  for (const i of result.items)
    Metrics.items.add(1, { strategy: strategies.get(i.name) ?? '', reason: i.reason, state: i.state });
  for (const c of result.changes) {
    if (!c.drift) continue;
    const managers = c.cause?.managers.join(',') || 'unknown';
    Metrics.driftCorrections.add(1, { cluster: sr.spec.kyma, manager: managers });
  }
  Metrics.runs.add(1, { outcome: result.clusterError ? 'unreachable' : 'done' });
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
