// status.ts computes a SyncResource's status from one run's result, in one place
// (kustomize-controller's finalizeStatus). Pure: the previous status and the clock
// are inputs; nothing is read or written here.
import { bounded, MAX_MESSAGE, type ApplyResult, type ItemResult } from './engine/result.ts';
import { canonical } from './util.ts';
import type { Condition, ItemStatus, State, SyncStatus } from './model.ts';

const rank: Record<State, number> = { Ready: 0, Processing: 1, Deleting: 1, Warning: 2, Error: 3 };

/** worst returns the most severe state (Error > Warning > Processing/Deleting > Ready). */
export function worst(states: State[]): State {
  return states.reduce<State>((w, s) => (rank[s] > rank[w] ? s : w), 'Ready');
}

/** WrittenStatus is every status field the status step owns (status.synced belongs to the engine). */
export type WrittenStatus = Omit<SyncStatus, 'synced'>;

function summary(items: ItemResult[]): string {
  const bad = items.filter((i) => i.state !== 'Ready');
  const shown = bad.slice(0, 5).map((i) => `${i.name} (${i.reason}: ${i.message})`).join('; ');
  return `${bad.length} of ${items.length} items not ready: ${shown}${bad.length > 5 ? '; ...' : ''}`;
}

/** computeStatus derives the status from a run's result and the previous status. */
export function computeStatus(r: ApplyResult, previous: SyncStatus | undefined, now: Date): WrittenStatus {
  let state: State;
  let reason: string;
  let message: string;
  let items: ItemStatus[] = r.items.map(({ name, state: s, reason: why, message: m }) => ({ name, state: s, reason: why, message: bounded(m) }));
  const failed = r.failed ?? [];
  // Objects that could not be deleted or released, each named with the API's answer.
  const failedMessage = `${failed.length} synced objects could not be deleted or released: ${failed.slice(0, 5).map((f) => f.message).join('; ')}`;
  if (r.suspended && !r.deleting) {
    state = 'Warning';
    reason = 'Suspended';
    message = 'sync is suspended (spec.suspend): nothing is created, changed or deleted in the SKR; items show the last run';
    items = previous?.items ?? [];
  } else if (r.clusterError) {
    state = 'Error';
    reason = r.clusterError.reason;
    message = r.clusterError.message;
    items = (previous?.items ?? []).map((i) => ({ ...i, state: 'Error', reason, message: 'the SKR could not be reached' }));
  } else if (r.deleting) {
    state = failed.length > 0 ? 'Error' : 'Deleting';
    reason = failed.length > 0 ? 'DeletionFailed' : 'Deleting';
    message = failed.length > 0 ? failedMessage : r.pending.length > 0
      ? `waiting for ${r.pending.length} synced objects to be deleted: ${r.pending.slice(0, 5).join(', ')}`
      : r.deleting.policy === 'Orphan' ? 'synced objects are orphaned' : 'synced objects are deleted';
    items = previous?.items ?? [];
  } else {
    // An item being deleted is progress, not the SyncResource's own deletion.
    state = worst(r.items.map((i) => (i.state === 'Deleting' ? 'Processing' : i.state)));
    if (failed.length > 0) {
      state = 'Error';
      message = r.items.every((i) => i.state === 'Ready') ? failedMessage : `${summary(r.items)}; ${failedMessage}`;
    } else if (state === 'Ready' && r.pending.length > 0) {
      state = 'Processing';
      message = `waiting for ${r.pending.length} pruned objects to be deleted: ${r.pending.slice(0, 5).join(', ')}`;
    } else {
      message = state === 'Ready' ? 'resources are synced' : summary(r.items);
    }
    reason = state;
  }
  message = bounded(message, 4 * MAX_MESSAGE);
  const status: Condition['status'] = state === 'Ready' ? 'True' : 'False';
  const prev = previous?.conditions?.find((c) => c.type === 'Resources');
  const condition: Condition = {
    type: 'Resources', status, reason, message,
    lastTransitionTime: prev && prev.status === status ? prev.lastTransitionTime : now.toISOString(),
    observedGeneration: r.generation,
  };
  return {
    state,
    observedGeneration: r.generation,
    conditions: [condition],
    lastOperation: {
      operation: state === 'Ready' ? 'all resources successfully synced to skr' : message,
      lastUpdateTime: r.observedAt,
    },
    items,
  };
}

/** sameStatus tells whether writing next over live would change anything but timestamps. */
export function sameStatus(live: SyncStatus | undefined, next: WrittenStatus): boolean {
  if (!live) return false;
  const strip = (s: WrittenStatus) => canonical({
    ...s,
    conditions: s.conditions?.map(({ lastTransitionTime: _t, ...c }) => c),
    lastOperation: s.lastOperation?.operation,
  });
  const { synced: _s, ...rest } = live;
  return strip(rest) === strip(next);
}
