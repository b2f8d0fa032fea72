// resolve-cluster: a SyncResource change (the source's), a reconcile request or an SKR
// change in; "cluster resolved" posted (not replied: see below), or the resolution failure for
// the status step. A Kyma's request is resolved once for all its SyncResources and
// answered with "kyma resolved". A changed access Secret is mapped to its Kyma and
// requests its reconcile (rotation); a changed source Secret (dataFrom) the
// SyncResources of its Kyma that reference it.
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { isControlPlane } from '../../lib/policy/tenancy.ts';
import {
  checkKymaRequest,
  checkSkrChanged,
  checkSyncResourceChanged,
  EventTypes,
  makeEvent,
  refFromEvent,
  type ReconcileRequest,
  type SyncRef,
} from '../../lib/events.ts';
import type { Deps, Logger } from '../../lib/pipeline/deps.ts';
import { resolveKymaStep, resolveStep, type ResolveOutcome } from '../../lib/pipeline/resolve.ts';
import { background, post } from '../../lib/pipeline/fanout.ts';
import { ownerOfSecret, resyncKyma, resyncResourceSource, resyncSource } from '../../lib/pipeline/resync.ts';
import { checkData, HttpError, run, traceExtensions } from '../shared.ts';

/** handle is the function's CloudEvent handler. */
export async function handle(
  context: Context,
  event?: CloudEvent<unknown>,
): Promise<CloudEvent<unknown> | undefined> {
  if (!event) throw new HttpError(400, 'a CloudEvent is required');
  if (event.type === EventTypes.reconcileKyma) return resolveKyma(context, event);
  if (event.type === EventTypes.skrChanged) return skrChanged(context, event);
  if (event.type === EventTypes.changed) return changed(context, event);
  const ref = refFromEvent(event);
  if (!ref) throw new HttpError(400, 'event data names no SyncResource');
  const kind = (event as unknown as { kind?: string }).kind;
  if (kind === 'Secret' || kind === 'ConfigMap') {
    return run(context, event, 'resolve-cluster', async (d, log) => {
      const object = `${ref.namespace}/${ref.name}`;
      // Sources outside the control-plane namespaces are never read.
      if (!isControlPlane(ref.namespace, d.config)) {
        log.warn({ step: 'resolve-cluster', trigger: kind, object }, 'namespace not allowed');
        return undefined;
      }
      // The posts run after the answer (pipeline/fanout.ts).
      if (kind === 'ConfigMap') {
        // A source ConfigMap changes the SyncResources that reference it; apply-items reads the text.
        background(d, log, `configmap ${object}`, () => resyncResourceSource(d, ref.namespace, ref.name));
        log.info({ step: 'resolve-cluster', trigger: 'source ConfigMap', object }, 'resync started');
        return undefined;
      }
      // An access Secret changes every SyncResource of its Kyma; a source Secret those that reference it.
      const owner = await ownerOfSecret(d, ref.namespace, ref.name);
      if (owner) {
        background(d, log, `secret ${object}`, () =>
          owner.source
            ? resyncSource(d, ref.namespace, owner.kyma, ref.name)
            : resyncKyma(d, ref.namespace, owner.kyma, 'secret'),
        );
      }
      log.info(
        {
          step: 'resolve-cluster',
          trigger: owner?.source ? 'source Secret' : 'Secret',
          object,
          cluster: owner?.kyma,
        },
        owner ? 'resync started' : 'not labelled for a Kyma',
      );
      return undefined;
    });
  }
  return run(context, event, 'resolve-cluster', async (d, log) => {
    // Watch events also report our own writes: those for a settled SyncResource need no run.
    const watched = event.type.startsWith('dev.knative.apiserver.ref.');
    const request = watched ? undefined : (event.data as Partial<ReconcileRequest>);
    const trigger = request?.trigger ?? (watched ? 'watch' : 'resync');
    // Creations and reconcile requests come in bulk; changes of existing SyncResources go first.
    const change = watched && !event.type.endsWith('.add');
    const out = await resolveStep(d, ref, {
      onlyIfUnsettled: watched,
      trigger,
      change,
      ...(typeof request?.since === 'string' ? { since: request.since } : {}),
    });
    return answer(d, log, event, ref, out);
  });
}

/**
 * skrChanged runs a SyncResource whose SKR objects the SKR source saw change, if its KCP
 * inventory holds one of them (the event's claim is checked, never trusted), ahead of bulk work.
 */
function skrChanged(context: Context, event: CloudEvent<unknown>): Promise<CloudEvent<unknown> | undefined> {
  const req = checkData(() => checkSkrChanged(event.data));
  const ref = { namespace: req.namespace, name: req.name };
  return run(context, event, 'resolve-cluster', async (d, log) => {
    const out = await resolveStep(d, ref, { trigger: 'skr', change: true, held: req });
    return answer(d, log, event, ref, out);
  });
}

/**
 * changed runs a SyncResource the source saw new, edited or being deleted (never for its
 * own writes), from the source's account of it: no read here; an edit or a deletion ahead
 * of bulk work.
 */
function changed(context: Context, event: CloudEvent<unknown>): Promise<CloudEvent<unknown> | undefined> {
  const seen = checkData(() => checkSyncResourceChanged(event.data));
  const ref = { namespace: seen.namespace, name: seen.name };
  return run(context, event, 'resolve-cluster', async (d, log) => {
    // A policy's change, or a run asked for with the annotation, runs it at a generation
    // already run: a reconcile request, never taken for the echo of a run that left it Ready.
    const trigger = seen.policy || seen.requested ? 'kyma' : 'watch';
    const out = await resolveStep(d, ref, { trigger, change: seen.change === true, seen });
    return answer(d, log, event, ref, out);
  });
}

/** answer logs a resolution and posts what comes next: the cluster resolved, or the failure for the status step. */
function answer(
  d: Deps,
  log: Logger,
  event: CloudEvent<unknown>,
  ref: SyncRef,
  out: ResolveOutcome,
): undefined {
  const fields = { step: 'resolve-cluster', syncResource: `${ref.namespace}/${ref.name}` };
  let next: CloudEvent<unknown>;
  switch (out.kind) {
    case 'none':
      log.info({ ...fields, why: out.why }, 'nothing to resolve');
      return undefined;
    case 'failed':
      log.warn({ ...fields, reason: out.data.result.clusterError?.reason }, 'cluster not resolved');
      next = makeEvent('resolve-cluster', EventTypes.itemsApplied, out.data, traceExtensions(event));
      break;
    case 'resolved':
      log.info(
        {
          ...fields,
          cluster: out.data.kyma,
          generation: out.data.generation,
          urgent: out.data.urgent ?? false,
        },
        'cluster resolved',
      );
      next = makeEvent('resolve-cluster', EventTypes.clusterResolved, out.data, traceExtensions(event));
      break;
  }
  // Posted, not replied: a channel-based broker would hold the reply, and with it the
  // ApiServerSource adapter that sends one event after another, for the whole run behind
  // it. This answer comes after resolve-cluster's own work; a post cut short by the end
  // of this process is caught up by the next resync (pipeline/fanout.ts).
  const urgent = out.kind === 'resolved' && out.data.urgent === true;
  background(
    d,
    log,
    `resolve ${ref.namespace}/${ref.name}`,
    async () => {
      await post(d, next, urgent);
      return 1;
    },
    { quiet: true },
  );
  return undefined;
}

/**
 * resolveKyma resolves the cluster of a Kyma for all its SyncResources (a resync, a
 * change of the Kyma or its access Secret) and replies with one kyma.resolved, or posts
 * each SyncResource's failure after answering.
 */
function resolveKyma(context: Context, event: CloudEvent<unknown>): Promise<CloudEvent<unknown> | undefined> {
  const req = checkData(() => checkKymaRequest(event.data));
  return run(context, event, 'resolve-cluster', async (d, log) => {
    const out = await resolveKymaStep(d, req);
    const fields = {
      step: 'resolve-cluster',
      cluster: req.name,
      namespace: req.namespace,
      trigger: req.trigger,
    };
    const ext = traceExtensions(event);
    switch (out.kind) {
      case 'none':
        log.info({ ...fields, why: out.why }, 'nothing to resolve');
        return undefined;
      case 'failed':
        log.warn(
          { ...fields, reason: out.data[0]?.result.clusterError?.reason, syncResources: out.data.length },
          'cluster not resolved',
        );
        background(
          d,
          log,
          `resolve kyma ${req.namespace}/${req.name}`,
          async () => {
            for (const data of out.data)
              await post(d, makeEvent('resolve-cluster', EventTypes.itemsApplied, data, ext), false);
            return out.data.length;
          },
          { quiet: true },
        );
        return undefined;
      case 'resolved':
        // Replied, not posted: the request comes from a fan-out (a resync, a Kyma or Secret
        // change) that runs behind its own answer, and holding its post for the Kyma's run
        // bounds the Kymas in progress at once by the fan-out's parallelism.
        log.info(fields, 'cluster resolved');
        return makeEvent('resolve-cluster', EventTypes.kymaResolved, out.data, ext);
    }
  });
}
