// client.ts: a small Kubernetes REST client over one pooled keep-alive connection
// set per cluster. Authentication and TLS material come from Credentials
// (credentials.ts); requests go through undici with JSON bodies passed through untouched
// (the generated typed clients rename fields of unknown shapes, which a manifest
// engine cannot afford), an optional token-bucket rate limit and a per-request observer.
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request, type Dispatcher } from 'undici';
import type { Credentials } from './credentials.ts';
import { KubeApiError, type Status } from './errors.ts';
import { checkPath } from '../policy/identity.ts';
import { TokenBucket } from './ratelimit.ts';

/** RequestInfo is what an observer learns about each finished request (no bodies, no credentials). */
export interface RequestInfo {
  cluster: string;
  method: string;
  path: string;
  code: number;
  durationMs: number;
  write: boolean;
}

/** ClientOptions tune a KubeClient. */
export interface ClientOptions {
  /** name identifies the cluster in errors, logs and metrics (never a credential). */
  name: string;
  /** qps and burst rate-limit requests on the client side; unset or 0: no limit (the server's priority and fairness decides). */
  qps?: number;
  burst?: number;
  /** throttleRetries is how often a 429 is retried after its Retry-After (default 3). */
  throttleRetries?: number;
  timeoutMs?: number;
  /**
   * connections caps concurrent connections to the API server. The client offers HTTP/2
   * (undici's default) and an API server takes it: requests are multiplexed, and a burst
   * after an idle pause opens one TLS connection, not one per request in flight.
   * HTTP/1.1 costs a warm request less CPU, but more connections, handshakes and memory
   * (BENCHMARKS.md, "HTTP/1.1 to the API servers": tried, not kept).
   */
  connections?: number;
  /** http2 pins every request and watch to one HTTP/2 connection (the SKR source's watches). */
  http2?: boolean;
  /** http1 keeps to HTTP/1.1, a pool of `connections` (bench/protocol.ts measures the two). */
  http1?: boolean;
  /** keepAliveMs is how long an idle connection stays open (default 30 s). */
  keepAliveMs?: number;
  onRequest?: (info: RequestInfo) => void;
  /**
   * beforeRequest, when set, is awaited before each request: the pipeline's scheduler
   * (yieldToUrgent) pauses bulk work there while an edit runs. Undefined: nothing to wait for.
   */
  beforeRequest?: () => Promise<void> | undefined;
}

/** RequestOptions describe one API call. */
export interface CallOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string>;
}

/** Content types for PATCH. */
export const PatchType = {
  apply: 'application/apply-patch+yaml',
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
} as const;

/** KubeClient talks to one API server. */
export class KubeClient {
  readonly name: string;
  readonly server: string;
  private readonly connect: () => Dispatcher;
  private agent: Dispatcher;
  private readonly token: (() => string) | undefined;
  private readonly limiter: TokenBucket | undefined;
  private readonly throttleRetries: number;
  private readonly timeoutMs: number;
  private readonly onRequest: ((info: RequestInfo) => void) | undefined;
  private readonly beforeRequest: (() => Promise<void> | undefined) | undefined;
  /** requests and writes count calls made (writes: all but GET), for tests and benchmarks. */
  requests = 0;
  writes = 0;

  private constructor(
    name: string,
    server: string,
    connect: () => Dispatcher,
    token: (() => string) | undefined,
    opts: ClientOptions,
  ) {
    this.name = name;
    this.server = server.replace(/\/+$/, '');
    this.connect = connect;
    this.agent = connect();
    this.token = token;
    this.limiter = opts.qps ? new TokenBucket(opts.qps, opts.burst || opts.qps) : undefined;
    this.throttleRetries = opts.throttleRetries ?? 3;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.onRequest = opts.onRequest;
    this.beforeRequest = opts.beforeRequest;
  }

  /** create builds a client for creds. */
  static create(creds: Credentials, opts: ClientOptions): KubeClient {
    const connect = () =>
      new Agent({
        connect: {
          ca: creds.ca,
          cert: creds.cert,
          key: creds.key,
          rejectUnauthorized: !creds.insecure,
          ...(creds.servername ? { servername: creds.servername } : {}),
          timeout: 10_000,
        },
        connections: opts.http2 ? 1 : (opts.connections ?? 16),
        ...(opts.http2 ? { allowH2: true } : opts.http1 ? { allowH2: false } : {}),
        keepAliveTimeout: opts.keepAliveMs ?? 30_000,
      });
    return new KubeClient(opts.name, creds.server, connect, creds.token, opts);
  }

  /**
   * call performs one request and returns the decoded JSON body; non-2xx throws
   * KubeApiError, a path with an unsafe segment throws UnsafePathError before any request. A 429 (the server's priority and fairness turned the request away
   * unprocessed) is retried after its Retry-After (1 s if absent, at most 10 s), as
   * client-go does.
   */
  async call<T = unknown>(method: string, path: string, opts: CallOptions = {}): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once<T>(method, path, opts);
      } catch (err) {
        if (!(err instanceof KubeApiError) || err.code !== 429 || attempt >= this.throttleRetries) throw err;
        await sleep(Math.max(0, Math.min(err.retryAfterSeconds ?? 1, 10)) * 1000);
      }
    }
  }

  private async once<T>(method: string, path: string, opts: CallOptions): Promise<T> {
    // Second line of defence: identities are validated before paths are built from them.
    checkPath(path);
    const paused = this.beforeRequest?.();
    if (paused) await paused;
    await this.limiter?.take();
    this.requests++;
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(opts.query ?? {}))
      if (v !== undefined) url.searchParams.set(k, String(v));
    const headers = { ...this.headers(), ...opts.headers };
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] = opts.contentType ?? 'application/json';
    }
    const started = performance.now();
    // A dry run changes nothing: it counts as a request, not as a write.
    const write = method !== 'GET' && opts.query?.dryRun === undefined;
    if (write) this.writes++;
    let code = 0;
    try {
      const res = await request(url, {
        method: method as Dispatcher.HttpMethod,
        headers,
        body,
        dispatcher: this.agent,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      code = res.statusCode;
      const text = await res.body.text();
      if (code >= 200 && code < 300) return (text ? JSON.parse(text) : undefined) as T;
      const retryAfter = Number(res.headers['retry-after']);
      throw new KubeApiError(this.name, method, path, code, parseStatus(text, code), {
        retryAfterSeconds: Number.isFinite(retryAfter) ? retryAfter : undefined,
      });
    } catch (err) {
      if (err instanceof KubeApiError) throw err;
      throw new KubeApiError(this.name, method, path, 0, undefined, { cause: err });
    } finally {
      this.onRequest?.({
        cluster: this.name,
        method,
        path: url.pathname,
        code,
        durationMs: performance.now() - started,
        write,
      });
    }
  }

  /**
   * watch opens a watch of path (query without watch=1) and yields its events as they
   * arrive, until the server ends it or signal aborts; a non-200 answer throws KubeApiError.
   */
  async *watch<T>(
    path: string,
    query: Record<string, string | undefined>,
    signal: AbortSignal,
    headers?: Record<string, string>,
  ): AsyncGenerator<{ type: string; object: T }> {
    checkPath(path);
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries({ ...query, watch: '1' }))
      if (v !== undefined) url.searchParams.set(k, v);
    this.requests++;
    const res = await request(url, {
      method: 'GET',
      headers: { ...this.headers(), ...headers },
      dispatcher: this.agent,
      signal,
      bodyTimeout: 0,
    });
    if (res.statusCode !== 200) {
      throw new KubeApiError(
        this.name,
        'GET',
        path,
        res.statusCode,
        parseStatus(await res.body.text(), res.statusCode),
      );
    }
    let buf = '';
    // One decoder for the stream: a UTF-8 character may be split across two chunks.
    const utf8 = new TextDecoder();
    for await (const chunk of res.body) {
      buf += utf8.decode(chunk as Uint8Array, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim()) yield JSON.parse(line) as { type: string; object: T };
      }
    }
  }

  private headers(): Record<string, string> {
    const h: Record<string, string> = { accept: 'application/json', 'user-agent': 'kcp-sync-resource' };
    if (this.token) h.authorization = `Bearer ${this.token()}`;
    return h;
  }

  /**
   * rest closes the idle connections now rather than after keepAliveMs: requests in flight
   * finish on them, the next request connects afresh.
   */
  rest(): void {
    const idle = this.agent;
    this.agent = this.connect();
    idle.close().catch(() => {});
  }

  /** close ends the connection pool. */
  async close(): Promise<void> {
    await this.agent.close();
  }
}

function parseStatus(text: string, code: number): Status {
  try {
    const parsed = JSON.parse(text) as Status;
    if (parsed && typeof parsed === 'object') return parsed;
  } catch {
    /* not JSON */
  }
  return { code, message: text.slice(0, 200) };
}
