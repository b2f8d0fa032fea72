import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import { ClusterSet } from '../infra/clusters.ts';
import { applyObjects, connect, installCrds, kymaObjects, setupKcp } from '../infra/kcp-setup.ts';
import { ClientCache } from '../lib/cluster/cache.ts';
import { Lookups } from '../lib/cluster/resolve.ts';
import { parseConfig } from '../lib/config.ts';
import { KcpStore, syncResourceInfo } from '../lib/kcp.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { Recorder } from '../lib/kube/recorder.ts';
import { applyKymaStep } from '../lib/pipeline/apply.ts';
import { resolveKymaStep } from '../lib/pipeline/resolve.ts';
import { writeStatusStep } from '../lib/pipeline/status.ts';
import type { Deps } from '../lib/pipeline/deps.ts';
import { benchCrd, syncResourceFor } from '../bench/workload.ts';

const stateDir = await mkdtemp(join(tmpdir(), 'prof-'));
const set = await ClusterSet.start({ skrs: 1, stateDir });
try {
  await setupKcp(set);
  const kcp = await connect(set.kcp.kubeconfig, 'kcp');
  const skr = await connect(set.skrs[0]!.kubeconfig, 'skr');
  await installCrds(skr, [benchCrd]);
  await applyObjects(skr, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'p' } }]);
  const config = { ...parseConfig({}), controlPlaneNamespaces: ['kcp-system'] };
  let deps: Deps = { config, kcp, store: new KcpStore(kcp, config.fieldManager), cache: new ClientCache(config), lookups: new Lookups(kcp), recorder: new Recorder(kcp, 'p'), send: async () => {}, log: { info() {}, warn() {}, error() {} } };
  if (process.env.WITH_OTEL) {
    const { startTelemetry } = await import('../lib/telemetry-sdk.ts');
    await startTelemetry('prof', { OTEL_METRICS_EXPORTER: 'prometheus', OTEL_EXPORTER_PROMETHEUS_PORT: '19464' });
    const { depsFromEnv } = await import('../lib/pipeline/setup.ts');
    deps = await depsFromEnv({ env: { KUBECONFIG: set.kcp.kubeconfigFile, SYNC_CONTROL_PLANE_NAMESPACES: 'kcp-system' } });
  }
  const N = 50;
  for (let i = 0; i < N; i++) {
    const o = syncResourceFor(i, 'p', 'kcp-system', 'kyma-1');
    o.metadata.labels = { 'operator.kyma-project.io/kyma-name': 'kyma-1' };
    await kcp.client.call('POST', resourcePath(syncResourceInfo, 'kcp-system'), { body: o });
  }
  const tick = async () => {
    const r = await resolveKymaStep(deps, { namespace: 'kcp-system', name: 'kyma-1', trigger: 'resync', since: new Date().toISOString() });
    if (r.kind !== 'resolved') throw new Error(r.kind);
    const out = await applyKymaStep(deps, r.data);
    for (const o of out.outcomes) await writeStatusStep(deps, o);
    return out;
  };
  for (let i = 0; i < 3; i++) console.log('warm', (await tick()).outcomes.length);
  const s = new Session(); s.connect(); await s.post('Profiler.enable'); await s.post('Profiler.start');
  const t0 = performance.now(); const c0 = process.cpuUsage();
  for (let i = 0; i < 10; i++) { const o = await tick(); if (o.outcomes.length) console.log('changed', o.outcomes.length); await new Promise((r) => setTimeout(r, 2100)); }
  const cpu = process.cpuUsage(c0);
  console.log('ms per SR cpu', ((cpu.user + cpu.system) / 1000 / (10 * N)).toFixed(2), 'wall', ((performance.now() - t0) / 10).toFixed(0));
  const { profile } = await s.post('Profiler.stop');
  writeFileSync('/tmp/apply.cpuprofile', JSON.stringify(profile));
  await deps.cache.closeAll(); await kcp.client.close(); await skr.client.close();
} finally { await set.stop(); }
