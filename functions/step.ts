// step.ts runs a step's body for one delivery: in the step's span (a child of the
// event's trace context), with its logger, its failures mapped to HTTP answers, and the
// duration metric; and carries the trace context on to the events it emits.
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import type { Deps, Logger } from '../lib/pipeline/deps.ts';
import {
  extractContext,
  injectContext,
  inSpan,
  Metrics,
  traceId,
  type TraceCarrier,
} from '../lib/telemetry.ts';
import { getDeps } from './deps.ts';
import { mapError } from './errors.ts';

function incomingTrace(event: CloudEvent<unknown>): TraceCarrier {
  const out: TraceCarrier = {};
  for (const k of ['traceparent', 'tracestate'] as const) {
    const v = (event as unknown as Record<string, unknown>)[k];
    if (typeof v === 'string') out[k] = v;
  }
  return out;
}

/**
 * traceExtensions returns the distributed-tracing extension for an event emitted now:
 * the active step span when tracing, else the incoming event's context unchanged.
 */
export function traceExtensions(event: CloudEvent<unknown>): Record<string, string> {
  const injected = injectContext();
  return injected.traceparent ? injected : ({ ...incomingTrace(event) } as Record<string, string>);
}

/** logger adapts the handler context's logger (pino: fields first, then a constant message). */
export function logger(context: Context | undefined, fallback: Logger): Logger {
  const log = context?.log as unknown as Logger | undefined;
  return log ?? fallback;
}

/** withTrace adds the active trace id and the milliseconds since the step began to every log line's fields. */
function withTrace(log: Logger, started: number): Logger {
  const f = (fields: Record<string, unknown>) => {
    const id = traceId();
    const ms = Math.round(performance.now() - started);
    return id ? { ...fields, ms, traceId: id } : { ...fields, ms };
  };
  return {
    info: (x, m) => log.info(f(x), m),
    warn: (x, m) => log.warn(f(x), m),
    error: (x, m) => log.error(f(x), m),
  };
}

/** run wraps a handler body in the step's span (child of the event's trace context), with error mapping, logging and the duration metric. */
export async function run<T>(
  context: Context,
  event: CloudEvent<unknown>,
  step: string,
  body: (d: Deps, log: Logger) => Promise<T>,
): Promise<T> {
  const d = await getDeps();
  const started = performance.now();
  const attributes = {
    'sync.step': step,
    'cloudevents.event_type': event.type,
    'cloudevents.event_subject': event.subject ?? '',
  };
  return inSpan(
    step,
    attributes,
    async (span) => {
      const log = withTrace(logger(context, d.log), started);
      let outcome = 'ok';
      try {
        return await body(d, log);
      } catch (err) {
        const mapped = mapError(err);
        outcome = mapped.code >= 500 ? 'retry' : 'rejected';
        span.setAttribute('http.response.status_code', mapped.code);
        log.error(
          { step, eventType: event.type, subject: event.subject, code: mapped.code, error: mapped.message },
          'step failed',
        );
        throw mapped;
      } finally {
        Metrics.reconcileDuration.record((performance.now() - started) / 1000, { step, outcome });
      }
    },
    extractContext(incomingTrace(event)),
  );
}
