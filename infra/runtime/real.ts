// real.ts runs the product on Knative's own parts: the eventing controller, the
// channel-based broker's controller, ingress and filter, the in-memory channel's
// controller and dispatcher, the PingSource adapter (mtping) and the ApiServerSource
// adapters the controller creates, all real commands built from knative.dev/eventing
// (infra/knative), reconciling knative.yaml as applied to the KCP. The runtime plays only
// what has no process form here: the kubelet (kubelet.ts), cluster DNS and service
// routing (clusternet.ts), and Serving's control plane (serving.ts; each replica behind
// Serving's real queue-proxy).
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { CloudEvent, HTTP } from 'cloudevents';
import { attributesOf, type BrokerStats, type Observed } from './broker.ts';
import {
  DEFAULT_REPLICAS,
  type AdapterProc,
  type EventBus,
  type FunctionProc,
  type Ping,
  type Runtime,
  type RuntimeOptions,
} from './types.ts';
import { loadAll } from 'js-yaml';
import { ProxyAgent, request } from 'undici';
import { KubeClient } from '../../lib/kube/client.ts';
import { credentialsFromFile } from '../../lib/kube/credentials.ts';
import { RestMapper } from '../../lib/kube/discovery.ts';
import type { Cluster, KubeObject } from '../../lib/kube/objects.ts';
import { ensureKnativeBinaries, ensureServingBinaries } from '../binaries.ts';
import { build, dist } from '../build.ts';
import { applyObjects } from '../kcp-setup.ts';
import { waitFor } from '../net.ts';
import { ApiProxy } from './apiproxy.ts';
import { ClusterNet, type Passage } from './clusternet.ts';
import { EVENTING_NAMESPACE, installEventing, waitEventingReady } from './eventing.ts';
import { applyRbac } from './identities.ts';
import { cronIntervalMs, loadRouting, pingSchedule, type Doc, type Routing } from './knative.ts';
import { Kubelet, PRODUCT_COMMAND, type LocalPod } from './kubelet.ts';
import { Serving } from './serving.ts';
import { oidcServiceAccountName } from '../../lib/policy/senders.ts';
import { healthOf } from '../../lib/health.ts';

const root = join(import.meta.dirname, '..', '..');

/** SOURCE_NAME_LABEL names the ApiServerSource on its adapter's Pods (eventing's pkg/reconciler/apiserversource/resources). */
const SOURCE_NAME_LABEL = 'eventing.knative.dev/sourceName';

/** KnativeOptions are the runtime's options that apply on Knative's own parts (index.ts); pingIntervalMs becomes "@every <n>s" (mtping takes seconds). */
export type KnativeOptions = Pick<
  RuntimeOptions,
  | 'kubeconfig'
  | 'stateDir'
  | 'knativeYaml'
  | 'pingIntervalMs'
  | 'env'
  | 'envFor'
  | 'delivery'
  | 'rbacEdit'
  | 'replicas'
  | 'log'
  | 'oidc'
  | 'adapterEnv'
  | 'skrSourceReplicas'
>;

/**
 * RealBroker is what the runtime sees of Knative's Broker from the cluster network: the
 * events posted to its ingress, and the deliveries to the function Services (the filter's
 * requests, retries included) with their answers.
 */
export class RealBroker implements EventBus {
  url = '';
  readonly stats: BrokerStats = { received: 0, delivered: 0, retries: 0, deadLettered: 0, replies: 0 };
  readonly byObject = new Map<string, { attempts: number; failures: number }>();
  readonly failedBy = new Map<string, string[]>();
  readonly observed: Observed[] = [];
  observe = false;
  readonly byReplica = new Map<string, number>();
  /** deliveries lists the CloudEvent types delivered to each function Service, in order. */
  readonly deliveries = new Map<string, string[]>();
  private readonly seen = new Set<string>();
  private readonly net: ClusterNet;
  private readonly post: (event: CloudEvent<unknown>) => Promise<number>;

  constructor(net: ClusterNet, post: (event: CloudEvent<unknown>) => Promise<number>) {
    this.net = net;
    this.post = post;
    net.observe((p) => {
      if (p.host.startsWith(`broker-ingress.${EVENTING_NAMESPACE}.`) && p.method === 'POST') {
        this.stats.received++;
        if (this.observe) {
          const event = toEvent(p);
          if (event) this.observed.push({ attributes: attributesOf(event), data: event.data });
        }
        return;
      }
      if (!p.replica) return;
      const service = p.host.split('.')[0]!;
      this.byReplica.set(p.replica, (this.byReplica.get(p.replica) ?? 0) + 1);
      const event = toEvent(p);
      const id = `${service} ${event?.id ?? ''}`;
      if (this.seen.has(id)) this.stats.retries++;
      this.seen.add(id);
      (this.deliveries.get(service) ?? this.deliveries.set(service, []).get(service)!).push(
        event?.type ?? '',
      );
      if (p.status >= 200 && p.status < 300) this.stats.delivered++;
      if (service === 'sync-dead-letter') this.stats.deadLettered++;
      if (p.responseHeaders['ce-type']) this.stats.replies++;
      const data = event?.data as { namespace?: unknown; name?: unknown } | undefined;
      if (typeof data?.name === 'string') {
        const key = `${String(data.namespace ?? '')}/${data.name}`;
        const c = this.byObject.get(key) ?? { attempts: 0, failures: 0 };
        c.attempts++;
        if (p.status < 200 || p.status >= 300) {
          c.failures++;
          this.failedBy.set(key, [
            ...(this.failedBy.get(key) ?? []),
            `${service} ${event?.type ?? ''} ${p.status}`,
          ]);
        }
        this.byObject.set(key, c);
      }
    });
  }

  get pending(): number {
    return this.net.inFlight;
  }

  /** idle waits until nothing passed through the cluster network for quietMs (at least a second: the dispatcher's retries back off). */
  idle(timeoutMs = 60_000, quietMs = 1_000): Promise<void> {
    return this.net.idle(timeoutMs, Math.max(quietMs, 1_000));
  }

  async publish(event: CloudEvent<unknown>): Promise<void> {
    const status = await this.post(event);
    if (status >= 300) throw new Error(`the broker ingress answered ${status}`);
  }
}

function toEvent(p: Passage): CloudEvent<unknown> | undefined {
  try {
    return HTTP.toEvent({
      headers: p.headers,
      body: p.body.length ? p.body.toString('utf8') : undefined,
    }) as CloudEvent<unknown>;
  } catch {
    return undefined;
  }
}

export interface KnativeRuntime {
  kcp: Cluster;
  kubelet: Kubelet;
  serving: Serving;
  net: ClusterNet;
  broker: RealBroker;
  proxy: ApiProxy;
  /** brokerUrl is the Broker's address as the cluster resolves it. */
  brokerUrl: string;
  namespace: string;
  pingSource: Routing['pingSources'][number] | undefined;
  /**
   * publish posts an event to the Broker's ingress, as a source in the cluster would: with
   * sender identity on, as the ServiceAccount sender (a token for the Broker's audience),
   * or with no token when sender is undefined.
   */
  publish(event: CloudEvent<unknown>, sender?: string): Promise<number>;
  /** adapters lists the running ApiServerSource adapter Pods. */
  adapters(): LocalPod[];
  stop(): Promise<void>;
}

/** startKnative installs Knative Eventing and Serving into the KCP and deploys the product on them (knative.yaml). */
export async function startKnative(opts: KnativeOptions): Promise<KnativeRuntime> {
  const log = opts.log ?? (() => {});
  const file = opts.knativeYaml ?? join(root, 'knative.yaml');
  const routing = await loadRouting(file);
  const s = await assemble(opts, routing, log);
  const oidc = opts.oidc ?? true;
  try {
    await writeFile(join(s.saDir, 'ca.crt'), s.admin.ca ?? '');
    log('installing Knative Eventing into the KCP');
    await installEventing(s.kcp, s.eventing.config, s.servingConfig, { oidc });
    await s.kubelet.start();
    // The product: RBAC (tests may take a rule away), then Services, Broker, Triggers, sources.
    await applyRbac(s.kcp, routing, opts.rbacEdit);
    const docs = productDocs(await readFile(file, 'utf8'), routing.namespace, oidc, opts);
    await applyObjects(
      s.kcp,
      docs.filter((d) => d.kind === 'Service'),
    );
    await s.serving.start();
    await applyObjects(
      s.kcp,
      docs.filter((d) => d.kind !== 'Service'),
    );
    log('waiting for the Broker, Triggers and sources to be Ready');
    await waitEventingReady(s.kcp, routing.namespace).catch((err: unknown) => {
      throw new Error(`${err instanceof Error ? err.message : String(err)}; ${s.kubelet.notReady()}`);
    });
    await s.serving.ready(routing.services.map((svc) => svc.name));
  } catch (err) {
    await s.stop();
    throw err;
  }
  const { publish, brokerUrl } = await brokerPublisher(s, routing, oidc);
  const broker = new RealBroker(s.net, publish);
  broker.url = `${await s.net.expose(`broker-ingress.${EVENTING_NAMESPACE}.svc.cluster.local`)}/${routing.namespace}/${routing.broker.name}`;
  return {
    kcp: s.kcp,
    kubelet: s.kubelet,
    serving: s.serving,
    net: s.net,
    broker,
    proxy: s.proxy,
    brokerUrl,
    stop: s.stop,
    namespace: routing.namespace,
    pingSource: routing.pingSources[0],
    adapters: () => s.kubelet.byCommand('apiserver_receive_adapter'),
    publish,
  };
}

/** Parts are the pieces of the local cluster Knative runs on: the KCP, its proxy, the cluster network, a kubelet, Serving. */
interface Parts {
  admin: ReturnType<typeof credentialsFromFile>;
  client: KubeClient;
  kcp: Cluster;
  proxy: ApiProxy;
  net: ClusterNet;
  kubelet: Kubelet;
  serving: Serving;
  viaNet: ProxyAgent;
  eventing: Awaited<ReturnType<typeof ensureKnativeBinaries>>;
  servingConfig: Awaited<ReturnType<typeof ensureServingBinaries>>['config'];
  saDir: string;
  stop: () => Promise<void>;
}

/** assemble builds the binaries and the parts of the local cluster; stop ends them. */
async function assemble(opts: KnativeOptions, routing: Routing, log: (line: string) => void): Promise<Parts> {
  const [eventing, serving] = await Promise.all([
    ensureKnativeBinaries(log),
    ensureServingBinaries(log),
    build(),
  ]);
  const logDir = join(opts.stateDir, 'logs');
  const saDir = join(opts.stateDir, 'serviceaccounts');
  await mkdir(logDir, { recursive: true });
  await mkdir(saDir, { recursive: true });
  const admin = credentialsFromFile(opts.kubeconfig);
  const client = KubeClient.create(admin, { name: 'kcp', qps: 100, burst: 200 });
  const kcp: Cluster = { client, mapper: new RestMapper(client) };
  const proxy = new ApiProxy(admin.server, admin.ca);
  await proxy.listen(join(opts.stateDir, 'proxy'));
  const apiServer = { url: proxy.url, caFile: proxy.caFile };
  let kubelet!: Kubelet;
  const net = new ClusterNet(kcp, (ns, sel, port) => kubelet.target(ns, sel, port));
  await net.listen();
  // The API server as a Pod reaches it by name (Knative's token verifier reads the issuer there).
  net.tunnel(['kubernetes.default.svc', 'kubernetes.default.svc.cluster.local'], proxy.port);
  const namespace = routing.namespace;
  // The product's image runs the SKR source (its command names the script).
  const binaries = { ...eventing.commands, [PRODUCT_COMMAND]: process.execPath };
  kubelet = new Kubelet({
    kcp,
    namespaces: [EVENTING_NAMESPACE, namespace],
    binaries,
    net,
    apiServer,
    tokenDir: saDir,
    logDir,
    log,
  });
  const oidc = opts.oidc ?? true;
  const servingRt = new Serving({
    kcp,
    namespace,
    net,
    replicas: Math.max(1, opts.replicas ?? DEFAULT_REPLICAS),
    queueBinary: serving.queue,
    functionCommand: { cmd: process.execPath, args: [join(dist, 'functions', 'serve.js')], cwd: dist },
    // Without sender identity no delivery carries a token: the functions accept them unchecked.
    ...(opts.env || !oidc ? { env: { ...(oidc ? {} : { SYNC_EVENT_AUTH: 'none' }), ...opts.env } } : {}),
    ...(opts.envFor ? { envFor: opts.envFor } : {}),
    apiServer: { url: admin.server, caFile: join(saDir, 'ca.crt') },
    tokenDir: saDir,
    logDir,
    log,
  });
  const viaNet = new ProxyAgent(net.url);
  const stop = async () => {
    await viaNet.close();
    await servingRt.stop();
    await kubelet.stop();
    await net.close();
    await proxy.close();
    await client.close();
  };
  return {
    admin,
    client,
    kcp,
    proxy,
    net,
    kubelet,
    serving: servingRt,
    viaNet,
    eventing,
    servingConfig: serving.config,
    saDir,
    stop,
  };
}

const PRODUCT_KINDS = [
  'Service',
  'Broker',
  'Trigger',
  'ApiServerSource',
  'PingSource',
  'SinkBinding',
  'EventPolicy',
  'Deployment',
];

/**
 * productDocs are the Knative objects of knative.yaml in namespace, as the options adjust
 * them. Without sender identity an EventPolicy is never Ready (OIDCAuthenticationDisabled,
 * in eventing's eventpolicy reconciler), and a Broker it applies to is not Ready either
 * (EventPoliciesNotReady): a deployment without the feature leaves them out, as here.
 */
function productDocs(text: string, namespace: string, oidc: boolean, opts: KnativeOptions): KubeObject[] {
  return (loadAll(text) as Doc[])
    .filter(Boolean)
    .filter((d) => PRODUCT_KINDS.includes(d.kind) && d.apiVersion !== 'v1')
    .filter((d) => oidc || d.kind !== 'EventPolicy')
    .map((d) => adjusted({ ...d, metadata: { ...d.metadata, namespace } }, opts) as unknown as KubeObject);
}

/** adjusted is a document with the options applied: the SKR source's replicas and env, the Broker's delivery, the PingSource's schedule. */
function adjusted(d: Doc, opts: KnativeOptions): Doc {
  if (d.kind === 'Deployment') {
    const spec = d.spec as {
      replicas?: number;
      template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } };
    };
    if (opts.skrSourceReplicas !== undefined) spec.replicas = opts.skrSourceReplicas;
    const c = spec.template.spec.containers[0]!;
    c.env = [
      ...(c.env ?? []).filter((e) => !(e.name in (opts.adapterEnv ?? {}))),
      ...Object.entries(opts.adapterEnv ?? {}).map(([name, value]) => ({ name, value: String(value) })),
    ];
  }
  if (d.kind === 'Broker' && opts.delivery) d.spec.delivery = { ...d.spec.delivery, ...opts.delivery };
  if (d.kind === 'PingSource') {
    const spec = d.spec as { schedule: string; data?: string };
    const { intervalMs, data } = pingSchedule(spec, opts);
    if (intervalMs !== cronIntervalMs(spec.schedule))
      spec.schedule = `@every ${Math.max(1, Math.round(intervalMs / 1000))}s`;
    if (data !== undefined) spec.data = data;
  }
  return d;
}

/**
 * brokerPublisher posts to the Broker's ingress through the cluster network, as a Pod
 * would. With sender identity the ingress takes only a token of a sender its EventPolicies
 * name, for its own audience: a post goes as such a sender would.
 */
async function brokerPublisher(s: Parts, routing: Routing, oidc: boolean) {
  const { namespace } = routing;
  const brokerUrl = `http://broker-ingress.${EVENTING_NAMESPACE}.svc.cluster.local/${namespace}/${routing.broker.name}`;
  const audience = oidc
    ? (
        await s.client.call<{ status?: { address?: { audience?: string } } }>(
          'GET',
          `/apis/eventing.knative.dev/v1/namespaces/${namespace}/brokers/${routing.broker.name}`,
        )
      ).status?.address?.audience
    : undefined;
  if (oidc && !audience) throw new Error('the Broker is Ready but names no audience (authentication-oidc)');
  const tokens = new Map<string, { token: string; renewAt: number }>();
  const tokenOf = async (sa: string) => {
    const kept = tokens.get(sa);
    if (kept && kept.renewAt > Date.now()) return kept.token;
    const seconds = 3_600;
    const res = await s.client.call<{ status: { token: string } }>(
      'POST',
      `/api/v1/namespaces/${namespace}/serviceaccounts/${sa}/token`,
      {
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { expirationSeconds: seconds, audiences: [audience] },
        },
      },
    );
    tokens.set(sa, { token: res.status.token, renewAt: Date.now() + seconds * 800 });
    return res.status.token;
  };
  const publish = async (event: CloudEvent<unknown>, sender?: string) => {
    const msg = HTTP.binary(event);
    const token = oidc && sender ? await tokenOf(sender) : undefined;
    const res = await request(brokerUrl, {
      method: 'POST',
      headers: {
        ...(msg.headers as Record<string, string>),
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
      body: msg.body as string,
      dispatcher: s.viaNet,
    });
    await res.body.dump();
    return res.statusCode;
  };
  return { publish, brokerUrl };
}

/** startKnativeRuntime runs startKnative behind the Runtime interface the tests and the benchmark use (index.ts). */
export async function startKnativeRuntime(opts: RuntimeOptions): Promise<Runtime> {
  if (opts.chaos)
    throw new Error(
      'chaos (duplicated and delayed deliveries) is a feature of the broker stand-in; not available with knative: real',
    );
  if (opts.namespace && opts.namespace !== 'kcp-system')
    throw new Error('knative: real installs Knative into its own KCP and runs in kcp-system');
  const k = await startKnative(opts);
  const skr = skrSourceOf(k);
  // The SKR source runs once the SinkBinding gave its Deployment K_SINK and its token (each
  // a new ReplicaSet): ready when its rollout is done, its replicas of the last template
  // only (a replica of an older one takes Kymas from the others until it goes).
  const wanted = opts.skrSourceReplicas ?? 2;
  await waitFor(
    'the SKR source rolled out and ready',
    async () => {
      const d = await k.kcp.client.call<KubeObject>(
        'GET',
        `/apis/apps/v1/namespaces/${k.namespace}/deployments/sync-skr-source`,
      );
      const pods = skr.pods();
      return healthOf(d).status === 'Current' && pods.length === wanted && pods.every((p) => p.ready);
    },
    120_000,
  ).catch(async (err: unknown) => {
    await k.stop();
    throw err;
  });
  return {
    broker: k.broker,
    get functions(): FunctionProc[] {
      return k.serving.replicas.map((r) => ({
        service: r.service,
        replica: r.replica,
        url: r.url,
        port: r.port,
        proc: r.proc,
        pod: r.pod,
      }));
    },
    ping: [pingOf(k)],
    // Named by their ApiServerSource (the label the controller puts on the adapter's Pods).
    get adapters() {
      return k
        .adapters()
        .filter((a) => a.proc)
        .map((a) => ({ name: a.labels[SOURCE_NAME_LABEL] ?? a.name, proc: a.proc! }));
    },
    proxy: k.proxy,
    processes: () => [
      ...k.serving.replicas.map((r) => ({ group: 'queue-proxies', pid: r.queue.pid })),
      ...[...k.kubelet.pods.values()]
        .filter((p) => p.proc && p.command !== 'apiserver_receive_adapter')
        .map((p) => ({ group: `Knative ${p.command}`, pid: p.proc!.pid })),
    ],
    restartFunction: async (service, replica = 0) => {
      await k.serving.restart(service, replica);
    },
    get skrSources() {
      return skr.pods().map((p, replica) => skr.proc(p, replica));
    },
    restartSkrSource: (replica = 0) => skr.restart(replica),
    stopSkrSource: async (replica = 0) => k.kubelet.pausePod(skr.pods()[replica]!),
    startSkrSource: (replica = 0) => skr.start(replica),
    stopSources: () => k.kubelet.pause('apiserver_receive_adapter'),
    startSources: async () => k.kubelet.resume('apiserver_receive_adapter'),
    stop: k.stop,
  };
}

/** skrSourceOf controls the SKR source's Pods, numbered by name (the kubelet restarts one that exits). */
function skrSourceOf(k: KnativeRuntime) {
  const pods = () => k.kubelet.byCommand(PRODUCT_COMMAND).sort((a, b) => a.name.localeCompare(b.name));
  const proc = (p: LocalPod, replica: number): AdapterProc => {
    const port = p.ports.get(8080) ?? 0;
    return {
      name: 'sync-skr-source',
      pod: p.name,
      replica,
      url: `http://127.0.0.1:${port}/`,
      port,
      proc: p.proc!,
    };
  };
  return {
    pods,
    proc,
    async restart(replica: number) {
      const p = pods()[replica]!;
      const before = p.restarts;
      await k.kubelet.kill(p);
      await waitFor('the SKR source restarted', async () => p.restarts > before && p.ready, 60_000);
      return proc(p, replica);
    },
    async start(replica: number) {
      const p = pods()[replica]!;
      k.kubelet.resumePod(p);
      await waitFor('the SKR source started', async () => p.ready, 60_000);
      return proc(p, replica);
    },
  };
}

/**
 * pingOf is the PingSource as the tests drive it: mtping fires on its schedule; fire() is
 * an extra tick, the event mtping would send, with the PingSource's own OIDC identity;
 * stop() holds the schedule by keeping mtping down (as a node that lost it), start() lets
 * it run again.
 */
function pingOf(k: KnativeRuntime): Ping {
  const pingName = k.pingSource?.name ?? 'sync-resync';
  const source = `/apis/v1/namespaces/${k.namespace}/pingsources/${pingName}`;
  const sender = oidcServiceAccountName('sources.knative.dev', 'PingSource', pingName);
  const json = k.pingSource?.contentType === 'application/json' || !k.pingSource?.contentType;
  const data = k.pingSource?.data ? { data: json ? JSON.parse(k.pingSource.data) : k.pingSource.data } : {};
  return {
    fire: () =>
      void k
        .publish(
          new CloudEvent({
            id: randomUUID(),
            type: 'dev.knative.sources.ping',
            source,
            datacontenttype: k.pingSource?.contentType ?? 'application/json',
            ...data,
          }),
          sender,
        )
        .then((status) => {
          if (status >= 300)
            console.error(`an extra resync tick was refused by the Broker's ingress: ${status}`);
        })
        .catch((err: unknown) => console.error(`an extra resync tick failed: ${String(err)}`)),
    start: () => k.kubelet.resume('mtping'),
    stop: () => void k.kubelet.pause('mtping'),
  };
}
