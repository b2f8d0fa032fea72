// The local event runtime keeps Knative's semantics: retry rules and backoff, dead
// letters, replies fed back to the broker, and ApiServerSource's real event shape.
import { createServer, type Server } from 'node:http';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudEvent, HTTP } from 'cloudevents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObjects, kymaObjects } from '../infra/kcp-setup.ts';
import { Broker } from '../infra/runtime/broker.ts';
import { ApiServerWatch, PingTimer } from '../infra/runtime/sources.ts';
import { cluster, eventually, uniqueName } from './helpers.ts';

type Answer = { code: number; reply?: CloudEvent<unknown> };
type Handler = (event: CloudEvent<unknown>, attempt: number) => Answer | Promise<Answer>;

/** subscriber is a real HTTP server answering per handler; it counts attempts per event id. */
async function subscriber(
  handler: Handler,
): Promise<{ url: string; attempts: Map<string, number>; server: Server }> {
  const attempts = new Map<string, number>();
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const event = HTTP.toEvent({ headers: req.headers, body }) as CloudEvent<unknown>;
      const n = (attempts.get(event.id) ?? 0) + 1;
      attempts.set(event.id, n);
      void Promise.resolve(handler(event, n)).then(({ code, reply }) => {
        if (reply) {
          const msg = HTTP.binary(reply);
          res.writeHead(code, msg.headers as Record<string, string>).end(msg.body as string);
        } else res.writeHead(code).end();
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/`, attempts, server };
}

const servers: Server[] = [];
afterAll(() => servers.forEach((s) => s.close()));

async function brokerWith(
  routes: Record<string, Handler>,
  delivery = { retry: 3, backoffPolicy: 'exponential' as const, backoffDelay: 'PT0.01S' },
) {
  const dir = await mkdtemp(join(tmpdir(), 'broker-'));
  const subs = Object.fromEntries(
    await Promise.all(
      Object.entries(routes).map(async ([type, h]) => {
        const s = await subscriber(h);
        servers.push(s.server);
        return [type, s] as const;
      }),
    ),
  );
  const broker = new Broker({
    triggers: Object.keys(routes).map((type) => ({ name: type, attributes: { type }, subscriber: type })),
    delivery,
    resolve: (svc) => (subs[svc] ? [subs[svc].url] : []),
    deadLetterFile: join(dir, 'dead.log'),
  });
  return { broker, subs, dead: join(dir, 'dead.log') };
}

const ev = (type: string) => new CloudEvent({ type, source: '/test', data: { x: 1 } });

describe('local broker', () => {
  it('retries 5xx, 404, 408, 409 and 429 until success', async () => {
    const codes = [500, 404, 429, 409];
    const { broker, subs } = await brokerWith(
      { a: (_, n) => ({ code: n <= codes.length ? codes[n - 1]! : 200 }) },
      { retry: 5, backoffPolicy: 'exponential', backoffDelay: 'PT0.01S' },
    );
    const e = ev('a');
    broker.publish(e);
    await eventually(async () => expect(subs.a!.attempts.get(e.id)).toBe(5));
    await broker.idle();
    expect(broker.stats).toMatchObject({ delivered: 1, retries: 4, deadLettered: 0 });
  });

  it('dead-letters after the retries, and at once on a non-retryable 400', async () => {
    const { broker, subs, dead } = await brokerWith({
      down: () => ({ code: 503 }),
      bad: () => ({ code: 400 }),
    });
    const down = ev('down');
    const bad = ev('bad');
    broker.publish(down);
    broker.publish(bad);
    await eventually(async () => expect(broker.stats.deadLettered).toBe(2));
    expect(subs.down!.attempts.get(down.id)).toBe(4); // 1 + retry 3
    expect(subs.bad!.attempts.get(bad.id)).toBe(1);
    const lines = (await readFile(dead, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.event.id).sort()).toEqual([down.id, bad.id].sort());
    expect(lines.find((l) => l.event.id === bad.id).error).toMatch(/HTTP 400/);
  });

  it('feeds reply events back into the broker', async () => {
    const { broker, subs } = await brokerWith({
      first: (e) => ({
        code: 200,
        reply: new CloudEvent({ type: 'second', source: '/first', subject: e.id, data: { from: e.id } }),
      }),
      second: () => ({ code: 202 }),
    });
    const e = ev('first');
    broker.publish(e);
    await eventually(async () => expect(subs.second!.attempts.size).toBe(1));
    expect(broker.stats.replies).toBe(1);
  });

  it("spreads a subscriber's deliveries over its replicas, the least busy first", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'broker-'));
    // Replica a answers slowly: while it is busy, b takes the next requests.
    const a = await subscriber(async () => {
      await new Promise((r) => setTimeout(r, 200));
      return { code: 200 };
    });
    const b = await subscriber(() => ({ code: 200 }));
    servers.push(a.server, b.server);
    const broker = new Broker({
      triggers: [{ name: 't', subscriber: 's' }],
      delivery: {},
      resolve: () => [a.url, b.url],
      deadLetterFile: join(dir, 'd'),
    });
    const events = Array.from({ length: 10 }, () => ev('x'));
    for (const e of events) {
      broker.publish(e);
      await new Promise((r) => setTimeout(r, 25));
    }
    await broker.idle();
    const at = (sub: typeof a) => events.filter((e) => sub.attempts.get(e.id) === 1).length;
    expect(at(a) + at(b)).toBe(10);
    expect(at(a)).toBeGreaterThan(0);
    expect(at(b)).toBeGreaterThan(at(a));
    expect([...broker.byReplica.values()].reduce((x, y) => x + y, 0)).toBe(10);
  });

  it('as a channel-based broker, answers a post only once the pipeline behind it has run; async mode at once', async () => {
    for (const mode of ['channel', 'async'] as const) {
      const dir = await mkdtemp(join(tmpdir(), 'broker-'));
      const order: string[] = [];
      // a replies with b; b's subscriber is slow.
      const a = await subscriber((e) => ({
        code: 200,
        reply: new CloudEvent({ type: 'b', source: '/a', data: { of: e.id } }),
      }));
      const b = await subscriber(async () => {
        await new Promise((r) => setTimeout(r, 150));
        order.push('b delivered');
        return { code: 200 };
      });
      servers.push(a.server, b.server);
      const broker = new Broker({
        triggers: [
          { name: 'a', attributes: { type: 'a' }, subscriber: 'a' },
          { name: 'b', attributes: { type: 'b' }, subscriber: 'b' },
        ],
        delivery: {},
        resolve: (svc) => [svc === 'a' ? a.url : b.url],
        deadLetterFile: join(dir, 'd'),
        mode,
      });
      await broker.listen();
      const msg = HTTP.binary(ev('a'));
      const res = await fetch(broker.url, {
        method: 'POST',
        headers: msg.headers as Record<string, string>,
        body: msg.body as string,
      });
      order.push(`answered ${res.status}`);
      await broker.idle();
      await broker.close();
      expect(order, mode).toEqual(
        mode === 'channel' ? ['b delivered', 'answered 202'] : ['answered 202', 'b delivered'],
      );
    }
  });

  it('duplicates and delays deliveries in chaos mode', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'broker-'));
    const s = await subscriber(() => ({ code: 200 }));
    servers.push(s.server);
    const broker = new Broker({
      triggers: [{ name: 't', subscriber: 's' }],
      delivery: {},
      resolve: () => [s.url],
      deadLetterFile: join(dir, 'd'),
      chaos: { duplicate: 1, maxDelayMs: 20 },
    });
    const e = ev('x');
    broker.publish(e);
    await eventually(async () => expect(s.attempts.get(e.id)).toBe(2));
  });
});

describe('local sources', () => {
  let ns: string;
  beforeAll(async () => {
    ns = uniqueName('src');
    await applyObjects(await cluster('kcp'), [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    ]);
  });

  it('ApiServerSource emits Reference-mode events with the real attributes, filtered by label', async () => {
    const kcp = await cluster('kcp');
    const got: CloudEvent<unknown>[] = [];
    const watches = [
      new ApiServerWatch(
        kcp,
        { apiVersion: 'operator.kyma-project.io/v1beta2', kind: 'Kyma' },
        ns,
        (e) => void got.push(e),
      ),
      new ApiServerWatch(
        kcp,
        { apiVersion: 'v1', kind: 'Secret', labelSelector: 'operator.kyma-project.io/kyma-name' },
        ns,
        (e) => void got.push(e),
      ),
    ];
    for (const w of watches) await w.start();
    try {
      await applyObjects(kcp, [
        ...kymaObjects('k1', 'irrelevant', ns),
        { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'unlabelled', namespace: ns } },
      ]);
      await eventually(async () =>
        expect(got.map((e) => `${e.type} ${(e.data as { kind: string }).kind}`).sort()).toEqual([
          'dev.knative.apiserver.ref.add Kyma',
          'dev.knative.apiserver.ref.add Secret',
        ]),
      );
      const kyma = got.find((e) => (e.data as { kind: string }).kind === 'Kyma')!;
      expect(kyma.source).toBe(kcp.client.server);
      expect(kyma.subject).toBe(`/apis/operator.kyma-project.io/v1beta2/namespaces/${ns}/kymas/k1`);
      expect(kyma.data).toEqual({
        kind: 'Kyma',
        namespace: ns,
        name: 'k1',
        apiVersion: 'operator.kyma-project.io/v1beta2',
      });
      expect(kyma.toJSON()).toMatchObject({
        kind: 'Kyma',
        name: 'k1',
        namespace: ns,
        apiversion: 'operator.kyma-project.io/v1beta2',
      });
      expect(JSON.stringify(got)).not.toContain('irrelevant'); // Reference mode: no content
      await kcp.client.call('DELETE', `/apis/operator.kyma-project.io/v1beta2/namespaces/${ns}/kymas/k1`);
      await eventually(async () =>
        expect(got.some((e) => e.type === 'dev.knative.apiserver.ref.delete')).toBe(true),
      );
    } finally {
      for (const w of watches) w.stop();
    }
  });

  it('ApiServerSource, as the real adapter, sends nothing for objects that exist when it starts or change while it is down', async () => {
    const kcp = await cluster('kcp');
    const got: CloudEvent<unknown>[] = [];
    const source = () =>
      new ApiServerWatch(
        kcp,
        { apiVersion: 'operator.kyma-project.io/v1beta2', kind: 'Kyma' },
        ns,
        (e) => void got.push(e),
      );
    await applyObjects(kcp, kymaObjects('before', 'irrelevant', ns).slice(0, 1));
    let w = source();
    await w.start();
    try {
      await applyObjects(kcp, kymaObjects('after', 'irrelevant', ns).slice(0, 1));
      await eventually(async () =>
        expect(got.map((e) => `${e.type} ${(e.data as { name: string }).name}`)).toEqual([
          'dev.knative.apiserver.ref.add after',
        ]),
      );
      // Down (the adapter restarts): a change meanwhile is never sent; what comes after is.
      w.stop();
      await kcp.client.call('DELETE', `/apis/operator.kyma-project.io/v1beta2/namespaces/${ns}/kymas/before`);
      w = source();
      await w.start();
      await applyObjects(kcp, kymaObjects('later', 'irrelevant', ns).slice(0, 1));
      await eventually(async () =>
        expect(got.map((e) => (e.data as { name: string }).name)).toContain('later'),
      );
      expect(got.map((e) => `${e.type} ${(e.data as { name: string }).name}`)).toEqual([
        'dev.knative.apiserver.ref.add after',
        'dev.knative.apiserver.ref.add later',
      ]);
    } finally {
      w.stop();
    }
  });

  it('PingSource ticks at the configured interval', async () => {
    const got: CloudEvent<unknown>[] = [];
    const t = new PingTimer({
      source: '/apis/v1/namespaces/x/pingsources/p',
      intervalMs: 50,
      data: '{"reason":"resync"}',
      contentType: 'application/json',
      emit: (e) => void got.push(e),
    });
    t.start();
    try {
      await eventually(async () => expect(got.length).toBeGreaterThanOrEqual(2));
    } finally {
      t.stop();
    }
    expect(got[0]).toMatchObject({
      type: 'dev.knative.sources.ping',
      source: '/apis/v1/namespaces/x/pingsources/p',
      data: { reason: 'resync' },
    });
  });
});
