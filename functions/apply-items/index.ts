// apply-items: "cluster resolved" in; the engine runs against the SKR; "items applied"
// out. When the SKR is unreachable the outcome is still sent on (so status shows it) and
// the answer is 503, so the broker redelivers with back-off. A Kyma's batch ("kyma
// resolved") runs each of its SyncResources and sends only the outcomes that change a status.
import { EventTypes } from '../../lib/events/contract.ts';
import { checkClusterResolved, checkKymaResolved } from '../../lib/events/parse.ts';
import { applyStep } from '../../lib/pipeline/apply-items.ts';
import { applyKymaStep } from '../../lib/pipeline/apply-kyma.ts';
import { defineFunction, ofType, route } from '../define.ts';

export const handle = defineFunction('apply-items', [
  route({
    accepts: ofType(EventTypes.clusterResolved),
    parse: (e) => checkClusterResolved(e.data),
    run: applyStep,
  }),
  route({
    accepts: ofType(EventTypes.kymaResolved),
    parse: (e) => checkKymaResolved(e.data),
    run: applyKymaStep,
  }),
]);
