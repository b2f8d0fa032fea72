// index.ts starts the local stand-in for Knative: the function Services of
// knative.yaml as real faas-js-runtime HTTP servers (two processes each by default, as
// Knative scales a Service to several replicas), the Broker and Triggers, the
// ApiServerSources against the KCP and the PingSource.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeClient } from '../../lib/kube/client.ts';
import { credentialsFromFile } from '../../lib/kube/credentials.ts';
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
    ...opts.envFor?.(service, replica),
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
  const logDir = join(opts.stateDir, 'logs');
  await mkdir(logDir, { recursive: true });
  const functions: FunctionProc[] = [];
  const broker = new Broker({
    triggers: routing.triggers,
    delivery: { ...routing.broker.delivery, ...opts.delivery },
    resolve: (svc) => functions.filter((f) => f.service === svc).map((f) => f.url),
    deadLetterFile: join(opts.stateDir, 'dead-letters.log'),
    concurrency: Object.fromEntries(routing.services.map((s) => [s.name, s.concurrency])),
    timeouts: Object.fromEntries(routing.services.map((s) => [s.name, s.timeoutMs])),
    ...(opts.chaos ? { chaos: opts.chaos } : {}),
    mode: opts.brokerMode ?? 'channel',
  });
  const brokerUrl = await broker.listen();
  const client = KubeClient.create(credentialsFromFile(opts.kubeconfig), {
    name: 'kcp',
    qps: 100,
    burst: 200,
  });
  const kcp: Cluster = { client, mapper: new RestMapper(client) };
  const watches: ApiServerWatch[] = [];
  const adapters: ReceiveAdapter[] = [];
  /** sourcesGeneration changes with every start and stop: a restart loop of an older start ends. */
  let sourcesGeneration = 0;
  const ping: PingTimer[] = [];
  const admin = credentialsFromFile(opts.kubeconfig);
  const real = (opts.sources ?? 'real') === 'real';
  const proxy = real ? new ApiProxy(admin.server, admin.ca) : undefined;
  const adapterBinary = real ? (await ensureKnativeBinaries(opts.log)).apiserverReceiveAdapter : '';
  const saDir = join(opts.stateDir, 'serviceaccounts');
  const startSources = async () => {
    if (proxy) {
      // One token per ServiceAccount, written before any adapter reads it.
      const kubeconfigs = new Map<string, string>();
      for (const sa of new Set(routing.apiServerSources.map((src) => src.serviceAccountName ?? 'default'))) {
        kubeconfigs.set(
          sa,
          await tokenKubeconfig(
            kcp,
            routing.namespace,
            sa,
            { url: proxy.url, caFile: proxy.caFile },
            join(saDir, routing.namespace),
            'kubeconfig-adapter.yaml',
          ),
        );
      }
      const generation = ++sourcesGeneration;
      await Promise.all(
        routing.apiServerSources.map(async (src) => {
          const run = async (): Promise<void> => {
            const a = await startAdapter({
              binary: adapterBinary,
              name: src.name,
              namespace: routing.namespace,
              resources: src.resources,
              ...(src.mode ? { mode: src.mode } : {}),
              sink: brokerUrl,
              kubeconfig: kubeconfigs.get(src.serviceAccountName ?? 'default')!,
              proxy,
              logDir,
            });
            adapters.push(a);
            // As the kubelet restarts a container that exits, with a back-off; not once stopped.
            void a.proc.exited.then(async () => {
              const i = adapters.indexOf(a);
              if (i < 0) return;
              adapters.splice(i, 1);
              for (let delay = 1_000; generation === sourcesGeneration; delay = Math.min(delay * 2, 10_000)) {
                await sleep(delay);
                if (generation !== sourcesGeneration) return;
                try {
                  return await run();
                } catch {
                  /* exited again at start: back off */
                }
              }
            });
          };
          await run();
        }),
      );
      return;
    }
    for (const src of routing.apiServerSources) {
      for (const res of src.resources) {
        const w = new ApiServerWatch(kcp, res, routing.namespace, (e) => broker.publish(e));
        watches.push(w);
        await w.start();
      }
    }
  };
  const stopSources = async () => {
    sourcesGeneration++;
    for (const w of watches.splice(0)) w.stop();
    await Promise.all(adapters.splice(0).map((a) => killProcess(a.proc)));
  };
  const skrSources: AdapterProc[] = [];
  // With the real adapters, the SKR source reaches the KCP through the same proxy, so that
  // breakWatches cuts its watches too; its own ServiceAccount's token either way.
  const sourceKubeconfigs = new Map<string, Promise<string | null>>();
  const sourceKubeconfig = (d: Routing['deployments'][number]) => {
    let k = sourceKubeconfigs.get(d.name);
    if (!k) {
      const own = identities.get(d.name) ?? null;
      k =
        proxy && own && d.serviceAccountName
          ? tokenKubeconfig(
              kcp,
              routing.namespace,
              d.serviceAccountName,
              { url: proxy.url, caFile: proxy.caFile },
              join(saDir, routing.namespace),
              `kubeconfig-${d.name}-proxied.yaml`,
            )
          : Promise.resolve(own);
      sourceKubeconfigs.set(d.name, k);
    }
    return k;
  };
  const startSkrSource = async (d: Routing['deployments'][number], replica: number) => {
    const kubeconfig = await sourceKubeconfig(d);
    const a = await startOnFreePort((port) =>
      startAdapterProcess(d, replica, port, opts, brokerUrl, logDir, kubeconfig),
    );
    skrSources.push(a);
    return a;
  };
  const stopSkrSource = async (a: AdapterProc, graceful = false) => {
    skrSources.splice(skrSources.indexOf(a), 1);
    await (graceful ? stopProcess(a.proc) : killProcess(a.proc));
  };
  const stop = async () => {
    await Promise.all([...skrSources].map((a) => stopSkrSource(a, true)));
    await stopSources();
    await proxy?.close();
    for (const p of ping) p.stop();
    await Promise.all(functions.map((f) => stopProcess(f.proc)));
    await broker.close();
    await client.close();
  };
  let identities = new Map<string, string | null>();
  try {
    await proxy?.listen(join(opts.stateDir, 'proxy'));
    await mkdir(saDir, { recursive: true });
    await writeFile(join(saDir, 'ca.crt'), admin.ca ?? '');
    identities = await serviceAccountKubeconfigs(
      kcp,
      routing,
      { url: admin.server, caFile: join(saDir, 'ca.crt') },
      saDir,
      opts.rbacEdit,
    );
    const replicas = Math.max(1, opts.replicas ?? DEFAULT_REPLICAS);
    const started = await Promise.all(
      routing.services.flatMap((s) =>
        Array.from({ length: replicas }, async (_, r) =>
          startOnFreePort(async (port) =>
            startFunction(
              s,
              r,
              await podOf(s, routing.namespace, r),
              port,
              opts,
              brokerUrl,
              logDir,
              identities.get(s.name) ?? null,
            ),
          ),
        ),
      ),
    );
    functions.push(...started);
    await startSources();
    for (const d of routing.deployments)
      await Promise.all(
        Array.from({ length: opts.skrSourceReplicas ?? d.replicas }, (_, r) => startSkrSource(d, r)),
      );
    for (const p of routing.pingSources) {
      const { intervalMs, data } = pingSchedule(p, opts);
      const t = new PingTimer({
        source: `/apis/v1/namespaces/${routing.namespace}/pingsources/${p.name}`,
        intervalMs,
        ...(data ? { data } : {}),
        ...(p.contentType ? { contentType: p.contentType } : {}),
        emit: (e) => broker.publish(e),
      });
      t.start();
      ping.push(t);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    broker,
    functions,
    ping,
    stop,
    stopSources,
    startSources,
    adapters,
    skrSources,
    async restartSkrSource(replica = 0, graceful = false) {
      const a = skrSources.find((x) => x.replica === replica)!;
      await stopSkrSource(a, graceful);
      return startSkrSource(
        routing.deployments.find((d) => d.name === a.name)!,
        replica,
      );
    },
    async stopSkrSource(replica = 0, graceful = false) {
      await stopSkrSource(
        skrSources.find((x) => x.replica === replica)!,
        graceful,
      );
    },
    async startSkrSource(replica = 0) {
      return startSkrSource(routing.deployments[0]!, replica);
    },
    ...(proxy ? { proxy } : {}),
    async restartFunction(service: string, replica = 0) {
      const i = functions.findIndex((f) => f.service === service && f.replica === replica);
      const f = functions[i]!;
      try {
        process.kill(-f.proc.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
      await f.proc.exited;
      // A container restarted in its Pod: the same address.
      functions[i] = await startFunction(
        routing.services.find((s) => s.name === service)!,
        replica,
        f.pod!,
        f.port,
        opts,
        brokerUrl,
        logDir,
        identities.get(service) ?? null,
      );
    },
  };
}
