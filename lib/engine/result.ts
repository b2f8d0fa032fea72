// result.ts: the outcome of one item and of one run, as the engine reports them.
import type { Change } from '../changeset.ts';
import { MAX_FEEDBACK } from '../feedback.ts';
import type { FeedbackValue, Health, InventoryEntry, ItemStatus, State } from '../model.ts';
import { bounded } from '../policy/rules.ts';
import type { ClusterReason, ItemReason } from '../reasons.ts';
import type { Recorded } from './inventory.ts';

/** ItemResult is the outcome for one spec item. */
export interface ItemResult {
  name: string;
  state: State;
  /** reason is machine-readable (lib/reasons.ts ITEM_REASONS). */
  reason: ItemReason;
  message: string;
  /** transient marks a failure a later run may overcome. */
  transient?: boolean;
  change?: Change;
  /** object names the item's object ("Deployment kyma-system/warden"), for messages. */
  object?: string;
  /** health is the object's as this run last read or wrote it. */
  health?: Health;
  feedback?: FeedbackValue[];
}

/** ApplyResult is the outcome of one reconcile of a SyncResource. */
export interface ApplyResult {
  /** generation of the spec that was applied. */
  generation: number;
  /** observedAt is when the run read the SyncResource (orders results of one generation). */
  observedAt: string;
  items: ItemResult[];
  /** changes include pruned objects, which belong to no current item. */
  changes: Change[];
  inventory: InventoryEntry[];
  /** recorded are digests of this run the KCP's inventory does not hold yet: the status step writes them (inventory.ts settle). */
  recorded?: Recorded[];
  /** pending lists pruned or deleted objects that still exist (finalizers in the SKR). */
  pending: string[];
  /** failed lists pruned or deleted objects whose request failed, with the API's message. */
  failed?: { subject: string; message: string }[];
  /** deleting is set when the SyncResource itself is being deleted. */
  deleting?: { finalizerRemoved: boolean; policy: 'Delete' | 'Orphan' };
  /** suspended is set when spec.suspend held: the run made no request to the SKR. */
  suspended?: boolean;
  /** requested is the reconcile-now annotation's value the run saw (status.lastHandledReconcileAt). */
  requested?: string;
  /** clusterError is set when the SKR could not be reached or resolved at all. */
  clusterError?: { reason: ClusterReason; message: string; transient: boolean };
}

/** result builds an ItemResult; its message is bounded. */
export function result(
  name: string,
  state: State,
  reason: ItemReason,
  message: string,
  extra: Partial<ItemResult> = {},
): ItemResult {
  return { name, state, reason, message: bounded(message), ...extra };
}

/**
 * statusItemOf is an item's result as status.items shows it, its texts cut as the CRD
 * bounds them: a result, and a status, may come in an event, and an event may lie.
 */
export function statusItemOf({ name, state, reason, message, health, feedback }: ItemStatus): ItemStatus {
  return {
    name,
    state,
    reason,
    message: bounded(message),
    ...(health
      ? {
          health: {
            ...health,
            message: bounded(health.message),
            ...(health.reason ? { reason: bounded(health.reason) } : {}),
          },
        }
      : {}),
    ...(feedback
      ? {
          feedback: feedback.slice(0, MAX_FEEDBACK).map((f) => ({
            ...f,
            name: bounded(f.name, 63),
            ...(f.value !== undefined ? { value: bounded(f.value) } : {}),
            ...(f.message !== undefined ? { message: bounded(f.message, 256) } : {}),
          })),
        }
      : {}),
  };
}
