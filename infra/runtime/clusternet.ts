// clusternet.ts plays a cluster's DNS and service proxy for the local processes: an HTTP
// forward proxy on loopback that every Pod process and function replica is given as
// HTTP_PROXY. A request for http://<name>.<namespace>.svc.cluster.local[:port]/... (or the
// shorter <name>.<namespace>.svc) goes to what that name stands for here:
//   - a Kubernetes Service of the KCP: ExternalName services are followed, and a
//     selector Service picks a ready local Pod process of the kubelet (kubelet.ts), with
//     the Service's targetPort mapped to the port that process listens on;
//   - a host the runtime registered itself (Serving's stand-in for a Knative Service).
// Go's net/http (the Knative commands) and Node's fetch (NODE_USE_ENV_PROXY=1) send plain
// HTTP through a proxy as absolute-form requests; the Host header is kept, which the
// in-memory channel dispatcher routes by. Loopback addresses are never proxied (Go and
// Node skip them), so API server traffic goes direct.
//
// HTTPS goes through it too (HTTPS_PROXY, a CONNECT tunnel), for the names the runtime
// gave a loopback port (tunnel()): kubernetes.default.svc, the API server as a Pod sees it.
//
// Every request passing through is counted while in flight, so the runtime can tell when
// the data plane is idle.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request, type Dispatcher } from 'undici';
import type { Cluster } from '../../lib/kube/objects.ts';

/** Target is where a request goes: a loopback port; done is called when the request ended; replica names it for observers. */
export interface Target {
  port: number;
  done?: () => void;
  replica?: string;
}

/** Route resolves a service port to a target, or undefined when nothing serves it (503). */
export type Route = (port: number, req: IncomingMessage) => Target | undefined | Promise<Target | undefined>;

/** Passage is one request that went through, for observers. */
export interface Passage {
  host: string;
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  /** body is the request's body (CloudEvents here: small). */
  body: Buffer;
  status: number;
  responseHeaders: Record<string, string | string[] | undefined>;
  /** replica is the function replica that served it, for a Knative Service's address. */
  replica?: string;
  /** start is when the request arrived (epoch ms), ms how long until its answer was sent on. */
  start: number;
  ms: number;
}

type ServiceSpec = {
  type?: string;
  externalName?: string;
  selector?: Record<string, string>;
  ports?: { name?: string; port: number; targetPort?: number | string }[];
};

/** PodPorts finds a ready local process for a selector in namespace: the target of a container port (number or name). */
export type PodPorts = (
  namespace: string,
  selector: Record<string, string>,
  targetPort: number | string,
) => Target | undefined;

export class ClusterNet {
  url = '';
  private server?: Server;
  private readonly exposed: Server[] = [];
  private readonly hosts = new Map<string, Route>();
  private readonly agent = new Agent({ bodyTimeout: 0, headersTimeout: 0, keepAliveTimeout: 4_000 });
  private readonly kcp: Cluster;
  private readonly pods: PodPorts;
  private readonly services = new Map<string, { at: number; spec: Promise<ServiceSpec | null> }>();
  /** inFlight counts requests being forwarded; lastActivity is when one last began or ended. */
  inFlight = 0;
  lastActivity = Date.now();
  private readonly observers = new Set<(p: Passage) => void>();

  constructor(kcp: Cluster, pods: PodPorts) {
    this.kcp = kcp;
    this.pods = pods;
  }

  private readonly tunnels = new Map<string, number>();
  private readonly tunnelled = new Set<import('node:net').Socket | import('node:stream').Duplex>();

  /** tunnel makes CONNECT host:443 reach a loopback port (TLS end to end, as the host's own server answers). */
  tunnel(hosts: string[], port: number): void {
    for (const h of hosts) this.tunnels.set(`${h}:443`, port);
  }

  /** register makes host (e.g. "sync-apply-items.kcp-system") resolve through route. */
  register(name: string, namespace: string, route: Route): void {
    this.hosts.set(`${name}.${namespace}`, route);
  }

  unregister(name: string, namespace: string): void {
    this.hosts.delete(`${name}.${namespace}`);
  }

  /** observe calls fn for every request that has been answered. */
  observe(fn: (p: Passage) => void): () => void {
    this.observers.add(fn);
    return () => this.observers.delete(fn);
  }

  /** idle waits until no request has been in flight for quietMs. */
  async idle(timeoutMs = 30_000, quietMs = 500): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.inFlight > 0 || Date.now() - this.lastActivity < quietMs) {
      if (Date.now() > deadline)
        throw new Error(
          `the cluster network is not idle after ${timeoutMs} ms (${this.inFlight} requests in flight)`,
        );
      await sleep(50);
    }
  }

  /** expose serves host:port of the cluster on a loopback port of the host (as kubectl port-forward), and returns its URL. */
  async expose(host: string, port = 80): Promise<string> {
    const server = createServer(
      (req, res) => void this.forward(req, res, `${host}:${port}`).catch(() => res.destroy()),
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    this.exposed.push(server);
    return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  }

  async listen(): Promise<string> {
    this.server = createServer((req, res) => void this.forward(req, res).catch(() => res.destroy()));
    this.server.keepAliveTimeout = 65_000;
    this.server.on('connect', (req: IncomingMessage, socket, head: Buffer) => {
      const port = this.tunnels.get((req.url ?? '').toLowerCase());
      if (!port) return void socket.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
      const up = connect(port, '127.0.0.1', () => {
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length) up.write(head);
        up.pipe(socket);
        socket.pipe(up);
      });
      this.tunnelled.add(socket).add(up);
      const end = () => {
        socket.destroy();
        up.destroy();
        this.tunnelled.delete(socket);
        this.tunnelled.delete(up);
      };
      up.on('error', end).on('close', end);
      socket.on('error', end).on('close', end);
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
    return this.url;
  }

  /** env is what a process needs to reach cluster names through this proxy. */
  env(): Record<string, string> {
    return {
      HTTP_PROXY: this.url,
      http_proxy: this.url,
      HTTPS_PROXY: this.url,
      https_proxy: this.url,
      NO_PROXY: '127.0.0.1,localhost',
      no_proxy: '127.0.0.1,localhost',
      NODE_USE_ENV_PROXY: '1',
    };
  }

  /** resolve returns the target of host:port, following ExternalName services. */
  async resolve(host: string, port: number, req: IncomingMessage, depth = 0): Promise<Target | undefined> {
    const m = /^([a-z0-9-]+)\.([a-z0-9-]+)(\.svc(\.cluster\.local)?)?\.?$/.exec(host.toLowerCase());
    if (!m || depth > 4) return undefined;
    const [, name, namespace] = m as unknown as [string, string, string];
    const own = this.hosts.get(`${name}.${namespace}`);
    if (own) return own(port, req);
    const svc = await this.service(namespace, name);
    if (!svc) return undefined;
    if (svc.type === 'ExternalName' && svc.externalName)
      return this.resolve(svc.externalName, port, req, depth + 1);
    const sp =
      (svc.ports ?? []).find((p) => p.port === port) ?? (svc.ports?.length === 1 ? svc.ports[0] : undefined);
    if (!sp || !svc.selector) return undefined;
    return this.pods(namespace, svc.selector, sp.targetPort ?? sp.port);
  }

  /**
   * service reads a Service, cached for a second (a Service changes rarely, requests come
   * in bursts); concurrent requests share one read, as kube-proxy's informer would serve
   * them all from memory (uncoalesced, a burst of deliveries read it 12 times per
   * SyncResource created with --knative real).
   */
  private service(namespace: string, name: string): Promise<ServiceSpec | null> {
    const key = `${namespace}/${name}`;
    const hit = this.services.get(key);
    if (hit && Date.now() - hit.at < 1_000) return hit.spec;
    const spec = this.kcp.client
      .call<{ spec: ServiceSpec }>('GET', `/api/v1/namespaces/${namespace}/services/${name}`)
      .then(
        (s) => s.spec,
        () => null,
      );
    this.services.set(key, { at: Date.now(), spec });
    return spec;
  }

  private async forward(req: IncomingMessage, res: ServerResponse, fixedHost?: string): Promise<void> {
    this.inFlight++;
    const start = (this.lastActivity = Date.now());
    let status = 502;
    let target: Target | undefined;
    try {
      const url = fixedHost
        ? new URL(req.url ?? '/', `http://${fixedHost}`)
        : new URL(req.url ?? '/', `http://${req.headers.host ?? 'unknown'}`);
      if (fixedHost) req.headers.host = fixedHost;
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body = Buffer.concat(chunks);
      target = await this.resolve(url.hostname, Number(url.port || 80), req);
      if (!target) {
        status = 503;
        res.writeHead(503, { 'content-type': 'text/plain' }).end(`no endpoint for ${url.host}\n`);
        return;
      }
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter(
          ([k]) =>
            ![
              'connection',
              'keep-alive',
              'proxy-connection',
              'proxy-authorization',
              'transfer-encoding',
            ].includes(k),
        ),
      ) as Record<string, string>;
      const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
      let responseHeaders: Passage['responseHeaders'] = {};
      try {
        const up = await request(`http://127.0.0.1:${target.port}${url.pathname}${url.search}`, {
          method: req.method as Dispatcher.HttpMethod,
          headers,
          dispatcher: this.agent,
          ...(hasBody ? { body } : {}),
        });
        status = up.statusCode;
        responseHeaders = Object.fromEntries(
          Object.entries(up.headers).filter(
            ([k]) => !['connection', 'keep-alive', 'transfer-encoding'].includes(k),
          ),
        );
        res.writeHead(up.statusCode, responseHeaders as Record<string, string>);
        await pipeline(up.body, res);
      } catch {
        // The process behind the name is gone or refused: what a client sees of a dead Pod.
        if (!res.headersSent)
          res.writeHead(502, { 'content-type': 'text/plain' }).end(`${url.host} refused the connection\n`);
        else res.destroy();
      }
      const passage: Passage = {
        host: url.hostname,
        method: req.method ?? 'GET',
        path: url.pathname,
        headers: req.headers,
        body,
        status,
        responseHeaders,
        start,
        ms: Date.now() - start,
        ...(target.replica ? { replica: target.replica } : {}),
      };
      for (const fn of this.observers) fn(passage);
    } finally {
      target?.done?.();
      this.inFlight--;
      this.lastActivity = Date.now();
    }
  }

  async close(): Promise<void> {
    for (const e of this.exposed) {
      e.closeAllConnections();
      e.close();
    }
    for (const t of this.tunnelled) t.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    await this.agent.close();
  }
}
