// write-status: "items applied" in; status, label and Kubernetes Events written.
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { checkItemsApplied, EventTypes } from '../../lib/events.ts';
import { writeStatusStep } from '../../lib/pipeline/status.ts';
import { checkData, HttpError, run } from '../shared.ts';

/** handle is the function's CloudEvent handler. */
export async function handle(context: Context, event?: CloudEvent<unknown>): Promise<void> {
  if (!event) throw new HttpError(400, 'a CloudEvent is required');
  if (event.type !== EventTypes.itemsApplied) throw new HttpError(400, `expected ${EventTypes.itemsApplied}`);
  const data = checkData(() => checkItemsApplied(event.data));
  await run(context, event, 'write-status', async (d, log) => {
    const outcome = await writeStatusStep(d, data);
    log.info(
      {
        step: 'write-status',
        syncResource: `${data.namespace}/${data.name}`,
        generation: data.result.generation,
        outcome,
      },
      'status handled',
    );
  });
}
