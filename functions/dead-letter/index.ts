// dead-letter: the Broker's dead-letter sink. Logs the identity of each event that
// exhausted its retries (type, source, subject, id) and counts it (sync_dead_letters_total),
// so an operator can see what was given up on; the next resync retries the SyncResource
// anyway. It needs no KCP access (its ServiceAccount mounts no token) and builds no clients.
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { ApiServerRefTypes, EventTypes, PING_TYPE } from '../../lib/events/contract.ts';
import type { Logger } from '../../lib/pipeline/deps.ts';
import { Metrics } from '../../lib/telemetry.ts';
import { logger } from '../step.ts';

/** handle is the function's CloudEvent handler. */
export async function handle(context: Context, event?: CloudEvent<unknown>): Promise<void> {
  const log = logger(context, stderrLog);
  // The type is the metric's only attribute, from a closed set: a posted event cannot grow its series.
  const type = event && KNOWN_TYPES.has(event.type) ? event.type : 'other';
  Metrics.deadLetters.add(1, { type });
  log.warn(
    {
      step: 'dead-letter',
      eventType: event?.type,
      source: event?.source,
      subject: event?.subject,
      id: event?.id,
    },
    'event dead-lettered',
  );
}

/** KNOWN_TYPES are the event types the product consumes or emits. */
const KNOWN_TYPES = new Set<string>([...ApiServerRefTypes, PING_TYPE, ...Object.values(EventTypes)]);

const line = (level: string) => (fields: Record<string, unknown>, msg: string) =>
  console.error(JSON.stringify({ level, msg, ...fields }));
/** stderrLog logs JSON lines when the runtime's context carries no logger. */
const stderrLog: Logger = { info: line('info'), warn: line('warn'), error: line('error') };
