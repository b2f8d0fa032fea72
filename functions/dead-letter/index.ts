// dead-letter: the Broker's dead-letter sink. Logs the identity of each event that
// exhausted its retries (type, source, subject, id), so an operator can see what was
// given up on; the next resync retries the SyncResource anyway.
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { getDeps, logger } from '../shared.ts';

/** handle is the function's CloudEvent handler. */
export async function handle(context: Context, event?: CloudEvent<unknown>): Promise<void> {
  const log = logger(context, (await getDeps()).log);
  log.warn({ step: 'dead-letter', eventType: event?.type, source: event?.source, subject: event?.subject, id: event?.id }, 'event dead-lettered');
}
