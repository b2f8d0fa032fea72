// The client's watch decoding, against a local HTTP server that splits a UTF-8 character
// across two chunks (no API server can be made to cut its stream at a given byte), and the
// protocol it speaks, against a TLS server that offers HTTP/2 and HTTP/1.1 (an API server
// does not say which one a request came over).
import { createServer } from 'node:http';
import { createSecureServer } from 'node:http2';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeCa, signCert } from '../../infra/pki.ts';
import { KubeClient } from './client.ts';

describe('KubeClient.watch', () => {
  it('decodes a UTF-8 character split across two chunks', async () => {
    const line = Buffer.from(
      `${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'x', annotations: { note: 'Grüße €' } } } })}\n`,
    );
    const at = line.indexOf(Buffer.from('€')) + 1; // inside the three bytes of "€"
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(line.subarray(0, at));
      setTimeout(() => res.end(line.subarray(at)), 50);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as { port: number };
    const client = KubeClient.create({ server: `http://127.0.0.1:${port}` }, { name: 'test' });
    try {
      const seen: unknown[] = [];
      for await (const ev of client.watch(
        '/api/v1/namespaces/a/configmaps',
        {},
        new AbortController().signal,
      ))
        seen.push(ev.object);
      expect(seen).toEqual([{ metadata: { name: 'x', annotations: { note: 'Grüße €' } } }]);
    } finally {
      await client.close();
      server.close();
    }
  });
});

describe('KubeClient protocols', () => {
  it('speaks HTTP/2 to a server that offers both, as an API server does, and HTTP/1.1 only when told to', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'client-alpn-'));
    const ca = await makeCa(dir, 'ca');
    const { pem } = await signCert(dir, 'server', '/CN=127.0.0.1', { san: 'IP:127.0.0.1' });
    const versions: string[] = [];
    const server = createSecureServer({ ...pem, allowHTTP1: true }, (req, res) => {
      versions.push(req.httpVersion);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      for (const opts of [{}, { http2: true }, { http1: true }]) {
        const client = KubeClient.create(
          { server: url, ca: Buffer.from(ca.cert) },
          { name: 'test', ...opts },
        );
        try {
          await client.call('GET', '/api/v1/namespaces/a/configmaps/x');
        } finally {
          await client.close();
        }
      }
      expect(versions).toEqual(['2.0', '2.0', '1.1']);
    } finally {
      server.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
