// apply-items: "cluster resolved" in; the engine runs against the SKR; "items applied"
// out. When the SKR is unreachable the outcome is still sent on (so status shows it)
// and the answer is 503, so the broker redelivers with backoff.
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import {
  checkClusterResolved,
  checkKymaResolved,
  EventTypes,
  makeEvent,
  type ItemsApplied,
  type ReconcileRequest,
} from '../../lib/events.ts';
import type { Logger } from '../../lib/pipeline/deps.ts';
import { summarize } from '../../lib/changeset.ts';
import { applyKymaStep, applyStep } from '../../lib/pipeline/apply.ts';
import { Metrics } from '../../lib/telemetry.ts';
import { mapLimit } from '../../lib/concurrency.ts';
import { checkData, HttpError, run, traceExtensions } from '../shared.ts';

const POSTS = 8;

/** handle is the function's CloudEvent handler. */
export async function handle(
  context: Context,
  event?: CloudEvent<unknown>,
): Promise<CloudEvent<unknown> | undefined> {
  if (!event) throw new HttpError(400, 'a CloudEvent is required');
  if (event.type === EventTypes.kymaResolved) return applyKyma(context, event);
  if (event.type !== EventTypes.clusterResolved)
    throw new HttpError(400, `expected ${EventTypes.clusterResolved}`);
  const data = checkData(() => checkClusterResolved(event.data));
  return run(context, event, 'apply-items', async (d, log) => {
    const out = await applyStep(d, data);
    const fields = {
      step: 'apply-items',
      syncResource: `${data.namespace}/${data.name}`,
      cluster: data.kyma,
    };
    if (out.kind === 'none') {
      log.info({ ...fields, why: out.why }, 'nothing to apply');
      return undefined;
    }
    const reply = makeEvent('apply-items', EventTypes.itemsApplied, out.data, traceExtensions(event));
    logApplied(log, out.data);
    if (out.retry) {
      await d.send(reply);
      throw new HttpError(503, `${out.data.result.clusterError!.reason}: retry later`);
    }
    return reply;
  });
}

/** logApplied logs a run's outcome and each drift it corrected (fields and managers, never values). */
function logApplied(log: Logger, data: ItemsApplied): void {
  const fields = { step: 'apply-items', syncResource: `${data.namespace}/${data.name}`, cluster: data.kyma };
  log.info(
    {
      ...fields,
      generation: data.result.generation,
      ...summarize(data.result.changes),
      clusterError: data.result.clusterError?.reason,
    },
    'items applied',
  );
  for (const c of data.result.changes) {
    if (c.drift)
      log.info(
        { ...fields, object: c.subject, paths: c.cause?.paths ?? [], managers: c.cause?.managers ?? [] },
        'drift corrected',
      );
  }
}

/**
 * applyKyma reconciles the SyncResources of one Kyma (a resync, a change of the Kyma or
 * its access Secret) and posts the outcomes that need the status step; runs that changed
 * nothing post nothing. SyncResources that must run on their own get a reconcile request.
 */
function applyKyma(context: Context, event: CloudEvent<unknown>): Promise<undefined> {
  const data = checkData(() => checkKymaResolved(event.data));
  return run(context, event, 'apply-items', async (d, log) => {
    const out = await applyKymaStep(d, data);
    const ext = traceExtensions(event);
    for (const o of out.outcomes) logApplied(log, o);
    await mapLimit(out.outcomes, POSTS, (o) =>
      d.send(makeEvent('apply-items', EventTypes.itemsApplied, o, ext)),
    );
    await mapLimit(out.redirect, POSTS, (ref) =>
      d.send(
        makeEvent<ReconcileRequest>(
          'apply-items',
          EventTypes.reconcile,
          { ...ref, trigger: data.trigger, ...(data.since ? { since: data.since } : {}) },
          ext,
        ),
      ),
    );
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
    if (out.retry) throw new HttpError(503, 'ClusterUnreachable: retry later');
    return undefined;
  });
}
