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
  const written = data.seen ? await writeOnSeen(deps, data, data.seen, now) : undefined;
  if (written) return written;
  const live = await deps.store.get(data.namespace, data.name);
  if (!live || live.metadata.uid !== data.uid) return 'gone';
  if (isStale(live, data)) {
    await syncLabel(deps, live);
    return 'stale';
  }
  const next = computeStatus(data.result, live.status, now);
  if (sameStatus(live.status, next)) {
    Metrics.statusWritesSkipped.add(1);
    await syncLabel(deps, live);
    return 'unchanged';
  }
  try {
    await inSpan('write status', { 'sync.state': next.state! }, () => deps.store.writeStatus(live, next));
  } catch (err) {
    if (isNotFound(err)) return 'gone';
    throw err;
  }
  Metrics.statusWrites.add(1, { state: next.state! });
  // The label after the status: its watch event then finds the SyncResource settled.
  await syncLabel(deps, live);
  await recordEvents(deps, live, data, next.state!, next.conditions![0]!.message);
  return 'written';
}

/** writeOnSeen writes a changed status guarded by the resourceVersion the run saw; undefined leaves the decision to a read. */
async function writeOnSeen(deps: Deps, data: ItemsApplied, seen: Seen, now: Date): Promise<StatusOutcome | undefined> {
  const sr: SyncResource = {
    apiVersion: SYNC_API_VERSION, kind: 'SyncResource',
    metadata: { name: data.name, namespace: data.namespace, uid: data.uid, resourceVersion: seen.resourceVersion },
    spec: { kyma: data.kyma, items: [] }, ...(seen.status ? { status: seen.status } : {}),
  };
  if (isStale(sr, data)) return undefined;
  const next = computeStatus(data.result, seen.status, now);
  if (sameStatus(seen.status, next)) return undefined;
  try {
    await inSpan('write status', { 'sync.state': next.state! }, () => deps.store.writeStatus(sr, next, true));
  } catch (err) {
    if (isConflict(err)) return undefined;
    if (isNotFound(err)) return 'gone';
    throw err;
  }
  Metrics.statusWrites.add(1, { state: next.state! });
  if (!seen.labelled && !data.result.deleting) await syncLabel(deps, sr);
  await recordEvents(deps, sr, data, next.state!, next.conditions![0]!.message);
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
