// kubelet.ts plays the kubelet for the Knative Eventing Pods of the KCP: the Deployments of
// Knative's own configuration (controllers, broker ingress and filter, in-memory channel
// dispatcher, PingSource adapter) and those the eventing controller creates (one per
// ApiServerSource). The kube-controller-manager turns Deployments into Pods as in any
// cluster; for each Pod whose image is a Knative command built here (ko://.../cmd/<name>),
// this runs the command as a process with what its container would get:
//   - the container's env, with fieldRef, configMapKeyRef and secretKeyRef resolved;
//   - its ServiceAccount's token (TokenRequest) in a kubeconfig, unless automounting is
//     off for the Pod or its ServiceAccount;
//   - a network of its own is not possible here, so every port the command listens on is
//     a free loopback port, passed in the env variables the command reads (the Knative
//     build reads its fixed ports from the environment: infra/knative/build.sh), and
//     the cluster network (clusternet.ts) maps the Pod's container ports to them;
//   - cluster DNS through clusternet's proxy.
// Once running (and its readiness probe, if any, answers), the Pod's status says Running and
// Ready, so the endpoints and deployment controllers see it ready. Its podIP is an address of
// a pod network that does not exist here (10.244.x.y; endpoints may not be loopback): the
// cluster network routes by the kubelet's table, never by that address. A
// process that exits is restarted with a back-off and its Pod is not ready meanwhile; a Pod
// deleted is stopped. A step that fails (an API request, a ConfigMap key not there yet, a
// status write) is tried again after a back-off, as the kubelet syncs a Pod again.
import { appendFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeApiError } from '../../lib/kube/errors.ts';
import type { Cluster } from '../../lib/kube/objects.ts';
import { dist } from '../build.ts';
import { freePort } from '../net.ts';
import { killProcess, startProcess, stopProcess, type Proc } from '../processes.ts';
import type { ClusterNet, Target } from './clusternet.ts';
import { mountedToken, projectTokens, type TokenVolume } from './identities.ts';

/** PRODUCT_COMMAND is what commandOf makes of the product's image (knative.yaml). */
export const PRODUCT_COMMAND = 'kcp-sync-resource';
import { informer } from '../../lib/kube/informer.ts';

type EnvVar = {
  name: string;
  value?: string;
  valueFrom?: {
    fieldRef?: { fieldPath: string };
    configMapKeyRef?: { name: string; key: string; optional?: boolean };
    secretKeyRef?: { name: string; key: string; optional?: boolean };
  };
};
type Container = {
  name: string;
  image: string;
  args?: string[];
  command?: string[];
  env?: EnvVar[];
  ports?: { name?: string; containerPort: number }[];
  volumeMounts?: { name: string; mountPath: string }[];
  readinessProbe?: {
    httpGet?: {
      path?: string;
      port: number | string;
      scheme?: string;
      httpHeaders?: { name: string; value: string }[];
    };
  };
};
/** Pod is what the kubelet reads of a Pod. */
export type Pod = {
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    labels?: Record<string, string>;
    deletionTimestamp?: string;
    resourceVersion?: string;
  };
  spec: {
    containers: Container[];
    serviceAccountName?: string;
    automountServiceAccountToken?: boolean;
    nodeName?: string;
    volumes?: TokenVolume[];
    terminationGracePeriodSeconds?: number;
  };
  status?: { phase?: string };
};

/**
 * PORT_ENV says, per command, which env variable sets the port it would listen on in its
 * own Pod (the container port), so that each process here gets a free one instead.
 */
const PORT_ENV: Record<string, Record<string, number>> = {
  controller: { KNATIVE_HEALTH_PROBES_PORT: 8080, PROFILING_PORT: 8008 },
  mtchannel_broker: { KNATIVE_HEALTH_PROBES_PORT: 8080, PROFILING_PORT: 8008 },
  channel_controller: { KNATIVE_HEALTH_PROBES_PORT: 8080, PROFILING_PORT: 8008, WEBHOOK_PORT: 8443 },
  channel_dispatcher: { IMC_DISPATCHER_PORT: 8080, IMC_DISPATCHER_PORT_HTTPS: 8443, PROFILING_PORT: 8008 },
  ingress: { INGRESS_PORT: 8080, INGRESS_PORT_HTTPS: 8443, PROFILING_PORT: 8008 },
  filter: { FILTER_PORT: 8080, FILTER_PORT_HTTPS: 8443, PROFILING_PORT: 8008 },
  mtping: { KNATIVE_HEALTH_PROBES_PORT: 8080, PROFILING_PORT: 8008 },
  webhook: { KNATIVE_HEALTH_PROBES_PORT: 8080, PROFILING_PORT: 8008, WEBHOOK_PORT: 8443 },
  apiserver_receive_adapter: { KNATIVE_HEALTH_PROBES_PORT: 8080, PROFILING_PORT: 8008 },
  // The product's own image (the SKR source): node runs the command's script from the repository.
  [PRODUCT_COMMAND]: { PORT: 8080 },
};

/** commandOf returns the command an image stands for ("ko://knative.dev/eventing/cmd/broker/filter" → "filter"). */
export const commandOf = (image: string): string =>
  image
    .replace(/^ko:\/\//, '')
    .replace(/[@:].*$/, '')
    .split('/')
    .pop() ?? '';

/** LocalPod is a Pod running here. */
export interface LocalPod {
  namespace: string;
  name: string;
  uid: string;
  labels: Record<string, string>;
  command: string;
  /** ip is the Pod's address as its status reports it. */
  ip: string;
  container: string;
  image: string;
  /** ports maps container ports (number and name) to the loopback ports of the process. */
  ports: Map<number | string, number>;
  ready: boolean;
  proc?: Proc;
  restarts: number;
  stopped: boolean;
  /** statusWrites counts the status writes begun: a write that failed is retried until a later one begins. */
  statusWrites: number;
}

export interface KubeletOptions {
  kcp: Cluster;
  namespaces: string[];
  /** binaries maps a command name to its executable. */
  binaries: Record<string, string>;
  net: ClusterNet;
  /** apiServer is how Pods reach the API server (the runtime's ApiProxy) and the CA to trust. */
  apiServer: { url: string; caFile: string };
  tokenDir: string;
  logDir: string;
  log?: (line: string) => void;
}

/** NODE is the one Node the local kubelet registers. */
export const NODE = 'local';

export class Kubelet {
  readonly pods = new Map<string, LocalPod>();
  private readonly opts: KubeletOptions;
  private readonly abort = new AbortController();
  private stopped = false;
  private rr = 0;
  private ips = 0;
  private readonly paused = new Set<string>();
  /** recent are the last lines logged, for notReady. */
  private readonly recent: string[] = [];

  constructor(opts: KubeletOptions) {
    this.opts = opts;
  }

  /** log tells opts.log and appends to kubelet.log in the log directory, for a start that fails. */
  private log(line: string): void {
    this.opts.log?.(line);
    if (this.recent.push(line) > 10) this.recent.shift();
    appendFile(join(this.opts.logDir, 'kubelet.log'), `${new Date().toISOString()} ${line}\n`).catch(
      () => {},
    );
  }

  /**
   * start registers the Node "local" (the endpoint controllers skip Pods of unknown Nodes),
   * then watches the Pods of every namespace; resolves once each was listed. With no
   * scheduler here, the kubelet binds the Pods it runs to its Node itself.
   */
  async start(): Promise<void> {
    await this.opts.kcp.client
      .call('POST', '/api/v1/nodes', {
        body: {
          apiVersion: 'v1',
          kind: 'Node',
          metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE } },
        },
      })
      .catch((err: unknown) => {
        if (!(err instanceof KubeApiError && err.code === 409)) throw err;
      });
    await this.opts.kcp.client.call('PATCH', `/api/v1/nodes/${NODE}/status`, {
      contentType: 'application/merge-patch+json',
      body: {
        status: {
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'KubeletReady',
              lastHeartbeatTime: new Date().toISOString(),
              lastTransitionTime: new Date().toISOString(),
            },
          ],
          addresses: [
            { type: 'InternalIP', address: '127.0.0.1' },
            { type: 'Hostname', address: NODE },
          ],
        },
      },
    });
    await Promise.all(
      this.opts.namespaces.map((ns) =>
        informer<Pod>(
          this.opts.kcp.client,
          `/api/v1/namespaces/${ns}/pods`,
          {
            list: (pods) => {
              const seen = new Set(pods.map((p) => p.metadata.uid));
              for (const pod of pods) this.observe(pod);
              for (const p of this.pods.values())
                if (p.namespace === ns && !seen.has(p.uid)) void this.stopPod(p);
            },
            event: (type, pod) => {
              const known = this.pods.get(pod.metadata.uid);
              if (type === 'DELETED') {
                if (known) void this.stopPod(known);
              } else this.observe(pod);
            },
          },
          this.abort.signal,
        ),
      ),
    );
  }

  /** target finds a ready Pod for a selector and maps a container port (number or name) to its process's port. */
  target(namespace: string, selector: Record<string, string>, port: number | string): Target | undefined {
    const ready = [...this.pods.values()].filter(
      (p) =>
        p.ready &&
        p.namespace === namespace &&
        Object.entries(selector).every(([k, v]) => p.labels[k] === v) &&
        p.ports.has(port),
    );
    if (ready.length === 0) return undefined;
    return { port: ready[this.rr++ % ready.length]!.ports.get(port)! };
  }

  /** byCommand lists the running Pods of a command (e.g. "apiserver_receive_adapter"). */
  byCommand(command: string): LocalPod[] {
    return [...this.pods.values()].filter((p) => p.command === command && !p.stopped);
  }

  /** pause stops the Pods of a command (SIGKILL) and keeps them down, as a node that lost them would, until resume. */
  async pause(command: string): Promise<void> {
    this.paused.add(command);
    await Promise.all(this.byCommand(command).map((p) => this.kill(p)));
  }

  resume(command: string): void {
    this.paused.delete(command);
  }

  /** pausePod stops one Pod's process (SIGKILL) and keeps it down until resumePod. */
  async pausePod(pod: LocalPod): Promise<void> {
    this.paused.add(pod.uid);
    await this.kill(pod);
  }

  resumePod(pod: LocalPod): void {
    this.paused.delete(pod.uid);
  }

  private isPaused(p: LocalPod): boolean {
    return this.paused.has(p.command) || this.paused.has(p.uid);
  }

  /** notReady says which Pods are not ready (and how often each restarted) and what the kubelet logged last. */
  notReady(): string {
    const pods = [...this.pods.values()]
      .filter((p) => !p.ready)
      .map((p) => `${p.namespace}/${p.name} (${p.proc ? `${p.restarts} restarts` : 'not started'})`);
    return `Pods not ready: ${pods.join(', ') || 'none'}; the kubelet's last lines: ${this.recent.join(' | ') || 'none'}`;
  }

  /** kill ends a Pod's process (SIGKILL), as a crash would; it is restarted like any container that exits. */
  async kill(pod: LocalPod): Promise<void> {
    if (pod.proc) await killProcess(pod.proc);
  }

  private observe(pod: Pod): void {
    const known = this.pods.get(pod.metadata.uid);
    if (pod.metadata.deletionTimestamp) {
      if (!known && pod.spec.nodeName !== NODE) return;
      // Graceful deletion of a bound Pod: the kubelet stops it (SIGTERM, SIGKILL after its
      // grace period: an SKR source replica gives its Lease up), then removes the object.
      const graceMs = (pod.spec.terminationGracePeriodSeconds ?? 30) * 1000;
      void (known ? this.stopPod(known, graceMs) : Promise.resolve()).then(() =>
        this.opts.kcp.client
          .call('DELETE', `/api/v1/namespaces/${pod.metadata.namespace}/pods/${pod.metadata.name}`, {
            body: {
              apiVersion: 'v1',
              kind: 'DeleteOptions',
              gracePeriodSeconds: 0,
              preconditions: { uid: pod.metadata.uid },
            },
          })
          .catch(() => {}),
      );
      return;
    }
    if (known || this.stopped) return;
    const container = pod.spec.containers[0];
    const command = container ? commandOf(container.image) : '';
    if (!container || pod.spec.containers.length !== 1 || !this.opts.binaries[command]) return;
    const local: LocalPod = {
      namespace: pod.metadata.namespace,
      name: pod.metadata.name,
      uid: pod.metadata.uid,
      labels: pod.metadata.labels ?? {},
      command,
      ip: `10.244.${Math.floor(this.ips / 250)}.${(this.ips++ % 250) + 1}`,
      container: container.name,
      image: container.image,
      ports: new Map(),
      ready: false,
      restarts: 0,
      stopped: false,
      statusWrites: 0,
    };
    this.pods.set(local.uid, local);
    void this.sync(local, pod, container);
  }

  /**
   * sync runs the Pod as the kubelet syncs one: a step that fails (an API request, a key of
   * a ConfigMap or Secret not there yet) is tried again after a back-off until the Pod is
   * stopped, never left undone (a Pod never started keeps its Deployment unavailable).
   */
  private sync(local: LocalPod, pod: Pod, c: Container): Promise<void> {
    return this.retry(
      500,
      () => this.run(local, pod, c),
      (err) => `pod ${local.namespace}/${local.name}: ${String(err)}; trying again`,
      () => local.stopped,
    );
  }

  /**
   * retry runs step until it succeeds, after a back-off (from firstMs, doubling, at most 5 s)
   * each time it fails; it gives up when the kubelet is stopped or done(err) says so, asked
   * after the failure and again after the wait: a step that no longer matters is not tried again.
   */
  private async retry(
    firstMs: number,
    step: () => Promise<void>,
    failed: (err: unknown) => string,
    done: (err: unknown) => boolean,
  ): Promise<void> {
    for (let delay = firstMs; ; delay = Math.min(delay * 2, 5_000)) {
      try {
        return await step();
      } catch (err) {
        this.log(`kubelet: ${failed(err)}`);
        if (this.stopped || done(err)) return;
        await sleep(delay);
        if (this.stopped || done(err)) return;
      }
    }
  }

  private async run(local: LocalPod, pod: Pod, c: Container): Promise<void> {
    if (!pod.spec.nodeName) {
      await this.opts.kcp.client
        .call('POST', `/api/v1/namespaces/${local.namespace}/pods/${local.name}/binding`, {
          body: {
            apiVersion: 'v1',
            kind: 'Binding',
            metadata: { name: local.name },
            target: { apiVersion: 'v1', kind: 'Node', name: NODE },
          },
        })
        .catch((err: unknown) => {
          // Bound by an earlier try of this sync.
          if (!(err instanceof KubeApiError && err.code === 409)) throw err;
        });
    }
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      ...(await this.envOf(pod, c, local)),
      ...this.opts.net.env(),
    };
    const kubeconfig = await mountedToken(
      this.opts.kcp,
      pod.metadata.namespace,
      pod.spec.serviceAccountName ?? 'default',
      pod.spec.automountServiceAccountToken,
      this.opts.apiServer,
      this.opts.tokenDir,
      `kubeconfig-${pod.metadata.name}.yaml`,
    );
    if (kubeconfig) env.KUBECONFIG = kubeconfig;
    const renewals = await projectTokens(this.opts.kcp, {
      namespace: pod.metadata.namespace,
      serviceAccount: pod.spec.serviceAccountName ?? 'default',
      mounts: c.volumeMounts ?? [],
      volumes: pod.spec.volumes ?? [],
      dir: join(this.opts.tokenDir, pod.metadata.namespace, pod.metadata.name),
      env,
      stopped: () => local.stopped || this.stopped,
      log: (line) => this.log(`kubelet: pod ${local.namespace}/${local.name}: ${line}`),
    });
    try {
      await this.loop(local, c, env);
    } finally {
      for (const t of renewals) clearTimeout(t);
    }
  }

  private async loop(local: LocalPod, c: Container, env: Record<string, string>): Promise<void> {
    for (let delay = 1_000; !local.stopped && !this.stopped; delay = Math.min(delay * 2, 10_000)) {
      while (this.isPaused(local) && !local.stopped && !this.stopped) await sleep(100);
      if (local.stopped || this.stopped) return;
      // Free ports for every start: all processes share the host's network here, and a port
      // found free may be taken by another process before this one binds it (it then exits,
      // and a restart on the same port would fail the same way for as long as that lasts).
      for (const [name, containerPort] of Object.entries(PORT_ENV[local.command] ?? {})) {
        const port = await freePort();
        env[name] = String(port);
        local.ports.set(containerPort, port);
      }
      for (const p of c.ports ?? [])
        if (p.name && local.ports.has(p.containerPort))
          local.ports.set(p.name, local.ports.get(p.containerPort)!);
      const proc = startProcess(
        'pod',
        `${local.namespace}-${local.name}`,
        this.opts.binaries[local.command]!,
        [...(c.command?.slice(1) ?? []), ...(c.args ?? [])],
        { logDir: this.opts.logDir, env, ...(local.command === PRODUCT_COMMAND ? { cwd: dist } : {}) },
      );
      local.proc = proc;
      const started = Date.now();
      const ready = this.waitReady(local, c, proc).then((ok) => {
        if (!ok || local.stopped) return;
        local.ready = true;
        void this.setStatus(local, true, started);
      });
      await proc.exited;
      await ready.catch(() => {});
      local.ready = false;
      if (local.stopped || this.stopped) return;
      local.restarts++;
      // Not awaited: the restart does not wait for the API server (its write goes on meanwhile).
      void this.setStatus(local, false, started);
      // As the kubelet's CrashLoopBackOff: quick at first, then longer; a long run resets it.
      if (Date.now() - started > 60_000) delay = 1_000;
      if (!this.isPaused(local)) await sleep(delay);
    }
  }

  /** waitReady polls the readiness probe (HTTP) of the container, or waits a moment for a process without one. */
  private async waitReady(local: LocalPod, c: Container, proc: Proc): Promise<boolean> {
    const probe = c.readinessProbe?.httpGet;
    const port = probe ? local.ports.get(probe.port) : undefined;
    for (;;) {
      if (proc.child.exitCode !== null || proc.child.signalCode !== null || local.stopped) return false;
      if (!probe || port === undefined || probe.scheme === 'HTTPS') {
        await sleep(500);
        return proc.child.exitCode === null;
      }
      // As the kubelet probes: its User-Agent (Knative's handlers answer probes by it) and the probe's headers.
      const headers = {
        'User-Agent': 'kube-probe/1.35',
        ...Object.fromEntries((probe.httpHeaders ?? []).map((h) => [h.name, h.value])),
      };
      const path = (probe.path ?? '/').replace(/^(?!\/)/, '/');
      const ok = await fetch(`http://127.0.0.1:${port}${path}`, {
        headers,
        signal: AbortSignal.timeout(1_000),
      }).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return true;
      await sleep(200);
    }
  }

  /** setStatus writes the Pod's status, again after a back-off if the write fails, until it is stopped or a later write begins. */
  private setStatus(local: LocalPod, ready: boolean, started: number): Promise<void> {
    const write = ++local.statusWrites;
    return this.retry(
      200,
      () => this.writeStatus(local, ready, started),
      (err) => `status of ${local.namespace}/${local.name}: ${String(err)}`,
      (err) =>
        local.stopped || write !== local.statusWrites || (err instanceof KubeApiError && err.code === 404),
    );
  }

  private async writeStatus(local: LocalPod, ready: boolean, started: number): Promise<void> {
    const now = new Date().toISOString();
    const cond = (type: string, status: boolean) => ({
      type,
      status: status ? 'True' : 'False',
      lastTransitionTime: now,
    });
    await this.opts.kcp.client.call(
      'PATCH',
      `/api/v1/namespaces/${local.namespace}/pods/${local.name}/status`,
      {
        contentType: 'application/merge-patch+json',
        body: {
          status: {
            phase: 'Running',
            hostIP: '127.0.0.1',
            podIP: local.ip,
            podIPs: [{ ip: local.ip }],
            startTime: new Date(started).toISOString(),
            conditions: [
              cond('PodScheduled', true),
              cond('Initialized', true),
              cond('ContainersReady', ready),
              cond('Ready', ready),
            ],
            containerStatuses: [
              {
                name: local.container,
                image: local.image,
                imageID: '',
                ready,
                started: true,
                restartCount: local.restarts,
                state: { running: { startedAt: new Date(started).toISOString() } },
              },
            ],
          },
        },
      },
    );
  }

  private async envOf(pod: Pod, c: Container, local: LocalPod): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    const ns = pod.metadata.namespace;
    for (const e of c.env ?? []) {
      const from = e.valueFrom;
      if (!from) {
        out[e.name] = (e.value ?? '').replace(
          /\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g,
          (m, v: string) => out[v] ?? m,
        );
      } else if (from.fieldRef) {
        const fields: Record<string, string | undefined> = {
          'metadata.name': pod.metadata.name,
          'metadata.namespace': ns,
          'metadata.uid': pod.metadata.uid,
          'spec.serviceAccountName': pod.spec.serviceAccountName ?? 'default',
          'status.podIP': local.ip,
          'status.hostIP': '127.0.0.1',
          'spec.nodeName': NODE,
        };
        const v = fields[from.fieldRef.fieldPath];
        if (v !== undefined) out[e.name] = v;
      } else if (from.configMapKeyRef || from.secretKeyRef) {
        const ref = (from.configMapKeyRef ?? from.secretKeyRef)!;
        const kind = from.configMapKeyRef ? 'configmaps' : 'secrets';
        const obj = await this.opts.kcp.client
          .call<{ data?: Record<string, string> }>('GET', `/api/v1/namespaces/${ns}/${kind}/${ref.name}`)
          .catch(() => undefined);
        const raw = obj?.data?.[ref.key];
        if (raw !== undefined)
          out[e.name] = kind === 'secrets' ? Buffer.from(raw, 'base64').toString('utf8') : raw;
        else if (!ref.optional) throw new Error(`env ${e.name}: ${kind} ${ref.name} has no key ${ref.key}`);
      }
    }
    return out;
  }

  /** stopPod ends a Pod's process: with SIGTERM and graceMs to exit when given, else at once (SIGKILL). */
  private async stopPod(p: LocalPod, graceMs?: number): Promise<void> {
    if (p.stopped) return;
    p.stopped = true;
    p.ready = false;
    this.pods.delete(p.uid);
    if (p.proc) await (graceMs === undefined ? killProcess(p.proc) : stopProcess(p.proc, graceMs));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await Promise.all([...this.pods.values()].map((p) => this.stopPod(p)));
  }
}
