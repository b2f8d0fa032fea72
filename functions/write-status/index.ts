// write-status: "items applied" in, or the SKR source's health report; status, label and
// Kubernetes Events written.
import { EventTypes } from '../../lib/events/contract.ts';
import { checkItemsApplied, checkSkrHealth } from '../../lib/events/parse.ts';
import { reportHealthStep, writeStatusStep } from '../../lib/pipeline/write-status.ts';
import { defineFunction, ofType, route } from '../define.ts';

export const handle = defineFunction('write-status', [
  route({
    accepts: ofType(EventTypes.itemsApplied),
    parse: (e) => checkItemsApplied(e.data),
    run: writeStatusStep,
  }),
  route({
    accepts: ofType(EventTypes.skrHealth),
    parse: (e) => checkSkrHealth(e.data),
    run: reportHealthStep,
  }),
]);
