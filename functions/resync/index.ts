// resync: the PingSource tick fans out a reconcile request per Kyma; a change of a Kyma
// fans out to that Kyma's SyncResources. (Access Secret changes go to resolve-cluster,
// which may read Secrets.) The fan-out runs after the answer (pipeline/fanout.ts): the
// ping or the adapter's event is acknowledged at once.
import { ApiServerRefTypes, PING_TYPE } from '../../lib/events/contract.ts';
import { fromKymaEvent } from '../../lib/pipeline/requests.ts';
import { kymaChangedStep, tickStep } from '../../lib/pipeline/resync.ts';
import { defineFunction, ofType, route } from '../define.ts';

export const handle = defineFunction('resync', [
  route({ accepts: ofType(PING_TYPE), parse: () => undefined, run: tickStep }),
  route({ accepts: ofType(...ApiServerRefTypes), parse: fromKymaEvent, run: kymaChangedStep }),
]);
