// net.ts: small network helpers for the local infrastructure.
import { createServer } from 'node:net';
import { request } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';

/** freePort asks the kernel for a free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** TlsClient is the TLS material for talking to a local API server. */
export interface TlsClient { ca: string; cert?: string; key?: string }

/** httpsGet performs one GET and resolves with status code and body. */
export function httpsGet(url: string, tls: TlsClient, timeoutMs = 2000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ...tls, timeout: timeoutMs, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** waitFor polls check (every everyMs) until it returns true, failing after timeoutMs with the last error. */
export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, isDead?: () => string | undefined, everyMs = 200): Promise<void> {
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
