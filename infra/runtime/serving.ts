// serving.ts stands in for Knative Serving's control plane for the function Services of
// the KCP (serving.knative.dev/v1 Service): no autoscaler, activator or ingress run here.
// For each Service it runs a fixed number of replicas of its Revision's template, each a
// function process with Serving's real queue-proxy (knative.dev/serving cmd/queue) in
// front, with the env a Pod of that Revision would get (the template's env, PORT, the
// queue-proxy's SERVING_* settings from the template's containerConcurrency and
// timeoutSeconds), and its ServiceAccount's token. The Service's address,
// http://<name>.<namespace>.svc.cluster.local, resolves through the cluster network to
// the replica with the fewest requests in flight, and its status says Ready with that
// address, so the eventing controller resolves Triggers and SinkBindings to it. A change to
// the template (e.g. the SinkBinding adding K_SINK) replaces the replicas with a new set,
// as a new Revision: the old ones finish their requests and stop, then the new ones start
// (not side by side, as Serving would: each replica number has ports of its own here).
// A projected serviceAccountToken volume the container mounts is played as the kubelet
// does: a token of the ServiceAccount for its audience, written to a file of the replica's
// own and renewed at 80 % of its lifetime; an env value under the mount path is made to
// point there (there is no mount namespace here).
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster } from '../../lib/kube/objects.ts';
import { freePort, waitFor } from '../net.ts';
import { killProcess, startProcess, stopProcess, type Proc } from '../processes.ts';
import type { ClusterNet, Target } from './clusternet.ts';
import { join } from 'node:path';
import { mountedToken, projectTokens } from './identities.ts';
import { informer } from '../../lib/kube/informer.ts';
import { newPod, podEnv, type Pod } from './pods.ts';

type KService = {
  metadata: { name: string; namespace: string; generation?: number; resourceVersion?: string };
  status?: { observedGeneration?: number; latestReadyRevisionName?: string };
  spec: {
    template: {
      metadata?: Record<string, unknown>;
      spec: {
        serviceAccountName?: string;
        containerConcurrency?: number;
        timeoutSeconds?: number;
        containers: {
          env?: { name: string; value?: string }[];
          volumeMounts?: { name: string; mountPath: string }[];
        }[];
        volumes?: {
          name: string;
          projected?: {
            sources?: {
              serviceAccountToken?: { audience?: string; expirationSeconds?: number; path: string };
            }[];
          };
        }[];
      };
    };
  };
};

/** Replica is one running replica: the function process and its queue-proxy. */
export interface Replica {
  service: string;
  revision: string;
  replica: number;
  /** port is the function's own port; queuePort is the queue-proxy's, where traffic goes. */
  port: number;
  queuePort: number;
  url: string;
  proc: Proc;
  queue: Proc;
  inFlight: number;
  /** renewals are the timers renewing its projected tokens. */
  renewals: NodeJS.Timeout[];
  /** pod is the Pod it plays, with an address of its own (pods.ts). */
  pod: Pod;
}

export interface ServingOptions {
  kcp: Cluster;
  namespace: string;
  net: ClusterNet;
  replicas: number;
  queueBinary: string;
  /** functionCommand is the function server (node functions/serve.ts) and its working directory. */
  functionCommand: { cmd: string; args: string[]; cwd: string };
  /** env is added to each function's environment (test settings), envFor per replica. */
  env?: Record<string, string>;
  envFor?: (service: string, replica: number) => Record<string, string> | Promise<Record<string, string>>;
  /** apiServer is how a function reaches the KCP (its ServiceAccount token goes with it). */
  apiServer: { url: string; caFile: string };
  tokenDir: string;
  logDir: string;
  log?: (line: string) => void;
}

/** QUEUE_PROBE is how the kubelet probes a queue-proxy's readiness (Serving's revision resources). */
export const QUEUE_PROBE = { 'User-Agent': 'kube-probe/1.35', 'K-Network-Probe': 'queue' };

const revisionOf = (s: KService): string =>
  `${s.metadata.name}-${createHash('sha256').update(JSON.stringify(s.spec.template)).digest('hex').slice(0, 8)}`;

export class Serving {
  /** replicas lists the ready replicas of every Service (the current Revision only). */
  readonly replicas: Replica[] = [];
  private readonly revisions = new Map<string, string>();
  private readonly opts: ServingOptions;
  private readonly abort = new AbortController();
  private stopped = false;
  private readonly pending = new Map<string, Promise<void>>();
  /** latest is each Service as last seen (a rollout of an older one is skipped). */
  private readonly latest = new Map<string, KService>();

  constructor(opts: ServingOptions) {
    this.opts = opts;
  }

  private get path(): string {
    return `/apis/serving.knative.dev/v1/namespaces/${this.opts.namespace}/services`;
  }

  /** start lists the Services, runs each one's replicas, and follows changes. */
  async start(): Promise<void> {
    await informer<KService>(
      this.opts.kcp.client,
      this.path,
      {
        list: (items) => Promise.all(items.map((s) => this.reconcile(s))).then(() => undefined),
        event: (type, s) => {
          if (type !== 'DELETED') return void this.reconcile(s);
          this.latest.delete(s.metadata.name);
          void this.retire(s.metadata.name, undefined);
        },
      },
      this.abort.signal,
    );
  }

  /** ready waits until every Service named runs ready replicas of its current template. */
  async ready(names: string[], timeoutMs = 120_000): Promise<void> {
    await waitFor(
      `Knative Services ${names.join(', ')}`,
      async () => {
        await Promise.all([...this.pending.values()]);
        const current = await Promise.all(
          names.map((n) => this.opts.kcp.client.call<KService>('GET', `${this.path}/${n}`)),
        );
        return current.every(
          (s) =>
            this.revisions.get(s.metadata.name) === revisionOf(s) &&
            this.replicas.some((r) => r.service === s.metadata.name),
        );
      },
      timeoutMs,
    );
  }

  /**
   * reconcile rolls out the Service's template when it changed, then reports its status.
   * A failed rollout (a replica that did not start: its port taken meanwhile by another
   * process, a slow start on a loaded machine) is tried again after a pause, with the
   * Service as last seen, as a controller requeues.
   */
  private reconcile(s: KService, attempt = 0): Promise<void> {
    const name = s.metadata.name;
    this.latest.set(name, s);
    const prev = this.pending.get(name) ?? Promise.resolve();
    const next = prev
      .then(async () => {
        if (this.latest.get(name) !== s) return; // a newer version of the Service is queued behind
        const revision = revisionOf(s);
        if (this.revisions.get(name) !== revision && !this.stopped) {
          // The old replicas go first (their requests in flight finish): a replica keeps its
          // number, and what is given per replica (envFor: a metrics port) is its alone.
          await this.retire(name, revision);
          const results = await Promise.allSettled(
            Array.from({ length: this.opts.replicas }, (_, i) => this.startReplica(s, revision, i)),
          );
          const started = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
          const failed = results.find((r) => r.status === 'rejected');
          if (failed) {
            // All of a Revision's replicas or none: those that started stop again before the retry.
            await Promise.all(started.flatMap((r) => [stopProcess(r.proc), stopProcess(r.queue)]));
            throw failed.reason;
          }
          this.revisions.set(name, revision);
          this.replicas.push(...started);
          this.opts.net.register(name, this.opts.namespace, () => this.route(name));
        }
        await this.report(s, revision);
      })
      .catch((err: unknown) => {
        this.opts.log?.(`serving: ${name}: ${String(err)}`);
        if (this.stopped || this.latest.get(name) !== s) return;
        const delay = Math.min(1_000 * 2 ** attempt, 10_000);
        setTimeout(() => {
          if (!this.stopped && this.latest.get(name) === s) void this.reconcile(s, attempt + 1);
        }, delay).unref();
      });
    this.pending.set(name, next);
    return next;
  }

  /** route picks the ready replica with the fewest requests in flight. */
  private route(name: string): Target | undefined {
    let best: Replica | undefined;
    for (const r of this.replicas) if (r.service === name && (!best || r.inFlight < best.inFlight)) best = r;
    if (!best) return undefined;
    const chosen = best;
    chosen.inFlight++;
    return {
      port: chosen.queuePort,
      done: () => {
        chosen.inFlight--;
      },
      replica: `${name}/${chosen.replica}`,
    };
  }

  /** startReplica starts one replica of a Revision as its Pod would run: the function behind its queue-proxy. */
  private async startReplica(s: KService, revision: string, replica: number): Promise<Replica> {
    const { name, namespace } = s.metadata;
    const t = s.spec.template.spec;
    const env: Record<string, string> = {};
    for (const e of t.containers[0]?.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
    const serviceAccount = t.serviceAccountName ?? 'default';
    const { kcp, apiServer, tokenDir } = this.opts;
    const kubeconfig = await mountedToken(kcp, namespace, serviceAccount, undefined, apiServer, tokenDir);
    const pod = `${revision}-${replica}`;
    const meta = (s.spec.template.metadata ?? {}) as {
      annotations?: Record<string, string>;
      labels?: Record<string, string>;
    };
    // With the labels Serving gives a Revision's Pods.
    const labels = {
      ...meta.labels,
      'serving.knative.dev/service': name,
      'serving.knative.dev/configuration': name,
      'serving.knative.dev/revision': revision,
    };
    const podInfo = await newPod(pod, namespace, labels, meta.annotations ?? {});
    const renewals = await projectTokens(kcp, {
      namespace,
      serviceAccount,
      mounts: t.containers[0]?.volumeMounts ?? [],
      volumes: t.volumes ?? [],
      dir: join(tokenDir, namespace, pod),
      env,
      stopped: () => this.stopped,
      log: (line) => this.opts.log?.(`serving: ${pod}: ${line}`),
    });
    const [port, queuePort, queueTls, admin, metrics] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    const label = replica === 0 ? name : `${name}-${replica}`;
    const proc = this.startFunction(
      label,
      { ...env, ...podEnv(env, podInfo.ip), ...this.opts.env, ...(await this.opts.envFor?.(name, replica)) },
      kubeconfig,
      name,
      revision,
      replica,
      port,
    );
    const queue = startProcess('queue-proxy', label, this.opts.queueBinary, [], {
      logDir: this.opts.logDir,
      env: queueEnv(s, revision, pod, { port, queuePort, queueTls, admin, metrics }),
    });
    const url = `http://127.0.0.1:${queuePort}/`;
    try {
      // Ready as Serving sees it: the queue-proxy answers its probe, which asks the function's readiness.
      await waitFor(
        `${name} replica ${replica}`,
        async () => (await fetch(url, { headers: QUEUE_PROBE, signal: AbortSignal.timeout(2_000) })).ok,
        60_000,
        () =>
          proc.child.exitCode !== null
            ? `the function exited with ${proc.child.exitCode}; see ${proc.logFile}`
            : queue.child.exitCode !== null
              ? `queue-proxy exited with ${queue.child.exitCode}; see ${queue.logFile}`
              : undefined,
      );
    } catch (err) {
      for (const r of renewals) clearTimeout(r);
      await Promise.all([killProcess(proc), killProcess(queue)]);
      throw err;
    }
    return {
      service: name,
      revision,
      replica,
      port,
      queuePort,
      url,
      proc,
      queue,
      inFlight: 0,
      renewals,
      pod: podInfo,
    };
  }

  /** startFunction starts the function's container: its env, the Revision's K_* variables, the cluster network's proxy settings only. */
  private startFunction(
    label: string,
    env: Record<string, string>,
    kubeconfig: string | undefined,
    name: string,
    revision: string,
    replica: number,
    port: number,
  ) {
    const fnEnv: Record<string, string | undefined> = {
      ...process.env,
      ...env,
      ...this.opts.net.env(),
      PORT: String(port),
      K_SERVICE: name,
      K_REVISION: revision,
      K_CONFIGURATION: name,
      LOG_LEVEL: 'info',
      KUBECONFIG: kubeconfig,
    };
    if (!kubeconfig) delete fnEnv.KUBECONFIG;
    const { cmd, args, cwd } = this.opts.functionCommand;
    return startProcess('function', label, cmd, args, {
      logDir: this.opts.logDir,
      cwd,
      env: fnEnv as Record<string, string>,
    });
  }

  /** retire stops the replicas of a Service that are not of revision (all of them when undefined). */
  private async retire(
    name: string,
    revision: string | undefined,
    among: Replica[] = this.replicas.filter((r) => r.service === name),
  ): Promise<void> {
    const gone = among.filter((r) => r.revision !== revision);
    for (const r of gone) this.replicas.splice(this.replicas.indexOf(r), 1);
    if (revision === undefined) {
      this.revisions.delete(name);
      this.opts.net.unregister(name, this.opts.namespace);
    }
    // Requests in flight finish first, as a Pod's termination drains its queue-proxy.
    await Promise.all(
      gone.map(async (r) => {
        for (let i = 0; r.inFlight > 0 && i < 300; i++) await sleep(100);
        for (const t of r.renewals) clearTimeout(t);
        await Promise.all([stopProcess(r.proc), stopProcess(r.queue)]);
      }),
    );
  }

  /** restart kills one replica (SIGKILL) and starts it again with the same ports: a crashed container. */
  async restart(service: string, replica = 0): Promise<Replica> {
    const i = this.replicas.findIndex((r) => r.service === service && r.replica === replica);
    const r = this.replicas[i]!;
    for (const t of r.renewals) clearTimeout(t);
    await Promise.all([killProcess(r.proc), killProcess(r.queue)]);
    this.replicas.splice(i, 1);
    const s = await this.opts.kcp.client.call<KService>('GET', `${this.path}/${service}`);
    const fresh = await this.startReplica(s, r.revision, replica);
    this.replicas.push(fresh);
    return fresh;
  }

  private async report(s: KService, revision: string): Promise<void> {
    const { name, namespace } = s.metadata;
    // Our own status write comes back as a change: nothing to report then.
    if (
      s.status?.observedGeneration === s.metadata.generation &&
      s.status?.latestReadyRevisionName === revision
    )
      return;
    const url = `http://${name}.${namespace}.svc.cluster.local`;
    const now = new Date().toISOString();
    const ok = (type: string) => ({ type, status: 'True', lastTransitionTime: now });
    await this.opts.kcp.client.call('PATCH', `${this.path}/${name}/status`, {
      contentType: 'application/merge-patch+json',
      body: {
        status: {
          observedGeneration: s.metadata.generation,
          url,
          address: { url },
          latestCreatedRevisionName: revision,
          latestReadyRevisionName: revision,
          traffic: [{ revisionName: revision, latestRevision: true, percent: 100 }],
          conditions: [ok('ConfigurationsReady'), ok('Ready'), ok('RoutesReady')],
        },
      },
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await Promise.all(
      this.replicas.splice(0).flatMap((r) => {
        for (const t of r.renewals) clearTimeout(t);
        return [stopProcess(r.proc), stopProcess(r.queue)];
      }),
    );
  }
}

/** queueEnv is a queue-proxy's environment, as Serving's revision reconciler sets it. */
function queueEnv(
  s: KService,
  revision: string,
  pod: string,
  ports: { port: number; queuePort: number; queueTls: number; admin: number; metrics: number },
): Record<string, string> {
  const t = s.spec.template.spec;
  const { name, namespace } = s.metadata;
  return {
    PATH: process.env.PATH ?? '',
    SERVING_NAMESPACE: namespace,
    SERVING_SERVICE: name,
    SERVING_CONFIGURATION: name,
    SERVING_REVISION: revision,
    SERVING_POD: pod,
    SERVING_POD_IP: '127.0.0.1',
    CONTAINER_CONCURRENCY: String(t.containerConcurrency ?? 0),
    REVISION_TIMEOUT_SECONDS: String(t.timeoutSeconds ?? 300),
    QUEUE_SERVING_PORT: String(ports.queuePort),
    QUEUE_SERVING_TLS_PORT: String(ports.queueTls),
    USER_PORT: String(ports.port),
    QUEUE_ADMIN_PORT: String(ports.admin),
    QUEUE_METRICS_PORT: String(ports.metrics),
    SERVING_READINESS_PROBE: JSON.stringify({
      httpGet: { path: '/health/readiness', port: ports.port, host: '127.0.0.1', scheme: 'HTTP' },
      successThreshold: 1,
    }),
    SERVING_LOGGING_CONFIG: '',
    SERVING_LOGGING_LEVEL: 'info',
    SYSTEM_NAMESPACE: 'knative-serving',
    METRICS_DOMAIN: 'knative.dev/internal/serving',
  };
}
