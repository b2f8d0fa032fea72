// requests.ts reads what each event asks of resolve-cluster and resync: which
// SyncResource, Kyma or source, why (trigger), and how urgently. Urgency is decided here
// only: a change of a SyncResource reconciled before goes ahead of bulk work (creations,
// resyncs, fan-outs) in every step after this one, and an edit ahead of a deletion.
import type { CloudEvent } from 'cloudevents';
import type { ClusterResolved, SkrChanged, SyncRef, SyncResourceChanged } from '../events/contract.ts';
import { ApiServerRefTypes } from '../events/contract.ts';
import {
  checkRef,
  checkReconcileRequest,
  checkSkrChanged,
  checkSyncResourceChanged,
  EventDataError,
} from '../events/parse.ts';
import type { ObjectId, SyncResource } from '../model.ts';
import { Priority } from '../concurrency.ts';

/** ResolveRequest is a request to resolve one SyncResource's cluster. */
export interface ResolveRequest {
  ref: SyncRef;
  trigger: NonNullable<ClusterResolved['trigger']>;
  /** change: a change of an existing SyncResource (update or deletion): resolved ahead of bulk requests. */
  change: boolean;
  /** onlyIfUnsettled skips SyncResources that are settled (watch events). */
  onlyIfUnsettled?: boolean;
  /** since is a reconcile request's ReconcileRequest.since, passed on. */
  since?: string;
  /** held is the SKR source's claim: the SyncResource's uid, Kyma and objects its inventory should hold (apply-items checks it). */
  held?: Pick<SkrChanged, 'uid' | 'kyma' | 'changes' | 'resourceVersion'>;
  /**
   * seen is the source's account of a SyncResource change (uid, generation, Kyma): it saves
   * the read in resolve-cluster. apply-items reads the SyncResource and acts only if it is
   * that uid at no older generation, and uses the Secret resolved here only if it is the one
   * that resolves for its spec.kyma now; a failed resolution reads it (the status names it).
   */
  seen?: SyncResourceChanged;
  /** ahead is the source's list of objects to read while the SyncResource is read (contract.ts), passed on. */
  ahead?: ObjectId[];
}

/** requestPriority is a request's priority at resolve-cluster's gate: a change ahead of bulk requests, an edit ahead of a deletion. */
export const requestPriority = (req: ResolveRequest): Priority => runPriority(req.change, req.seen?.deleting);

/**
 * runPriority is the priority of work marked urgent (a change of a SyncResource reconciled
 * before) and deleting (its deletion): the SKR source's post, and each step's run from what
 * its event carries (ClusterResolved urgent and deleting; ItemsApplied urgent and its
 * result's deleting). It orders work and never decides what a run does.
 */
export function runPriority(urgent: boolean | undefined, deleting: boolean | undefined): Priority {
  if (urgent !== true) return Priority.bulk;
  return deleting === true ? Priority.deletion : Priority.edit;
}

/** isUrgent tells whether the run a request resolved goes ahead of bulk work: an edit or deletion of a SyncResource reconciled before, or a change in its SKR. */
export function isUrgent(req: ResolveRequest, sr: SyncResource): boolean {
  if (req.trigger === 'skr' || req.seen?.change === true) return true;
  const observed = sr.status?.observedGeneration;
  return req.trigger === 'watch' && observed !== undefined && observed !== sr.metadata.generation;
}

/** fromSkrChanged: objects the SyncResource holds changed in its SKR. */
export function fromSkrChanged(event: CloudEvent<unknown>): ResolveRequest {
  const req = checkSkrChanged(event.data);
  const ref = { namespace: req.namespace, name: req.name };
  return { ref, trigger: 'skr', change: true, held: req, ...(req.ahead ? { ahead: req.ahead } : {}) };
}

/**
 * fromChanged: the SKR source saw the SyncResource new, edited or being deleted (never for
 * its own writes). A policy's change, or a run asked for with the annotation, runs it at a
 * generation already run: a reconcile request, never taken for the echo of a run that left
 * it Ready.
 */
export function fromChanged(event: CloudEvent<unknown>): ResolveRequest {
  const seen = checkSyncResourceChanged(event.data);
  const trigger = seen.policy || seen.requested ? 'kyma' : 'watch';
  const ref = { namespace: seen.namespace, name: seen.name };
  return { ref, trigger, change: seen.change === true, seen, ...(seen.ahead ? { ahead: seen.ahead } : {}) };
}

/** isWatchEvent tells an ApiServerSource event (Reference mode) from the product's own. */
export const isWatchEvent = (event: CloudEvent<unknown>): boolean =>
  (ApiServerRefTypes as readonly string[]).includes(event.type);

/**
 * fromSyncResourceEvent: a reconcile request, or a watch event of the SyncResource
 * (creations come in bulk; updates and deletions of existing ones go first). Watch events
 * also report our own writes: those for a settled SyncResource need no run.
 */
export function fromSyncResourceEvent(event: CloudEvent<unknown>): ResolveRequest {
  if (!isWatchEvent(event)) {
    const req = checkReconcileRequest(event.data);
    const ref = { namespace: req.namespace, name: req.name };
    return { ref, trigger: req.trigger, change: false, ...(req.since ? { since: req.since } : {}) };
  }
  const ref = checkRef(event.data);
  return { ref, trigger: 'watch', change: !event.type.endsWith('.add'), onlyIfUnsettled: true };
}

/** kindOf is the kind an ApiServerSource event names (its kind extension, or its data's). */
export function kindOf(event: CloudEvent<unknown>): string | undefined {
  const ext = (event as unknown as { kind?: unknown }).kind;
  const data = (event.data ?? {}) as { kind?: unknown };
  const kind = ext ?? data.kind;
  return typeof kind === 'string' ? kind : undefined;
}

/** ObjectChange is a watch event of a Kyma, Secret or ConfigMap: which object, of which kind. */
export interface ObjectChange {
  ref: SyncRef;
  kind: string;
}

/** fromObjectEvent reads a watch event of a Kyma, Secret or ConfigMap. */
export function fromObjectEvent(event: CloudEvent<unknown>): ObjectChange {
  return { ref: checkRef(event.data), kind: kindOf(event) ?? '' };
}

/** fromKymaEvent reads a watch event of a Kyma (the resync function's Trigger takes no other kind). */
export function fromKymaEvent(event: CloudEvent<unknown>): ObjectChange {
  const change = fromObjectEvent(event);
  if (change.kind !== 'Kyma') throw new EventDataError(`unexpected kind ${change.kind}`);
  return change;
}
