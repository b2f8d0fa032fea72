// apply-kyma.ts runs a Kyma's batch in apply-items: every SyncResource of one Kyma from
// one LIST (a resync, a change of the Kyma or its access Secret), each run through its
// SyncResource's queue and the process gate like any run (apply.ts). Runs that changed
// nothing need no status step and post nothing.
import {
  EventTypes,
  type ItemsApplied,
  type KymaResolved,
  type ReconcileRequest,
  type SyncRef,
} from '../events/contract.ts';
import { KYMA_NAME_LABEL, type SyncResource } from '../model.ts';
import { sameStatus } from '../status.ts';
import { Metrics } from '../telemetry.ts';
import { mapLimit } from '../concurrency.ts';
import type { Answer, Emit } from './answer.ts';
import type { Deps, Logger } from './deps.ts';
import { knownUnreachable, logApplied, queueFor, type ApplyOutcome, type RunRequest } from './apply-items.ts';
import { unresolved } from './resolve-cluster.ts';
import { forEachPage } from './resync.ts';
import { unbound } from '../cluster/policies.ts';

/** KymaApplied is what a run of a Kyma's batch comes to. */
export interface KymaApplied {
  /** outcomes are the results the status step must see (a status, label or event to write); the rest changed nothing. */
  outcomes: ItemsApplied[];
  /** unchanged counts runs that need nothing written. */
  unchanged: number;
  /** redirect names SyncResources to reconcile on their own: labelled for this Kyma but targeting another, or whose run failed transiently. */
  redirect: SyncRef[];
  /** retry asks the broker to redeliver the batch (the SKR was unreachable). */
  retry: boolean;
}

/** BATCH_RUNS bounds the runs of one Kyma's batch started at a time (the process gate bounds all runs). */
const BATCH_RUNS = 8;

/**
 * applyKymaStep reconciles every SyncResource labelled for the Kyma data names (runBatch)
 * and sends, before it answers, the outcomes that need the status step and a reconcile
 * request for each SyncResource that must run on its own.
 */
export async function applyKymaStep(deps: Deps, data: KymaResolved, log: Logger): Promise<Answer> {
  const out = await runBatch(deps, data);
  for (const o of out.outcomes) logApplied(log, o);
  if (out.unchanged > 0) Metrics.statusWritesSkipped.add(out.unchanged);
  log.info(
    {
      step: 'apply-items',
      cluster: data.name,
      namespace: data.namespace,
      trigger: data.trigger,
      changed: out.outcomes.length,
      unchanged: out.unchanged,
      redirected: out.redirect.length,
    },
    'Kyma applied',
  );
  const request = (ref: SyncRef): ReconcileRequest => ({
    ...ref,
    trigger: data.trigger,
    ...(data.since ? { since: data.since } : {}),
  });
  const send: Emit[] = [
    ...out.outcomes.map((o) => ({ type: EventTypes.itemsApplied, data: o })),
    ...out.redirect.map((ref) => ({ type: EventTypes.reconcile, data: request(ref) })),
  ];
  return { send, ...(out.retry ? { retry: 'ClusterUnreachable: retry later' } : {}) };
}

/**
 * runBatch runs every SyncResource labelled for the Kyma data names, from one LIST of
 * them: each run goes through the SyncResource's queue (serialized with its other runs in
 * this process) and the process gate, with the SyncResource as listed.
 */
async function runBatch(deps: Deps, data: KymaResolved): Promise<KymaApplied> {
  const out: KymaApplied = { outcomes: [], unchanged: 0, redirect: [], retry: false };
  const srs: SyncResource[] = [];
  try {
    await forEachPage<SyncResource>(
      deps,
      data.namespace,
      `${KYMA_NAME_LABEL}=${data.name}`,
      async (page) => void srs.push(...page),
      true,
    );
  } catch (err) {
    if (unbound(deps.config, data.namespace, err)) return out;
    throw err;
  }
  // The batch's breaker: once a run finds the SKR unreachable, the runs not started yet
  // are not started (one SKR, one answer); each gets that finding as its outcome, written
  // only where its status does not say so already.
  let tripped: ItemsApplied['result']['clusterError'];
  await mapLimit(srs, BATCH_RUNS, async (sr) => {
    const ref = { namespace: data.namespace, name: sr.metadata.name };
    if (sr.spec.kyma !== data.name) return void out.redirect.push(ref);
    if (tripped) {
      Metrics.runs.add(1, { outcome: 'skipped' });
      if (knownUnreachable(sr)) out.unchanged++;
      else {
        out.outcomes.push(unresolved(sr, tripped));
        out.retry = true;
      }
      return;
    }
    const run = await runListed(deps, data, sr);
    if (run === 'failed') return void out.redirect.push(ref);
    if (run.kind === 'none') return;
    if (run.data.result.clusterError?.transient) tripped ??= run.data.result.clusterError;
    if (run.retry) out.retry = true;
    // Gone with its finalizer: no status to write.
    if (needsStatusStep(run.data) && !run.gone) out.outcomes.push(run.data);
    else out.unchanged++;
  });
  return out;
}

/**
 * runListed runs one SyncResource of the batch as listed, through its queue; a failed run
 * (KCP trouble, or the SyncResource changed) is reconciled on its own request, with the
 * broker's back-off.
 */
async function runListed(deps: Deps, data: KymaResolved, sr: SyncResource): Promise<ApplyOutcome | 'failed'> {
  const ref = { namespace: data.namespace, name: sr.metadata.name };
  const request: RunRequest = {
    ...ref,
    trigger: data.trigger,
    uid: sr.metadata.uid!,
    generation: sr.metadata.generation ?? 0,
    kyma: data.name,
    secret: data.secret,
    ...(data.since ? { since: data.since } : {}),
    listed: sr,
  };
  try {
    return await queueFor(deps).run(`${ref.namespace}/${ref.name}`, { deps, request });
  } catch (err) {
    deps.log.warn(
      {
        step: 'apply-items',
        syncResource: `${ref.namespace}/${ref.name}`,
        cluster: data.name,
        error: err instanceof Error ? err.message : String(err),
      },
      'run of a batch failed; reconciling it on its own',
    );
    return 'failed';
  }
}

/**
 * needsStatusStep tells whether the status step would write anything for a run's outcome
 * (status, label, Kubernetes Events): not when the run changed nothing, its SyncResource
 * is labelled, and the status it saw is the status the run computed.
 */
export function needsStatusStep(data: ItemsApplied): boolean {
  const r = data.result;
  const seen = data.seen;
  if (!seen?.status || !data.status || !seen.labelled || r.clusterError || r.deleting) return true;
  if (r.generation !== seen.generation) return true;
  if (r.changes.some((c) => c.action !== 'unchanged') || (r.recorded?.length ?? 0) > 0) return true;
  return !sameStatus(seen.status, data.status);
}
