// resolve.ts is the resolve-cluster step: SyncResource reference in, the identity
// of its target cluster out (Kyma and access Secret version, never the kubeconfig).
// Resolution failures become an items.applied outcome carrying the cluster error, so
// the status step writes them; a SyncResource being deleted whose cluster is gone is
// released (finalizer removed, Warning event) instead of blocking forever.
import { ResolutionError } from '../cluster/resolve.ts';
import { admit, getIfBound, policiesOnce } from '../cluster/policies.ts';
import { kymaHome } from '../policy/tenancy.ts';
import { validateKubeconfig } from '../policy/kubeconfig.ts';
import {
  EventTypes,
  type ClusterResolved,
  type ItemsApplied,
  type KymaRequest,
  type KymaResolved,
  type SyncRef,
  type SyncResourceChanged,
} from '../events/contract.ts';
import type { Answer } from './answer.ts';
import { isUrgent, requestPriority, runPriority, type ResolveRequest } from './requests.ts';
import { Priority } from '../concurrency.ts';
import { isResolutionFailure, TerminalError } from '../kube/errors.ts';
import type { ClusterReason } from '../reasons.ts';
import { FINALIZER, KYMA_NAME_LABEL, settled, SYNC_API_VERSION, type SyncResource } from '../model.ts';
import { forEachPage } from './resync.ts';
import type { Deps, Logger } from './deps.ts';

/** ResolveOutcome is what resolving one SyncResource's cluster comes to. */
type ResolveOutcome =
  | { kind: 'resolved'; data: ClusterResolved }
  | { kind: 'failed'; data: ItemsApplied }
  | { kind: 'none'; why: string };

/**
 * resolveStep resolves the target cluster of one SyncResource and answers at once: the
 * cluster resolved (or the failure, for the status step) is posted after the answer, not
 * replied. A channel-based broker would hold the reply, and with it the caller (an
 * adapter sends one event after another) for the whole run behind it; a post cut short by
 * the end of this process is caught up by the next resync (fanout.ts).
 */
export async function resolveStep(deps: Deps, req: ResolveRequest, log: Logger): Promise<Answer> {
  const out = await deps.process.resolutions.run(requestPriority(req), () => resolveOnce(deps, req));
  const { ref } = req;
  const fields = { step: 'resolve-cluster', syncResource: `${ref.namespace}/${ref.name}` };
  if (out.kind === 'none') {
    log.info({ ...fields, why: out.why }, 'nothing to resolve');
    return {};
  }
  const key = `resolve ${ref.namespace}/${ref.name}`;
  if (out.kind === 'failed') {
    log.warn({ ...fields, reason: out.data.result.clusterError?.reason }, 'cluster not resolved');
    return {
      later: { key, events: [{ type: EventTypes.itemsApplied, data: out.data }], priority: Priority.bulk },
    };
  }
  const { urgent, deleting } = out.data;
  log.info(
    { ...fields, cluster: out.data.kyma, generation: out.data.generation, urgent: urgent === true },
    'cluster resolved',
  );
  const events = [{ type: EventTypes.clusterResolved, data: out.data }];
  return { later: { key, events, priority: runPriority(urgent, deleting) } };
}

/**
 * resolveOnce resolves the cluster of the SyncResource req names: as the event names it
 * (asNamed, the SKR source's events) or as read. afresh reads the Kyma and its Secret from
 * etcd, as a change of either always does; a SyncResource being deleted is let go only on
 * such a read, never on an answer shared from the last two seconds.
 */
async function resolveOnce(
  deps: Deps,
  req: ResolveRequest,
  asNamed = true,
  afresh = false,
): Promise<ResolveOutcome> {
  const { ref, held, since, seen, trigger, ahead } = req;
  const onlyIfUnsettled = req.onlyIfUnsettled === true;
  // The SKR source's events name the SyncResource's uid and Kyma: resolved as named, with
  // no read; apply-items reads it and runs only what the live object justifies (an SKR
  // change only if its inventory holds an object named: rules.ts heldBy).
  const claimed = !asNamed
    ? undefined
    : (seen ?? (held ? { uid: held.uid, generation: 0, kyma: held.kyma } : undefined));
  // A namespace the operator has not bound the product in: nothing to read or write there.
  const sr = claimed ? seenObject(ref, claimed) : await getIfBound(deps.store, deps.config, ref);
  if (!sr) return { kind: 'none', why: 'gone' };
  if (onlyIfUnsettled && settled(sr)) return { kind: 'none', why: 'settled' };
  const key = `${ref.namespace}/${ref.name}`;
  if (
    onlyIfUnsettled &&
    sr.status?.observedGeneration !== sr.metadata.generation &&
    deps.process.echoes.wasRequested(key, sr.metadata.uid, sr.metadata.generation ?? 0)
  ) {
    // The echo of a write (finalizer, inventory) made by the run this process requested
    // for this generation, before its status is written. Once a status that is not Ready
    // is written for it, watch events run again as before (apply-items decides).
    return { kind: 'none', why: 'run already requested' };
  }
  const kyma = sr.spec.kyma;
  // A change of the Kyma or its Secret reads afresh; other runs, a deletion's among them,
  // may share a read from the last two seconds, or read the watch cache no older than the
  // SyncResource as the event saw it (lookups.resolve), which reads etcd when it finds nothing.
  const fresh = afresh || trigger === 'kyma' || trigger === 'secret';
  try {
    // A team's SyncResource under its namespace's policy (tenancy.ts); a deletion removes
    // what it created whatever the policy says now.
    if (!sr.metadata.deletionTimestamp)
      await admit(policiesOnce(deps.kcp), deps.lookups, deps.config, ref.namespace, kyma);
    const version = versionOf(req, sr);
    const secret = await deps.lookups.resolve(
      kymaHome(ref.namespace, deps.config),
      kyma,
      fresh,
      version.resourceVersion,
    );
    validateKubeconfig(secret.kubeconfig, { allowInsecure: deps.config.allowInsecureKubeconfigs });
    if (!held) deps.process.echoes.requested(key, sr.metadata.uid!, sr.metadata.generation ?? 0);
    return {
      kind: 'resolved',
      data: {
        namespace: ref.namespace,
        name: ref.name,
        trigger,
        uid: sr.metadata.uid!,
        generation: sr.metadata.generation ?? 0,
        kyma,
        secret: secret.ref,
        ...version,
        ...(isUrgent(req, sr)
          ? { urgent: true, ...(sr.metadata.deletionTimestamp ? { deleting: true } : {}) }
          : {}),
        ...(since ? { since } : {}),
        ...(held ? { held: held.changes.map(({ change: _c, ...id }) => id) } : {}),
        ...(ahead ? { ahead } : {}),
      },
    };
  } catch (err) {
    if (!isResolutionFailure(err)) throw err;
    // What is written for a failure is written on the SyncResource as it is.
    const live = claimed ? await deps.store.get(ref.namespace, ref.name) : sr;
    if (!live || live.metadata.uid !== sr.metadata.uid) return { kind: 'none', why: 'gone or replaced' };
    // The failure of a Kyma the live spec does not name is not its failure; one being
    // deleted is resolved as it is now (its policy no longer applies): read, then resolve.
    if (
      claimed &&
      (live.spec.kyma !== kyma || (live.metadata.deletionTimestamp && err.reason === 'NotPermitted'))
    )
      return resolveOnce(deps, req, false, afresh);
    if (live.metadata.deletionTimestamp)
      return fresh ? letGoOfDeleted(deps, live, err) : resolveOnce(deps, req, asNamed, true);
    return { kind: 'failed', data: unresolved(live, err) };
  }
}

/** versionOf is the SyncResource's resourceVersion as this step read it or the source's event saw it: apply-items reads at no older one. */
function versionOf(req: ResolveRequest, sr: SyncResource): Pick<ClusterResolved, 'resourceVersion'> {
  const v = sr.metadata.resourceVersion ?? req.seen?.resourceVersion ?? req.held?.resourceVersion;
  return v ? { resourceVersion: v } : {};
}

/** seenObject is a SyncResource as the source's event describes it: identity, generation, Kyma, deletion. */
function seenObject(
  ref: SyncRef,
  seen: Pick<SyncResourceChanged, 'uid' | 'generation' | 'kyma' | 'deleting'>,
): SyncResource {
  return {
    apiVersion: SYNC_API_VERSION,
    kind: 'SyncResource',
    metadata: {
      namespace: ref.namespace,
      name: ref.name,
      uid: seen.uid,
      generation: seen.generation,
      ...(seen.deleting ? { deletionTimestamp: 'seen' } : {}),
    },
    spec: { kyma: seen.kyma, items: [] },
  };
}

/** KymaOutcome is what resolving a Kyma's request comes to: its cluster, or the failure of each of its SyncResources. */
type KymaOutcome =
  | { kind: 'resolved'; data: KymaResolved }
  | { kind: 'failed'; data: ItemsApplied[] }
  | { kind: 'none'; why: string };

/**
 * resolveKymaStep resolves the cluster of a Kyma once for all its SyncResources. A
 * resync reads LIST snapshots of the namespace's Kymas and access Secrets (shared by the
 * requests of one tick); a change of the Kyma or its Secret reads both afresh. When the
 * cluster cannot be resolved, each SyncResource labelled for the Kyma gets the error (or,
 * being deleted, is released), posted after the answer. The resolved Kyma is replied, not
 * posted: the request comes from a fan-out (a resync, a Kyma or Secret change) that runs
 * behind its own answer, and holding its post for the Kyma's run bounds the Kymas in
 * progress at once by the fan-out's parallelism.
 */
export async function resolveKymaStep(deps: Deps, req: KymaRequest, log: Logger): Promise<Answer> {
  const out = await deps.process.resolutions.run(Priority.bulk, () => resolveKymaOnce(deps, req));
  const fields = {
    step: 'resolve-cluster',
    cluster: req.name,
    namespace: req.namespace,
    trigger: req.trigger,
  };
  switch (out.kind) {
    case 'none':
      log.info({ ...fields, why: out.why }, 'nothing to resolve');
      return {};
    case 'failed':
      log.warn(
        { ...fields, reason: out.data[0]?.result.clusterError?.reason, syncResources: out.data.length },
        'cluster not resolved',
      );
      return {
        later: {
          key: `resolve kyma ${req.namespace}/${req.name}`,
          events: out.data.map((data) => ({ type: EventTypes.itemsApplied, data })),
          priority: Priority.bulk,
        },
      };
    case 'resolved':
      log.info(fields, 'cluster resolved');
      return { reply: { type: EventTypes.kymaResolved, data: out.data } };
  }
}

async function resolveKymaOnce(deps: Deps, req: KymaRequest): Promise<KymaOutcome> {
  const { namespace, name: kyma } = req;
  // A team namespace's batch: each of its SyncResources is admitted under the policy by its run (apply.ts).
  const home = kymaHome(namespace, deps.config);
  try {
    const secret =
      req.trigger === 'resync'
        ? await deps.lookups.resolveFromSnapshots(home, kyma, req.since ? Date.parse(req.since) : 0)
        : await deps.lookups.resolve(home, kyma, true);
    validateKubeconfig(secret.kubeconfig, { allowInsecure: deps.config.allowInsecureKubeconfigs });
    return { kind: 'resolved', data: { ...req, secret: secret.ref } };
  } catch (err) {
    if (!isResolutionFailure(err)) throw err;
    const failed: ItemsApplied[] = [];
    await forEachPage<SyncResource>(
      deps,
      namespace,
      `${KYMA_NAME_LABEL}=${kyma}`,
      async (page) => {
        for (const sr of page) {
          if (sr.spec.kyma !== kyma) continue;
          if (sr.metadata.deletionTimestamp) await letGoOfDeleted(deps, sr, err);
          else failed.push(unresolved(sr, err));
        }
      },
      true,
    );
    return { kind: 'failed', data: failed };
  }
}

/**
 * unresolved turns a resolution error, or a cluster error another run found (apply.ts: the
 * batch's breaker), into an outcome for the status step.
 */
export function unresolved(
  sr: SyncResource,
  err: TerminalError<ClusterReason> | NonNullable<ItemsApplied['result']['clusterError']>,
): ItemsApplied {
  return {
    namespace: sr.metadata.namespace!,
    name: sr.metadata.name,
    uid: sr.metadata.uid!,
    kyma: sr.spec.kyma,
    result: {
      generation: sr.metadata.generation ?? 0,
      observedAt: new Date().toISOString(),
      items: [],
      changes: [],
      inventory: sr.status?.synced ?? [],
      pending: [],
      clusterError:
        err instanceof TerminalError ? { reason: err.reason, message: err.message, transient: false } : err,
    },
  };
}

/** letGoOfDeleted removes the finalizer of a SyncResource being deleted whose cluster is gone: its objects stay as they are. */
async function letGoOfDeleted(
  deps: Deps,
  sr: SyncResource,
  err: TerminalError | ResolutionError,
): Promise<ResolveOutcome> {
  if (sr.metadata.finalizers?.includes(FINALIZER)) {
    await deps.recorder.event(
      sr,
      'Warning',
      'ClusterGone',
      'Delete',
      `target cluster is gone (${err.message}); finalizer removed, synced objects are left as they are`,
    );
    await deps.store.removeFinalizer(sr);
  }
  return { kind: 'none', why: 'released: cluster gone' };
}
