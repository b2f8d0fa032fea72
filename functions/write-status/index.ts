// write-status: "items applied" in; status, label and Kubernetes Events written.
import { EventTypes } from '../../lib/events/contract.ts';
import { checkItemsApplied } from '../../lib/events/parse.ts';
import { writeStatusStep } from '../../lib/pipeline/write-status.ts';
import { defineFunction, ofType, route } from '../define.ts';

export const handle = defineFunction('write-status', [
  route({
    accepts: ofType(EventTypes.itemsApplied),
    parse: (e) => checkItemsApplied(e.data),
    run: writeStatusStep,
  }),
]);
