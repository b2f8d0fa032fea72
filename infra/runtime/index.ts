// index.ts starts the local stand-in for Knative: the function Services of
// knative.yaml as real faas-js-runtime HTTP servers (two processes each by default, as
// Knative scales a Service to several replicas), the Broker and Triggers, the
// ApiServerSources against the KCP and the PingSource.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeClient } from '../../lib/kube/client.ts';
import { credentialsFromFile, type Credentials } from '../../lib/kube/credentials.ts';
import { RestMapper } from '../../lib/kube/discovery.ts';
import type { Cluster } from '../../lib/kube/objects.ts';
import { startOnFreePort, waitFor } from '../net.ts';
import { ensureKnativeBinaries } from '../binaries.ts';
import { build, dist } from '../build.ts';
import { killProcess, startProcess, stopProcess } from '../processes.ts';
import { startAdapter, type ReceiveAdapter } from './adapter.ts';
import { ApiProxy } from './apiproxy.ts';
import { Broker } from './broker.ts';
import { serviceAccountKubeconfigs, tokenKubeconfig } from './identities.ts';
import { loadRouting, pingSchedule, type Routing } from './knative.ts';
import { ApiServerWatch, PingTimer } from './sources.ts';
import { newPod, podEnv, type Pod } from './pods.ts';

import {
  DEFAULT_REPLICAS,
  type AdapterProc,
  type FunctionProc,
  type Runtime,
  type RuntimeOptions,
} from './types.ts';

export {
  DEFAULT_REPLICAS,
  type EventBus,
  type FunctionProc,
  type Ping,
  type Runtime,
  type RuntimeOptions,
} from './types.ts';

const root = join(import.meta.dirname, '..', '..');

async function startFunction(
  svc: Routing['services'][number],
  replica: number,
  pod: Pod,
  port: number,
  opts: RuntimeOptions,
  brokerUrl: string,
  logDir: string,
  kubeconfig: string | null,
): Promise<FunctionProc> {
  // The function's own ServiceAccount (identities.ts); none: no KCP access at all, as its Pod.
  const service = svc.name;
  const env = svc.env;
  const processEnv: Record<string, string | undefined> = {
    ...process.env,
    ...env,
    ...podEnv(env, pod.ip),
    // The broker stand-in plays Knative without sender identity (authentication-oidc):
    // no delivery carries a token, and no post needs one (knative: real plays it).
    SYNC_EVENT_AUTH: 'none',
    ...opts.env,
    ...(await opts.envFor?.(service, replica)),
    PORT: String(port),
    K_SINK: brokerUrl,
    KUBECONFIG: kubeconfig ?? undefined,
    LOG_LEVEL: 'info',
  };
  if (kubeconfig === null) delete processEnv.KUBECONFIG;
  delete processEnv.SYNC_SINK_TOKEN_FILE;
  const proc = startProcess(
    'function',
    replica === 0 ? service : `${service}-${replica}`,
    process.execPath,
    [join(dist, 'functions', 'serve.js')],
    {
      logDir,
      cwd: dist,
      env: processEnv as Record<string, string>,
    },
  );
  const url = `http://127.0.0.1:${port}/`;
  await waitFor(
    `function ${service}`,
    async () => (await fetch(`${url}health/readiness`)).ok,
    30_000,
    () =>
      proc.child.exitCode !== null ? `exited with ${proc.child.exitCode}; see ${proc.logFile}` : undefined,
  );
  return { service, replica, url, port, proc, pod };
}

/** podOf is the Pod a replica of svc would run in, with an address of its own (pods.ts). */
const podOf = (svc: Routing['services'][number], namespace: string, replica: number): Promise<Pod> =>
  newPod(
    `${svc.name}-${replica}`,
    namespace,
    { ...svc.labels, 'serving.knative.dev/service': svc.name },
    svc.annotations,
  );

/**
 * startAdapterProcess starts one replica of a Deployment of knative.yaml (the SKR source) as
 * its Pod would run: its env, POD_NAME and the like from its fieldRefs, its ServiceAccount's
 * kubeconfig, K_SINK (the SinkBinding's), a port of its own.
 */
async function startAdapterProcess(
  d: Routing['deployments'][number],
  replica: number,
  port: number,
  opts: RuntimeOptions,
  brokerUrl: string,
  logDir: string,
  kubeconfig: string | null,
): Promise<AdapterProc> {
  const pod = `${d.name}-${replica}`;
  const fields: Record<string, string> = {
    'metadata.name': pod,
    'metadata.namespace': opts.namespace ?? 'kcp-system',
  };
  const processEnv: Record<string, string | undefined> = {
    ...process.env,
    ...d.env,
    ...Object.fromEntries(Object.entries(d.fields).map(([k, path]) => [k, fields[path] ?? ''])),
    ...(opts.namespace ? { SYNC_CONTROL_PLANE_NAMESPACES: opts.namespace } : {}),
    ...opts.adapterEnv,
    PORT: String(port),
    K_SINK: brokerUrl,
    KUBECONFIG: kubeconfig ?? undefined,
  };
  if (kubeconfig === null) delete processEnv.KUBECONFIG;
  // The stand-in broker checks no sender identity: posts carry none.
  delete processEnv.SYNC_SINK_TOKEN_FILE;
  const proc = startProcess('adapter', pod, process.execPath, d.args, {
    logDir,
    cwd: dist,
    env: processEnv as Record<string, string>,
  });
  const url = `http://127.0.0.1:${port}/`;
  await waitFor(
    `adapter ${pod}`,
    async () => (await fetch(`${url}healthz`)).ok,
    30_000,
    () =>
      proc.child.exitCode !== null ? `exited with ${proc.child.exitCode}; see ${proc.logFile}` : undefined,
  );
  return { name: d.name, pod, replica, url, port, proc };
}

/** startRuntime starts functions, broker and sources; stop() ends them. */
export async function startRuntime(opts: RuntimeOptions): Promise<Runtime> {
  if ((opts.knative ?? process.env.KCP_SYNC_KNATIVE ?? 'emulated') === 'real') {
    const { startKnativeRuntime } = await import('./real.ts');
    return startKnativeRuntime(opts);
  }
  const [routing] = await Promise.all([loadRouting(opts.knativeYaml ?? join(root, 'knative.yaml')), build()]);
  if (opts.namespace) {
    routing.namespace = opts.namespace;
    for (const s of routing.services)
      if (s.env.SYNC_CONTROL_PLANE_NAMESPACES) s.env.SYNC_CONTROL_PLANE_NAMESPACES = opts.namespace;
  }
  const stack = new Stack(opts, routing);
  try {
    await stack.start();
  } catch (err) {
    await stack.stop();
    throw err;
  }
  return stack.runtime();
}

/**
 * Stack is the emulated stack of one runtime, started in phases: the broker, the API
 * proxy and the ServiceAccounts' identities, the functions, the KCP sources
 * (ApiServerSource adapters or watches), the SKR source's replicas, the PingSources.
 */
class Stack {
  readonly functions: FunctionProc[] = [];
  readonly adapters: ReceiveAdapter[] = [];
  readonly skrSources: AdapterProc[] = [];
  readonly ping: PingTimer[] = [];
  readonly broker: Broker;
  private readonly watches: ApiServerWatch[] = [];
  private readonly logDir: string;
  private readonly saDir: string;
  private readonly admin: Credentials;
  private readonly client: KubeClient;
  private readonly kcp: Cluster;
  private readonly proxy: ApiProxy | undefined;
  private brokerUrl = '';
  private identities = new Map<string, string | null>();
  private readonly sourceKubeconfigs = new Map<string, Promise<string | null>>();
  /** sourcesGeneration changes with every start and stop: a restart loop of an older start ends. */
  private sourcesGeneration = 0;

  private readonly opts: RuntimeOptions;
  private readonly routing: Routing;

  constructor(opts: RuntimeOptions, routing: Routing) {
    this.opts = opts;
    this.routing = routing;
    this.logDir = join(opts.stateDir, 'logs');
    this.saDir = join(opts.stateDir, 'serviceaccounts');
    this.broker = new Broker({
      triggers: routing.triggers,
      delivery: { ...routing.broker.delivery, ...opts.delivery },
      resolve: (svc) => this.functions.filter((f) => f.service === svc).map((f) => f.url),
      deadLetterFile: join(opts.stateDir, 'dead-letters.log'),
      concurrency: Object.fromEntries(routing.services.map((s) => [s.name, s.concurrency])),
      timeouts: Object.fromEntries(routing.services.map((s) => [s.name, s.timeoutMs])),
      ...(opts.chaos ? { chaos: opts.chaos } : {}),
      mode: opts.brokerMode ?? 'channel',
    });
    this.admin = credentialsFromFile(opts.kubeconfig);
    this.client = KubeClient.create(this.admin, { name: 'kcp', qps: 100, burst: 200 });
    this.kcp = { client: this.client, mapper: new RestMapper(this.client) };
    this.proxy =
      (opts.sources ?? 'real') === 'real' ? new ApiProxy(this.admin.server, this.admin.ca) : undefined;
  }

  async start(): Promise<void> {
    await mkdir(this.logDir, { recursive: true });
    this.brokerUrl = await this.broker.listen();
    await this.proxy?.listen(join(this.opts.stateDir, 'proxy'));
    await mkdir(this.saDir, { recursive: true });
    await writeFile(join(this.saDir, 'ca.crt'), this.admin.ca ?? '');
    this.identities = await serviceAccountKubeconfigs(
      this.kcp,
      this.routing,
      { url: this.admin.server, caFile: join(this.saDir, 'ca.crt') },
      this.saDir,
      this.opts.rbacEdit,
    );
    await this.startFunctions();
    await this.startSources();
    for (const d of this.routing.deployments)
      await Promise.all(
        Array.from({ length: this.opts.skrSourceReplicas ?? d.replicas }, (_, r) =>
          this.startSkrSource(d, r),
        ),
      );
    this.startPings();
  }

  /** startFunctions starts every replica of every function Service, each in a Pod of its own. */
  private async startFunctions(): Promise<void> {
    const replicas = Math.max(1, this.opts.replicas ?? DEFAULT_REPLICAS);
    const started = await Promise.all(
      this.routing.services.flatMap((s) =>
        Array.from({ length: replicas }, async (_, r) => {
          const pod = await podOf(s, this.routing.namespace, r);
          return startOnFreePort((port) => this.startFunction(s, r, pod, port));
        }),
      ),
    );
    this.functions.push(...started);
  }

  private startFunction(svc: Routing['services'][number], replica: number, pod: Pod, port: number) {
    const kubeconfig = this.identities.get(svc.name) ?? null;
    return startFunction(svc, replica, pod, port, this.opts, this.brokerUrl, this.logDir, kubeconfig);
  }

  /** startSources starts the ApiServerSources: the real receive adapters behind the proxy, or watches in this process. */
  async startSources(): Promise<void> {
    if (this.proxy) return this.startAdapters(this.proxy);
    for (const src of this.routing.apiServerSources) {
      for (const res of src.resources) {
        const w = new ApiServerWatch(this.kcp, res, this.routing.namespace, (e) => this.broker.publish(e));
        this.watches.push(w);
        await w.start();
      }
    }
  }

  /** startAdapters starts one receive adapter per ApiServerSource, with its ServiceAccount's token (written before any adapter reads it). */
  private async startAdapters(proxy: ApiProxy): Promise<void> {
    const { namespace } = this.routing;
    const binary = (await ensureKnativeBinaries(this.opts.log)).apiserverReceiveAdapter;
    const kubeconfigs = new Map<string, string>();
    for (const sa of new Set(
      this.routing.apiServerSources.map((src) => src.serviceAccountName ?? 'default'),
    )) {
      const to = { url: proxy.url, caFile: proxy.caFile };
      const dir = join(this.saDir, namespace);
      kubeconfigs.set(sa, await tokenKubeconfig(this.kcp, namespace, sa, to, dir, 'kubeconfig-adapter.yaml'));
    }
    const generation = ++this.sourcesGeneration;
    await Promise.all(
      this.routing.apiServerSources.map((src) =>
        this.runAdapter(generation, {
          binary,
          name: src.name,
          namespace,
          resources: src.resources,
          ...(src.mode ? { mode: src.mode } : {}),
          sink: this.brokerUrl,
          kubeconfig: kubeconfigs.get(src.serviceAccountName ?? 'default')!,
          proxy,
          logDir: this.logDir,
        }),
      ),
    );
  }

  /** runAdapter starts an adapter and, as the kubelet restarts a container that exits, starts it again with a back-off; not once stopped. */
  private async runAdapter(generation: number, config: Parameters<typeof startAdapter>[0]): Promise<void> {
    const a = await startAdapter(config);
    this.adapters.push(a);
    void a.proc.exited.then(async () => {
      const i = this.adapters.indexOf(a);
      if (i < 0) return;
      this.adapters.splice(i, 1);
      for (let delay = 1_000; generation === this.sourcesGeneration; delay = Math.min(delay * 2, 10_000)) {
        await sleep(delay);
        if (generation !== this.sourcesGeneration) return;
        try {
          return await this.runAdapter(generation, config);
        } catch {
          /* exited again at start: back off */
        }
      }
    });
  }

  async stopSources(): Promise<void> {
    this.sourcesGeneration++;
    for (const w of this.watches.splice(0)) w.stop();
    await Promise.all(this.adapters.splice(0).map((a) => killProcess(a.proc)));
  }

  /**
   * sourceKubeconfig is the SKR source's own ServiceAccount's kubeconfig; with the real
   * adapters it reaches the KCP through the same proxy, so that breakWatches cuts its
   * watches too.
   */
  private sourceKubeconfig(d: Routing['deployments'][number]): Promise<string | null> {
    let k = this.sourceKubeconfigs.get(d.name);
    if (!k) {
      const own = this.identities.get(d.name) ?? null;
      const { proxy } = this;
      k =
        proxy && own && d.serviceAccountName
          ? tokenKubeconfig(
              this.kcp,
              this.routing.namespace,
              d.serviceAccountName,
              { url: proxy.url, caFile: proxy.caFile },
              join(this.saDir, this.routing.namespace),
              `kubeconfig-${d.name}-proxied.yaml`,
            )
          : Promise.resolve(own);
      this.sourceKubeconfigs.set(d.name, k);
    }
    return k;
  }

  async startSkrSource(d: Routing['deployments'][number], replica: number): Promise<AdapterProc> {
    const kubeconfig = await this.sourceKubeconfig(d);
    const a = await startOnFreePort((port) =>
      startAdapterProcess(d, replica, port, this.opts, this.brokerUrl, this.logDir, kubeconfig),
    );
    this.skrSources.push(a);
    return a;
  }

  async stopSkrSource(a: AdapterProc, graceful = false): Promise<void> {
    this.skrSources.splice(this.skrSources.indexOf(a), 1);
    await (graceful ? stopProcess(a.proc) : killProcess(a.proc));
  }

  private startPings(): void {
    for (const p of this.routing.pingSources) {
      const { intervalMs, data } = pingSchedule(p, this.opts);
      const t = new PingTimer({
        source: `/apis/v1/namespaces/${this.routing.namespace}/pingsources/${p.name}`,
        intervalMs,
        ...(data ? { data } : {}),
        ...(p.contentType ? { contentType: p.contentType } : {}),
        emit: (e) => this.broker.publish(e),
      });
      t.start();
      this.ping.push(t);
    }
  }

  /** restartFunction kills a replica (SIGKILL) and starts it again in its Pod: the same address. */
  async restartFunction(service: string, replica: number): Promise<void> {
    const i = this.functions.findIndex((f) => f.service === service && f.replica === replica);
    const f = this.functions[i]!;
    try {
      process.kill(-f.proc.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
    await f.proc.exited;
    this.functions[i] = await this.startFunction(
      this.routing.services.find((s) => s.name === service)!,
      replica,
      f.pod!,
      f.port,
    );
  }

  async stop(): Promise<void> {
    await Promise.all([...this.skrSources].map((a) => this.stopSkrSource(a, true)));
    await this.stopSources();
    await this.proxy?.close();
    for (const p of this.ping) p.stop();
    await Promise.all(this.functions.map((f) => stopProcess(f.proc)));
    await this.broker.close();
    await this.client.close();
  }

  /** runtime is the stack as its users see it. */
  runtime(): Runtime {
    const replicaOf = (replica: number) => this.skrSources.find((x) => x.replica === replica)!;
    return {
      broker: this.broker,
      functions: this.functions,
      ping: this.ping,
      adapters: this.adapters,
      skrSources: this.skrSources,
      ...(this.proxy ? { proxy: this.proxy } : {}),
      stop: () => this.stop(),
      stopSources: () => this.stopSources(),
      startSources: () => this.startSources(),
      restartFunction: (service, replica = 0) => this.restartFunction(service, replica),
      restartSkrSource: async (replica = 0, graceful = false) => {
        const a = replicaOf(replica);
        await this.stopSkrSource(a, graceful);
        return this.startSkrSource(
          this.routing.deployments.find((d) => d.name === a.name)!,
          replica,
        );
      },
      stopSkrSource: (replica = 0, graceful = false) => this.stopSkrSource(replicaOf(replica), graceful),
      startSkrSource: (replica = 0) => this.startSkrSource(this.routing.deployments[0]!, replica),
    };
  }
}

/**
 * sourcesSettled waits until every SKR source replica takes its share of the Kymas (its
 * /watches says active, with every replica a member): before that, the first replica
 * posts for every Kyma and a joining one posts again, on taking its share, what is not
 * settled then (a run in flight runs twice). Tests and benchmarks that create at once
 * after a start wait for it.
 */
export async function sourcesSettled(rt: Pick<Runtime, 'skrSources'>, timeoutMs = 60_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const views = await Promise.all(
      rt.skrSources.map(async (a) => {
        try {
          return (await (await fetch(`${a.url}watches`)).json()) as { members: string[]; active: boolean };
        } catch {
          return { members: [], active: false };
        }
      }),
    );
    if (views.every((v) => v.active && v.members.length === rt.skrSources.length)) return;
    if (performance.now() > deadline)
      throw new Error(`SKR source replicas not settled: ${JSON.stringify(views)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
