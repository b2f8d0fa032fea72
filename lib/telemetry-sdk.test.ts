import { createServer } from 'node:net';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { freePort } from '../infra/net.ts';
import { startTelemetry } from './telemetry-sdk.ts';

describe('startTelemetry (Prometheus only)', () => {
  it('serves the metrics on the port asked for, and fails the start when another process holds it', async () => {
    const port = await freePort();
    const env = {
      OTEL_METRICS_EXPORTER: 'prometheus',
      OTEL_EXPORTER_PROMETHEUS_HOST: '127.0.0.1',
      OTEL_EXPORTER_PROMETHEUS_PORT: String(port),
    };
    const stop = await startTelemetry('kcp-sync-test', env);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('service_name="kcp-sync-test"');
    } finally {
      await stop();
    }

    const holder = createServer().listen(port, '127.0.0.1');
    await once(holder, 'listening');
    try {
      await expect(startTelemetry('kcp-sync-test', env)).rejects.toThrow(
        `metrics cannot be served on 127.0.0.1:${port}: listen EADDRINUSE`,
      );
    } finally {
      holder.close();
    }
  });
});
