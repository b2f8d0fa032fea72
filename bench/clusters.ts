// clusters.ts measures the local clusters alone: warm start of 1 KCP + 2 SKRs (binaries
// already built) and their total resident memory once settled.
//   npm run bench:clusters
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterSet } from '../infra/clusters.ts';

const stateDir = await mkdtemp(join(tmpdir(), 'kcp-sync-bench-clusters-'));
const starts: number[] = [];
for (let run = 0; run < 3; run++) {
  const t0 = performance.now();
  const set = await ClusterSet.start({ skrs: 2, stateDir });
  starts.push(performance.now() - t0);
  if (run === 2) {
    await new Promise((r) => setTimeout(r, 10_000)); // let the controller managers settle
    let total = 0;
    for (const p of set.state().processes) {
      const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p.pid}/status`, 'utf8'))![1]);
      total += kb;
      console.log(`  ${p.role}/${p.cluster}: ${Math.round(kb / 1024)} MiB`);
    }
    console.log(`total RSS of 1 KCP + 2 SKRs: ${Math.round(total / 1024)} MiB`);
  }
  await set.stop();
}
console.log(`warm start of 1 KCP + 2 SKRs: ${starts.map((ms) => `${Math.round(ms)} ms`).join(', ')}`);
await rm(stateDir, { recursive: true, force: true });
