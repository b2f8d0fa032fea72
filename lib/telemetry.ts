// telemetry.ts: traces and metrics through the OpenTelemetry API. Without an SDK
// (no OTEL_* exporter configured) every call here is a no-op. Trace context travels on
// CloudEvents as the distributed-tracing extension (traceparent, tracestate).
import {
  context,
  metrics,
  propagation,
  trace,
  SpanStatusCode,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';

const NAME = 'kcp-sync-resource';

/** tracer creates the product's spans. */
export const tracer = trace.getTracer(NAME);

/** TraceCarrier is the pair of CloudEvent extensions that carry trace context. */
export interface TraceCarrier {
  traceparent?: string;
  tracestate?: string;
}

/** extractContext returns the context an incoming event carries (or the active one). */
export function extractContext(carrier: TraceCarrier): Context {
  const c: Record<string, string> = {};
  if (carrier.traceparent) c.traceparent = carrier.traceparent;
  if (carrier.tracestate) c.tracestate = carrier.tracestate;
  return propagation.extract(context.active(), c);
}

/** injectContext returns the extensions to put on an outgoing event for the active span. */
export function injectContext(): Record<string, string> {
  const c: Record<string, string> = {};
  propagation.inject(context.active(), c);
  return c;
}

/** traceId returns the active trace id, for log fields ('' when not tracing). */
export function traceId(): string {
  const id = trace.getActiveSpan()?.spanContext().traceId ?? '';
  return /^0+$/.test(id) ? '' : id;
}

/** inSpan runs fn in a child span of the active context; errors mark the span and rethrow. */
export async function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  parent?: Context,
): Promise<T> {
  return tracer.startActiveSpan(name, { attributes }, parent ?? context.active(), async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.recordException(err instanceof Error ? err : String(err));
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: err instanceof Error ? err.message : String(err),
      });
      throw err;
    } finally {
      span.end();
    }
  });
}

/**
 * SECONDS are the buckets of the duration histograms: the SDK's default boundaries (0, 5,
 * 10, 25, ... 10000) are for milliseconds, and put every run under 5 s in one bucket.
 */
const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

function createInstruments() {
  const meter = metrics.getMeter(NAME);
  return {
    /** reconcileDuration: seconds per step run, attribute step and outcome. */
    reconcileDuration: meter.createHistogram('sync.step.duration', {
      unit: 's',
      description: 'Duration of one pipeline step run',
      advice: { explicitBucketBoundaries: SECONDS },
    }),
    /** items: item results by strategy, reason and state. */
    items: meter.createCounter('sync.items', { description: 'Item results by strategy, reason and state' }),
    /** apiRequests: API requests by cluster, method and status code class. */
    apiRequests: meter.createCounter('sync.api.requests', {
      description: 'Kubernetes API requests by cluster, method and code',
    }),
    /** apiErrors: API requests that failed (non-2xx or unreachable), by cluster. */
    apiErrors: meter.createCounter('sync.api.errors', {
      description: 'Failed Kubernetes API requests by cluster and code',
    }),
    /** driftCorrections: objects re-applied because they had changed in the SKR. */
    driftCorrections: meter.createCounter('sync.drift.corrections', {
      description: 'Objects re-applied because they changed in the SKR',
    }),
    /** runs: engine runs against an SKR by how they ended, and runs not started because the SKR is known unreachable. */
    runs: meter.createCounter('sync.runs', {
      description:
        'Runs of a SyncResource against its SKR, by outcome: done, unreachable (the SKR could not be reached), skipped (not started: another run of the same batch found the SKR unreachable)',
    }),
    /** statusWritesSkipped: status writes skipped because nothing changed. */
    statusWritesSkipped: meter.createCounter('sync.status.writes.skipped', {
      description: 'Status writes skipped because nothing changed',
    }),
    /** statusWrites: status writes done. */
    statusWrites: meter.createCounter('sync.status.writes', { description: 'Status writes' }),
    /** deadLetters: events the broker gave up on (retries exhausted), by type (a type the product does not know: other). */
    deadLetters: meter.createCounter('sync.dead_letters', {
      description: 'Events the broker delivered to the dead-letter sink after its retries, by event type',
    }),
    /** senderRefusals: deliveries refused for their sender identity (lib/policy/senders.ts), by reason. */
    senderRefusals: meter.createCounter('sync.sender.refusals', {
      description:
        'Deliveries refused because their OIDC token is missing, does not verify (invalid, expired, audience, issuer) or is of another sender (subject)',
    }),
    /** senderIdentity: 1 where the function checks every delivery's sender, 0 where SYNC_EVENT_AUTH=none turned it off. */
    senderIdentity: meter.createUpDownCounter('sync.sender.identity', {
      description:
        '1 when this function checks the sender identity (OIDC token) of every delivery, 0 when it runs with SYNC_EVENT_AUTH=none and accepts any',
    }),
    /** senderVerifyDuration: seconds to verify one delivery's token. */
    senderVerifyDuration: meter.createHistogram('sync.sender.verify.duration', {
      unit: 's',
      description: "Duration of verifying one delivery's OIDC token",
      advice: { explicitBucketBoundaries: SECONDS },
    }),
    healthTransitions: meter.createCounter('sync.health.transitions', {
      description:
        'Objects whose health changed, by the new status (Current, InProgress, Failed, Terminating, Unknown)',
    }),
    /** cacheHits / cacheMisses / cacheEvictions: the SKR client cache. */
    cacheHits: meter.createCounter('sync.client_cache.hits', { description: 'SKR client cache hits' }),
    cacheMisses: meter.createCounter('sync.client_cache.misses', { description: 'SKR client cache misses' }),
    cacheEvictions: meter.createCounter('sync.client_cache.evictions', {
      description:
        'SKR client cache evictions: why=capacity (over SYNC_MAX_CLUSTER_CLIENTS, least recently used) or failure (401/TLS)',
    }),
    /** cacheClients: SKR clients cached now. */
    cacheClients: meter.createUpDownCounter('sync.client_cache.clients', {
      description: 'SKR clients cached now (at most SYNC_MAX_CLUSTER_CLIENTS)',
    }),
  };
}

let instruments: ReturnType<typeof createInstruments> | undefined;

/**
 * Metrics are the product's instruments, created on first use: the metrics API has no
 * proxy provider, so instruments made before the SDK starts would stay no-ops.
 */
export const Metrics = new Proxy({} as ReturnType<typeof createInstruments>, {
  get: (_, key: keyof ReturnType<typeof createInstruments>) => (instruments ??= createInstruments())[key],
});

/** recordRequest feeds API request metrics; used as the clients' onRequest observer. */
export function recordRequest(info: { cluster: string; method: string; code: number }): void {
  const code = info.code === 0 ? 'unreachable' : `${Math.floor(info.code / 100)}xx`;
  Metrics.apiRequests.add(1, { cluster: info.cluster, method: info.method, code });
  if (info.code === 0 || info.code >= 400) Metrics.apiErrors.add(1, { cluster: info.cluster, code });
}
