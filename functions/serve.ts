// serve.ts runs one function (chosen by $FUNCTION or the first argument) as a
// faas-js-runtime HTTP server: one image, four Knative Services.
//   FUNCTION=apply-items PORT=8080 node functions/serve.ts
import faas from 'faas-js-runtime';
import { startTelemetry } from '../lib/telemetry-sdk.ts';
import { getDeps } from './shared.ts';

const names = ['resync', 'resolve-cluster', 'apply-items', 'write-status', 'dead-letter'];
const name = process.argv[2] ?? process.env.FUNCTION;
if (!name || !names.includes(name)) {
  console.error(JSON.stringify({ level: 'error', msg: 'unknown function', function: name, known: names }));
  process.exit(2);
}
const stopTelemetry = startTelemetry(`kcp-sync-${name}`);
const { start } = faas;
const mod = (await import(`./${name}/index.ts`)) as { handle: Parameters<typeof start>[0] };
await start({
  handle: mod.handle as never,
  init: async () => { await getDeps(); },
  shutdown: async () => {
    await (await getDeps()).cache.closeAll();
    await stopTelemetry();
  },
}, { port: Number(process.env.PORT ?? 8080), logLevel: (process.env.LOG_LEVEL ?? 'info') as never });
