// resolve-cluster: a SyncResource reference (ApiServerSource) or a reconcile request
// in; "cluster resolved" posted, or the resolution failure for the status step. A
// changed access Secret is mapped to its Kyma and fans out reconcile requests
// (rotation); a changed source Secret (dataFrom) to the SyncResources of its Kyma that
// reference it.
//
// Every request is answered at once and worked on after, in this process's own queue
// (one run per SyncResource at a time, edits first: pipeline/resolve.ts), and the result
// is posted, not replied. The ApiServerSource adapter sends one event after another and
// a channel-based broker holds each until the pipeline behind it has run: a reply, or
// even the read of the SyncResource before answering, would make every event wait for
// those before it, and an edit made during a bulk create for all of the creations. A
// request cut short by the end of this process is caught up by the next resync.
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { outsideControlPlane } from '../../lib/config.ts';
import { EventTypes, makeEvent, refFromEvent, type ReconcileRequest, type SyncRef } from '../../lib/events.ts';
import type { Deps, Logger } from '../../lib/pipeline/deps.ts';
import { resolveStep, type ResolveOptions } from '../../lib/pipeline/resolve.ts';
import { KeyedQueue } from '../../lib/util.ts';
import { background } from '../../lib/pipeline/fanout.ts';
import { ownerOfSecret, resyncKyma, resyncSource } from '../../lib/pipeline/resync.ts';
import { HttpError, run, traceExtensions } from '../shared.ts';

/** handle is the function's CloudEvent handler. */
export async function handle(context: Context, event?: CloudEvent<unknown>): Promise<CloudEvent<unknown> | undefined> {
  if (!event) throw new HttpError(400, 'a CloudEvent is required');
  const ref = refFromEvent(event);
  if (!ref) throw new HttpError(400, 'event data names no SyncResource');
  if ((event as unknown as { kind?: string }).kind === 'Secret') {
    return run(context, event, 'resolve-cluster', async (d, log) => {
      // Secrets outside the control-plane namespaces are never read.
      if (outsideControlPlane(ref.namespace, d.config)) {
        log.warn({ step: 'resolve-cluster', trigger: 'Secret', object: `${ref.namespace}/${ref.name}` }, 'namespace not allowed');
        return undefined;
      }
      // An access Secret changes every SyncResource of its Kyma; a source Secret those that reference it.
      // The posts run after the answer (pipeline/fanout.ts).
      const owner = await ownerOfSecret(d, ref.namespace, ref.name);
      if (owner) {
        background(d, log, `secret ${ref.namespace}/${ref.name}`, () => (owner.source
          ? resyncSource(d, ref.namespace, owner.kyma, ref.name)
          : resyncKyma(d, ref.namespace, owner.kyma, 'secret')));
      }
      log.info({ step: 'resolve-cluster', trigger: owner?.source ? 'source Secret' : 'Secret', object: `${ref.namespace}/${ref.name}`, cluster: owner?.kyma }, owner ? 'resync started' : 'not labelled for a Kyma');
      return undefined;
    });
  }
  return run(context, event, 'resolve-cluster', async (d, log) => {
    // Watch events also report our own writes: those for a settled SyncResource need no run.
    const watched = event.type.startsWith('dev.knative.apiserver.ref.');
    const request = watched ? undefined : event.data as Partial<ReconcileRequest>;
    const trigger = request?.trigger ?? (watched ? 'watch' : 'resync');
    // Creations and reconcile requests come in bulk; changes of existing SyncResources go first.
    const change = watched && !event.type.endsWith('.add');
    const opts: ResolveOptions = { onlyIfUnsettled: watched, trigger, change, ...(typeof request?.since === 'string' ? { since: request.since } : {}) };
    // Answered at once, worked on after (see the top of the file); requests for one
    // SyncResource that meet in the queue are merged into one run.
    const work: Work = { ref, opts, trace: traceExtensions(event), log };
    background(d, log, `resolve ${ref.namespace}/${ref.name} ${event.id}`, async () => { await queueFor(d).run(`${ref.namespace}/${ref.name}`, work); return 1; }, { quiet: true });
    return undefined;
  });
}

/** Work is one resolve request waiting for its SyncResource's turn. */
interface Work {
  ref: SyncRef;
  opts: ResolveOptions;
  trace: Record<string, string>;
  log: Logger;
}

/**
 * mergeWork combines two requests for one SyncResource: a run is skipped as settled only if
 * both allow it, a reconcile request's trigger wins over a watch event's (a Secret's over
 * all), a change goes first if either is one, the later since and trace win.
 */
export function mergeWork(a: Work, b: Work): Work {
  const triggers = [a.opts.trigger ?? 'resync', b.opts.trigger ?? 'resync'];
  const trigger = triggers.includes('secret') ? 'secret' : triggers.find((t) => t !== 'watch') ?? 'watch';
  const since = [a.opts.since, b.opts.since].filter((x) => x !== undefined).sort().pop();
  return {
    ...b,
    opts: { onlyIfUnsettled: a.opts.onlyIfUnsettled === true && b.opts.onlyIfUnsettled === true, trigger, change: a.opts.change === true || b.opts.change === true, ...(since ? { since } : {}) },
  };
}

const queues = new WeakMap<Deps, KeyedQueue<Work, void>>();
function queueFor(d: Deps): KeyedQueue<Work, void> {
  let q = queues.get(d);
  if (!q) queues.set(d, q = new KeyedQueue((w) => resolveAndPost(d, w), mergeWork));
  return q;
}

async function resolveAndPost(d: Deps, w: Work): Promise<void> {
  const { ref, log } = w;
  const out = await resolveStep(d, ref, w.opts);
  const fields = { step: 'resolve-cluster', syncResource: `${ref.namespace}/${ref.name}` };
  switch (out.kind) {
    case 'none':
      log.info({ ...fields, why: out.why }, 'nothing to resolve');
      return;
    case 'failed':
      log.warn({ ...fields, reason: out.data.result.clusterError?.reason }, 'cluster not resolved');
      await d.send(makeEvent('resolve-cluster', EventTypes.itemsApplied, out.data, w.trace));
      return;
    case 'resolved':
      log.info({ ...fields, cluster: out.data.kyma, generation: out.data.generation, urgent: out.data.urgent ?? false }, 'cluster resolved');
      await d.send(makeEvent('resolve-cluster', EventTypes.clusterResolved, out.data, w.trace));
  }
}
