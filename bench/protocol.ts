// protocol.ts measures what one API request costs the client and the API server over a
// pool of HTTP/1.1 keep-alive connections and multiplexed over one HTTP/2 connection (what
// the clients speak; BENCHMARKS.md, "HTTP/1.1 to the API servers": tried, not kept):
// server-side applies and GETs of a ConfigMap against a real local API server, the two
// alternating round by round.
//   npm run bench:protocol
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterSet } from '../infra/clusters.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { KubeClient, PatchType } from '../lib/kube/client.ts';
import { credentialsFromKubeconfig } from '../lib/kube/credentials.ts';
import { median } from './context.ts';
import { cpuSeconds } from './procs.ts';

const ROUNDS = 6;
const N = 600; // applies, each followed by a GET
const stateDir = await mkdtemp(join(tmpdir(), 'kcp-sync-bench-protocol-'));
const set = await ClusterSet.start({ skrs: 1, stateDir, workloads: false });
try {
  const skr = set.cluster('skr-1');
  const creds = credentialsFromKubeconfig(skr.kubeconfig);
  const data = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, 'v'.repeat(60)]));
  const per: Record<'HTTP/1.1' | 'HTTP/2', { client: number[]; server: number[] }> = {
    'HTTP/1.1': { client: [], server: [] },
    'HTTP/2': { client: [], server: [] },
  };
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate which goes first; round 0 (connections, TLS, JIT) is not counted.
    for (const http2 of round % 2 ? [true, false] : [false, true]) {
      const client = KubeClient.create(creds, { name: 'skr-1', ...(http2 ? { http2 } : { http1: true }) });
      const server0 = await cpuSeconds(skr.apiserver.pid);
      const client0 = process.cpuUsage();
      await mapLimit(
        Array.from({ length: N }, (_, i) => i),
        16,
        async (i: number) => {
          const name = `cm-${i % 200}`;
          await client.call('PATCH', `/api/v1/namespaces/default/configmaps/${name}`, {
            body: {
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name },
              data: { ...data, round: `${round}` },
            },
            contentType: PatchType.apply,
            query: { fieldManager: 'bench-protocol', force: true },
          });
          await client.call('GET', `/api/v1/namespaces/default/configmaps/${name}`);
        },
      );
      const used = process.cpuUsage(client0);
      const server = ((await cpuSeconds(skr.apiserver.pid)) - server0) * 1000;
      await client.close();
      if (round === 0) continue;
      const p = per[http2 ? 'HTTP/2' : 'HTTP/1.1'];
      p.client.push((used.user + used.system) / 1000 / (2 * N));
      p.server.push(server / (2 * N));
    }
  }
  console.log(
    `CPU per request, median of ${ROUNDS - 1} rounds of ${2 * N} (an apply and a GET each, 16 at once):`,
  );
  for (const [name, p] of Object.entries(per))
    console.log(
      `  ${name}: client ${median(p.client).toFixed(3)} ms, API server ${median(p.server).toFixed(3)} ms`,
    );
} finally {
  await set.stop();
  await rm(stateDir, { recursive: true, force: true });
}
