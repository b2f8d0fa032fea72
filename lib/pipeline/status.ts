// status.ts is the write-status step: a run's outcome in; the SyncResource's status
// written only when it changed, never from a result older than what is there, the
// kyma-name label kept equal to spec.kyma, and Kubernetes Events on transitions,
// failures, drift corrections and pruning. A changed status is written on the basis of
// the SyncResource as the run saw it, guarded by its resourceVersion (one request);
// the live object is read when that guard fails or the status looks unchanged.
import type { ItemsApplied, Seen } from '../events.ts';
import { PatchType } from '../kube/client.ts';
import { resourcePath } from '../kube/discovery.ts';
import { isConflict, isNotFound } from '../kube/errors.ts';
import { syncResourceInfo } from '../kcp.ts';
import { KYMA_NAME_LABEL, SYNC_API_VERSION, type SyncResource } from '../model.ts';
import { computeStatus, sameStatus } from '../status.ts';
import { inSpan, Metrics } from '../telemetry.ts';
import { gateFor, type Deps } from './deps.ts';

/** StatusOutcome says what the step did. */
export type StatusOutcome = 'written' | 'unchanged' | 'stale' | 'gone';

/** isStale tells whether a result is older than the status already written. */
export function isStale(live: SyncResource, data: ItemsApplied): boolean {
  const status = live.status;
  if (!status?.observedGeneration) return false;
  if (status.observedGeneration > data.result.generation) return true;
  const written = status.lastOperation?.lastUpdateTime;
  return status.observedGeneration === data.result.generation && written !== undefined && written > data.result.observedAt;
}

/** writeStatusStep writes the status for one outcome; the process's gate starts urgent ones (edits) first. */
export function writeStatusStep(deps: Deps, data: ItemsApplied, now?: Date): Promise<StatusOutcome> {
  return gateFor(deps).run(data.urgent === true, () => writeOnce(deps, data, now ?? new Date()));
}

async function writeOnce(deps: Deps, data: ItemsApplied, now: Date): Promise<StatusOutcome> {
  if (data.seen) {
    const out = await decide(deps, data, seenObject(data, data.seen), now, true);
    if (out !== 'read again') return out;
  }
  // Read, decide, write guarded by what was read; a write that lost a race decides again.
  for (let attempt = 1; ; attempt++) {
    const live = await deps.store.get(data.namespace, data.name);
    if (!live || live.metadata.uid !== data.uid) return 'gone';
    const out = await decide(deps, data, live, now, false, attempt === 3);
    if (out !== 'read again') return out;
  }
}

/** seenObject rebuilds what the status step needs of the SyncResource as the run saw it. */
function seenObject(data: ItemsApplied, seen: Seen): SyncResource {
  return {
    apiVersion: SYNC_API_VERSION, kind: 'SyncResource',
    metadata: {
      name: data.name, namespace: data.namespace, uid: data.uid, resourceVersion: seen.resourceVersion,
      labels: seen.labelled ? { [KYMA_NAME_LABEL]: data.kyma } : {},
      // Presence is what counts (no label repair while deleting); the run saw the SyncResource being deleted.
      ...(data.result.deleting ? { deletionTimestamp: data.result.observedAt } : {}),
    },
    spec: { kyma: data.kyma, items: [] }, ...(seen.status ? { status: seen.status } : {}),
  };
}

/**
 * decide writes the status data calls for on the basis of base, guarded by base's
 * resourceVersion. 'read again' means the write lost a race (409), or, for a tentative
 * base (the SyncResource as the run saw it), that only the live object can tell whether
 * the result is stale or the status unchanged; last rethrows the conflict instead (the
 * broker retries).
 */
async function decide(deps: Deps, data: ItemsApplied, base: SyncResource, now: Date, tentative: boolean, last = false): Promise<StatusOutcome | 'read again'> {
  if (isStale(base, data)) {
    if (tentative) return 'read again';
    await syncLabel(deps, base);
    return 'stale';
  }
  const next = computeStatus(data.result, base.status, now);
  if (sameStatus(base.status, next)) {
    if (tentative) return 'read again';
    Metrics.statusWritesSkipped.add(1);
    await syncLabel(deps, base);
    return 'unchanged';
  }
  try {
    await inSpan('write status', { 'sync.state': next.state! }, () => deps.store.writeStatus(base, next, true));
  } catch (err) {
    if (isNotFound(err)) return 'gone';
    if (isConflict(err) && !last) return 'read again';
    throw err;
  }
  Metrics.statusWrites.add(1, { state: next.state! });
  // The label after the status: its watch event then finds the SyncResource settled.
  await syncLabel(deps, base);
  await recordEvents(deps, base, data, next.state!, next.conditions![0]!.message);
  return 'written';
}

async function syncLabel(deps: Deps, sr: SyncResource): Promise<void> {
  if (sr.metadata.labels?.[KYMA_NAME_LABEL] === sr.spec.kyma || sr.metadata.deletionTimestamp) return;
  await deps.kcp.client.call('PATCH', resourcePath(syncResourceInfo, sr.metadata.namespace, sr.metadata.name), {
    body: { metadata: { labels: { [KYMA_NAME_LABEL]: sr.spec.kyma } } }, contentType: PatchType.merge,
  });
}

async function recordEvents(deps: Deps, sr: SyncResource, data: ItemsApplied, state: string, message: string): Promise<void> {
  const r = data.result;
  const previous = sr.status?.state;
  if (previous !== state) {
    await deps.recorder.event(sr, state === 'Ready' || state === 'Processing' || state === 'Deleting' ? 'Normal' : 'Warning',
      state, 'Reconcile', message);
  }
  const wasFailing = new Set((sr.status?.items ?? []).filter((i) => i.state === 'Error').map((i) => `${i.name}/${i.reason}`));
  for (const i of r.items) {
    if (i.state === 'Error' && !wasFailing.has(`${i.name}/${i.reason}`)) {
      await deps.recorder.event(sr, 'Warning', i.reason, 'Apply', `item ${i.name}: ${i.message}`);
    }
  }
  const drifted = r.changes.filter((c) => c.drift).map((c) => c.subject);
  if (drifted.length > 0) {
    await deps.recorder.event(sr, 'Normal', 'DriftCorrected', 'Apply', `reverted changes made in the SKR to ${drifted.join(', ')}`);
  }
  const pruned = r.changes.filter((c) => c.action === 'deleted' && !r.items.some((i) => i.name === c.item)).map((c) => c.subject);
  if (pruned.length > 0) {
    await deps.recorder.event(sr, 'Normal', 'Pruned', 'Prune', `deleted objects no item claims any more: ${pruned.join(', ')}`);
  }
}
