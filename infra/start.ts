// start.ts is `npm start`: the whole system locally. It brings up one KCP and N SKRs
// (with the product's CRDs, Kymas and access Secrets), the functions as real
// faas-js-runtime servers and the local event runtime, writes .local/, prints
// "ready" and what to try, and stops everything on Ctrl-C.
//   npm start                              # 1 KCP + 2 SKRs
//   npm start -- --skrs 3 --ping-interval 30s
//   npm start -- --kubeconfig ~/.kube/kcp.yaml   # functions + runtime against an existing KCP
//   npm start -- --knative real             # on Knative's own eventing data plane (runtime/real.ts)
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ClusterSet } from './clusters.ts';
import { setupKcp } from './kcp-setup.ts';
import { startRuntime, type Runtime } from './runtime/index.ts';
import { startKnative, type KnativeRuntime } from './runtime/real.ts';

const { values } = parseArgs({
  options: {
    skrs: { type: 'string', default: '2' },
    kubeconfig: { type: 'string' },
    'ping-interval': { type: 'string', default: '60s' },
    // Where .local's files go; tests use a directory of their own.
    'state-dir': { type: 'string' },
    // "emulated" (default): the runtime's broker stand-in; "real": Knative Eventing's own controllers and data plane.
    knative: { type: 'string', default: process.env.KCP_SYNC_KNATIVE ?? 'emulated' },
  },
});
const skrs = Number(values.skrs);
if (!Number.isInteger(skrs) || skrs < 1)
  throw new Error(`--skrs must be a positive integer, got ${values.skrs}`);
const interval = /^(\d+)(ms|s|m)$/.exec(values['ping-interval']!);
if (!interval)
  throw new Error(`--ping-interval must look like 500ms, 30s or 5m, got ${values['ping-interval']}`);
const pingIntervalMs =
  Number(interval[1]) * ({ ms: 1, s: 1000, m: 60_000 } as const)[interval[2] as 'ms' | 's' | 'm'];
if (values.knative !== 'real' && values.knative !== 'emulated')
  throw new Error(`--knative must be real or emulated, got ${values.knative}`);

const root = join(import.meta.dirname, '..');
const stateDir = values['state-dir'] ? resolve(values['state-dir']) : join(root, '.local');
const started = Date.now();
let set: ClusterSet | undefined;
let kubeconfig: string;
if (values.kubeconfig) {
  kubeconfig = resolve(values.kubeconfig);
} else {
  set = await ClusterSet.start({ skrs, stateDir, log: (l) => console.log(l) });
  await setupKcp(set);
  kubeconfig = set.kcp.kubeconfigFile;
}
let runtime: Runtime | undefined;
let knative: KnativeRuntime | undefined;
try {
  if (values.knative === 'real')
    knative = await startKnative({ kubeconfig, stateDir, pingIntervalMs, log: (l) => console.log(l) });
  else runtime = await startRuntime({ kubeconfig, stateDir, pingIntervalMs, log: (l) => console.log(l) });
} catch (err) {
  await set?.stop();
  throw err;
}
const procs = runtime
  ? runtime.functions.map((f) => f.proc)
  : knative!.serving.replicas.flatMap((r) => [r.proc, r.queue]);
if (set) {
  set.extraProcesses.push(...procs);
  await set.writeState();
} else {
  const processes = procs.map((p) => ({ role: p.role, cluster: p.cluster, pid: p.pid }));
  await writeFile(
    join(stateDir, 'state.json'),
    JSON.stringify({ processes, clusters: { kcp: { kubeconfig } } }, null, 2) + '\n',
  );
}

// Children and the reaper pipe are unref'd so tests can exit freely; keep this one alive.
const keepAlive = setInterval(() => {}, 1 << 30);
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  console.log('stopping ...');
  await runtime?.stop();
  await knative?.stop();
  await set?.stop();
  clearInterval(keepAlive);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

const kcp = values.kubeconfig
  ? `--kubeconfig ${values.kubeconfig}`
  : '--kubeconfig .local/kubeconfig/kcp.yaml';
const functions = runtime ? runtime.functions.length : knative!.serving.replicas.length;
const broker = runtime ? runtime.broker.url : `${knative!.brokerUrl} (Knative's own broker)`;
console.log(
  `ready: ${set ? `KCP + ${skrs} SKRs, ` : ''}${functions} functions, broker ${broker} in ${Date.now() - started} ms`,
);
console.log('Try:');
console.log(`  kubectl ${kcp} apply -f examples/seed-scenario.yaml`);
console.log(`  kubectl ${kcp} get syncresources -n kcp-system -w`);
if (set)
  console.log(
    '  kubectl --kubeconfig .local/kubeconfig/skr-1.yaml get configmaps,deployments -n kyma-system',
  );
console.log(`  kubectl ${kcp} describe syncresource seed-scenario -n kcp-system`);
console.log(
  `Logs: .local/logs/  Dead letters: .local/dead-letters.log  Resync every ${values['ping-interval']}.`,
);
console.log('Ctrl-C stops everything.');
