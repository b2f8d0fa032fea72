// serve.ts: one function process as Knative runs it (the build's bundle, as the image
// holds it: infra/build.ts), probes included.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { dist } from '../infra/build.ts';
import { freePort, waitFor } from '../infra/net.ts';

/** serve starts the built function server (node options first, then the function) and collects its output. */
function serve(nodeArgs: string[], fn: string, env: Record<string, string | undefined>) {
  const child = spawn(process.execPath, [...nodeArgs, join(dist, 'functions', 'serve.js'), fn], {
    cwd: dist,
    env: env as NodeJS.ProcessEnv,
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return { child, out: () => out };
}

/** ready waits for a server's readiness probe. */
const ready = (port: number) =>
  waitFor('serve.js', async () => (await fetch(`http://127.0.0.1:${port}/health/readiness`)).ok, 30_000);

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
    const { child } = serve(['--require', block], 'dead-letter', {
      ...process.env,
      PORT: String(port),
      KUBECONFIG: kubeconfig,
      K_SINK: 'http://127.0.0.1:1',
      LOG_LEVEL: 'warn',
      SYNC_EVENT_AUTH: 'none',
    });
    try {
      await ready(port);
      const url = `http://127.0.0.1:${port}/health`;
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
    const { SYNC_EVENT_AUTH: _unset, ...base } = process.env;
    const port = await freePort();
    const unset = serve([], 'dead-letter', { ...base, PORT: String(port), LOG_LEVEL: 'warn' });
    const code = await new Promise<number | null>((r) => unset.child.on('exit', r));
    expect(code).not.toBe(0);
    expect(unset.out()).toContain('SYNC_EVENT_AUTH is not set');

    const metricsPort = await freePort();
    const none = serve([], 'dead-letter', {
      ...base,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      SYNC_EVENT_AUTH: 'none',
      OTEL_METRICS_EXPORTER: 'prometheus',
      OTEL_EXPORTER_PROMETHEUS_HOST: '127.0.0.1',
      OTEL_EXPORTER_PROMETHEUS_PORT: String(metricsPort),
    });
    try {
      await ready(port);
      expect(none.out()).toMatch(/"level":"warn","msg":"sender identity is off \(SYNC_EVENT_AUTH=none\)/);
      const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      expect(metrics).toMatch(/^sync_sender_identity\{[^}]*function="dead-letter"[^}]*\} 0$/m);
      // faas-js-runtime's own counters stay on its /metrics (its default process metrics do not).
      const own = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(own).toMatch(/^# TYPE faas_invocations counter$/m);
      expect(own).not.toMatch(/^nodejs_eventloop_lag/m);
    } finally {
      none.child.kill('SIGKILL');
    }
  });

  it("keeps none of faas-js-runtime's event-loop samplers running (the build's patches)", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'serve-'));
    const record = join(dir, 'timers.jsonl');
    // Preloaded: every interval set and cleared, every event-loop delay monitor started.
    const spy = join(dir, 'spy.cjs');
    await writeFile(
      spy,
      `const { appendFileSync } = require('node:fs');
const note = (r) => appendFileSync(${JSON.stringify(record)}, JSON.stringify(r) + '\\n');
const { setInterval: set, clearInterval: clear } = globalThis;
const ids = new WeakMap();
let n = 0;
globalThis.setInterval = function (fn, ms, ...args) {
  const t = set.call(this, fn, ms, ...args);
  ids.set(t, ++n);
  note({ set: n, ms });
  return t;
};
globalThis.clearInterval = function (t) {
  if (t && ids.has(t)) note({ clear: ids.get(t) });
  return clear.call(this, t);
};
const hooks = require('node:perf_hooks');
const monitor = hooks.monitorEventLoopDelay;
hooks.monitorEventLoopDelay = (opts) => (note({ monitor: opts }), monitor(opts));
`,
    );
    await writeFile(record, '');
    const port = await freePort();
    const { child } = serve(['--require', spy], 'dead-letter', {
      ...process.env,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      SYNC_EVENT_AUTH: 'none',
    });
    try {
      await ready(port);
      const notes = (await readFile(record, 'utf8'))
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { set?: number; ms?: number; clear?: number; monitor?: unknown });
      // The spy saw faas-js-runtime load: loopbench's 5 ms sampler is set, then stopped.
      expect(notes.filter((r) => r.ms === 5)).toHaveLength(1);
      const cleared = new Set(notes.map((r) => r.clear));
      const running = notes.filter((r) => r.set !== undefined && !cleared.has(r.set));
      // Unpatched, overload-protection's loopbench keeps a 5 ms interval and prom-client's
      // default metrics a 10 ms event-loop delay monitor.
      expect(running.filter((r) => (r.ms ?? 0) <= 100)).toEqual([]);
      expect(notes.filter((r) => r.monitor !== undefined)).toEqual([]);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
