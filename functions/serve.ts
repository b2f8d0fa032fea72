// serve.ts runs one function (chosen by $FUNCTION or the first argument) as a
// faas-js-runtime HTTP server: one image, five Knative Services.
//   FUNCTION=apply-items PORT=8080 node functions/serve.ts
// Start-up is on the cold-start path: V8's compile cache is enabled before anything
// else loads (NODE_COMPILE_CACHE chooses where), and modules load in parallel.
import module from 'node:module';

module.enableCompileCache?.();

const names = ['resync', 'resolve-cluster', 'apply-items', 'write-status', 'dead-letter'];
const name = process.argv[2] ?? process.env.FUNCTION;
if (!name || !names.includes(name)) {
  console.error(JSON.stringify({ level: 'error', msg: 'unknown function', function: name, known: names }));
  process.exit(2);
}
// Telemetry first, so that its providers are in place when the handlers load.
const stopTelemetry = await (await import('../lib/telemetry-sdk.ts')).startTelemetry(`kcp-sync-${name}`);
const [{ default: faas }, mod, { getDeps }] = await Promise.all([
  import('faas-js-runtime'),
  import(`./${name}/index.ts`) as Promise<{ handle: unknown }>,
  import('./shared.ts'),
]);
// Probes answer OK once the server listens (init has run by then). faas-js-runtime's
// default probes answer 503 whenever the event loop lags more than 42 ms (and log a
// TypeError doing it); a function that queues and orders its own work lags under bulk
// load by design and must not be taken out of service for it.
const ok = async () => 'OK';
// dead-letter needs no KCP access: its ServiceAccount mounts no token, so it builds no clients.
const usesKcp = name !== 'dead-letter';
await faas.start(
  {
    handle: mod.handle as never,
    readiness: ok as never,
    liveness: ok as never,
    init: async () => {
      if (usesKcp) await getDeps();
    },
    shutdown: async () => {
      if (usesKcp) await (await getDeps()).cache.closeAll();
      await stopTelemetry();
    },
  },
  { port: Number(process.env.PORT ?? 8080), logLevel: (process.env.LOG_LEVEL ?? 'info') as never },
);
