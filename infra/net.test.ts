import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { FETCH_BLOCKED, freePort } from './net.ts';

describe('freePort', () => {
  it('picks a port below the ephemeral range, where no outgoing connection takes its local port, and it can be bound', async () => {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(low);
    }
    const srv = createServer();
    await new Promise<void>((resolve, reject) =>
      srv.once('error', reject).listen(ports[0], '127.0.0.1', resolve),
    );
    await new Promise((r) => srv.close(r));
  });

  it("never picks a port fetch refuses (the Fetch standard's bad ports)", async () => {
    expect(FETCH_BLOCKED.has(10_080)).toBe(true);
    await expect(fetch('http://127.0.0.1:10080/')).rejects.toThrow();
    const original = Math.random;
    // The first pick lands on 10080, the next one elsewhere.
    let calls = 0;
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    Math.random = () => (calls++ === 0 ? (10_080 - 10_000 + 0.5) / (low - 10_000) : original());
    try {
      const port = await freePort();
      expect(calls).toBeGreaterThan(1);
      expect(port).not.toBe(10_080);
    } finally {
      Math.random = original;
    }
  });

  it('skips a port that is in use', async () => {
    // Hold many ports of the range; none of them may be returned while held.
    const held = await Promise.all(
      Array.from({ length: 200 }, async () => {
        const srv = createServer();
        const port = await freePort();
        await new Promise<void>((resolve) =>
          srv.once('error', () => resolve()).listen(port, '127.0.0.1', resolve),
        );
        return srv;
      }),
    );
    const taken = new Set(held.filter((s) => s.listening).map((s) => (s.address() as { port: number }).port));
    for (let i = 0; i < 200; i++) expect(taken.has(await freePort())).toBe(false);
    await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
  });
});
