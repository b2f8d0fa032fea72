// burst.ts measures one edit made just after a burst of creations: how long the edit of an
// established SyncResource takes to be Ready while N new ones are created at once, and, on
// Knative's own data plane, how long each hop held its caller. Figures only.
//   npm run bench:burst                        # N=200, 3 rounds, Knative's own eventing
//   npm run bench:burst -- --n 100 --rounds 5 --knative emulated
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ClusterSet } from '../infra/clusters.ts';
import { connect, controlPlaneNamespace as ns, setupKcp } from '../infra/kcp-setup.ts';
import { waitFor } from '../infra/net.ts';
import type { Passage } from '../infra/runtime/clusternet.ts';
import { startRuntime, type Runtime } from '../infra/runtime/index.ts';
import { startKnative, type KnativeRuntime } from '../infra/runtime/real.ts';
import type { SyncResource } from '../lib/model.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { readyAt } from './workload.ts';

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '3' },
    knative: { type: 'string', default: 'real' },
  },
});
const N = Number(values.n);
const ROUNDS = Number(values.rounds);
const stateDir = await mkdtemp(join(tmpdir(), 'kcp-sync-bench-burst-'));

const set = await ClusterSet.start({ skrs: 1, stateDir });
const passages: Passage[] = [];
let rt: Runtime | KnativeRuntime | undefined;
try {
  await setupKcp(set);
  const opts = {
    kubeconfig: set.kcp.kubeconfigFile,
    stateDir,
    pingIntervalMs: 3_600_000,
  };
  if (values.knative === 'real') {
    const k = await startKnative(opts);
    k.net.observe((p) => passages.push(p));
    rt = k;
  } else {
    rt = await startRuntime(opts);
  }
  const kcp = await connect(set.kcp.kubeconfig, 'kcp');
  const path = `/apis/operator.kyma-project.io/v1alpha1/namespaces/${ns}/syncresources`;
  const sr = (name: string, v: string) => ({
    apiVersion: 'operator.kyma-project.io/v1alpha1',
    kind: 'SyncResource',
    metadata: { name, namespace: ns },
    spec: {
      kyma: 'kyma-1',
      items: [
        {
          name: 'cm',
          strategy: 'CreateAndSync',
          resource: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: default}\ndata: {v: "${v}"}\n`,
        },
      ],
    },
  });
  const ready = (o: SyncResource, generation: number) =>
    readyAt(o) && (o.metadata.generation ?? 0) >= generation;
  await kcp.client.call('POST', path, { body: sr('edit-me', '0') });
  await waitFor(
    'edit-me Ready',
    async () => ready(await kcp.client.call<SyncResource>('GET', `${path}/edit-me`), 1),
    120_000,
    undefined,
    100,
  );
  console.log(
    `burst: ${N} SyncResources created at once, then one edit of an established one; ${ROUNDS} rounds; ${values.knative === 'real' ? "Knative's own eventing" : 'the stand-in'}`,
  );
  const edits: number[] = [];
  const bursts: number[] = [];
  const t0 = Date.now();
  for (let round = 1; round <= ROUNDS; round++) {
    await new Promise((r) => setTimeout(r, 3_000));
    const names = Array.from({ length: N }, (_, i) => `burst-${round}-${i}`);
    const start = Date.now();
    await mapLimit(names, 16, (n) => kcp.client.call('POST', path, { body: sr(n, '1') }));
    // As `kubectl apply` does, the edit changes the spec and keeps the labels.
    const edited = Date.now();
    const { metadata } = await kcp.client.call<SyncResource>('PATCH', `${path}/edit-me`, {
      body: { spec: sr('edit-me', String(round)).spec },
      contentType: 'application/merge-patch+json',
    });
    await waitFor(
      'the edit Ready',
      async () => ready(await kcp.client.call<SyncResource>('GET', `${path}/edit-me`), metadata.generation!),
      120_000,
      undefined,
      50,
    );
    edits.push(Date.now() - edited);
    await waitFor(
      `the burst of ${N} Ready`,
      async () => {
        const list = await kcp.client.call<{ items: SyncResource[] }>('GET', path, {
          query: { labelSelector: 'operator.kyma-project.io/kyma-name' },
        });
        return (
          list.items.filter((o) => o.metadata.name.startsWith(`burst-${round}-`) && ready(o, 1)).length === N
        );
      },
      600_000,
      undefined,
      1_000,
    );
    bursts.push(Date.now() - start);
    console.log(
      `  round ${round}: edit -> Ready ${edits.at(-1)} ms; all ${N} new Ready after ${bursts.at(-1)} ms`,
    );
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(`| figure | value |\n|---|---|`);
  console.log(
    `| edit of an established SyncResource after a burst of ${N} creations -> Ready, median of ${ROUNDS} (max) | ${median(edits)} ms (${Math.max(...edits)} ms) |`,
  );
  console.log(`| burst of ${N}: all Ready, median of ${ROUNDS} | ${median(bursts)} ms |`);
  // How long each hop held its caller, by host and event type (Knative's own data plane only).
  const hops = new Map<string, number[]>();
  for (const p of passages) {
    if (p.start < t0 || p.method !== 'POST') continue;
    const type = String(p.headers['ce-type'] ?? '')
      .replace('dev.knative.apiserver.ref.', 'ref.')
      .replace('io.kyma-project.syncresource.', '');
    const key = `${p.host.split('.')[0]} ${type}`;
    const held = hops.get(key) ?? [];
    held.push(p.ms);
    hops.set(key, held);
  }
  for (const [key, ms] of [...hops].sort(([a], [b]) => a.localeCompare(b))) {
    console.log(
      `| hop ${key}: requests, p50 / p90 ms held | ${ms.length}, ${median(ms)} / ${[...ms].sort((a, b) => a - b)[Math.floor(ms.length * 0.9)]} |`,
    );
  }
  await kcp.client.close();
} finally {
  await rt?.stop();
  await set.stop();
  await rm(stateDir, { recursive: true, force: true });
}
