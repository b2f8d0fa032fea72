// net.ts: small network helpers for the local infrastructure.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { request } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * freePort finds a free TCP port on 127.0.0.1 below the kernel's ephemeral range. A port
 * the kernel hands out (listen on 0) is drawn from the range every outgoing connection
 * takes its local port from, so under load a connection could take it before the process
 * it was meant for binds it; below the range only another freePort caller can, and the
 * random pick makes that rare (callers that start a process still retry on a failed bind).
 */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  for (;;) {
    const port = FIRST_PORT + Math.floor(Math.random() * (low - FIRST_PORT));
    if (!FETCH_BLOCKED.has(port) && (await bindable(port))) return port;
  }
}

/**
 * FETCH_BLOCKED are the ports at or above FIRST_PORT that fetch refuses ("bad port", the
 * Fetch standard's list): a test or the benchmark that fetches from a process on one fails.
 */
export const FETCH_BLOCKED = new Set([10_080]);

/**
 * startOnFreePort starts on a port found free, and on another if the start fails and
 * retry says the port may be why: between the check and the bind another process may take it.
 */
export async function startOnFreePort<T>(
  start: (port: number) => Promise<T>,
  retry: (err: unknown) => boolean = () => true,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(await freePort());
    } catch (err) {
      if (attempt >= 3 || !retry(err)) throw err;
    }
  }
}

/**
 * metricsPortEnv is an envFor (runtime options) that gives each function process a
 * Prometheus port of its own, found free as the process starts (one found long before
 * could be taken meanwhile, and its scrapes answered by another process), and records it
 * in ports as "<service>/<replica>" for the scrapers. A port taken between the two fails
 * the start (lib/telemetry-sdk.ts), which the runtime retries with another.
 */
export function metricsPortEnv(
  ports: Record<string, number>,
): (service: string, replica: number) => Promise<Record<string, string>> {
  return async (service, replica) => {
    const port = await freePort();
    ports[`${service}/${replica}`] = port;
    return { OTEL_EXPORTER_PROMETHEUS_HOST: '127.0.0.1', OTEL_EXPORTER_PROMETHEUS_PORT: String(port) };
  };
}

const FIRST_PORT = 10_000;
let ephemeral: number | undefined;
function ephemeralLow(): number {
  if (ephemeral === undefined) {
    try {
      ephemeral = Number(
        readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0],
      );
    } catch {
      ephemeral = 32_768; // Linux's default; other systems: the IANA range starts higher
    }
    if (!(ephemeral > FIRST_PORT + 1_000)) ephemeral = 32_768;
  }
  return ephemeral;
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', () => resolve(false));
    srv.listen({ port, host: '127.0.0.1', exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** TlsClient is the TLS material for talking to a local API server. */
export interface TlsClient {
  ca: string;
  cert?: string;
  key?: string;
}

/** httpsGet performs one GET and resolves with status code and body. */
export function httpsGet(
  url: string,
  tls: TlsClient,
  timeoutMs = 2000,
): Promise<{ status: number; body: string }> {
  return httpsRequest('GET', url, tls, undefined, timeoutMs);
}

/** httpsRequest performs one request (a JSON body, or a patch with its content type) and resolves with status code and body. */
export function httpsRequest(
  method: string,
  url: string,
  tls: TlsClient,
  body?: { json: unknown; contentType?: string },
  timeoutMs = 2000,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers = body ? { 'content-type': body.contentType ?? 'application/json' } : undefined;
    const req = request(url, { ...tls, method, headers, timeout: timeoutMs, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('timeout', () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body ? JSON.stringify(body.json) : undefined);
  });
}

/** waitFor polls check (every everyMs) until it returns true, failing after timeoutMs with the last error. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  isDead?: () => string | undefined,
  everyMs = 200,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    const dead = isDead?.();
    if (dead) throw new Error(`${what}: ${dead}`);
    try {
      if (await check()) return;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not ready after ${timeoutMs} ms`, { cause: last });
    await sleep(everyMs);
  }
}
