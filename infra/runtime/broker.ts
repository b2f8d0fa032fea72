// broker.ts plays Knative's Broker and Triggers: an HTTP ingress, fan-out to every
// matching trigger, delivery with Knative's retry rules (retry on network errors,
// 404, 408, 409, 429 and 5xx, exponential or linear backoff), dead letters to a log
// file, and reply events fed back into the broker. A chaos mode duplicates, delays and
// so reorders deliveries, for reliability tests.
//
// Mode "channel" (the default) is the semantics of Knative's default Broker class,
// MTChannelBasedBroker on an InMemoryChannel: the ingress answers only once every
// Trigger's delivery has finished, retries and dead letter included (eventing
// pkg/channel/fanout/fanout_event_handler.go, synchronous unless the channel carries the
// async-handler annotation, which a Broker's channel template cannot set), and a
// subscriber's reply is sent to the ingress by the filter, which waits for that too: a
// post to the broker holds its sender for the whole pipeline behind the event. Mode
// "async" answers at once (a broker backed by a log, such as Kafka's).
import { appendFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { CloudEvent, HTTP } from 'cloudevents';
import { request } from 'undici';
import { triggerMatches, type Attributes } from './filters.ts';
import { isoDurationMs, type Delivery, type Trigger } from './knative.ts';

/** Chaos perturbs delivery: duplicate with a probability, delay up to maxDelayMs. */
export interface Chaos {
  duplicate: number;
  maxDelayMs: number;
  random?: () => number;
}

/** BrokerStats counts what happened to deliveries. */
export interface BrokerStats {
  received: number;
  delivered: number;
  retries: number;
  deadLettered: number;
  replies: number;
}

/** Observed is one event the broker received, for tests (identity and attributes). */
export type Observed = { attributes: Attributes; data: unknown };

const retryable = (code: number) =>
  code === 0 || code === 404 || code === 408 || code === 409 || code === 429 || code >= 500;

/** Broker is the local stand-in for a Knative Broker. */
export class Broker {
  readonly stats: BrokerStats = { received: 0, delivered: 0, retries: 0, deadLettered: 0, replies: 0 };
  /** byObject counts delivery attempts and their non-2xx answers per object the event names (data namespace/name). */
  readonly byObject = new Map<string, { attempts: number; failures: number }>();
  /** failedBy names, per object, each non-2xx answer: the subscriber, the event type and the code (a test's message). */
  readonly failedBy = new Map<string, string[]>();
  readonly observed: Observed[] = [];
  /** observe keeps every received event in `observed` (tests). */
  observe = false;
  private server?: Server;
  private readonly triggers: Trigger[];
  private readonly delivery: Delivery;
  private readonly resolve: (service: string) => string[];
  /** byReplica counts the requests each subscriber URL received. */
  readonly byReplica = new Map<string, number>();
  private readonly busy = new Map<string, number>();
  private turn = 0;
  private readonly deadLetterFile: string;
  private readonly chaos: Chaos | undefined;
  private inflight = 0;
  private closed = false;
  private readonly concurrency: Record<string, number>;
  /** mode: "channel" holds each post until its pipeline is done; "async" answers at once. */
  readonly mode: 'channel' | 'async';
  private readonly limits = new Map<string, Semaphore>();
  private readonly timeouts: Record<string, number>;
  url = '';

  constructor(opts: {
    /** resolve gives a subscriber's replica URLs; each request goes to the least busy (round robin among equals), as Serving's activator routes. */
    triggers: Trigger[];
    delivery: Delivery;
    resolve: (service: string) => string[];
    deadLetterFile: string;
    chaos?: Chaos;
    /** concurrency caps requests in flight per replica of a subscriber, as containerConcurrency and the queue-proxy do. */
    concurrency?: Record<string, number>;
    /** timeouts bound one request per subscriber, as the Service's timeoutSeconds does (default 300 s). */
    timeouts?: Record<string, number>;
    mode?: 'channel' | 'async';
  }) {
    this.mode = opts.mode ?? 'channel';
    this.timeouts = opts.timeouts ?? {};
    this.concurrency = opts.concurrency ?? {};
    this.triggers = opts.triggers;
    this.delivery = opts.delivery;
    this.resolve = opts.resolve;
    this.deadLetterFile = opts.deadLetterFile;
    this.chaos = opts.chaos;
  }

  /** listen starts the ingress on a loopback port. */
  async listen(): Promise<string> {
    this.server = createServer((req, res) => {
      void readBody(req).then((body) => {
        let event: CloudEvent<unknown>;
        try {
          event = HTTP.toEvent({ headers: req.headers, body }) as CloudEvent<unknown>;
        } catch (err) {
          res.writeHead(400).end(err instanceof Error ? err.message : 'not a CloudEvent');
          return;
        }
        const done = this.publish(event);
        if (this.mode === 'async') res.writeHead(202).end();
        else void done.then(() => res.writeHead(202).end());
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}/`;
    return this.url;
  }

  /**
   * publish routes an event to every matching trigger; the promise settles when every
   * delivery (retries, dead letter, and the pipeline behind a reply) has finished.
   */
  publish(event: CloudEvent<unknown>): Promise<void> {
    this.stats.received++;
    const attributes = attributesOf(event);
    if (this.observe) this.observed.push({ attributes, data: event.data });
    const deliveries: Promise<void>[] = [];
    for (const t of this.triggers) {
      if (!triggerMatches(t, attributes)) continue;
      const copies = this.chaos && (this.chaos.random ?? Math.random)() < this.chaos.duplicate ? 2 : 1;
      for (let i = 0; i < copies; i++) deliveries.push(this.deliver(t, event));
    }
    return Promise.all(deliveries).then(() => undefined);
  }

  /** pending is the number of deliveries in flight (including retries and backoff). */
  get pending(): number {
    return this.inflight;
  }

  /**
   * idle resolves when no delivery has been in flight for quietMs: a function that answered
   * may post its fan-out a moment later (pipeline/fanout.ts).
   */
  async idle(timeoutMs = 30_000, quietMs = 150): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let quietSince = this.inflight === 0 ? Date.now() : Infinity;
    while (Date.now() < deadline) {
      if (this.inflight > 0) quietSince = Infinity;
      else if (quietSince === Infinity) quietSince = Date.now();
      else if (Date.now() - quietSince >= quietMs) return;
      await sleep(20);
    }
  }

  private async deliver(t: Trigger, event: CloudEvent<unknown>): Promise<void> {
    this.inflight++;
    try {
      if (this.chaos) await sleep((this.chaos.random ?? Math.random)() * this.chaos.maxDelayMs);
      const delivery = { ...this.delivery, ...t.delivery };
      const retries = delivery.retry ?? 0;
      const base = delivery.backoffDelay ? isoDurationMs(delivery.backoffDelay) : 200;
      let last = '';
      for (let attempt = 0; attempt <= retries && !this.closed; attempt++) {
        if (attempt > 0) {
          this.stats.retries++;
          await sleep(delivery.backoffPolicy === 'linear' ? base * attempt : base * 2 ** (attempt - 1));
        }
        const url = this.pick(this.resolve(t.subscriber));
        const limit = url ? this.limitOf(t.subscriber, url) : undefined;
        if (url) {
          this.busy.set(url, (this.busy.get(url) ?? 0) + 1);
          this.byReplica.set(url, (this.byReplica.get(url) ?? 0) + 1);
        }
        await limit?.acquire();
        const { code, reply, error } = await (
          url
            ? send(url, event, this.timeouts[t.subscriber] ?? 300_000)
            : Promise.resolve({ code: 0, reply: undefined, error: `no subscriber ${t.subscriber}` })
        ).finally(() => {
          limit?.release();
          if (url) this.busy.set(url, this.busy.get(url)! - 1);
        });
        this.count(event, code, t.subscriber);
        if (code >= 200 && code < 300) {
          this.stats.delivered++;
          if (reply) {
            this.stats.replies++;
            const next = this.publish(reply);
            if (this.mode === 'channel') await next;
          }
          return;
        }
        last = error ?? `HTTP ${code}`;
        if (!retryable(code)) break;
      }
      if (this.closed) return;
      this.stats.deadLettered++;
      await appendFile(
        this.deadLetterFile,
        JSON.stringify({
          time: new Date().toISOString(),
          trigger: t.name,
          subscriber: t.subscriber,
          error: last,
          event: { id: event.id, type: event.type, source: event.source, subject: event.subject },
        }) + '\n',
      );
    } finally {
      this.inflight--;
    }
  }

  /** pick chooses the replica with the fewest requests in flight, taking turns among equals. */
  private pick(urls: string[]): string | undefined {
    if (urls.length <= 1) return urls[0];
    this.turn = (this.turn + 1) % urls.length;
    let best: string | undefined;
    for (let i = 0; i < urls.length; i++) {
      const u = urls[(this.turn + i) % urls.length]!;
      if (best === undefined || (this.busy.get(u) ?? 0) < (this.busy.get(best) ?? 0)) best = u;
    }
    return best;
  }

  private limitOf(service: string, url: string): Semaphore | undefined {
    const n = this.concurrency[service] ?? 0;
    if (n <= 0) return undefined;
    let l = this.limits.get(url);
    if (!l) this.limits.set(url, (l = new Semaphore(n)));
    return l;
  }

  private count(event: CloudEvent<unknown>, code: number, subscriber: string): void {
    const data = event.data as { namespace?: unknown; name?: unknown } | undefined;
    if (typeof data?.name !== 'string') return;
    const key = `${String(data.namespace ?? '')}/${data.name}`;
    const c = this.byObject.get(key) ?? { attempts: 0, failures: 0 };
    c.attempts++;
    if (code < 200 || code >= 300) {
      c.failures++;
      this.failedBy.set(key, [...(this.failedBy.get(key) ?? []), `${subscriber} ${event.type} ${code}`]);
    }
    this.byObject.set(key, c);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

/** Semaphore admits at most n holders; others wait in order. */
class Semaphore {
  private free: number;
  private readonly waiting: (() => void)[] = [];
  constructor(n: number) {
    this.free = n;
  }
  acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((r) => this.waiting.push(r));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

/** attributesOf flattens an event's context attributes and extensions to strings. */
export function attributesOf(event: CloudEvent<unknown>): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(event.toJSON())) {
    if (k !== 'data' && k !== 'data_base64' && v !== undefined && v !== null) out[k] = String(v);
  }
  return out;
}

async function send(
  url: string,
  event: CloudEvent<unknown>,
  timeoutMs: number,
): Promise<{ code: number; reply?: CloudEvent<unknown>; error?: string }> {
  const msg = HTTP.binary(event);
  try {
    const res = await request(url, {
      method: 'POST',
      headers: msg.headers as Record<string, string>,
      body: msg.body as string,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const body = await res.body.text();
    const headers = res.headers as Record<string, string>;
    let reply: CloudEvent<unknown> | undefined;
    if (
      res.statusCode >= 200 &&
      res.statusCode < 300 &&
      (headers['ce-type'] || headers['content-type']?.startsWith('application/cloudevents'))
    ) {
      reply = HTTP.toEvent({ headers, body }) as CloudEvent<unknown>;
    }
    return {
      code: res.statusCode,
      reply,
      error: res.statusCode >= 300 ? `HTTP ${res.statusCode}: ${body.slice(0, 200)}` : undefined,
    };
  } catch (err) {
    return { code: 0, error: err instanceof Error ? err.message : String(err) };
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => resolve(body));
  });
}
