// serve.ts runs one function (chosen by $FUNCTION or the first argument) as a
// faas-js-runtime HTTP server: one image, five Knative Services.
//   FUNCTION=apply-items PORT=8080 node dist/functions/serve.js
// What runs is the build's bundle of this file (infra/build.ts), which also quiets
// faas-js-runtime's idle samplers; run from source, the function serves the same but
// keeps them. Start-up is on the cold-start path: V8's compile cache is enabled before
// anything else loads (NODE_COMPILE_CACHE chooses where), and modules load in parallel.
import module from 'node:module';

module.enableCompileCache?.();
// Start-up phases, in ms since the process started (logged once ready: cold starts are measured).
const phases: Record<string, number> = { node: performance.now() };

// Each step's handler, loaded only in the process that serves it (and named here, so that
// the build's bundle holds each in a chunk of its own: infra/build.ts).
const steps: Record<string, () => Promise<{ handle: unknown }>> = {
  resync: () => import('./resync/index.ts'),
  'resolve-cluster': () => import('./resolve-cluster/index.ts'),
  'apply-items': () => import('./apply-items/index.ts'),
  'write-status': () => import('./write-status/index.ts'),
  'dead-letter': () => import('./dead-letter/index.ts'),
};
const names = Object.keys(steps);
const name = process.argv[2] ?? process.env.FUNCTION;
if (!name || !Object.hasOwn(steps, name)) {
  console.error(JSON.stringify({ level: 'error', msg: 'unknown function', function: name, known: names }));
  process.exit(2);
}
// Telemetry first, so that its providers are in place when the handlers load.
const stopTelemetry = await (await import('../lib/telemetry-sdk.ts')).startTelemetry(`kcp-sync-${name}`);
phases.telemetry = performance.now();
const [{ default: faas }, mod, { getDeps }, { senderCheck }, { IdleCollector }] = await Promise.all([
  import('faas-js-runtime'),
  steps[name]!(),
  import('./deps.ts'),
  import('./senders.ts'),
  import('./idle.ts'),
]);
phases.imports = performance.now();
// Probes answer OK once the server listens (init has run by then). faas-js-runtime's
// default probes answer 503 whenever the event loop lags more than 42 ms (and log a
// TypeError doing it); a function that queues and orders its own work lags under bulk
// load by design and must not be taken out of service for it.
const ok = async () => 'OK';
// dead-letter reads nothing of the KCP: it builds no pipeline clients (only the sender check's).
const usesKcp = name !== 'dead-letter';
// Every delivery passes the sender check first (SYNC_EVENT_AUTH=oidc): a refused one does no work.
const senders = senderCheck(name);
if (!senders)
  console.log(
    JSON.stringify({
      level: 'warn',
      msg: 'sender identity is off (SYNC_EVENT_AUTH=none): every delivery is accepted, whoever sent it',
      function: name,
    }),
  );
type Handle = (context: { headers?: Record<string, unknown> }, event?: unknown) => Promise<unknown>;
const inner = mod.handle as Handle;
// Memory a burst of deliveries grew is given back once none has been in flight for a moment (idle.ts).
const idle = new IdleCollector();
const checked: Handle = senders
  ? async (context, event) => {
      await senders.check(context as never);
      return inner(context, event);
    }
  : inner;
const handle: Handle = (context, event) => idle.run(() => checked(context, event));
await faas.start(
  {
    handle: handle as never,
    readiness: ok as never,
    liveness: ok as never,
    init: async () => {
      // The issuer's keys are read before traffic; if the KCP cannot answer yet, the first
      // deliveries are answered 503 (redelivered) until it does.
      const [deps] = await Promise.all([
        usesKcp ? getDeps() : undefined,
        senders?.ready().catch(() => undefined),
      ]);
      // Posts a step makes after its answer are work too (fanout.ts).
      if (deps) idle.alsoWaitFor(() => deps.process.fanOuts.size > 0);
      phases.init = performance.now();
    },
    shutdown: async () => {
      if (usesKcp) await (await getDeps()).cache.closeAll();
      await senders?.close();
      await stopTelemetry();
    },
  },
  { port: Number(process.env.PORT ?? 8080), logLevel: (process.env.LOG_LEVEL ?? 'info') as never },
);
phases.listening = performance.now();
// One line with each phase's share: node until this file ran, the telemetry SDK (when
// configured), the modules, init (clients, the issuer's keys), the HTTP server.
const order = ['node', 'telemetry', 'imports', 'init', 'listening'];
console.log(
  JSON.stringify({
    level: 'info',
    msg: 'started',
    function: name,
    readyMs: Math.round(phases.listening),
    phasesMs: Object.fromEntries(
      order.map((p, i) => [p, Math.round((phases[p] ?? 0) - (i ? (phases[order[i - 1]!] ?? 0) : 0))]),
    ),
  }),
);
