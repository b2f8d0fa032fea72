// resolve.ts is the resolve-cluster step: SyncResource reference in, the identity
// of its target cluster out (Kyma and access Secret version, never the kubeconfig).
// Resolution failures become an items.applied outcome carrying the cluster error, so
// the status step writes them; a SyncResource being deleted whose cluster is gone is
// released (finalizer removed, Warning event) instead of blocking forever.
import { ResolutionError } from '../cluster/resolve.ts';
import { admit, getIfBound, policiesOnce } from '../cluster/policies.ts';
import { kymaHome } from '../policy/tenancy.ts';
import { validateKubeconfig } from '../policy/kubeconfig.ts';
import type {
  ClusterResolved,
  ItemsApplied,
  KymaRequest,
  KymaResolved,
  SkrChanged,
  SyncRef,
  SyncResourceChanged,
} from '../events.ts';
import { isResolutionFailure, KubeApiError, TerminalError } from '../kube/errors.ts';
import type { ClusterReason } from '../reasons.ts';
import {
  FINALIZER,
  KYMA_NAME_LABEL,
  objectKey,
  settled,
  SYNC_API_VERSION,
  type SyncResource,
} from '../model.ts';
import { forEachPage } from './resync.ts';
import type { Deps } from './deps.ts';

/** ResolveOutcome is what the step replies with. */
export type ResolveOutcome =
  | { kind: 'resolved'; data: ClusterResolved }
  | { kind: 'failed'; data: ItemsApplied }
  | { kind: 'none'; why: string };

/** holds tells whether sr is the SyncResource of the claim (uid) and its inventory holds one of the objects named. */
export function holds(sr: SyncResource, held: NonNullable<ResolveOptions['held']>): boolean {
  if (sr.metadata.uid !== held.uid) return false;
  const inventory = new Set((sr.status?.synced ?? []).map(objectKey));
  return held.changes.some((c) => inventory.has(objectKey(c)));
}

/** isEdit tells whether a watch event reports an edit or deletion of a SyncResource that has been reconciled before. */
export function isEdit(sr: SyncResource, trigger: ClusterResolved['trigger']): boolean {
  const observed = sr.status?.observedGeneration;
  return trigger === 'watch' && observed !== undefined && observed !== sr.metadata.generation;
}

/** ResolveOptions describe the request being resolved. */
export interface ResolveOptions {
  /** onlyIfUnsettled skips SyncResources that are settled (watch events). */
  onlyIfUnsettled?: boolean;
  trigger?: ClusterResolved['trigger'];
  /** change marks a watch event for an existing SyncResource (update or delete): it starts ahead of bulk requests. */
  change?: boolean;
  /** since is a reconcile request's ReconcileRequest.since, passed on. */
  since?: string;
  /** held is the SKR source's claim: the SyncResource's uid and objects its inventory should hold (checked, not trusted). */
  held?: Pick<SkrChanged, 'uid' | 'changes'>;
  /**
   * seen is the source's account of a SyncResource change (uid, generation, Kyma): it saves
   * the read here. apply-items reads the SyncResource and acts only if it is that uid at no
   * older generation, and uses the Secret resolved here only if it is the one that resolves
   * for its spec.kyma now; a failed resolution reads it (the status names it).
   */
  seen?: SyncResourceChanged;
}

/** resolveStep resolves the target cluster of ref. */
export function resolveStep(deps: Deps, ref: SyncRef, opts: ResolveOptions = {}): Promise<ResolveOutcome> {
  return deps.process.resolutions.run(opts.change === true, () => resolveOnce(deps, ref, opts));
}

async function resolveOnce(deps: Deps, ref: SyncRef, opts: ResolveOptions): Promise<ResolveOutcome> {
  const { held, since, seen } = opts;
  const onlyIfUnsettled = opts.onlyIfUnsettled === true;
  const trigger = opts.trigger ?? 'resync';
  // A namespace the operator has not bound the product in: nothing to read or write there.
  const sr = seen ? seenObject(ref, seen) : await getIfBound(deps.store, deps.config, ref);
  if (!sr) return { kind: 'none', why: 'gone' };
  if (onlyIfUnsettled && settled(sr)) return { kind: 'none', why: 'settled' };
  if (held && !holds(sr, held)) return { kind: 'none', why: 'not in its inventory' };
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
  try {
    // A change of the Kyma or its Secret, and a deletion, read afresh; other runs may
    // share a read from the last two seconds.
    const fresh = trigger === 'kyma' || trigger === 'secret' || sr.metadata.deletionTimestamp !== undefined;
    // A team's SyncResource under its namespace's policy (tenancy.ts); a deletion removes
    // what it created whatever the policy says now.
    if (!sr.metadata.deletionTimestamp)
      await admit(policiesOnce(deps.kcp), deps.lookups, deps.config, ref.namespace, kyma);
    const secret = await deps.lookups.resolve(kymaHome(ref.namespace, deps.config), kyma, fresh);
    validateKubeconfig(secret.kubeconfig, { allowInsecure: deps.config.allowInsecureKubeconfigs });
    deps.process.echoes.requested(key, sr.metadata.uid!, sr.metadata.generation ?? 0);
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
        ...(isEdit(sr, trigger) || trigger === 'skr' || seen?.change ? { urgent: true } : {}),
        ...(since ? { since } : {}),
      },
    };
  } catch (err) {
    if (!isResolutionFailure(err)) throw err;
    // What is written for a failure is written on the SyncResource as it is.
    const live = seen ? await deps.store.get(ref.namespace, ref.name) : sr;
    if (!live || live.metadata.uid !== sr.metadata.uid) return { kind: 'none', why: 'gone or replaced' };
    if (live.metadata.deletionTimestamp && err.reason === 'NotPermitted')
      return resolveOnce(deps, ref, { ...opts, seen: undefined });
    if (live.metadata.deletionTimestamp) return letGoOfDeleted(deps, live, err);
    return { kind: 'failed', data: unresolved(live, err) };
  }
}

/** seenObject is a SyncResource as the source's event describes it: identity, generation, Kyma, deletion. */
function seenObject(ref: SyncRef, seen: SyncResourceChanged): SyncResource {
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
export type KymaOutcome =
  | { kind: 'resolved'; data: KymaResolved }
  | { kind: 'failed'; data: ItemsApplied[] }
  | { kind: 'none'; why: string };

/**
 * resolveKymaStep resolves the cluster of a Kyma once for all its SyncResources. A
 * resync reads LIST snapshots of the namespace's Kymas and access Secrets (shared by the
 * requests of one tick); a change of the Kyma or its Secret reads both afresh. When the
 * cluster cannot be resolved, each SyncResource labelled for the Kyma gets the error (or,
 * being deleted, is released).
 */
export function resolveKymaStep(deps: Deps, req: KymaRequest): Promise<KymaOutcome> {
  return deps.process.resolutions.run(false, () => resolveKymaOnce(deps, req));
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
