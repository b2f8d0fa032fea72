// serve.ts: one function process as Knative runs it, probes included.
import { spawn } from 'node:child_process';
import module from 'node:module';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { freePort, waitFor } from '../infra/net.ts';
import { skipDefaultMetrics, stopOverloadSampler } from '../functions/quiet.ts';

describe('serve', () => {
  it('answers its probes while a long synchronous stretch would make faas-js-runtime report overload', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'serve-'));
    const kubeconfig = join(dir, 'kcp.yaml');
    await writeFile(kubeconfig, inject('clusters').kcp.kubeconfig);
    const port = await freePort();
    // Preloaded: a timer that blocks the event loop for 60 ms every 100 ms.
    const block = join(dir, 'block.cjs');
    await writeFile(
      block,
      'setInterval(() => { const end = Date.now() + 60; while (Date.now() < end); }, 100).unref();\n',
    );
    const child = spawn(
      process.execPath,
      ['--require', block, join(import.meta.dirname, '..', 'functions', 'serve.ts'), 'dead-letter'],
      {
        env: {
          ...process.env,
          PORT: String(port),
          KUBECONFIG: kubeconfig,
          K_SINK: 'http://127.0.0.1:1',
          LOG_LEVEL: 'warn',
          SYNC_EVENT_AUTH: 'none',
        },
        stdio: 'ignore',
      },
    );
    try {
      const url = `http://127.0.0.1:${port}/health`;
      await waitFor('serve.ts', async () => (await fetch(`${url}/readiness`)).ok, 30_000);
      for (let i = 0; i < 20; i++) {
        for (const probe of ['readiness', 'liveness']) {
          const res = await fetch(`${url}/${probe}`);
          expect([probe, res.status, await res.text()]).toEqual([probe, 200, 'OK']);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('refuses to start without SYNC_EVENT_AUTH; turned off by name, it says so at start-up and in a metric', async () => {
    const serve = join(import.meta.dirname, '..', 'functions', 'serve.ts');
    const run = (env: Record<string, string | undefined>) => {
      const child = spawn(process.execPath, [serve, 'dead-letter'], { env: env as NodeJS.ProcessEnv });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      return { child, out: () => out };
    };
    const { SYNC_EVENT_AUTH: _unset, ...base } = process.env;
    const port = await freePort();
    const unset = run({ ...base, PORT: String(port), LOG_LEVEL: 'warn' });
    const code = await new Promise<number | null>((r) => unset.child.on('exit', r));
    expect(code).not.toBe(0);
    expect(unset.out()).toContain('SYNC_EVENT_AUTH is not set');

    const metricsPort = await freePort();
    const none = run({
      ...base,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      SYNC_EVENT_AUTH: 'none',
      OTEL_METRICS_EXPORTER: 'prometheus',
      OTEL_EXPORTER_PROMETHEUS_HOST: '127.0.0.1',
      OTEL_EXPORTER_PROMETHEUS_PORT: String(metricsPort),
    });
    try {
      await waitFor(
        'serve.ts',
        async () => (await fetch(`http://127.0.0.1:${port}/health/readiness`)).ok,
        30_000,
      );
      expect(none.out()).toMatch(/"level":"warn","msg":"sender identity is off \(SYNC_EVENT_AUTH=none\)/);
      const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      expect(metrics).toMatch(/^sync_sender_identity\{[^}]*function="dead-letter"[^}]*\} 0$/m);
    } finally {
      none.child.kill('SIGKILL');
    }
  });

  it("leaves no event-loop sampler of faas-js-runtime's unused overload probe running", () => {
    const fromRuntime = module.createRequire(import.meta.resolve('faas-js-runtime'));
    const fromProtection = module.createRequire(fromRuntime.resolve('overload-protection'));
    const fresh = () => {
      for (const m of ['./lib/health-check.js', 'overload-protection'])
        delete fromRuntime.cache[fromRuntime.resolve(m)];
      delete fromProtection.cache[fromProtection.resolve('loopbench')];
    };
    // The intervals a load leaves running (an unref'd timer is not among the process's active resources).
    const running = (load: () => void) => {
      const { setInterval: set, clearInterval: clear } = globalThis;
      const live = new Set<unknown>();
      globalThis.setInterval = ((...args: Parameters<typeof set>) => {
        const t = set(...args);
        live.add(t);
        return t;
      }) as typeof set;
      globalThis.clearInterval = ((t: Parameters<typeof clear>[0]) => {
        live.delete(t);
        clear(t);
      }) as typeof clear;
      try {
        load();
      } finally {
        Object.assign(globalThis, { setInterval: set, clearInterval: clear });
      }
      for (const t of live) clear(t as never);
      return live.size;
    };
    // As faas-js-runtime loads it: an interval for good.
    fresh();
    expect(running(() => fromRuntime('./lib/health-check.js'))).toBe(1);
    // As serve.ts loads it.
    fresh();
    stopOverloadSampler();
    expect(running(() => fromRuntime('./lib/health-check.js'))).toBe(0);
  });

  it("starts no event-loop delay monitor for faas-js-runtime's default metrics", async () => {
    const fromRuntime = module.createRequire(import.meta.resolve('faas-js-runtime'));
    const hooks = (await import('node:perf_hooks')).default;
    const monitor = hooks.monitorEventLoopDelay;
    const started: unknown[] = [];
    hooks.monitorEventLoopDelay = ((opts) => {
      started.push(opts);
      return monitor(opts);
    }) as typeof monitor;
    const metricsOf = () => {
      delete fromRuntime.cache[fromRuntime.resolve('./lib/metrics.js')];
      (fromRuntime('./lib/metrics.js') as (config: object) => unknown)({});
    };
    try {
      // As faas-js-runtime loads it: a monitor sampling every 10 ms, for good.
      metricsOf();
      expect(started).toEqual([{ resolution: 10 }]);
      // As serve.ts loads it.
      skipDefaultMetrics();
      metricsOf();
      expect(started).toHaveLength(1);
    } finally {
      hooks.monitorEventLoopDelay = monitor;
    }
  });
});
