// holders.ts measures what deleting D SyncResources of a Kyma of N at once costs (each
// deletion reads the Kyma's holders): the time until all D are gone, the CPU of the
// clusters and functions meanwhile, and the KCP's LIST requests of SyncResources (pages
// of 100; the script's own polls not counted). Alone, in about a minute:
//   node bench/holders.ts [N=1000] [D=300]
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterSet } from '../infra/clusters.ts';
import { connect, setupKcp } from '../infra/kcp-setup.ts';
import { startRuntime } from '../infra/runtime/index.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { syncResourceInfo } from '../lib/kcp.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { createBatch, kcpRequests, listBatch } from './cost.ts';
import { cpuSeconds } from './procs.ts';

const N = Number(process.argv[2] ?? 1000);
const D = Number(process.argv[3] ?? 300);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const stateDir = await mkdtemp(join(tmpdir(), 'kcp-sync-del-'));
const set = await ClusterSet.start({ skrs: 1, stateDir });
await setupKcp(set);
const kcp = await connect(set.kcp.kubeconfig, 'kcp');
const rt = await startRuntime({
  kubeconfig: set.kcp.kubeconfigFile,
  stateDir,
  pingIntervalMs: 24 * 3600_000,
});
const ns = 'kcp-system';
let polls = 0;
const list = async () => {
  polls++;
  return listBatch(kcp, ns, 'del');
};
await createBatch(kcp, ns, 'del', N, 16);
for (;;) {
  const ready = (await list()).filter((s) => s.status?.state === 'Ready').length;
  if (ready >= N) break;
  await sleep(1000);
}
await sleep(5000);
const pids = () => [
  set.kcp.apiserver.pid,
  set.etcd.pid,
  ...set.skrs.map((s) => s.apiserver.pid),
  ...rt.functions.map((f) => f.proc.pid),
  ...rt.skrSources.map((a) => a.proc.pid),
];
const cpu = async () => (await Promise.all(pids().map(cpuSeconds))).reduce((a, b) => a + b, 0);
const r0 = await kcpRequests(set.kcp.kubeconfigFile);
const p0 = polls;
const c0 = await cpu();
const t0 = performance.now();
await mapLimit(
  Array.from({ length: D }, (_, i) => i),
  32,
  async (i) => {
    await kcp.client.call('DELETE', resourcePath(syncResourceInfo, ns, `del-${i}`));
  },
);
for (;;) {
  const left = (await list()).filter((s) => Number(s.metadata.name.slice(4)) < D).length;
  if (left === 0) break;
  await sleep(250);
}
const took = (performance.now() - t0) / 1000;
const c1 = await cpu();
const r1 = await kcpRequests(set.kcp.kubeconfigFile);
console.log(
  JSON.stringify({
    N,
    D,
    seconds: took.toFixed(1),
    cpu: (c1 - c0).toFixed(1),
    lists: (r1['syncresources LIST'] ?? 0) - (r0['syncresources LIST'] ?? 0) - (polls - p0),
  }),
);
await rt.stop();
await set.stop();
await rm(stateDir, { recursive: true, force: true });
process.exit(0);
