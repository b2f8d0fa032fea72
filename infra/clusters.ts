// clusters.ts starts and stops a set of real local clusters: one KCP and N SKRs,
// each a kube-apiserver (TLS, RBAC, admin client certificate) with its
// kube-controller-manager, all backed by one etcd with a key prefix per cluster. Each SKR
// also runs Pods: kube-scheduler binds them to a Node that KWOK simulates (its stages move
// Pods to Running and Ready, Jobs' Pods to Succeeded), so workloads become healthy for real.
import { mkdtemp, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBinaries, ensureWorkloadBinaries, type Binaries, type WorkloadBinaries } from './binaries.ts';
import { renderKubeconfig } from './kubeconfig.ts';
import { freePort, httpsGet, httpsRequest, startOnFreePort, waitFor, type TlsClient } from './net.ts';
import { makeClusterPki, type ClusterPki } from './pki.ts';
import { reapDir, releaseReaper, startProcess, stopProcess, killProcess, type Proc } from './processes.ts';

/** Cluster is one running local cluster. */
export interface Cluster {
  name: string;
  url: string;
  port: number;
  dir: string;
  pki: ClusterPki;
  /** kubeconfig is the admin kubeconfig text (inline credentials). */
  kubeconfig: string;
  kubeconfigFile: string;
  apiserver: Proc;
  controllerManager: Proc;
  /** workloads are an SKR's kube-scheduler and KWOK (none for the KCP, or with workloads: false). */
  workloads: Proc[];
  /** profiling serves the API server's /debug/pprof (ClusterSetOptions.profiling). */
  profiling: boolean;
}

/** NODE_NAME is the simulated Node of every SKR. */
export const NODE_NAME = 'kwok-node-1';

/** ClusterSetOptions configures start(). */
export interface ClusterSetOptions {
  skrs: number;
  /** stateDir receives kubeconfig/<cluster>.yaml and state.json while the set runs. */
  stateDir: string;
  log?: (line: string) => void;
  readyTimeoutMs?: number;
  /** workloads: SKRs run kube-scheduler and a KWOK Node (default true). */
  workloads?: boolean;
  /** profiling has every API server serve /debug/pprof (the benchmark's --apiserver-prof; default off). */
  profiling?: boolean;
}

/** StateFile is the content of state.json: every process and every cluster's access. */
export interface StateFile {
  processes: { role: string; cluster: string; pid: number }[];
  clusters: Record<string, { kubeconfig: string; url: string }>;
}

interface ClusterSetFields {
  binaries: Binaries;
  workloadBinaries: WorkloadBinaries | undefined;
  workDir: string;
  stateDir: string;
  etcd: Proc;
  etcdUrl: string;
  kcp: Cluster;
  skrs: Cluster[];
  readyTimeoutMs: number;
}

/** ClusterSet is a running KCP plus SKRs; stop() ends every process it started. */
export class ClusterSet {
  readonly extraProcesses: Proc[] = [];
  declare readonly binaries: Binaries;
  declare private readonly workloadBinaries: WorkloadBinaries | undefined;
  declare readonly workDir: string;
  declare readonly stateDir: string;
  declare readonly etcd: Proc;
  declare readonly etcdUrl: string;
  declare readonly kcp: Cluster;
  declare readonly skrs: Cluster[];
  declare private readonly readyTimeoutMs: number;

  private constructor(fields: ClusterSetFields) {
    Object.assign(this, fields);
  }

  /** start builds binaries if needed, then starts etcd and every cluster concurrently. */
  static async start(opts: ClusterSetOptions): Promise<ClusterSet> {
    const log = opts.log ?? (() => {});
    const binaries = await ensureBinaries(log);
    const workloads = opts.workloads === false ? undefined : await ensureWorkloadBinaries(log);
    const workDir = await mkdtemp(join(tmpdir(), 'kcp-sync-clusters-'));
    reapDir(workDir);
    const logDir = join(workDir, 'logs');
    await mkdir(logDir);
    const timeout = opts.readyTimeoutMs ?? 120_000;
    const [clientPort, peerPort] = [await freePort(), await freePort()];
    const etcdUrl = `http://127.0.0.1:${clientPort}`;
    const etcd = startProcess(
      'etcd',
      'shared',
      binaries.etcd,
      [
        '--name=local',
        `--data-dir=${join(workDir, 'etcd')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-cluster=local=http://127.0.0.1:${peerPort}`,
        '--unsafe-no-fsync',
        '--log-level=warn',
        '--quota-backend-bytes=8589934592',
      ],
      { logDir },
    );
    const started: Proc[] = [etcd];
    try {
      await waitFor(
        'etcd',
        async () => (await fetch(`${etcdUrl}/health`)).ok,
        timeout,
        () => exitedMsg(etcd),
      );
      const names = ['kcp', ...Array.from({ length: opts.skrs }, (_, i) => `skr-${i + 1}`)];
      const clusters = await Promise.all(
        names.map(async (name) => {
          const c = await startCluster(name, binaries, workDir, opts.stateDir, etcdUrl, timeout, {
            profiling: opts.profiling === true,
          });
          started.push(c.apiserver, c.controllerManager);
          if (name !== 'kcp' && workloads) {
            c.workloads = await startWorkloads(c, workloads, workDir);
            started.push(...c.workloads);
          }
          return c;
        }),
      );
      const set = new ClusterSet({
        binaries,
        workloadBinaries: workloads,
        workDir,
        stateDir: opts.stateDir,
        etcd,
        etcdUrl,
        kcp: clusters[0]!,
        skrs: clusters.slice(1),
        readyTimeoutMs: timeout,
      });
      await set.writeState();
      log(`clusters ready: ${names.join(', ')}`);
      return set;
    } catch (err) {
      await Promise.all(started.map((p) => stopProcess(p, 1000)));
      releaseReaper();
      await rm(workDir, { recursive: true, force: true });
      throw err;
    }
  }

  /** clusters lists the KCP first, then the SKRs. */
  get clusters(): Cluster[] {
    return [this.kcp, ...this.skrs];
  }

  /** cluster returns the cluster named name ("kcp", "skr-1", ...). */
  cluster(name: string): Cluster {
    const c = this.clusters.find((x) => x.name === name);
    if (!c) throw new Error(`no cluster ${name}`);
    return c;
  }

  /** state describes the processes and clusters, as written to state.json. */
  state(): StateFile {
    const procs = [
      this.etcd,
      ...this.clusters.flatMap((c) => [c.apiserver, c.controllerManager, ...c.workloads]),
      ...this.extraProcesses,
    ];
    return {
      processes: procs.map(({ role, cluster, pid }) => ({ role, cluster, pid })),
      clusters: Object.fromEntries(
        this.clusters.map((c) => [c.name, { kubeconfig: c.kubeconfigFile, url: c.url }]),
      ),
    };
  }

  /** writeState (re)writes stateDir/state.json, e.g. after adding extra processes. */
  async writeState(): Promise<void> {
    await mkdir(join(this.stateDir, 'kubeconfig'), { recursive: true });
    reapDir(join(this.stateDir, 'state.json'));
    for (const c of this.clusters) reapDir(c.kubeconfigFile);
    await Promise.all(this.clusters.map((c) => writeFile(c.kubeconfigFile, c.kubeconfig, { mode: 0o600 })));
    await writeFile(join(this.stateDir, 'state.json'), JSON.stringify(this.state(), null, 2) + '\n');
  }

  /** killApiServer ends a cluster's API server at once (SIGKILL), as a crash would. */
  async killApiServer(name: string): Promise<void> {
    await killProcess(this.cluster(name).apiserver);
  }

  /**
   * restartApiServer starts a cluster's API server again on the same port and data, and
   * the cluster's other processes with it (kube-controller-manager; an SKR's
   * kube-scheduler and KWOK), so that the cluster is whole again at once. Left running,
   * their informers sat out client-go's back-off (up to a minute): after two minutes
   * away, a Deployment applied once the API server was back got its ReplicaSet 71 s later;
   * with the controller-manager and scheduler restarted, its Pod was Ready 41 s later
   * (KWOK's back-off), and as late with KWOK restarted too, until the Node lease of the
   * KWOK before had expired (40 s). The benchmark's scenario 10, right after scenario 13's
   * outage, measured that recovery with the product's work.
   */
  async restartApiServer(name: string): Promise<void> {
    const c = this.cluster(name);
    await stopProcess(c.apiserver);
    c.apiserver = launchApiServer(c, this.binaries, this.etcdUrl);
    await waitReady(c, this.readyTimeoutMs);
    await stopProcess(c.controllerManager);
    c.controllerManager = launchControllerManager(c, this.binaries, this.workDir);
    if (c.workloads.length > 0 && this.workloadBinaries) {
      await Promise.all(c.workloads.map((p) => stopProcess(p)));
      // A new KWOK takes the Node only once the lease of the one before has expired (40 s).
      const lease = `${c.url}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${NODE_NAME}`;
      const gone = await httpsRequest('DELETE', lease, adminTls(c));
      if (gone.status !== 200 && gone.status !== 404)
        throw new Error(`deleting the lease of ${NODE_NAME} in ${c.name}: ${gone.status} ${gone.body}`);
      c.workloads = launchWorkloads(c, this.workloadBinaries, this.workDir);
    }
    await this.writeState();
  }

  /** stop ends every process (extra ones first), removes the state files and the data. */
  async stop(): Promise<void> {
    await Promise.all(this.extraProcesses.map((p) => stopProcess(p)));
    await Promise.all(this.clusters.flatMap((c) => c.workloads.map((p) => stopProcess(p))));
    await Promise.all(this.clusters.map((c) => stopProcess(c.controllerManager)));
    await Promise.all(this.clusters.map((c) => stopProcess(c.apiserver)));
    await stopProcess(this.etcd);
    reapDir(this.workDir, false);
    releaseReaper();
    await rm(join(this.stateDir, 'state.json'), { force: true });
    await Promise.all(this.clusters.map((c) => rm(c.kubeconfigFile, { force: true })));
    await rm(this.workDir, { recursive: true, force: true });
  }

  /** kubeconfigFile is where a cluster's kubeconfig is written inside stateDir. */
  static kubeconfigPath(stateDir: string, name: string): string {
    return join(stateDir, 'kubeconfig', `${name}.yaml`);
  }
}

function exitedMsg(p: Proc): string | undefined {
  const { exitCode, signalCode } = p.child;
  if (exitCode === null && signalCode === null) return undefined;
  return `${p.role} exited (${exitCode ?? signalCode}); see ${p.logFile}`;
}

async function startCluster(
  name: string,
  bin: Binaries,
  workDir: string,
  stateDir: string,
  etcdUrl: string,
  timeout: number,
  opts: { profiling: boolean },
): Promise<Cluster> {
  const dir = join(workDir, name);
  await mkdir(dir);
  const pki = await makeClusterPki(dir, name);
  const adminFile = adminKubeconfig(dir);
  const kubeconfigFile = ClusterSet.kubeconfigPath(stateDir, name);
  // The API server exits at once when its port was taken after freePort found it free.
  let last: Proc | undefined;
  const c = await startOnFreePort(
    async (port) => {
      const url = `https://127.0.0.1:${port}`;
      const c = {
        name,
        url,
        port,
        dir,
        pki,
        kubeconfig: renderKubeconfig(name, url, pki.ca.cert, pki.admin),
        kubeconfigFile,
        workloads: [],
        profiling: opts.profiling,
      } as unknown as Cluster;
      const logFrom = last ? (await stat(last.logFile)).size : 0;
      last = c.apiserver = launchApiServer(c, bin, etcdUrl);
      try {
        await waitReady(c, timeout);
      } catch (err) {
        throw (await portTaken(c.apiserver, logFrom)) ? new PortTakenError(port, err) : err;
      }
      return c;
    },
    (err) => err instanceof PortTakenError,
  );
  await writeFile(adminFile, c.kubeconfig, { mode: 0o600 });
  c.controllerManager = launchControllerManager(c, bin, workDir);
  return c;
}

function launchControllerManager(c: Cluster, bin: Binaries, workDir: string): Proc {
  const { pki } = c;
  return startProcess(
    'kube-controller-manager',
    c.name,
    bin.kubeControllerManager,
    [
      `--kubeconfig=${adminKubeconfig(c.dir)}`,
      '--leader-elect=false',
      '--secure-port=0',
      '--use-service-account-credentials=false',
      `--service-account-private-key-file=${pki.serviceAccount.keyFile}`,
      `--root-ca-file=${pki.caFile}`,
      '--controllers=*,-nodeipam,-nodelifecycle,-service-lb-controller,-cloud-node-lifecycle-controller,-persistentvolume-attach-detach-controller',
      '--concurrent-gc-syncs=5',
      // Each controller's client is limited to 20 requests a second by default: a bulk
      // create's Deployments then turned Available seconds after they were applied, with
      // the CPU idle, and the benchmark measured that limit instead of the product's work.
      '--kube-api-qps=100',
      '--kube-api-burst=200',
      '--v=1',
    ],
    { logDir: join(workDir, 'logs') },
  );
}

/**
 * startWorkloads starts an SKR's kube-scheduler and KWOK and registers the simulated Node.
 * The Node is created without the not-ready taint the API server's admission adds (the
 * local controller-manager runs no node-lifecycle controller to take it off); KWOK marks it
 * Ready and keeps its lease.
 */
async function startWorkloads(c: Cluster, bin: WorkloadBinaries, workDir: string): Promise<Proc[]> {
  const processes = launchWorkloads(c, bin, workDir);
  const tls = adminTls(c);
  const node = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: NODE_NAME,
      annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
      labels: { 'kubernetes.io/hostname': NODE_NAME, type: 'kwok' },
    },
    status: {
      allocatable: { cpu: '32', memory: '256Gi', pods: '500' },
      capacity: { cpu: '32', memory: '256Gi', pods: '500' },
    },
  };
  const created = await httpsRequest('POST', `${c.url}/api/v1/nodes`, tls, { json: node });
  if (created.status !== 201 && created.status !== 409)
    throw new Error(`creating Node ${NODE_NAME} in ${c.name}: ${created.status} ${created.body}`);
  const untainted = await httpsRequest('PATCH', `${c.url}/api/v1/nodes/${NODE_NAME}`, tls, {
    json: { spec: { taints: null } },
    contentType: 'application/merge-patch+json',
  });
  if (untainted.status !== 200)
    throw new Error(`untainting Node ${NODE_NAME} in ${c.name}: ${untainted.status} ${untainted.body}`);
  return processes;
}

/** launchWorkloads starts an SKR's kube-scheduler and KWOK (its Node registered by startWorkloads). */
function launchWorkloads(c: Cluster, bin: WorkloadBinaries, workDir: string): Proc[] {
  const kubeconfig = adminKubeconfig(c.dir);
  const logDir = join(workDir, 'logs');
  const scheduler = startProcess(
    'kube-scheduler',
    c.name,
    bin.kubeScheduler,
    [`--kubeconfig=${kubeconfig}`, '--leader-elect=false', '--secure-port=0', '--v=1'],
    { logDir },
  );
  const kwok = startProcess(
    'kwok',
    c.name,
    bin.kwok,
    [
      `--kubeconfig=${kubeconfig}`,
      `--config=${bin.stages}`,
      '--manage-all-nodes=false',
      '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake',
      '--node-lease-duration-seconds=40',
      '--cidr=10.244.0.0/16',
      '--node-ip=10.0.0.10',
      '--server-address=127.0.0.1:0',
    ],
    { logDir, env: { ...process.env, HOME: c.dir } },
  );
  return [scheduler, kwok];
}

/** portTaken tells whether a process ended because its port was in use (its log after byte from says so). */
async function portTaken(p: Proc, from: number): Promise<boolean> {
  if (p.child.exitCode === null && p.child.signalCode === null) return false;
  return (await readFile(p.logFile).catch(() => Buffer.alloc(0)))
    .subarray(from)
    .includes('address already in use');
}

class PortTakenError extends Error {
  constructor(port: number, cause: unknown) {
    super(`port ${port} was taken before the API server bound it`, { cause });
  }
}

function launchApiServer(c: Cluster, bin: Binaries, etcdUrl: string): Proc {
  return startProcess(
    'kube-apiserver',
    c.name,
    bin.kubeApiserver,
    [
      `--etcd-servers=${etcdUrl}`,
      `--etcd-prefix=/${c.name}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${c.port}`,
      `--cert-dir=${c.dir}`,
      `--tls-cert-file=${c.pki.serving.certFile}`,
      `--tls-private-key-file=${c.pki.serving.keyFile}`,
      `--client-ca-file=${c.pki.caFile}`,
      `--service-account-key-file=${c.pki.serviceAccount.pubFile}`,
      `--service-account-signing-key-file=${c.pki.serviceAccount.keyFile}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      // Where a Pod finds the keys (Knative's token verifier follows it from the discovery document).
      '--service-account-jwks-uri=https://kubernetes.default.svc.cluster.local/openid/v1/jwks',
      '--service-cluster-ip-range=10.96.0.0/12',
      '--authorization-mode=RBAC',
      '--allow-privileged=true',
      '--enable-priority-and-fairness=false',
      `--profiling=${c.profiling}`,
      '--endpoint-reconciler-type=none',
      '--v=1',
    ],
    { logDir: join(c.dir, '..', 'logs') },
  );
}

/** adminKubeconfig is the file of a cluster's admin kubeconfig in its directory (its controller-manager's, scheduler's and KWOK's). */
function adminKubeconfig(dir: string): string {
  return join(dir, 'admin.kubeconfig');
}

/** adminTls is how the runner itself reaches a cluster's API server: its CA and admin client certificate. */
function adminTls(c: Cluster): TlsClient {
  return { ca: c.pki.ca.cert, cert: c.pki.admin.cert, key: c.pki.admin.key };
}

async function waitReady(c: Cluster, timeout: number): Promise<void> {
  const tls = adminTls(c);
  await waitFor(
    `kube-apiserver ${c.name}`,
    async () => (await httpsGet(`${c.url}/readyz`, tls)).status === 200,
    timeout,
    () => exitedMsg(c.apiserver),
  );
}
