// resync: PingSource ticks fan out a reconcile request per SyncResource (the recheck tick:
// per SyncResource with objects on their way, pipeline/resync.ts); a change of
// a Kyma fans out to that Kyma's SyncResources. (Access Secret changes go to
// resolve-cluster, which may read Secrets.) The fan-out runs after the answer
// (pipeline/fanout.ts): the ping or the adapter's event is acknowledged at once.
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { ApiServerRefTypes, checkRef, PING_TYPE, type ObjectRef } from '../../lib/events.ts';
import { background } from '../../lib/pipeline/fanout.ts';
import { recheck, resyncAll, resyncKyma } from '../../lib/pipeline/resync.ts';
import { checkData, HttpError, run } from '../shared.ts';
import { inControlPlane } from '../../lib/policy/rules.ts';

/** isRecheck tells a recheck tick ({"reason":"recheck"}) from the resync tick. */
const isRecheck = (data: unknown): boolean => (data as { reason?: unknown } | null)?.reason === 'recheck';

/** recheckInterval is the recheck tick's period in seconds, as its PingSource's data says (1 to 60; default 5). */
function recheckInterval(data: unknown): number {
  const s = (data as { intervalSeconds?: unknown }).intervalSeconds;
  return typeof s === 'number' && Number.isFinite(s) ? Math.min(60, Math.max(1, s)) : 5;
}

/** handle is the function's CloudEvent handler. */
export async function handle(context: Context, event?: CloudEvent<unknown>): Promise<void> {
  if (!event) throw new HttpError(400, 'a CloudEvent is required');
  await run(context, event, 'resync', async (d, log) => {
    if (event.type === PING_TYPE && isRecheck(event.data)) {
      // The recheck tick (PingSource sync-recheck): only SyncResources with objects on their way.
      const tickS = recheckInterval(event.data);
      background(d, log, 'recheck', () => recheck(d, tickS), { quiet: true });
      return;
    }
    if (event.type === PING_TYPE) {
      background(d, log, 'all', () => resyncAll(d));
      log.info({ step: 'resync', trigger: 'ping' }, 'resync started');
      return;
    }
    if (!(ApiServerRefTypes as readonly string[]).includes(event.type))
      throw new HttpError(400, `unexpected event type ${event.type}`);
    const ref = checkData(() => checkRef(event.data));
    const kind = (event as unknown as { kind?: string }).kind ?? (event.data as Partial<ObjectRef>).kind;
    if (kind !== 'Kyma') throw new HttpError(400, `unexpected kind ${kind}`);
    if (!inControlPlane(ref.namespace, d.config)) {
      log.warn(
        { step: 'resync', trigger: kind, object: `${ref.namespace}/${ref.name}` },
        'namespace not allowed',
      );
      return;
    }
    background(d, log, `kyma ${ref.namespace}/${ref.name}`, () =>
      resyncKyma(d, ref.namespace, ref.name, 'kyma'),
    );
    log.info({ step: 'resync', trigger: kind, object: `${ref.namespace}/${ref.name}` }, 'resync started');
  });
}
