// binaries.ts finds or builds the Go programs the local stack runs: kube-apiserver,
// kube-controller-manager and etcd (infra/kube), kube-scheduler and KWOK (infra/kwok), Knative Eventing's commands
// (infra/knative), Knative Serving's queue-proxy (infra/serving), Prometheus for the
// monitoring test (infra/prometheus) and, for the benchmark alone, Gardener's
// resource-manager (infra/gardener, the peer). Builds go to a cache outside the git tree, keyed by a
// hash of each Go module's files and build script, so a version change rebuilds and
// anything else reuses.
import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';

const kubeModule = join(import.meta.dirname, 'kube');
const knativeModule = join(import.meta.dirname, 'knative');
const servingModule = join(import.meta.dirname, 'serving');
const kwokModule = join(import.meta.dirname, 'kwok');
const gardenerModule = join(import.meta.dirname, 'gardener');
const prometheusModule = join(import.meta.dirname, 'prometheus');

/** Binaries are the paths of the three programs a local cluster runs. */
export interface Binaries {
  kubeApiserver: string;
  kubeControllerManager: string;
  etcd: string;
  versions: { kubernetes: string; etcd: string };
}

/** KnativeBinaries are the Knative Eventing programs the local runtime runs. */
export interface KnativeBinaries {
  apiserverReceiveAdapter: string;
  /** commands maps each command's name (controller, ingress, filter, ...) to its executable. */
  commands: Record<string, string>;
  /** config is Knative's own configuration of these parts (config/core, channels/in-memory-channel, brokers/mt-channel-broker). */
  config: string;
  versions: { eventing: string };
}

/** ServingBinaries are Knative Serving's queue-proxy and CRDs. */
export interface ServingBinaries {
  queue: string;
  config: string;
  versions: { serving: string };
}

/** WorkloadBinaries run the workloads of an SKR: kube-scheduler and KWOK (a simulated Node), with KWOK's stages. */
export interface WorkloadBinaries {
  kubeScheduler: string;
  kwok: string;
  /** stages is a YAML file of KWOK Stages (fast Node and Pod lifecycles, a chaos stage that fails a labelled Pod). */
  stages: string;
  versions: { kwok: string; kubernetes: string };
}

/** PeerBinaries are Gardener's resource-manager, its ManagedResource CRD and the certificate pair of its webhook server. */
export interface PeerBinaries {
  resourceManager: string;
  crd: string;
  /** certDir holds tls.crt and tls.key (the module's example pair): the webhook server starts even with every webhook off. */
  certDir: string;
  versions: { gardener: string };
}

/** EVENTING_COMMANDS are the commands infra/knative/build.sh builds. */
export const EVENTING_COMMANDS = [
  'apiserver_receive_adapter',
  'controller',
  'mtchannel_broker',
  'channel_controller',
  'channel_dispatcher',
  'ingress',
  'filter',
  'mtping',
  'webhook',
];

/** cacheDir is where a module's build is kept: $KCP_SYNC_BIN_CACHE, else the user's cache directory. */
export function cacheDir(module = kubeModule): string {
  const base =
    process.env.KCP_SYNC_BIN_CACHE ??
    join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'kcp-sync-resource', 'bin');
  const hash = createHash('sha256');
  for (const f of ['go.mod', 'go.sum', 'build.sh']) hash.update(readFileSync(join(module, f)));
  // kube-scheduler comes from the kube module: its version is part of the key.
  if (module === kwokModule)
    for (const f of ['go.mod', 'go.sum']) hash.update(readFileSync(join(kubeModule, f)));
  // The kube build keeps its historical key; others are told apart by their module's name.
  const prefix =
    module === kubeModule
      ? ''
      : module === knativeModule
        ? 'knative-'
        : module === kwokModule
          ? 'kwok-'
          : module === gardenerModule
            ? 'gardener-'
            : module === prometheusModule
              ? 'prometheus-'
              : 'serving-';
  return join(base, `${prefix}${hash.digest('hex').slice(0, 16)}`);
}

function versionsIn<V>(dir: string): V | undefined {
  const versions = join(dir, 'versions.json');
  return existsSync(versions) ? (JSON.parse(readFileSync(versions, 'utf8')) as V) : undefined;
}

/** STEPS are the binaries each module's build.sh builds, in the order its "::step NAME" lines name them. */
const STEPS: Record<string, string[]> = {
  [kubeModule]: ['kube-apiserver', 'kube-controller-manager', 'etcd'],
  [kwokModule]: ['kwok', 'kube-scheduler'],
  [knativeModule]: EVENTING_COMMANDS,
  [servingModule]: ['queue-proxy'],
  [gardenerModule]: ['gardener-resource-manager'],
  [prometheusModule]: ['prometheus'],
};

let firstBuildAt: number | undefined;
const soFar = () => {
  const s = Math.round((performance.now() - firstBuildAt!) / 1000);
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s so far`;
};

/**
 * build runs module's build.sh into its cache directory once (minutes, first run only). It
 * logs one line per binary (which, n of m, the time so far) and one a minute while a binary
 * builds; the Go tool's own output goes to a log beside the cache directory, whose tail is
 * in the error when the build fails. steps are the binaries its "::step NAME" lines name.
 */
export async function build(
  module: string,
  what: string,
  log: (line: string) => void,
  steps = STEPS[module] ?? [],
): Promise<string> {
  const dir = cacheDir(module);
  if (versionsIn(dir)) return dir;
  const tmp = `${dir}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  firstBuildAt ??= performance.now();
  const logFile = `${dir}.log`;
  const name = `infra/${basename(module)}`;
  log(`building ${what} from ${name} into ${dir} (first run only; the Go tool's output goes to ${logFile})`);
  const out = createWriteStream(logFile);
  const tail: string[] = [];
  let current = '';
  const tick = setInterval(() => log(`  still building ${current} (${name}), ${soFar()}`), 60_000);
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(join(module, 'build.sh'), [tmp], { stdio: ['ignore', 'pipe', 'pipe'] });
      for (const stream of [child.stdout, child.stderr]) {
        createInterface({ input: stream }).on('line', (line) => {
          out.write(`${line}\n`);
          const step = /^::step (\S+)$/.exec(line)?.[1];
          if (step) {
            current = step;
            log(`  building ${step} (${steps.indexOf(step) + 1} of ${steps.length} of ${name}), ${soFar()}`);
            // Download lines say nothing about a failure: the tail keeps the others.
          } else if (!line.startsWith('go: downloading ') && tail.push(line) > 30) tail.shift();
        });
      }
      child.on('error', reject);
      child.on('close', (code) =>
        code === 0
          ? resolve()
          : reject(
              new Error(`${name}/build.sh exited with ${code}; the end of ${logFile}:\n${tail.join('\n')}`),
            ),
      );
    });
  } finally {
    clearInterval(tick);
    out.end();
  }
  await rename(tmp, dir).catch(async (err: unknown) => {
    // Another process finished the same build first: keep theirs.
    if (!versionsIn(dir)) throw err;
    await rm(tmp, { recursive: true, force: true });
  });
  if (!versionsIn(dir)) throw new Error(`build finished but ${dir} holds no versions.json`);
  log(`  built ${name}, ${soFar()}`);
  return dir;
}

/** ensureBinaries returns cached Kubernetes binaries, building them first when missing. */
export async function ensureBinaries(log: (line: string) => void = () => {}): Promise<Binaries> {
  const dir = await build(kubeModule, 'kube-apiserver, kube-controller-manager and etcd', log);
  return {
    kubeApiserver: join(dir, 'kube-apiserver'),
    kubeControllerManager: join(dir, 'kube-controller-manager'),
    etcd: join(dir, 'etcd'),
    versions: versionsIn<Binaries['versions']>(dir)!,
  };
}

/** ensureKnativeBinaries returns the cached Knative Eventing programs, building them first when missing. */
export async function ensureKnativeBinaries(
  log: (line: string) => void = () => {},
): Promise<KnativeBinaries> {
  const dir = await build(knativeModule, 'Knative Eventing (controllers, broker, channel, sources)', log);
  return {
    apiserverReceiveAdapter: join(dir, 'apiserver_receive_adapter'),
    commands: Object.fromEntries(EVENTING_COMMANDS.map((c) => [c, join(dir, c)])),
    config: join(dir, 'config'),
    versions: versionsIn<KnativeBinaries['versions']>(dir)!,
  };
}

/** ensureServingBinaries returns the cached queue-proxy and Serving CRDs, building them first when missing. */
export async function ensureServingBinaries(
  log: (line: string) => void = () => {},
): Promise<ServingBinaries> {
  const dir = await build(servingModule, "Knative Serving's queue-proxy", log);
  return {
    queue: join(dir, 'queue'),
    config: join(dir, 'config'),
    versions: versionsIn<ServingBinaries['versions']>(dir)!,
  };
}

/** ensureWorkloadBinaries returns the cached kube-scheduler, KWOK and its stages, building them first when missing. */
export async function ensureWorkloadBinaries(
  log: (line: string) => void = () => {},
): Promise<WorkloadBinaries> {
  const dir = await build(kwokModule, 'kube-scheduler and KWOK', log);
  return {
    kubeScheduler: join(dir, 'kube-scheduler'),
    kwok: join(dir, 'kwok'),
    stages: join(dir, 'stages', 'stages.yaml'),
    versions: versionsIn<WorkloadBinaries['versions']>(dir)!,
  };
}

/**
 * ensurePeerBinaries returns the cached Gardener resource-manager, building it first when
 * missing (about 6 minutes on 2 cores, a 100 MB binary): only the benchmark's peer
 * scenarios ask for it, never npm start or npm test.
 */
export async function ensurePeerBinaries(log: (line: string) => void = () => {}): Promise<PeerBinaries> {
  const dir = await build(gardenerModule, "Gardener's resource-manager (the benchmark's peer)", log);
  return {
    resourceManager: join(dir, 'gardener-resource-manager'),
    crd: join(dir, 'managedresources-crd.yaml'),
    certDir: join(dir, 'certs'),
    versions: versionsIn<PeerBinaries['versions']>(dir)!,
  };
}

/** PrometheusBinaries is Prometheus, which the monitoring test runs (infra/prometheus). */
export interface PrometheusBinaries {
  prometheus: string;
  versions: { prometheus: string };
}

export async function ensurePrometheusBinaries(
  log: (line: string) => void = () => {},
): Promise<PrometheusBinaries> {
  const dir = await build(prometheusModule, 'Prometheus (the monitoring test)', log);
  return { prometheus: join(dir, 'prometheus'), versions: versionsIn<PrometheusBinaries['versions']>(dir)! };
}

if (import.meta.main) {
  const log = (l: string) => console.log(l);
  console.log(
    JSON.stringify(
      {
        kube: await ensureBinaries(log),
        workloads: await ensureWorkloadBinaries(log),
        knative: await ensureKnativeBinaries(log),
        serving: await ensureServingBinaries(log),
        prometheus: await ensurePrometheusBinaries(log),
      },
      null,
      2,
    ),
  );
}
