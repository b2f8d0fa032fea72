// start.ts is `npm start`: it brings up the local system (one KCP and N SKRs with
// the product's CRDs, Kymas and access Secrets), writes .local/ and waits for Ctrl-C.
//   npm start -- --skrs 3
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ClusterSet } from './clusters.ts';
import { setupKcp } from './kcp-setup.ts';

const { values } = parseArgs({
  options: {
    skrs: { type: 'string', default: '2' },
  },
});
const skrs = Number(values.skrs);
if (!Number.isInteger(skrs) || skrs < 1) throw new Error(`--skrs must be a positive integer, got ${values.skrs}`);

const root = join(import.meta.dirname, '..');
const stateDir = join(root, '.local');
const started = Date.now();
const set = await ClusterSet.start({ skrs, stateDir, log: (l) => console.log(l) });
await setupKcp(set);

// Children and the reaper pipe are unref'd so tests can exit freely; keep this one alive.
const keepAlive = setInterval(() => {}, 1 << 30);
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  console.log('stopping ...');
  await set.stop();
  clearInterval(keepAlive);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

console.log(`ready: KCP + ${skrs} SKRs in ${Date.now() - started} ms`);
console.log(`  kubectl --kubeconfig .local/kubeconfig/kcp.yaml get kymas,secrets -n kcp-system`);
console.log(`  kubectl --kubeconfig .local/kubeconfig/kcp.yaml apply -f examples/seed-scenario.yaml`);
console.log(`  kubectl --kubeconfig .local/kubeconfig/skr-1.yaml get configmaps -n kyma-system`);
console.log('Ctrl-C stops everything.');
