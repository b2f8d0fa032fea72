// coldstart.ts: scenario 6, the cold start of one function process (what the image runs),
// its start-up phases as it logs them, and its first reconcile.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { dist } from '../../infra/build.ts';
import { freePort } from '../../infra/net.ts';
import type { KubeObject } from '../../lib/kube/objects.ts';
import type { SyncResource } from '../../lib/model.ts';
import { median, sleep, type Bench } from '../context.ts';
import { atRest, machineBusy } from '../procs.ts';

/** coldStart starts apply-items ten times: spawn to ready, its phases, and its first reconcile of a 5-item SyncResource. */
export async function coldStart(b: Bench): Promise<void> {
  const { row } = b;
  console.log('6. cold start');
  // A start measured while the scenarios before still keep the cores busy (rollouts of the
  // Deployments they created, the API servers' collections) is a figure of that load.
  const before = await atRest(0.2, 60_000);
  const runs: Started[] = [];
  const busy: number[] = [];
  for (let i = 0; i < 10; i++) {
    const load = machineBusy(300);
    runs.push(await startOnce(b, i));
    busy.push(await load);
  }
  const phaseRuns = runs.flatMap((r) => (r.phases ? [r.phases] : []));
  row(
    '6 cold start',
    'spawn -> ready on /health/readiness (median of 10)',
    `${median(runs.map((r) => r.cold)).toFixed(0)} ms`,
    '<= 300 ms',
  );
  if (phaseRuns.length > 0)
    row(
      '6 cold start',
      'its phases (medians, as the function logs them): node / telemetry / imports / init / listening',
      Object.keys(phaseRuns[0]!)
        .map((p) => `${median(phaseRuns.map((r) => r[p] ?? 0)).toFixed(0)}`)
        .join(' / ') + ' ms',
    );
  row(
    '6 cold start',
    'machine busy before the starts (waited for under 20 %, a minute at most) / in the first 300 ms of each (median), both cores',
    `${(before * 100).toFixed(0)} % / ${(median(busy) * 100).toFixed(0)} %`,
  );
  row(
    '6 cold start',
    'first reconcile of a 5-item SyncResource (median of 10)',
    `${median(runs.map((r) => r.first)).toFixed(0)} ms`,
  );
}

/** Started is one cold start: until ready, its phases as the function logs them (functions/serve.ts), its first reconcile. */
interface Started {
  cold: number;
  phases: Record<string, number> | undefined;
  first: number;
}

/** startOnce starts what the image runs (the build in dist/), waits for it, and has it reconcile bench-1 once. */
async function startOnce(b: Bench, i: number): Promise<Started> {
  const { set, rt } = b;
  const port = await freePort();
  const t = performance.now();
  const child = spawn(process.execPath, [join(dist, 'functions', 'serve.js'), 'apply-items'], {
    cwd: dist,
    env: {
      ...process.env,
      PORT: String(port),
      KUBECONFIG: set.kcp.kubeconfigFile,
      K_SINK: rt.broker.url,
      LOG_LEVEL: 'warn',
      SYNC_EVENT_AUTH: 'none',
    },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  try {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/health/readiness`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      await sleep(5);
    }
    const cold = performance.now() - t;
    // Once it has logged its start-up phases.
    for (let w = 0; w < 100 && !out.includes('"msg":"started"'); w++) await sleep(10);
    const started = out
      .split('\n')
      .map((l) => {
        try {
          return JSON.parse(l) as { msg?: string; phasesMs?: Record<string, number> };
        } catch {
          return undefined;
        }
      })
      .find((l) => l?.msg === 'started');
    const event = await resolvedEvent(b, i);
    const t1 = performance.now();
    await fetch(`http://127.0.0.1:${port}/`, event).then((res) => res.text());
    return { cold, phases: started?.phasesMs, first: performance.now() - t1 };
  } finally {
    child.kill('SIGKILL');
  }
}

/** resolvedEvent is the cluster.resolved event resolve-cluster would send for bench-1. */
async function resolvedEvent(b: Bench, i: number): Promise<RequestInit> {
  const { kcp, srPath } = b;
  const sr = await kcp.client.call<SyncResource>('GET', srPath('bench-1'));
  const secret = await kcp.client.call<{ items: KubeObject[] }>(
    'GET',
    '/api/v1/namespaces/kcp-system/secrets',
    {
      query: { labelSelector: `operator.kyma-project.io/kyma-name=${sr.spec.kyma}` },
    },
  );
  const s = secret.items[0]!;
  return {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'ce-specversion': '1.0',
      'ce-id': `cold-${i}`,
      'ce-source': '/bench',
      'ce-type': 'io.kyma-project.syncresource.cluster.resolved',
    },
    body: JSON.stringify({
      namespace: 'kcp-system',
      name: 'bench-1',
      uid: sr.metadata.uid,
      generation: sr.metadata.generation,
      kyma: sr.spec.kyma,
      secret: {
        namespace: 'kcp-system',
        name: s.metadata.name,
        uid: s.metadata.uid,
        resourceVersion: s.metadata.resourceVersion,
      },
    }),
  };
}
