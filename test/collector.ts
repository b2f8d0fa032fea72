// A local OTLP/JSON trace collector for tests: the functions export their spans to it.
import { createServer } from 'node:http';

/** Span is one received span, its attributes flattened. */
export interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: Record<string, unknown>;
  service: string;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
}

/** Collector receives spans at endpoint until closed. */
export interface Collector {
  endpoint: string;
  spans: Span[];
  close(): void;
}

function value(v: Record<string, unknown>): unknown {
  const list = v.arrayValue as { values?: Record<string, unknown>[] } | undefined;
  return list
    ? (list.values ?? []).map(value)
    : (v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue);
}

/** startCollector listens on a free loopback port. */
export async function startCollector(): Promise<Collector> {
  const spans: Span[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const doc = JSON.parse(body) as {
          resourceSpans: {
            resource: { attributes: { key: string; value: Record<string, unknown> }[] };
            scopeSpans: {
              spans: {
                traceId: string;
                spanId: string;
                parentSpanId?: string;
                name: string;
                startTimeUnixNano: string;
                endTimeUnixNano: string;
                attributes?: { key: string; value: Record<string, unknown> }[];
              }[];
            }[];
          }[];
        };
        for (const rs of doc.resourceSpans) {
          const service = String(
            value(rs.resource.attributes.find((a) => a.key === 'service.name')?.value ?? {}),
          );
          for (const ss of rs.scopeSpans) {
            for (const sp of ss.spans) {
              spans.push({
                ...sp,
                service,
                attributes: Object.fromEntries((sp.attributes ?? []).map((a) => [a.key, value(a.value)])),
              });
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    spans,
    close: () => server.close(),
  };
}

/** otelEnv is the env that makes every function export its spans to endpoint quickly. */
export const otelEnv = (endpoint: string): Record<string, string> => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_TRACES_EXPORTER: 'otlp',
  OTEL_BSP_SCHEDULE_DELAY: '100',
});
