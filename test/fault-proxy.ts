// A fault-injecting HTTPS proxy in front of a real API server, for failures a real
// server cannot produce on demand (a 500 mid-run, 429 with Retry-After, a reset
// connection). It terminates TLS with its own CA and forwards everything else to the
// upstream with the upstream's admin credential.
import { request as httpsRequest, createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { renderKubeconfig } from '../infra/kubeconfig.ts';
import { makeCa, signCert } from '../infra/pki.ts';

/** Fault is one injected failure. */
export interface Fault {
  method?: string;
  path: RegExp;
  kind: 'status' | 'reset';
  status?: number;
  headers?: Record<string, string>;
  /** times limits how often it fires (default once). */
  times?: number;
}

/** FaultProxy proxies to upstream, applying faults in order of registration. */
export class FaultProxy {
  readonly faults: Fault[] = [];
  readonly seen: { method: string; path: string; fault?: string }[] = [];
  private server!: Server;
  private dir!: string;
  kubeconfig!: string;

  static async start(upstreamKubeconfig: string): Promise<FaultProxy> {
    const p = new FaultProxy();
    await p.init(upstreamKubeconfig);
    return p;
  }

  private async init(upstreamKubeconfig: string): Promise<void> {
    const up = load(upstreamKubeconfig) as {
      clusters: { cluster: { server: string; 'certificate-authority-data': string } }[];
      users: { user: { 'client-certificate-data': string; 'client-key-data': string } }[];
    };
    const b = (s: string) => Buffer.from(s, 'base64');
    const upstream = new URL(up.clusters[0]!.cluster.server);
    const tls = {
      ca: b(up.clusters[0]!.cluster['certificate-authority-data']),
      cert: b(up.users[0]!.user['client-certificate-data']),
      key: b(up.users[0]!.user['client-key-data']),
    };
    this.dir = await mkdtemp(join(tmpdir(), 'fault-proxy-'));
    const ca = await makeCa(this.dir, 'fault-proxy-ca');
    const serving = await signCert(this.dir, 'serving', '/CN=fault-proxy', { san: 'IP:127.0.0.1' });
    this.server = createServer({ cert: serving.pem.cert, key: serving.pem.key }, (req, res) =>
      this.handle(req, res, upstream, tls),
    );
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    const port = (this.server.address() as { port: number }).port;
    this.kubeconfig = renderKubeconfig('fault-proxy', `https://127.0.0.1:${port}`, ca.cert, {
      token: 'proxy-token',
    });
  }

  private handle(
    req: IncomingMessage,
    res: ServerResponse,
    upstream: URL,
    tls: { ca: Buffer; cert: Buffer; key: Buffer },
  ): void {
    const method = req.method ?? 'GET';
    const path = req.url ?? '/';
    const i = this.faults.findIndex((f) => (!f.method || f.method === method) && f.path.test(path));
    if (i >= 0) {
      const f = this.faults[i]!;
      f.times = (f.times ?? 1) - 1;
      if (f.times <= 0) this.faults.splice(i, 1);
      this.seen.push({ method, path, fault: f.kind === 'reset' ? 'reset' : String(f.status) });
      req.resume();
      if (f.kind === 'reset') return void req.socket.destroy();
      res.writeHead(f.status!, { 'content-type': 'application/json', ...f.headers });
      return void res.end(
        JSON.stringify({
          kind: 'Status',
          apiVersion: 'v1',
          status: 'Failure',
          code: f.status,
          message: `injected ${f.status}`,
          reason: f.status === 429 ? 'TooManyRequests' : 'InternalError',
        }),
      );
    }
    this.seen.push({ method, path });
    const headers = { ...req.headers, host: upstream.host };
    delete headers.authorization;
    const up = httpsRequest(
      { host: upstream.hostname, port: upstream.port, method, path, headers, ...tls },
      (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        ur.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    req.pipe(up);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
    await rm(this.dir, { recursive: true, force: true });
  }
}
