// The client's watch decoding, against a local HTTP server that splits a UTF-8 character
// across two chunks (no API server can be made to cut its stream at a given byte).
import { createServer } from 'node:http';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
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
