// shared.ts: what the four function adapters share: dependencies built once per
// process, error mapping to HTTP status codes, and trace context carried to replies.
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { EventDataError } from '../lib/events.ts';
import { KubeApiError, SyncError } from '../lib/kube/errors.ts';
import type { Deps, Logger } from '../lib/pipeline/deps.ts';
import { depsFromEnv } from '../lib/pipeline/setup.ts';
import { KubeClient } from '../lib/kube/client.ts';
import { credentialsFromFile, inClusterCredentials } from '../lib/kube/credentials.ts';
import { SenderRefused, SenderVerifier, senderPolicyFromEnv, type Issuer } from '../lib/policy/senders.ts';
import {
  extractContext,
  injectContext,
  inSpan,
  Metrics,
  traceId,
  type TraceCarrier,
} from '../lib/telemetry.ts';

let deps: Promise<Deps> | undefined;

/** setDeps injects dependencies (tests); otherwise they come from the environment on first use. */
export function setDeps(d: Deps | Promise<Deps>): void {
  deps = Promise.resolve(d);
}

/** getDeps returns the process's dependencies. */
export function getDeps(): Promise<Deps> {
  deps ??= depsFromEnv();
  return deps;
}

/** HttpError carries the status code faas-js-runtime answers with. */
export class HttpError extends Error {
  readonly code: number;
  constructor(code: number, message: string, cause?: unknown) {
    super(message, { cause });
    this.name = 'HttpError';
    this.code = code;
  }
}

/** checkData runs an event-data check, turning its EventDataError into a 400 (redelivery cannot fix bad data). */
export function checkData<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (err instanceof EventDataError) throw new HttpError(400, err.message, err);
    throw err;
  }
}

/** mapError turns a failure into the answer the broker acts on: 5xx retries, 4xx does not. */
export function mapError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof SyncError)
    return new HttpError(err.transient ? 503 : 422, `${err.reason}: ${err.message}`, err);
  if (err instanceof KubeApiError)
    return new HttpError(err.transient || err.code >= 500 ? 503 : 500, err.message, err);
  return new HttpError(500, err instanceof Error ? err.message : String(err), err);
}

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

/** kcpIssuer reads the KCP's service-account issuer (discovery and keys) with the function's own credentials. */
export function kcpIssuer(
  env: Record<string, string | undefined> = process.env,
): Issuer & { close(): Promise<void> } {
  const creds = env.KUBECONFIG ? credentialsFromFile(env.KUBECONFIG) : inClusterCredentials(env);
  const client = KubeClient.create(creds, { name: 'kcp-issuer', qps: 5, burst: 10 });
  return {
    discovery: () => client.call<{ issuer: string }>('GET', '/.well-known/openid-configuration'),
    keys: () => client.call('GET', '/openid/v1/jwks', { headers: { accept: 'application/jwk-set+json' } }),
    close: () => client.close(),
  };
}

/** SenderGuard checks a delivery's sender before the handler runs (ready: before traffic). */
export interface SenderGuard {
  check(context: Context): Promise<void>;
  ready(): Promise<void>;
  close(): Promise<void>;
}

/**
 * senderGuard is the function's check of who sent a delivery (lib/policy/senders.ts),
 * or undefined when SYNC_EVENT_AUTH=none. A refusal is answered 401/403 and counted by
 * reason; it is logged without the token.
 */
export function senderGuard(
  fn: string,
  env: Record<string, string | undefined> = process.env,
  fallback: Logger = { info() {}, warn() {}, error() {} },
): SenderGuard | undefined {
  const policy = senderPolicyFromEnv(env);
  Metrics.senderIdentity.add(policy ? 1 : 0, { function: fn });
  if (!policy) return undefined;
  const issuer = kcpIssuer(env);
  const verifier = new SenderVerifier(policy, issuer);
  return {
    ready: () => verifier.ready(),
    close: () => issuer.close(),
    async check(context) {
      const started = performance.now();
      const auth = context.headers?.authorization;
      try {
        await verifier.verify(Array.isArray(auth) ? auth[0] : auth);
      } catch (err) {
        if (!(err instanceof SenderRefused))
          throw new HttpError(503, `the KCP's service-account issuer cannot be read: ${String(err)}`, err);
        Metrics.senderRefusals.add(1, { function: fn, reason: err.reason });
        logger(context, fallback).warn(
          {
            step: fn,
            code: err.code,
            reason: err.reason,
            error: err.message,
            ceType: context.headers?.['ce-type'],
          },
          'delivery refused',
        );
        throw new HttpError(err.code, err.message, err);
      } finally {
        Metrics.senderVerifyDuration.record((performance.now() - started) / 1000, { function: fn });
      }
    },
  };
}
