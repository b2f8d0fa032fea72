// Helpers for end-to-end tests: the local runtime with real function processes
// against the test KCP, in a control-plane namespace of the test's own, driven by kubectl.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, inject } from 'vitest';
import { ClusterSet } from '../infra/clusters.ts';
import {
  applyObjects,
  connect,
  controlPlaneNamespace,
  kymaName,
  kymaObjects,
  setupKcp,
} from '../infra/kcp-setup.ts';
import { sourcesSettled, startRuntime, type Runtime, type RuntimeOptions } from '../infra/runtime/index.ts';
import { SYNC_API_VERSION, type SyncResource } from '../lib/model.ts';
import { isNotFound } from '../lib/kube/errors.ts';
import type { Cluster, KubeObject } from '../lib/kube/objects.ts';
import { cluster, eventually, uniqueName } from './helpers.ts';

/** kubectl runs kubectl against a kubeconfig file, with optional stdin; rejects with stderr on failure. */
export function kubectl(kubeconfig: string, args: string[], stdin?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      'kubectl',
      ['--kubeconfig', kubeconfig, ...args],
      { maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) =>
        err ? reject(new Error(`kubectl ${args.join(' ')}: ${stderr || err.message}`)) : resolve(stdout),
    );
    if (stdin !== undefined) child.stdin!.end(stdin);
  });
}

/** Stack is a running runtime in its own control-plane namespace. */
export interface Stack {
  ns: string;
  runtime: Runtime;
  stateDir: string;
  kcp: string;
  skr: string[];
  stop(): Promise<void>;
}

/**
 * startStack creates a namespace with a Kyma and access Secret per SKR and starts the
 * runtime for it. On Knative's own parts (knative: "real"), which install cluster-wide,
 * the stack gets a KCP and two SKRs of its own instead, and runs in kcp-system.
 */
export async function startStack(
  prefix: string,
  opts: Partial<RuntimeOptions> = {},
  own = { clusters: false },
): Promise<Stack> {
  const stateDir = await mkdtemp(join(tmpdir(), `kcp-sync-${prefix}-`));
  // own.clusters: a KCP and two SKRs of the stack's own, for tests that count every request an SKR serves.
  if (opts.knative === 'real' || own.clusters) return startRealStack(stateDir, opts);
  const clusters = inject('clusters');
  const ns = uniqueName(prefix);
  const kcp = await cluster('kcp');
  await applyObjects(kcp, [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    ...clusters.skrs.flatMap((s, i) => kymaObjects(kymaName(i + 1), s.kubeconfig, ns)),
  ]);
  const kcpFile = `${clusters.stateDir}/kubeconfig/kcp.yaml`;
  const runtime = await startRuntime({
    kubeconfig: kcpFile,
    stateDir,
    pingIntervalMs: 2000,
    namespace: ns,
    ...opts,
  });
  // Every SKR source replica takes its share before a test creates anything (sourcesSettled).
  await sourcesSettled(runtime);
  return {
    ns,
    runtime,
    stateDir,
    kcp: kcpFile,
    skr: clusters.skrs.map((_, i) => `${clusters.stateDir}/kubeconfig/skr-${i + 1}.yaml`),
    async stop() {
      await runtime.stop();
      if (!process.env.KCP_SYNC_KEEP_STATE) await rm(stateDir, { recursive: true, force: true });
    },
  };
}

async function startRealStack(stateDir: string, opts: Partial<RuntimeOptions>): Promise<Stack> {
  const set = await ClusterSet.start({ skrs: 2, stateDir });
  const stop = async (runtime?: Runtime) => {
    await runtime?.stop();
    await set.stop();
    if (!process.env.KCP_SYNC_KEEP_STATE) await rm(stateDir, { recursive: true, force: true });
  };
  let runtime: Runtime | undefined;
  try {
    await setupKcp(set);
    runtime = await startRuntime({
      kubeconfig: set.kcp.kubeconfigFile,
      stateDir,
      pingIntervalMs: 2000,
      ...opts,
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    ns: controlPlaneNamespace,
    runtime,
    stateDir,
    kcp: set.kcp.kubeconfigFile,
    skr: set.skrs.map((s) => s.kubeconfigFile),
    stop: () => stop(runtime),
  };
}

/** kubectlGet reads one object with kubectl (undefined when it does not exist); ns for a namespaced kind. */
export async function kubectlGet<T = KubeObject>(
  kubeconfig: string,
  kind: string,
  name: string,
  ns?: string,
): Promise<T | undefined> {
  const out = await kubectl(kubeconfig, [
    'get',
    kind,
    name,
    ...(ns ? ['-n', ns] : []),
    '-o',
    'json',
    '--ignore-not-found',
  ]);
  return out.trim() ? (JSON.parse(out) as T) : undefined;
}

/** getSr reads a SyncResource of the stack's namespace with kubectl (undefined when it does not exist). */
export function getSr(s: Stack, name: string): Promise<SyncResource | undefined> {
  return kubectlGet<SyncResource>(s.kcp, 'syncresource', name, s.ns);
}

/**
 * waitSr waits until check passes on the SyncResource as kubectl reads it. It polls over
 * one kept-alive connection and asks kubectl only once the poll passes: a kubectl process
 * costs a tenth of a CPU second, four a second per waiting test on a 2-core machine.
 */
export async function waitSr(
  s: Stack,
  name: string,
  check: (sr: SyncResource | undefined) => void,
  timeoutMs = 30_000,
): Promise<SyncResource | undefined> {
  return eventually(
    async () => {
      check(await readSr(s, name));
      const sr = await getSr(s, name);
      check(sr);
      return sr;
    },
    timeoutMs,
    250,
  );
}

/** readSr reads a SyncResource of the stack's namespace over read's connection: for polling, not for what a test asserts. */
export const readSr = (s: Stack, name: string): Promise<SyncResource | undefined> =>
  read<SyncResource>(s.kcp, `/apis/${SYNC_API_VERSION}/namespaces/${s.ns}/syncresources/${name}`);

const readers = new Map<string, Promise<Cluster>>();

/** read GETs an API path from the cluster of a kubeconfig file over a connection kept per file (undefined on 404): for polling, not for what a test asserts. */
export async function read<T = KubeObject>(kubeconfigFile: string, path: string): Promise<T | undefined> {
  let c = readers.get(kubeconfigFile);
  if (!c) {
    c = connect(readFileSync(kubeconfigFile, 'utf8'), 'test-reader');
    readers.set(kubeconfigFile, c);
  }
  try {
    return await (await c).client.call<T>('GET', path);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    // The next poll connects again, from the file as it is then (a restarted cluster).
    readers.delete(kubeconfigFile);
    void c.then((x) => x.client.close()).catch(() => undefined);
    throw err;
  }
}

afterAll(async () => {
  for (const c of readers.values()) await (await c).client.close();
  readers.clear();
});

/** kubeEvents lists the Kubernetes Events about one object of the stack's namespace (reason and note), with kubectl. */
export async function kubeEvents(s: Stack, name: string): Promise<{ reason: string; note: string }[]> {
  const out = JSON.parse(
    await kubectl(s.kcp, [
      'get',
      'events.events.k8s.io',
      '-n',
      s.ns,
      '-o',
      'json',
      '--field-selector',
      `regarding.name=${name}`,
    ]),
  ) as { items: { reason: string; note: string }[] };
  return out.items.map(({ reason, note }) => ({ reason, note }));
}

/** syncResourceYaml renders a SyncResource for kubectl apply. */
export function syncResourceYaml(
  ns: string,
  name: string,
  kyma: string,
  items: {
    name: string;
    strategy: string;
    resource?: string;
    subresource?: string;
    resourceFrom?: { configMapKeyRef: { name: string; key: string } };
  }[],
): string {
  return JSON.stringify({
    apiVersion: 'operator.kyma-project.io/v1alpha1',
    kind: 'SyncResource',
    metadata: { name, namespace: ns },
    spec: { kyma, items },
  });
}

/** serviceLog is the log of every replica of a function Service (function-<service>.log, function-<service>-<n>.log). */
export async function serviceLog(stateDir: string, service: string): Promise<string> {
  const dir = join(stateDir, 'logs');
  const files = (await readdir(dir)).filter(
    (f) => f === `function-${service}.log` || new RegExp(`^function-${service}-\\d+\\.log$`).test(f),
  );
  return (await Promise.all(files.map((f) => readFile(join(dir, f), 'utf8')))).join('\n');
}
