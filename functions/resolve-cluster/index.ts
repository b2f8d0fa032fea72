// resolve-cluster: a SyncResource's change (the SKR source's), a reconcile request or an
// SKR change in; the SyncResource's cluster resolved (Kyma and access Secret version,
// never the kubeconfig) and posted on, or the resolution failure for the status step. A
// Kyma's request is resolved once for all its SyncResources. A changed access Secret
// reconciles its Kyma (rotation); a changed source Secret or ConfigMap the SyncResources
// that reference it.
import { EventTypes } from '../../lib/events/contract.ts';
import { checkKymaRequest } from '../../lib/events/parse.ts';
import * as requests from '../../lib/pipeline/requests.ts';
import { resolveKymaStep, resolveStep } from '../../lib/pipeline/resolve-cluster.ts';
import { sourceChangedStep } from '../../lib/pipeline/resync.ts';
import { defineFunction, ofType, route } from '../define.ts';

const source = (kind: string | undefined) => kind === 'Secret' || kind === 'ConfigMap';

export const handle = defineFunction('resolve-cluster', [
  route({
    accepts: ofType(EventTypes.reconcileKyma),
    parse: (e) => checkKymaRequest(e.data),
    run: resolveKymaStep,
  }),
  route({ accepts: ofType(EventTypes.skrChanged), parse: requests.fromSkrChanged, run: resolveStep }),
  route({ accepts: ofType(EventTypes.changed), parse: requests.fromChanged, run: resolveStep }),
  route({
    accepts: (e) => requests.isWatchEvent(e) && source(requests.kindOf(e)),
    parse: requests.fromObjectEvent,
    run: sourceChangedStep,
  }),
  route({
    accepts: (e) => e.type === EventTypes.reconcile || requests.isWatchEvent(e),
    parse: requests.fromSyncResourceEvent,
    run: resolveStep,
  }),
]);
