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
        if (p.status < 200 || p.status >= 300) c.failures++;
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

export async function startKnative(opts: KnativeOptions): Promise<KnativeRuntime> {
  const log = opts.log ?? (() => {});
  const file = opts.knativeYaml ?? join(root, 'knative.yaml');
  const routing = await loadRouting(file);
  const namespace = routing.namespace;
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
  const oidc = opts.oidc ?? true;
  const apiServer = { url: proxy.url, caFile: proxy.caFile };
  let kubelet!: Kubelet;
  const net = new ClusterNet(kcp, (ns, sel, port) => kubelet.target(ns, sel, port));
  await net.listen();
  // The API server as a Pod reaches it by name (Knative's token verifier reads the issuer there).
  net.tunnel(['kubernetes.default.svc', 'kubernetes.default.svc.cluster.local'], proxy.port);
  kubelet = new Kubelet({
    kcp,
    namespaces: [EVENTING_NAMESPACE, namespace],
    // The product's image runs the SKR source (its command names the script).
    binaries: { ...eventing.commands, [PRODUCT_COMMAND]: process.execPath },
    net,
    apiServer,
    tokenDir: saDir,
    logDir,
    log,
  });
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
  try {
    await writeFile(join(saDir, 'ca.crt'), admin.ca ?? '');
    log('installing Knative Eventing into the KCP');
    await installEventing(kcp, eventing.config, serving.config, { oidc });
    await kubelet.start();
    // The product: RBAC (tests may take a rule away), then Services, Broker, Triggers, sources.
    await applyRbac(kcp, routing, opts.rbacEdit);
    const docs = (loadAll(await readFile(file, 'utf8')) as Doc[])
      .filter(Boolean)
      .filter(
        (d) =>
          [
            'Service',
            'Broker',
            'Trigger',
            'ApiServerSource',
            'PingSource',
            'SinkBinding',
            'EventPolicy',
            'Deployment',
          ].includes(d.kind) && d.apiVersion !== 'v1',
      )
      // Without sender identity an EventPolicy is never Ready (OIDCAuthenticationDisabled, in
      // eventing's eventpolicy reconciler), and a Broker it applies to is not Ready either
      // (EventPoliciesNotReady): a deployment without the feature leaves them out, as here.
      .filter((d) => oidc || d.kind !== 'EventPolicy')
      .map((d) => ({ ...d, metadata: { ...d.metadata, namespace } }) as unknown as KubeObject);
    for (const d of docs) {
      if (d.kind === 'Deployment') {
        const spec = (d as unknown as Doc).spec as {
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
      if (d.kind === 'Broker' && opts.delivery)
        (d as unknown as Doc).spec.delivery = { ...(d as unknown as Doc).spec.delivery, ...opts.delivery };
      if (d.kind === 'PingSource') {
        const spec = (d as unknown as Doc).spec as { schedule: string; data?: string };
        const { intervalMs, data } = pingSchedule(spec, opts);
        if (intervalMs !== cronIntervalMs(spec.schedule))
          spec.schedule = `@every ${Math.max(1, Math.round(intervalMs / 1000))}s`;
        if (data !== undefined) spec.data = data;
      }
    }
    await applyObjects(
      kcp,
      docs.filter((d) => d.kind === 'Service'),
    );
    await servingRt.start();
    await applyObjects(
      kcp,
      docs.filter((d) => d.kind !== 'Service'),
    );
    log('waiting for the Broker, Triggers and sources to be Ready');
    await waitEventingReady(kcp, namespace);
    await servingRt.ready(routing.services.map((s) => s.name));
  } catch (err) {
    await stop();
    throw err;
  }
  const brokerUrl = `http://broker-ingress.${EVENTING_NAMESPACE}.svc.cluster.local/${namespace}/${routing.broker.name}`;
  // With sender identity the Broker's ingress takes only a token of a sender its
  // EventPolicies name, for its own audience: a post goes as such a sender would.
  const brokerAudience = oidc
    ? (
        await client.call<{ status?: { address?: { audience?: string } } }>(
          'GET',
          `/apis/eventing.knative.dev/v1/namespaces/${namespace}/brokers/${routing.broker.name}`,
        )
      ).status?.address?.audience
    : undefined;
  if (oidc && !brokerAudience)
    throw new Error('the Broker is Ready but names no audience (authentication-oidc)');
  const tokens = new Map<string, { token: string; renewAt: number }>();
  const tokenOf = async (sa: string) => {
    const kept = tokens.get(sa);
    if (kept && kept.renewAt > Date.now()) return kept.token;
    const seconds = 3_600;
    const res = await client.call<{ status: { token: string } }>(
      'POST',
      `/api/v1/namespaces/${namespace}/serviceaccounts/${sa}/token`,
      {
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { expirationSeconds: seconds, audiences: [brokerAudience] },
        },
      },
    );
    tokens.set(sa, { token: res.status.token, renewAt: Date.now() + seconds * 800 });
    return res.status.token;
  };
  const publish = async (event: CloudEvent<unknown>, sender?: string) => {
    const msg = HTTP.binary(event);
    const token = oidc && sender ? await tokenOf(sender) : undefined;
    // Through the cluster network, as a Pod would post.
    const res = await request(brokerUrl, {
      method: 'POST',
      headers: {
        ...(msg.headers as Record<string, string>),
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
      body: msg.body as string,
      dispatcher: viaNet,
    });
    await res.body.dump();
    return res.statusCode;
  };
  const broker = new RealBroker(net, publish);
  broker.url = `${await net.expose(`broker-ingress.${EVENTING_NAMESPACE}.svc.cluster.local`)}/${namespace}/${routing.broker.name}`;
  return {
    kubelet,
    serving: servingRt,
    net,
    broker,
    proxy,
    brokerUrl,
    stop,
    namespace,
    pingSource: routing.pingSources[0],
    adapters: () => kubelet.byCommand('apiserver_receive_adapter'),
    publish,
  };
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
  const functions = (): FunctionProc[] =>
    k.serving.replicas.map((r) => ({
      service: r.service,
      replica: r.replica,
      url: r.url,
      port: r.port,
      proc: r.proc,
      pod: r.pod,
    }));
  const skrPods = () => k.kubelet.byCommand(PRODUCT_COMMAND).sort((a, b) => a.name.localeCompare(b.name));
  const skrProc = (p: LocalPod, replica: number): AdapterProc => {
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
  // The SKR source runs once the SinkBinding gave its Deployment K_SINK (a new ReplicaSet).
  const wanted = opts.skrSourceReplicas ?? 2;
  await waitFor(
    'the SKR source ready',
    async () => skrPods().filter((p) => p.ready).length >= wanted,
    120_000,
  ).catch(async (err: unknown) => {
    await k.stop();
    throw err;
  });
  const pingName = k.pingSource?.name ?? 'sync-resync';
  const source = `/apis/v1/namespaces/${k.namespace}/pingsources/${pingName}`;
  // An extra tick goes as mtping sends it: with the PingSource's own OIDC identity.
  const pingSender = oidcServiceAccountName('sources.knative.dev', 'PingSource', pingName);
  return {
    broker: k.broker,
    get functions() {
      return functions();
    },
    // mtping fires on its schedule; fire() is an extra tick, the event mtping would send;
    // stop() holds the schedule by keeping mtping down (as a node that lost it), start() lets it run again.
    ping: [
      {
        fire: () =>
          void k
            .publish(
              new CloudEvent({
                id: randomUUID(),
                type: 'dev.knative.sources.ping',
                source,
                datacontenttype: k.pingSource?.contentType ?? 'application/json',
                ...(k.pingSource?.data
                  ? {
                      data:
                        k.pingSource.contentType === 'application/json' || !k.pingSource.contentType
                          ? JSON.parse(k.pingSource.data)
                          : k.pingSource.data,
                    }
                  : {}),
              }),
              pingSender,
            )
            .then((status) => {
              if (status >= 300)
                console.error(`an extra resync tick was refused by the Broker's ingress: ${status}`);
            })
            .catch((err: unknown) => console.error(`an extra resync tick failed: ${String(err)}`)),
        start: () => k.kubelet.resume('mtping'),
        stop: () => void k.kubelet.pause('mtping'),
      } satisfies Ping,
    ],
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
    async restartFunction(service, replica = 0) {
      await k.serving.restart(service, replica);
    },
    // The SKR source's Pods, numbered by name (the kubelet restarts one that exits).
    get skrSources() {
      return skrPods().map((p, replica) => skrProc(p, replica));
    },
    async restartSkrSource(replica = 0) {
      const p = skrPods()[replica]!;
      const before = p.restarts;
      await k.kubelet.kill(p);
      await waitFor('the SKR source restarted', async () => p.restarts > before && p.ready, 60_000);
      return skrProc(p, replica);
    },
    async stopSkrSource(replica = 0) {
      await k.kubelet.pausePod(skrPods()[replica]!);
    },
    async startSkrSource(replica = 0) {
      const p = skrPods()[replica]!;
      k.kubelet.resumePod(p);
      await waitFor('the SKR source started', async () => p.ready, 60_000);
      return skrProc(p, replica);
    },
    stopSources: () => k.kubelet.pause('apiserver_receive_adapter'),
    async startSources() {
      k.kubelet.resume('apiserver_receive_adapter');
    },
    stop: k.stop,
  };
}
