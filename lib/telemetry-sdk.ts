// telemetry-sdk.ts starts the OpenTelemetry SDK when, and only when, the standard
// OTEL_* variables configure an exporter: otherwise the API stays a no-op.

/** isSet tells whether an OTEL_* variable asks for something ("none" and empty do not). */
const isSet = (env: Record<string, string | undefined>, k: string) =>
  env[k] !== undefined && env[k] !== '' && env[k] !== 'none';

/** TRACES_OR_OTLP are the variables that ask for traces or an OTLP exporter. */
const TRACES_OR_OTLP = [
  'OTEL_TRACES_EXPORTER',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT',
];

/** telemetryConfigured tells whether the environment asks for traces or metrics. */
export function telemetryConfigured(env: Record<string, string | undefined> = process.env): boolean {
  return isSet(env, 'OTEL_METRICS_EXPORTER') || TRACES_OR_OTLP.some((k) => isSet(env, k));
}

/**
 * startTelemetry starts the SDK for service (if configured) and returns its shutdown.
 * The SDK is loaded only then: without telemetry it costs no start-up time.
 */
export async function startTelemetry(
  service: string,
  env: Record<string, string | undefined> = process.env,
): Promise<() => Promise<void>> {
  if (!telemetryConfigured(env)) return async () => {};
  if (prometheusOnly(env)) return startPrometheus(service, env);
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  process.env.OTEL_SERVICE_NAME ??= service;
  // Logs go to stdout as JSON; traces and metrics only where asked for (an OTLP
  // endpoint alone means both, as the specification's defaults say).
  process.env.OTEL_LOGS_EXPORTER ??= 'none';
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT) {
    process.env.OTEL_TRACES_EXPORTER ??= env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? 'otlp' : 'none';
    process.env.OTEL_METRICS_EXPORTER ??= env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT ? 'otlp' : 'none';
  }
  const sdk = new NodeSDK({ instrumentations: [] });
  sdk.start();
  return () => sdk.shutdown();
}

/**
 * prometheusOnly tells the deployment's default (knative.yaml): metrics served for
 * Prometheus, no traces, no OTLP. That needs the metrics SDK alone, not the whole Node SDK
 * and its instrumentations (their memory is paid by every process).
 */
function prometheusOnly(env: Record<string, string | undefined>): boolean {
  return env.OTEL_METRICS_EXPORTER === 'prometheus' && !TRACES_OR_OTLP.some((k) => isSet(env, k));
}

/** startPrometheus serves the metrics on OTEL_EXPORTER_PROMETHEUS_HOST:PORT (default all addresses, 9464), as the Node SDK would. */
async function startPrometheus(
  service: string,
  env: Record<string, string | undefined>,
): Promise<() => Promise<void>> {
  const [{ metrics }, { MeterProvider }, { PrometheusExporter }, { resourceFromAttributes }] =
    await Promise.all([
      import('@opentelemetry/api'),
      import('@opentelemetry/sdk-metrics'),
      import('@opentelemetry/exporter-prometheus'),
      import('@opentelemetry/resources'),
    ]);
  const exporter = new PrometheusExporter({
    ...(env.OTEL_EXPORTER_PROMETHEUS_HOST ? { host: env.OTEL_EXPORTER_PROMETHEUS_HOST } : {}),
    ...(env.OTEL_EXPORTER_PROMETHEUS_PORT ? { port: Number(env.OTEL_EXPORTER_PROMETHEUS_PORT) } : {}),
    preventServerStart: true,
  });
  // A port that cannot be bound ends the start (as a Go component's listener does): left to
  // the exporter, the error would go to a diagnostic logger nobody set, and whatever else
  // holds the port would answer the scrapes.
  await exporter.startServer().catch((err: unknown) => {
    throw new Error(
      `metrics cannot be served on ${env.OTEL_EXPORTER_PROMETHEUS_HOST ?? '0.0.0.0'}:${env.OTEL_EXPORTER_PROMETHEUS_PORT ?? PrometheusExporter.DEFAULT_OPTIONS.port}: ${err instanceof Error ? err.message : String(err)}`,
    );
  });
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME ?? service }),
    readers: [exporter],
  });
  metrics.setGlobalMeterProvider(provider);
  return () => provider.shutdown();
}
