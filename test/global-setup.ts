// Starts the real local clusters once per test run and hands their access to the
// tests through vitest's provide/inject.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { ClusterSet } from '../infra/clusters.ts';
import { setupKcp } from '../infra/kcp-setup.ts';

/** TestClusters is what tests receive with inject('clusters'). */
export interface TestClusters {
  stateDir: string;
  kcp: { kubeconfig: string; url: string };
  skrs: { name: string; kubeconfig: string; url: string; ca: { certFile: string; keyFile: string } }[];
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
  set = await ClusterSet.start({ skrs: 2, stateDir, log: (l) => console.log(`[clusters] ${l}`) });
  await setupKcp(set);
  console.log(`[clusters] KCP + ${set.skrs.length} SKRs up in ${Date.now() - started} ms`);
  project.provide('clusters', {
    stateDir,
    kcp: { kubeconfig: set.kcp.kubeconfig, url: set.kcp.url },
    skrs: set.skrs.map((s) => ({ name: s.name, kubeconfig: s.kubeconfig, url: s.url, ca: { certFile: s.pki.caFile, keyFile: `${s.pki.dir}/ca.key` } })),
    kubernetesVersion: set.binaries.versions.kubernetes,
  });
  return async () => {
    await set?.stop();
    await rm(stateDir, { recursive: true, force: true });
  };
}
