// resolve-cluster: a SyncResource reference (ApiServerSource) or a reconcile request
// in; "cluster resolved" out, or the resolution failure for the status step.
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { EventTypes, makeEvent, refFromEvent } from '../../lib/events.ts';
import { resolveStep } from '../../lib/pipeline/resolve.ts';
import { HttpError, run, traceExtensions } from '../shared.ts';

/** handle is the function's CloudEvent handler. */
export async function handle(context: Context, event?: CloudEvent<unknown>): Promise<CloudEvent<unknown> | undefined> {
  if (!event) throw new HttpError(400, 'a CloudEvent is required');
  const ref = refFromEvent(event);
  if (!ref) throw new HttpError(400, 'event data names no SyncResource');
  return run(context, event, 'resolve-cluster', async (d, log) => {
    // Watch events also report our own writes: those for a settled SyncResource need no run.
    const out = await resolveStep(d, ref, event.type.startsWith('dev.knative.apiserver.ref.'));
    const fields = { step: 'resolve-cluster', syncResource: `${ref.namespace}/${ref.name}` };
    switch (out.kind) {
      case 'none':
        log.info({ ...fields, why: out.why }, 'nothing to resolve');
        return undefined;
      case 'failed':
        log.warn({ ...fields, reason: out.data.result.clusterError?.reason }, 'cluster not resolved');
        return makeEvent('resolve-cluster', EventTypes.itemsApplied, out.data, traceExtensions(event));
      case 'resolved':
        log.info({ ...fields, cluster: out.data.kyma }, 'cluster resolved');
        return makeEvent('resolve-cluster', EventTypes.clusterResolved, out.data, traceExtensions(event));
    }
  });
}
