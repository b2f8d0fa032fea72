// resync: the PingSource tick fans out a reconcile request per Kyma's SyncResources; a change of
// a Kyma fans out to that Kyma's SyncResources. (Access Secret changes go to
// resolve-cluster, which may read Secrets.) The fan-out runs after the answer
// (pipeline/fanout.ts): the ping or the adapter's event is acknowledged at once.
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { ApiServerRefTypes, checkRef, PING_TYPE, type ObjectRef } from '../../lib/events.ts';
import { background } from '../../lib/pipeline/fanout.ts';
import { resyncAll, resyncKyma } from '../../lib/pipeline/resync.ts';
import { checkData, HttpError, run } from '../shared.ts';
import { isControlPlane } from '../../lib/policy/tenancy.ts';

/** handle is the function's CloudEvent handler. */
export async function handle(context: Context, event?: CloudEvent<unknown>): Promise<void> {
  if (!event) throw new HttpError(400, 'a CloudEvent is required');
  await run(context, event, 'resync', async (d, log) => {
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
    if (!isControlPlane(ref.namespace, d.config)) {
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
