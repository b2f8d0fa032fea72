// status.ts is the write-status step: a run's outcome in; the SyncResource's status
// written only when it changed, never from a result older than what is there, the
// kyma-name label kept equal to spec.kyma, and Kubernetes Events on transitions,
// failures, drift corrections and pruning. A changed status is written in one request on
// the basis of the SyncResource as the run saw it, the request testing that the object
// still is what the event claims; the live object is read when a test fails or the status
// looks unchanged.
import { describeCorrection } from '../changeset.ts';
import {
  EventTypes,
  type ItemsApplied,
  type Seen,
  type SkrChanged,
  type SkrHealth,
} from '../events/contract.ts';
import { PatchType } from '../kube/client.ts';
import { resourcePath } from '../kube/discovery.ts';
import { isNotFound, lostRace } from '../kube/errors.ts';
import { syncResourceInfo } from '../kcp.ts';
import { KYMA_NAME_LABEL, SYNC_API_VERSION, type SyncResource } from '../model.ts';
import { describeHealth } from '../health.ts';
import { computeStatus, reportedResult, sameStatus } from '../status.ts';
import { inSpan, Metrics } from '../telemetry.ts';
import type { Deps, Logger } from './deps.ts';
import type { Answer } from './answer.ts';
import { Priority } from '../concurrency.ts';
import { runPriority } from './requests.ts';
import { stillRecordable } from '../engine/inventory.ts';
import { bounded, claimRefusal, MAX_MESSAGE, resultNamesSpec } from '../policy/rules.ts';
import { getIfBound, unbound } from '../cluster/policies.ts';

/** StatusOutcome says what the step did; rejected: the event claimed what live state denies. */
type StatusOutcome = 'written' | 'unchanged' | 'stale' | 'gone' | 'rejected';

/** isStale tells whether a result is older than the status already written. */
export function isStale(live: SyncResource, data: ItemsApplied): boolean {
  const status = live.status;
  if (!status?.observedGeneration) return false;
  if (status.observedGeneration > data.result.generation) return true;
  const written = status.lastOperation?.lastUpdateTime;
  return (
    status.observedGeneration === data.result.generation &&
    written !== undefined &&
    written > data.result.observedAt
  );
}

/** writeStatusStep writes the status for one outcome; the process's gate starts edits first, then deletions. */
export async function writeStatusStep(deps: Deps, data: ItemsApplied, log: Logger): Promise<Answer> {
  const priority = runPriority(data.urgent, data.result.deleting !== undefined);
  const outcome = await deps.process.runs.run(priority, () => writeOnce(deps, data, new Date()));
  log.info(
    {
      step: 'write-status',
      syncResource: `${data.namespace}/${data.name}`,
      generation: data.result.generation,
      outcome,
    },
    'status handled',
  );
  return {};
}

/**
 * reportHealthStep writes the health the SKR source reported for objects of a SyncResource
 * (status.ts reportedResult decides whether its status may take it): one read, one write
 * guarded by what was read, and the Kubernetes Events of the change, with no run. A report
 * the status cannot take is answered with an skr.changed event: a run reads the objects.
 */
export async function reportHealthStep(deps: Deps, report: SkrHealth, log: Logger): Promise<Answer> {
  // Not ahead of bulk work: a report comes for every SyncResource a bulk creation rolls
  // out, and an edit's status goes first.
  const out = await deps.process.runs.run(Priority.bulk, () => reportOnce(deps, report, new Date()));
  const fields = { step: 'write-status', syncResource: `${report.namespace}/${report.name}` };
  if (typeof out === 'string') {
    log.info({ ...fields, outcome: out, objects: report.objects.length }, 'health reported');
    return {};
  }
  log.info({ ...fields, why: out.why }, 'health report needs a run');
  const data: SkrChanged = {
    namespace: report.namespace,
    name: report.name,
    uid: report.uid,
    kyma: report.kyma,
    changes: report.objects.map(({ health: _h, ...o }) => ({ ...o, change: 'health' as const })),
  };
  return { reply: { type: EventTypes.skrChanged, data } };
}

async function reportOnce(
  deps: Deps,
  report: SkrHealth,
  now: Date,
): Promise<StatusOutcome | { why: string }> {
  for (let attempt = 1; ; attempt++) {
    // A namespace the operator has not bound the product in: nothing to read or write there.
    // First at no older version than the source saw; after a lost race, from etcd.
    const live = await getIfBound(
      deps.store,
      deps.config,
      report,
      attempt === 1 ? report.resourceVersion : undefined,
    );
    if (!live || live.metadata.uid !== report.uid) return 'gone';
    const result = reportedResult(live, report.objects, now);
    if (typeof result === 'string') return { why: result };
    const { namespace, name, uid } = report;
    const data: ItemsApplied = { namespace, name, uid, kyma: live.spec.kyma, result };
    const out = await nextStatus(deps, data, live, now, false, attempt === 3);
    // A status written after this report's time (another replica's clock): a run decides.
    if (out === 'stale') return { why: 'a newer status was written meanwhile' };
    if (out !== 'read again') return out;
  }
}

/**
 * writeOnce decides on the SyncResource as the run saw it (seen) and writes in one request
 * whose tests make a false claim change nothing; otherwise, or when a test fails or
 * nothing seems to change, it reads the live object, decides, and writes guarded by what it
 * read, deciding again after a lost race. Events are not trusted: a result for another
 * namespace, another uid or a generation the SyncResource never had is dropped, and only
 * items the live spec names are written.
 */
async function writeOnce(deps: Deps, data: ItemsApplied, now: Date): Promise<StatusOutcome> {
  try {
    return await writeGuarded(deps, data, now);
  } catch (err) {
    // A namespace the operator has not bound the product in: nothing to write.
    if (unbound(deps.config, data.namespace, err)) return 'rejected';
    throw err;
  }
}

async function writeGuarded(deps: Deps, data: ItemsApplied, now: Date): Promise<StatusOutcome> {
  if (data.seen && data.result.generation <= data.seen.generation) {
    const out = await nextStatus(deps, data, seenObject(data, data.seen), now, true);
    if (out !== 'read again') return out;
  }
  for (let attempt = 1; ; attempt++) {
    const live = await deps.store.get(data.namespace, data.name);
    const refused = claimRefusal(live, { uid: data.uid, generation: data.result.generation });
    if (!live || refused === 'gone or replaced') return 'gone';
    if (refused || !resultNamesSpec(data.result, live)) return 'rejected';
    const out = await nextStatus(deps, withSpecItems(data, live), live, now, false, attempt === 3);
    if (out !== 'read again') return out;
  }
}

/** seenObject rebuilds what the status step needs of the SyncResource as the run saw it. */
function seenObject(data: ItemsApplied, seen: Seen): SyncResource {
  return {
    apiVersion: SYNC_API_VERSION,
    kind: 'SyncResource',
    metadata: {
      name: data.name,
      namespace: data.namespace,
      uid: data.uid,
      resourceVersion: seen.resourceVersion,
      generation: seen.generation,
      labels: {
        ...(seen.labelled ? { [KYMA_NAME_LABEL]: data.kyma } : {}),
      },
      // Presence is what counts (no label repair while deleting); the run saw the SyncResource being deleted.
      ...(data.result.deleting ? { deletionTimestamp: data.result.observedAt } : {}),
    },
    spec: { kyma: data.kyma, items: [] },
    ...(seen.status ? { status: seen.status } : {}),
  };
}

/** withSpecItems keeps the result's items that the live spec names, each once. */
function withSpecItems(data: ItemsApplied, live: SyncResource): ItemsApplied {
  const names = new Set((live.spec.items ?? []).map((i) => i.name));
  const items = data.result.items.filter((i) => names.delete(i.name));
  return items.length === data.result.items.length ? data : { ...data, result: { ...data.result, items } };
}

/**
 * nextStatus writes the status data calls for on the basis of base. A tentative base (the
 * SyncResource as the run saw it) is written with tests of its uid, resourceVersion,
 * generation and item names; a live one with tests of what was read. 'read again' means a
 * test failed (a lost race, or a claim the object denies) or, for a tentative base, that
 * only the live object can tell whether the result is stale or the status unchanged; last
 * rethrows a lost race instead (the broker retries).
 */
async function nextStatus(
  deps: Deps,
  data: ItemsApplied,
  base: SyncResource,
  now: Date,
  tentative: boolean,
  last = false,
): Promise<StatusOutcome | 'read again'> {
  if (isStale(base, data)) {
    if (tentative) return 'read again';
    await syncLabel(deps, base);
    return 'stale';
  }
  // The run's step computed the status on the basis it saw; a live basis is computed on here.
  const next = tentative && data.status ? data.status : computeStatus(data.result, base.status, now);
  const recorded = tentative
    ? (data.result.recorded ?? [])
    : stillRecordable(data.result.recorded, base.status?.synced);
  const preconditions = {
    generation: base.metadata.generation ?? 0,
    items: tentative ? data.result.items.map((i) => i.name) : [],
  };
  if (sameStatus(base.status, next)) {
    if (tentative && recorded.length === 0) return 'read again';
    Metrics.statusWritesSkipped.add(1);
    if (recorded.length > 0) {
      // The run's digests only: the status it computes is the one there.
      try {
        await deps.store.writeStatus(base, {}, preconditions, recorded);
      } catch (err) {
        if (isNotFound(err)) return 'gone';
        if (lostRace(err) && (tentative || !last)) return 'read again';
        throw err;
      }
    }
    await syncLabel(deps, base);
    // A drift correction or a prune leaves the status as it was, but is news.
    await recordChanges(deps, base, data);
    return 'unchanged';
  }
  try {
    await inSpan('write status', { 'sync.state': next.state! }, () =>
      deps.store.writeStatus(base, next, preconditions, recorded),
    );
  } catch (err) {
    if (isNotFound(err)) return 'gone';
    if (lostRace(err) && (tentative || !last)) return 'read again';
    throw err;
  }
  Metrics.statusWrites.add(1, { state: next.state! });
  // The label after the status: its watch event then finds the SyncResource settled.
  await syncLabel(deps, base);
  await recordEvents(deps, base, data, next.state!, next.conditions![0]!.message);
  return 'written';
}

/** syncLabel keeps the kyma-name label equal to spec.kyma (not while deleting: presence is what counts then). */
async function syncLabel(deps: Deps, sr: SyncResource): Promise<void> {
  const labels: Record<string, string | null> = {};
  if (sr.metadata.labels?.[KYMA_NAME_LABEL] !== sr.spec.kyma && !sr.metadata.deletionTimestamp)
    labels[KYMA_NAME_LABEL] = sr.spec.kyma;
  if (Object.keys(labels).length === 0) return;
  await deps.kcp.client
    .call('PATCH', resourcePath(syncResourceInfo, sr.metadata.namespace, sr.metadata.name), {
      body: { metadata: { labels } },
      contentType: PatchType.merge,
    })
    .catch((err: unknown) => {
      // Deleted meanwhile (the finalizer gone): nothing left to label.
      if (!isNotFound(err)) throw err;
    });
}

async function recordEvents(
  deps: Deps,
  sr: SyncResource,
  data: ItemsApplied,
  state: string,
  message: string,
): Promise<void> {
  const r = data.result;
  const previous = sr.status?.state;
  const health = healthNews(sr, data);
  // A change of state is news; a new SyncResource's first state is not (its status says so):
  // Ready at once, or Processing while its objects roll out (its turn to Ready is news).
  if (previous !== state && !(previous === undefined && (state === 'Ready' || state === 'Processing'))) {
    // A turn to Ready because objects turned healthy is one Event that names them.
    const healthy = state === 'Ready' && health.length > 0 && health.every((h) => h.reason === 'Healthy');
    await deps.recorder.event(
      sr,
      state === 'Ready' || state === 'Processing' || state === 'Deleting' ? 'Normal' : 'Warning',
      state,
      'Reconcile',
      healthy ? bounded(health.map((h) => h.note).join('; '), MAX_MESSAGE) : message,
    );
    if (healthy) health.length = 0;
  }
  const wasFailing = new Set(
    (sr.status?.items ?? []).filter((i) => i.state === 'Error').map((i) => `${i.name}/${i.reason}`),
  );
  for (const i of r.items) {
    if (i.state === 'Error' && !wasFailing.has(`${i.name}/${i.reason}`)) {
      await deps.recorder.event(sr, 'Warning', i.reason, 'Apply', `item ${i.name}: ${i.message}`);
    }
  }
  for (const h of health)
    await deps.recorder.event(
      sr,
      h.reason === 'Unhealthy' ? 'Warning' : 'Normal',
      h.reason,
      'Health',
      h.note,
    );
  await recordChanges(deps, sr, data);
}

/**
 * healthNews is the objects whose health changed, each counted in the metrics: one that
 * failed (Unhealthy), one that became healthy again or at last (Healthy), one that was
 * healthy and is on its way again (Progressing). A new object that is healthy at once is no news.
 */
function healthNews(
  sr: SyncResource,
  data: ItemsApplied,
): { reason: 'Unhealthy' | 'Healthy' | 'Progressing'; note: string }[] {
  const before = new Map((sr.status?.items ?? []).map((i) => [i.name, i.health?.status]));
  const out: { reason: 'Unhealthy' | 'Healthy' | 'Progressing'; note: string }[] = [];
  for (const i of data.result.items) {
    const was = before.get(i.name);
    const now = i.health?.status;
    if (!now || now === was) continue;
    Metrics.healthTransitions.add(1, { status: now });
    const note = describeHealth(i.object ?? `item ${i.name}`, i.health!);
    if (now === 'Failed') out.push({ reason: 'Unhealthy', note });
    else if (now === 'Current' && was !== undefined) out.push({ reason: 'Healthy', note });
    else if (now === 'InProgress' && (was === 'Current' || was === 'Failed'))
      out.push({ reason: 'Progressing', note });
  }
  return out;
}

/** recordChanges records the run's drift corrections and pruned objects (the recorder drops repeats). */
async function recordChanges(deps: Deps, sr: SyncResource, data: ItemsApplied): Promise<void> {
  const r = data.result;
  const drifted = r.changes.filter((c) => c.drift);
  if (drifted.length > 0) {
    await deps.recorder.event(
      sr,
      'Normal',
      'DriftCorrected',
      'Apply',
      drifted.map(describeCorrection).join('; '),
    );
  }
  for (const c of r.changes.filter((x) => x.action === 'recreated')) {
    const message =
      r.items.find((i) => i.name === c.item)?.message ?? `${c.subject} was deleted and created again`;
    await deps.recorder.event(sr, 'Normal', 'Recreated', 'Apply', message);
  }
  const pruned = r.changes
    .filter((c) => c.action === 'deleted' && !r.items.some((i) => i.name === c.item))
    .map((c) => c.subject);
  if (pruned.length > 0) {
    await deps.recorder.event(
      sr,
      'Normal',
      'Pruned',
      'Prune',
      `deleted objects no item claims any more: ${pruned.join(', ')}`,
    );
  }
}
