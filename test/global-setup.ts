// Starts the real local clusters once per test run and hands their access to the
// tests through vitest's provide/inject.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { ensureKnativeBinaries, ensurePrometheusBinaries, ensureServingBinaries } from '../infra/binaries.ts';
import { build } from '../infra/build.ts';
import { ClusterSet } from '../infra/clusters.ts';
import { setupKcp } from '../infra/kcp-setup.ts';

/** TestClusters is what tests receive with inject('clusters'). */
export interface TestClusters {
  stateDir: string;
  kcp: { kubeconfig: string; url: string };
  skrs: { name: string; kubeconfig: string; url: string; ca: { certFile: string; keyFile: string } }[];
  /** isolated is an SKR no other test touches, for tests that compare the whole cluster before and after. */
  isolated: { name: string; kubeconfig: string };
  kubernetesVersion: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    clusters: TestClusters;
  }
}

let set: ClusterSet | undefined;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const stateDir = await mkdtemp(join(tmpdir(), 'kcp-sync-test-'));
  const started = Date.now();
  // Built once here (a cold build takes minutes), not by every test's runtime at once.
  await ensureKnativeBinaries((l) => console.log(`[clusters] ${l}`));
  await ensureServingBinaries((l) => console.log(`[clusters] ${l}`));
  await ensurePrometheusBinaries((l) => console.log(`[clusters] ${l}`));
  // The processes the runtimes start run the build in dist/, as the image does.
  await build();
  set = await ClusterSet.start({ skrs: 3, stateDir, log: (l) => console.log(`[clusters] ${l}`) });
  const [isolated] = set.skrs.slice(2);
  await setupKcp(set);
  console.log(`[clusters] KCP + ${set.skrs.length} SKRs up in ${Date.now() - started} ms (one isolated)`);
  project.provide('clusters', {
    stateDir,
    kcp: { kubeconfig: set.kcp.kubeconfig, url: set.kcp.url },
    isolated: { name: isolated!.name, kubeconfig: isolated!.kubeconfig },
    skrs: set.skrs.slice(0, 2).map((s) => ({
      name: s.name,
      kubeconfig: s.kubeconfig,
      url: s.url,
      ca: { certFile: s.pki.caFile, keyFile: `${s.pki.dir}/ca.key` },
    })),
    kubernetesVersion: set.binaries.versions.kubernetes,
  });
  return async () => {
    await set?.stop();
    await rm(stateDir, { recursive: true, force: true });
  };
}
