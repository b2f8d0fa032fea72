// status.ts computes a SyncResource's status from one run's result, in one place
// (kustomize-controller's finalizeStatus). Pure: the previous status and the clock
// are inputs; nothing is read or written here.
import { statusItemOf, type ApplyResult, type ItemResult } from './engine/result.ts';
import { bounded, MAX_MESSAGE } from './policy/rules.ts';
import { describeHealth } from './health.ts';
import { canonical } from './values.ts';
import {
  objectKey,
  type Condition,
  type Health,
  type ItemStatus,
  type State,
  type SyncResource,
  type SyncStatus,
} from './model.ts';
import type { CONDITIONS, ItemReason, ResourcesReason } from './reasons.ts';
import type { ReportedHealth } from './events/contract.ts';
import { describeId } from './manifest.ts';

const rank: Record<State, number> = { Ready: 0, Processing: 1, Deleting: 1, Warning: 2, Error: 3 };

/** worst returns the most severe state (Error > Warning > Processing/Deleting > Ready). */
export function worst(states: State[]): State {
  return states.reduce<State>((w, s) => (rank[s] > rank[w] ? s : w), 'Ready');
}

/** WrittenStatus is every status field the status step owns (status.synced belongs to the engine). */
export type WrittenStatus = Omit<SyncStatus, 'synced'>;

function summary(items: ItemResult[]): string {
  const bad = items.filter((i) => i.state !== 'Ready');
  const shown = bad
    .slice(0, 5)
    .map((i) => `${i.name} (${i.reason}: ${i.message})`)
    .join('; ');
  return `${bad.length} of ${items.length} items not ready: ${shown}${bad.length > 5 ? '; ...' : ''}`;
}

/** HealthSummary sorts the items by their objects' health, with the message each kind gets. */
interface HealthSummary {
  failed: ItemStatus[];
  progressing: ItemStatus[];
  warned: ItemStatus[];
  unhealthyText: string;
  waitingText: string;
  warnedText: string;
}

function healthSummary(items: ItemStatus[], objects: Map<string, string | undefined>): HealthSummary {
  const failed = items.filter((i) => i.health?.status === 'Failed');
  const progressing = items.filter(
    (i) => i.health && ['InProgress', 'Terminating', 'Unknown'].includes(i.health.status),
  );
  const warned = items.filter((i) => i.health?.status === 'Current' && i.health.reason === 'Warning');
  return {
    failed,
    progressing,
    warned,
    unhealthyText: `${failed.length} of ${items.length} objects are unhealthy: ${named(failed, objects)}`,
    waitingText: `${progressing.length} of ${items.length} objects are not ready yet: ${named(progressing, objects)}`,
    warnedText: `${warned.length} objects report a warning: ${named(warned, objects)}`,
  };
}

/** named lists at most five objects with their health: "Deployment kyma-system/warden: ProgressDeadlineExceeded: Progress deadline exceeded". */
function named(items: ItemStatus[], objects: Map<string, string | undefined>): string {
  const shown = items
    .slice(0, 5)
    .map((i) => describeHealth(objects.get(i.name) ?? `item ${i.name}`, i.health!));
  return `${shown.join('; ')}${items.length > 5 ? `; and ${items.length - 5} more` : ''}`;
}

/** computeStatus derives the status from a run's result and the previous status. */
export function computeStatus(r: ApplyResult, previous: SyncStatus | undefined, now: Date): WrittenStatus {
  const applied = appliedState(r, previous);
  const items = applied.items;
  const ready = applied.state === 'Ready';
  const health = healthSummary(items, new Map(r.items.map((i) => [i.name, i.object])));
  // Ready means applied and working: a failed object makes the SyncResource Error, one on its way Processing.
  const [state, text] =
    ready && health.failed.length > 0
      ? (['Error', health.unhealthyText] as const)
      : ready && health.progressing.length > 0
        ? (['Processing', health.waitingText] as const)
        : ready && health.warned.length > 0
          ? (['Warning', health.warnedText] as const)
          : ([applied.state, applied.message] as const);
  const message = bounded(text, 4 * MAX_MESSAGE);
  return {
    state,
    observedGeneration: r.generation,
    conditions: conditionsOf(r, previous, now, applied, health, message),
    lastOperation: {
      operation: state === 'Ready' ? 'all resources successfully synced to skr' : message,
      lastUpdateTime: r.observedAt,
    },
    items,
    // The reconcile asked for with the annotation was made (kubectl wait reads it).
    ...(r.requested !== undefined ? { lastHandledReconcileAt: r.requested } : {}),
  };
}

/** Applied is the state of the run itself, before the objects' health: the Resources condition. */
interface Applied {
  state: State;
  reason: ResourcesReason;
  message: string;
  items: ItemStatus[];
}

/** appliedState is what the run did: suspended, unreachable, deleting, or the worst of its items and prunes. */
function appliedState(r: ApplyResult, previous: SyncStatus | undefined): Applied {
  const failed = r.failed ?? [];
  // Objects that could not be deleted or released, each named with the API's answer.
  const failedMessage = `${failed.length} synced objects could not be deleted or released: ${failed
    .slice(0, 5)
    .map((f) => f.message)
    .join('; ')}`;
  const before = previous?.items ?? [];
  if (r.suspended && !r.deleting)
    return {
      state: 'Warning',
      reason: 'Suspended',
      message:
        'sync is suspended (spec.suspend): nothing is created, changed or deleted in the SKR; items show the last run',
      items: before,
    };
  if (r.clusterError) {
    const reason = r.clusterError.reason;
    const items = before.map((i): ItemStatus => ({
      ...i,
      state: 'Error',
      reason,
      message: 'the SKR could not be reached',
      ...(i.health ? { health: { status: 'Unknown', message: 'the SKR could not be reached' } } : {}),
    }));
    return { state: 'Error', reason, message: r.clusterError.message, items };
  }
  if (r.deleting) {
    if (failed.length > 0)
      return { state: 'Error', reason: 'DeletionFailed', message: failedMessage, items: before };
    const message =
      r.pending.length > 0
        ? `waiting for ${r.pending.length} synced objects to be deleted: ${r.pending.slice(0, 5).join(', ')}`
        : r.deleting.policy === 'Orphan'
          ? 'synced objects are orphaned'
          : 'synced objects are deleted';
    return { state: 'Deleting', reason: 'Deleting', message, items: before };
  }
  const items = r.items.map(statusItemOf);
  // An item being deleted is progress, not the SyncResource's own deletion.
  const worstItem = worst(r.items.map((i) => (i.state === 'Deleting' ? 'Processing' : i.state)));
  if (failed.length > 0) {
    const message = r.items.every((i) => i.state === 'Ready')
      ? failedMessage
      : `${summary(r.items)}; ${failedMessage}`;
    return { state: 'Error', reason: 'Error', message, items };
  }
  if (worstItem === 'Ready' && r.pending.length > 0) {
    const message = `waiting for ${r.pending.length} pruned objects to be deleted: ${r.pending.slice(0, 5).join(', ')}`;
    return { state: 'Processing', reason: 'Processing', message, items };
  }
  const message = worstItem === 'Ready' ? 'resources are synced' : summary(r.items);
  return { state: worstItem, reason: worstItem, message, items };
}

/**
 * conditionsOf are the three conditions. Resources: every item applied. Healthy: every
 * object works (else Unhealthy, Progressing or Degraded; Resources stays True).
 * Progressing: some object is on its way (or being deleted); suspended or unreachable,
 * nothing can move on its own (the resync tick tries again).
 */
function conditionsOf(
  r: ApplyResult,
  previous: SyncStatus | undefined,
  now: Date,
  applied: Applied,
  health: HealthSummary,
  message: string,
): Condition[] {
  const condition = <T extends keyof typeof CONDITIONS>(
    type: T,
    status: Condition['status'],
    why: keyof (typeof CONDITIONS)[T],
    text: string,
  ): Condition => {
    const prev = previous?.conditions?.find((c) => c.type === type);
    return {
      type,
      status,
      reason: why as string,
      message: bounded(text, 4 * MAX_MESSAGE),
      lastTransitionTime: prev && prev.status === status ? prev.lastTransitionTime : now.toISOString(),
      observedGeneration: r.generation,
    };
  };
  const ready = applied.state === 'Ready';
  const resources = condition(
    'Resources',
    ready ? 'True' : 'False',
    ready ? 'Ready' : applied.reason,
    applied.message,
  );
  const healthy =
    health.failed.length > 0
      ? condition('Healthy', 'False', 'Unhealthy', health.unhealthyText)
      : health.progressing.length > 0
        ? condition('Healthy', 'False', 'Progressing', health.waitingText)
        : health.warned.length > 0
          ? condition('Healthy', 'False', 'Degraded', health.warnedText)
          : condition('Healthy', 'True', 'Healthy', 'every synced object is healthy');
  const moving =
    !r.suspended &&
    !r.clusterError &&
    (health.progressing.length > 0 ||
      r.pending.length > 0 ||
      (r.deleting !== undefined && !r.deleting.finalizerRemoved));
  const progressing = moving
    ? condition(
        'Progressing',
        'True',
        'Progressing',
        health.progressing.length > 0 ? health.waitingText : message,
      )
    : condition('Progressing', 'False', 'Settled', 'nothing is on its way');
  return [resources, healthy, progressing];
}

/** sameStatus tells whether writing next over live would change anything but timestamps. */
export function sameStatus(live: SyncStatus | undefined, next: WrittenStatus): boolean {
  if (!live) return false;
  const strip = (s: WrittenStatus) =>
    canonical({
      ...s,
      conditions: s.conditions?.map(({ lastTransitionTime: _t, ...c }) => c),
      lastOperation: s.lastOperation?.operation,
    });
  const { synced: _s, ...rest } = live;
  return strip(rest) === strip(next);
}

/** isMoving tells whether a status says objects are on their way (its Progressing condition is True). */
export const isMoving = (s: WrittenStatus | undefined): boolean =>
  s?.conditions?.some((c) => c.type === 'Progressing' && c.status === 'True') === true;

/**
 * outOfSync says why a health report may not move sr's status (undefined: it may): being
 * deleted, suspended or a preview, a status of another generation, an item not applied
 * (Resources not True). The SKR source asks it of its views before it reports, write-status
 * of the live SyncResource before it writes.
 */
export function outOfSync(sr: SyncResource): string | undefined {
  if (sr.metadata.deletionTimestamp || sr.spec?.suspend === true || sr.spec?.preview)
    return 'not a SyncResource in sync';
  const status = sr.status;
  if (!status || status.observedGeneration !== sr.metadata.generation)
    return 'its status is not of its generation';
  if (!status.conditions?.some((c) => c.type === 'Resources' && c.status === 'True'))
    return 'not every item is applied';
  return undefined;
}

/**
 * reportedResult is the result a run would make of live if it found the reported objects
 * with the health reported and everything else as the status says: the SKR source's
 * health report, written without a run. A report may only move health: the status must be
 * of the spec's generation with every item applied (Resources True), and each object must
 * be in the inventory under an item of the spec whose health is read by kstatus's rules
 * and which copies no feedback (a run reads those). Otherwise it says why not (a run is
 * asked for instead).
 */
export function reportedResult(
  live: SyncResource,
  objects: readonly ReportedHealth[],
  now: Date,
): ApplyResult | string {
  const status = live.status;
  const why = outOfSync(live);
  if (why !== undefined || !status) return why ?? 'no status';
  const synced = status.synced ?? [];
  const spec = new Map(live.spec.items.map((i) => [i.name, i]));
  const reported = new Map<string, Health>();
  for (const o of objects) {
    const entry = synced.find((e) => objectKey(e) === objectKey(o));
    const item = entry && spec.get(entry.item);
    if (!entry || !item) return `${describeId(o)} is not in its inventory under an item of its spec`;
    if (item.health || item.feedback || item.strategy === 'Delete')
      return `item ${item.name} has health rules or feedback of its own`;
    reported.set(item.name, o.health);
  }
  const objectOf = new Map(synced.map((e) => [e.item, describeId(e)]));
  const items: ItemResult[] = [];
  for (const i of status.items ?? []) {
    const health = reported.get(i.name) ?? i.health;
    if (health && !objectOf.has(i.name)) return `item ${i.name} has health but no inventory entry`;
    items.push({
      ...i,
      reason: i.reason as ItemReason,
      ...(health ? { health, object: objectOf.get(i.name)! } : {}),
    });
  }
  if ([...reported.keys()].some((name) => !items.some((i) => i.name === name)))
    return 'an item reported has no status yet';
  return {
    generation: status.observedGeneration ?? 0,
    observedAt: now.toISOString(),
    items,
    changes: [],
    inventory: synced,
    pending: [],
    ...(status.lastHandledReconcileAt !== undefined ? { requested: status.lastHandledReconcileAt } : {}),
  };
}
