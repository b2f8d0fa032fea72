// apiproxy.ts stands between a real Knative adapter process and the KCP API server: a
// TLS front on loopback (its own CA, which the adapter's kubeconfig trusts; client-go
// sends a bearer token only over TLS) that forwards every request to the API server,
// unchanged (the adapter's own ServiceAccount token included). It is how the runtime
// sees that an adapter has its watches open (ready), and how a test breaks them. Its
// certificate also names kubernetes.default.svc: the cluster network tunnels that name to
// it, as a Pod reaches its API server (Knative's token verifier reads the issuer there).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { mkdir, readFile } from 'node:fs/promises';
import { makeCa, signCert } from '../pki.ts';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request, type Dispatcher } from 'undici';

/** ApiProxy forwards to one API server and records the watches passing through. */
export class ApiProxy {
  url = '';
  port = 0;
  /** caFile is the CA that signed the proxy's serving certificate. */
  caFile = '';
  /** watched lists the paths of the watch requests received (query left out). */
  readonly watched: string[] = [];
  private readonly open = new Set<ServerResponse>();
  private server?: Server;
  private readonly agent: Agent;
  private readonly target: string;

  constructor(target: string, ca: string | Buffer | undefined) {
    this.target = target.replace(/\/$/, '');
    this.agent = new Agent({ connect: { ...(ca ? { ca } : {}) }, bodyTimeout: 0, headersTimeout: 0 });
  }

  /** listen serves on a loopback port with a certificate made in dir. */
  async listen(dir: string): Promise<string> {
    await mkdir(dir, { recursive: true });
    const ca = await makeCa(dir, 'kcp-proxy-ca');
    const serving = await signCert(dir, 'proxy', '/CN=kcp-proxy', {
      san: 'IP:127.0.0.1,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local',
      ca,
    });
    this.caFile = ca.certFile;
    this.server = createServer(
      { cert: await readFile(serving.certFile), key: await readFile(serving.keyFile) },
      (req, res) => void this.forward(req, res).catch(() => res.destroy()),
    );
    // As the API server (Go's net/http) answers: no "Keep-Alive: timeout=5" header (Node's
    // default), which would make every client close its idle connections after 3 s and pay a
    // TLS handshake for each request a few seconds apart (a Lease renewal, a resync's reads).
    this.server.keepAliveTimeout = 0;
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as { port: number }).port;
    this.url = `https://127.0.0.1:${this.port}`;
    return this.url;
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.target);
    const watch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(
        ([k]) => !['host', 'connection', 'keep-alive', 'transfer-encoding'].includes(k),
      ),
    ) as Record<string, string>;
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    const up = await request(url, {
      method: req.method as Dispatcher.HttpMethod,
      headers,
      dispatcher: this.agent,
      ...(hasBody ? { body: req } : {}),
    });
    const out = Object.fromEntries(
      Object.entries(up.headers).filter(
        ([k]) => !['connection', 'keep-alive', 'transfer-encoding'].includes(k),
      ),
    );
    res.writeHead(up.statusCode, out as Record<string, string>);
    if (watch && up.statusCode === 200) {
      this.watched.push(url.pathname);
      this.open.add(res);
      res.on('close', () => this.open.delete(res));
    }
    await pipeline(up.body, res).catch(() => undefined);
  }

  /** waitForWatches resolves once a watch of each path has been opened since from (an index into watched). */
  async waitForWatches(paths: string[], from: number, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const seen = this.watched.slice(from);
      if (paths.every((p) => seen.includes(p))) return;
      if (Date.now() > deadline)
        throw new Error(
          `no watch of ${paths.filter((p) => !seen.includes(p)).join(', ')} within ${timeoutMs} ms`,
        );
      await sleep(20);
    }
  }

  /** breakWatches cuts every open watch connection, as a network failure would. */
  breakWatches(): number {
    const n = this.open.size;
    for (const res of this.open) res.destroy();
    this.open.clear();
    return n;
  }

  async close(): Promise<void> {
    this.breakWatches();
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    await this.agent.close();
  }
}
