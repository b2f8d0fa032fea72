// status.ts computes a SyncResource's status from one run's result, in one place
// (kustomize-controller's finalizeStatus). Pure: the previous status and the clock
// are inputs; nothing is read or written here.
import type { ApplyResult, ItemResult } from './engine/result.ts';
import { bounded, MAX_MESSAGE } from './policy/rules.ts';
import { MAX_FEEDBACK } from './feedback.ts';
import { describeHealth } from './health.ts';
import { canonical } from './values.ts';
import type { Condition, ItemStatus, State, SyncStatus } from './model.ts';
import type { CONDITIONS, ResourcesReason } from './reasons.ts';

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

/** HealthSummary sorts the items by their objects' health. */
interface HealthSummary {
  failed: ItemStatus[];
  progressing: ItemStatus[];
  warned: ItemStatus[];
}

function healthSummary(items: ItemStatus[]): HealthSummary {
  return {
    failed: items.filter((i) => i.health?.status === 'Failed'),
    progressing: items.filter(
      (i) => i.health && ['InProgress', 'Terminating', 'Unknown'].includes(i.health.status),
    ),
    warned: items.filter((i) => i.health?.status === 'Current' && i.health.reason === 'Warning'),
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
  let state: State;
  let reason: ResourcesReason;
  let message: string;
  let items: ItemStatus[] = r.items.map(({ name, state: s, reason: why, message: m, health, feedback }) => ({
    name,
    state: s,
    reason: why,
    message: bounded(m),
    // Bounded as the CRD bounds them: a result is an event, and an event may lie.
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
  }));
  const failed = r.failed ?? [];
  // Objects that could not be deleted or released, each named with the API's answer.
  const failedMessage = `${failed.length} synced objects could not be deleted or released: ${failed
    .slice(0, 5)
    .map((f) => f.message)
    .join('; ')}`;
  if (r.suspended && !r.deleting) {
    state = 'Warning';
    reason = 'Suspended';
    message =
      'sync is suspended (spec.suspend): nothing is created, changed or deleted in the SKR; items show the last run';
    items = previous?.items ?? [];
  } else if (r.clusterError) {
    state = 'Error';
    reason = r.clusterError.reason;
    message = r.clusterError.message;
    items = (previous?.items ?? []).map((i) => ({
      ...i,
      state: 'Error',
      reason,
      message: 'the SKR could not be reached',
      ...(i.health ? { health: { status: 'Unknown', message: 'the SKR could not be reached' } } : {}),
    }));
  } else if (r.deleting) {
    state = failed.length > 0 ? 'Error' : 'Deleting';
    reason = failed.length > 0 ? 'DeletionFailed' : 'Deleting';
    message =
      failed.length > 0
        ? failedMessage
        : r.pending.length > 0
          ? `waiting for ${r.pending.length} synced objects to be deleted: ${r.pending.slice(0, 5).join(', ')}`
          : r.deleting.policy === 'Orphan'
            ? 'synced objects are orphaned'
            : 'synced objects are deleted';
    items = previous?.items ?? [];
  } else {
    // An item being deleted is progress, not the SyncResource's own deletion.
    state = worst(r.items.map((i) => (i.state === 'Deleting' ? 'Processing' : i.state)));
    if (failed.length > 0) {
      state = 'Error';
      message = r.items.every((i) => i.state === 'Ready')
        ? failedMessage
        : `${summary(r.items)}; ${failedMessage}`;
    } else if (state === 'Ready' && r.pending.length > 0) {
      state = 'Processing';
      message = `waiting for ${r.pending.length} pruned objects to be deleted: ${r.pending.slice(0, 5).join(', ')}`;
    } else {
      message = state === 'Ready' ? 'resources are synced' : summary(r.items);
    }
    reason = state;
  }
  const applied = state === 'Ready';
  const appliedMessage = bounded(message, 4 * MAX_MESSAGE);
  const objects = new Map(r.items.map((i) => [i.name, i.object]));
  const health = healthSummary(items);
  const unhealthy = `${health.failed.length} of ${items.length} objects are unhealthy: ${named(health.failed, objects)}`;
  const waiting = `${health.progressing.length} of ${items.length} objects are not ready yet: ${named(health.progressing, objects)}`;
  // Ready means applied and working: a failed object makes the SyncResource Error, one on its way Processing.
  const warned = `${health.warned.length} objects report a warning: ${named(health.warned, objects)}`;
  // The Healthy condition gives the reason (Unhealthy, Progressing, Degraded); Resources stays True.
  if (applied && health.failed.length > 0) [state, message] = ['Error', unhealthy];
  else if (applied && health.progressing.length > 0) [state, message] = ['Processing', waiting];
  else if (applied && health.warned.length > 0) [state, message] = ['Warning', warned];
  message = bounded(message, 4 * MAX_MESSAGE);
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
  // Resources: every item applied. Healthy: every object works. Progressing: some object is on its way (or being deleted).
  const resources = condition(
    'Resources',
    applied ? 'True' : 'False',
    applied ? 'Ready' : reason,
    appliedMessage,
  );
  const healthy =
    health.failed.length > 0
      ? condition('Healthy', 'False', 'Unhealthy', unhealthy)
      : health.progressing.length > 0
        ? condition('Healthy', 'False', 'Progressing', waiting)
        : health.warned.length > 0
          ? condition('Healthy', 'False', 'Degraded', warned)
          : condition('Healthy', 'True', 'Healthy', 'every synced object is healthy');
  // Suspended or unreachable, nothing can move on its own: the resync tick tries again.
  const moving =
    !r.suspended &&
    !r.clusterError &&
    (health.progressing.length > 0 ||
      r.pending.length > 0 ||
      (r.deleting !== undefined && !r.deleting.finalizerRemoved));
  const progressing = moving
    ? condition('Progressing', 'True', 'Progressing', health.progressing.length > 0 ? waiting : message)
    : condition('Progressing', 'False', 'Settled', 'nothing is on its way');
  return {
    state,
    observedGeneration: r.generation,
    conditions: [resources, healthy, progressing],
    lastOperation: {
      operation: state === 'Ready' ? 'all resources successfully synced to skr' : message,
      lastUpdateTime: r.observedAt,
    },
    items,
    // The reconcile asked for with the annotation was made (kubectl wait reads it).
    ...(r.requested !== undefined ? { lastHandledReconcileAt: r.requested } : {}),
  };
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
