import { createServer } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CloudEvent, HTTP } from 'cloudevents';
import { makeCa, signCert } from '../../infra/pki.ts';
import { sinkTransport } from './setup.ts';

const servers: ReturnType<typeof createServer>[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** listen starts a server that records what it received and answers status. */
async function listen(
  status: number,
): Promise<{ url: string; seen: { url: string; host: string; type: string }[] }> {
  const seen: { url: string; host: string; type: string }[] = [];
  const server = createServer((req, res) => {
    seen.push({
      url: req.url ?? '',
      host: req.headers.host ?? '',
      type: String(req.headers['ce-type'] ?? ''),
    });
    res.writeHead(status).end();
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen };
}

const message = () => HTTP.binary(new CloudEvent({ type: 't.one', source: '/s', data: { a: 1 } }));

describe('sinkTransport', () => {
  it('posts to the sink and fails on a non-2xx answer', async () => {
    const ok = await listen(202);
    expect(await sinkTransport(`${ok.url}/ns/broker`, {})(message())).toBe(202);
    expect(ok.seen).toEqual([{ url: '/ns/broker', host: ok.url.slice('http://'.length), type: 't.one' }]);
    const bad = await listen(503);
    await expect(sinkTransport(bad.url, {})(message())).rejects.toThrow(/answered 503/);
  });

  it('goes through HTTP_PROXY when it is set (a cluster name the host cannot resolve), but not for NO_PROXY hosts', async () => {
    const proxy = await listen(202);
    const sink = 'http://broker-ingress.knative-eventing.svc.cluster.local/ns/broker';
    expect(await sinkTransport(sink, { HTTP_PROXY: proxy.url })(message())).toBe(202);
    expect(proxy.seen).toEqual([
      { url: sink, host: 'broker-ingress.knative-eventing.svc.cluster.local', type: 't.one' },
    ]);
    const direct = await listen(202);
    await sinkTransport(`${direct.url}/x`, { HTTP_PROXY: proxy.url, NO_PROXY: '127.0.0.1' })(message());
    expect(direct.seen).toHaveLength(1);
    expect(proxy.seen).toHaveLength(1);
  });

  it('speaks TLS to an https sink, and refuses one whose certificate it does not trust', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sink-tls-'));
    try {
      await makeCa(dir, 'ca');
      const { pem } = await signCert(dir, 'sink', '/CN=127.0.0.1', { san: 'IP:127.0.0.1' });
      let posts = 0;
      const server = createTlsServer(pem, (_req, res) => {
        posts++;
        res.writeHead(202).end();
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const port = (server.address() as { port: number }).port;
      try {
        // The CA is not one the process trusts: the handshake fails before anything is posted.
        await expect(sinkTransport(`https://127.0.0.1:${port}/ns/broker`, {})(message())).rejects.toThrow(
          /certificate/,
        );
        expect(posts).toBe(0);
      } finally {
        server.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
