// informer.ts lists and watches one collection as client-go's reflector does: a list (every
// object handed over), then a watch from its resourceVersion with bookmarks on (unless asked
// otherwise). A watch that ends or breaks is resumed from the last resourceVersion seen;
// only an expired one (410) lists again. Failures back off exponentially (with jitter) up to
// maxBackoffMs, so an API server that is down is not hammered; the first event after a break
// resets the back-off.
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeClient } from './client.ts';
import { KubeApiError } from './errors.ts';

type Obj = { metadata: { resourceVersion?: string } };

/**
 * Handlers receive each full list (the first and any after an expired watch) and every
 * change between them. With pageSize, a list comes page by page (last: the final page), so
 * that a big collection is never held whole.
 */
export interface Handlers<T> {
  list(items: T[], last: boolean): void | Promise<void>;
  event(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: T): void;
  /** error sees each failed list or watch before its back-off. */
  error?(err: unknown): void;
  /** watching is called each time a watch is open (after a list, and after each resume). */
  watching?(): void;
}

/** InformerOptions narrow the collection and tune the back-off. */
export interface InformerOptions {
  query?: Record<string, string>;
  headers?: Record<string, string>;
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** pageSize lists in pages of this many (limit and continue). */
  pageSize?: number;
  /** retryFirstList keeps retrying the first list (the promise resolves once it succeeds); otherwise its failure rejects. */
  retryFirstList?: boolean;
  /** watchSeconds is how long each watch request lasts, a random length between its bounds (default: client-go's 5 to 10 minutes). */
  watchSeconds?: [number, number];
  /** bookmarks asks the API server for a bookmark on each watch about every minute (default true). */
  bookmarks?: boolean;
}

/**
 * watchTimeout is how long one watch request lasts before it is resumed, at random between
 * bounds: by default 5 to 10 minutes, as client-go's reflector asks.
 */
const watchTimeout = ([min, max]: [number, number] = [300, 600]): string =>
  String(Math.round(min + (max - min) * Math.random()));

/**
 * watchHeaders are the list's headers as a watch needs them: a metadata-only list asks for
 * a PartialObjectMetadataList, its watch for each PartialObjectMetadata (the API server
 * ends a watch asked for the list form at once).
 */
export const watchHeaders = (headers?: Record<string, string>): Record<string, string> | undefined =>
  headers?.accept
    ? {
        ...headers,
        accept: headers.accept.replace('as=PartialObjectMetadataList', 'as=PartialObjectMetadata'),
      }
    : headers;

/** informer resolves once the first list is handled, and follows the collection until signal aborts. */
export async function informer<T extends Obj>(
  client: KubeClient,
  path: string,
  on: Handlers<T>,
  signal: AbortSignal,
  opts: InformerOptions = {},
): Promise<void> {
  const inf = new Informer(client, path, on, signal, opts);
  for (;;) {
    try {
      inf.rv = await inf.list();
      break;
    } catch (err) {
      if (!opts.retryFirstList || signal.aborted) throw err;
      await inf.backoff(err);
    }
  }
  void inf.follow();
}

/** Informer lists a collection (in pages) and follows it, resuming its watch from the last resourceVersion, as client-go's reflector. */
class Informer<T extends Obj> {
  rv: string | undefined;
  private delay: number;
  private readonly min: number;
  private readonly max: number;
  private readonly client: KubeClient;
  private readonly path: string;
  private readonly on: Handlers<T>;
  private readonly signal: AbortSignal;
  private readonly opts: InformerOptions;

  constructor(client: KubeClient, path: string, on: Handlers<T>, signal: AbortSignal, opts: InformerOptions) {
    this.client = client;
    this.path = path;
    this.on = on;
    this.signal = signal;
    this.opts = opts;
    this.min = opts.minBackoffMs ?? 500;
    this.max = opts.maxBackoffMs ?? 30_000;
    this.delay = this.min;
  }

  async backoff(err: unknown): Promise<void> {
    this.on.error?.(err);
    await sleep(this.delay * (0.75 + Math.random() / 2), undefined, { signal: this.signal }).catch(() => {});
    this.delay = Math.min(this.delay * 2, this.max);
  }

  /** list hands every page to on.list and returns the list's resourceVersion. */
  async list(): Promise<string> {
    const { opts } = this;
    let next: string | undefined;
    for (;;) {
      const l = await this.client.call<{
        metadata: { resourceVersion: string; continue?: string };
        items: T[] | null;
      }>('GET', this.path, {
        query: {
          ...opts.query,
          ...(opts.pageSize ? { limit: opts.pageSize } : {}),
          ...(next ? { continue: next } : {}),
        },
        ...(opts.headers ? { headers: opts.headers } : {}),
      });
      next = l.metadata.continue || undefined;
      // A metadata-only list with nothing in it comes back with items: null.
      await this.on.list(l.items ?? [], next === undefined);
      if (next === undefined) return l.metadata.resourceVersion;
    }
  }

  /** follow watches from rv until the signal aborts, listing again when rv expired, backing off after a failure. */
  async follow(): Promise<void> {
    while (!this.signal.aborted) {
      try {
        this.rv ??= await this.list();
        await this.watchOnce(this.rv);
      } catch (err) {
        if (this.signal.aborted) return;
        if (err instanceof KubeApiError && err.code === 410) this.rv = undefined;
        await this.backoff(err);
      }
    }
  }

  /** watchOnce follows one watch request to its end. */
  private async watchOnce(rv: string): Promise<void> {
    const { opts } = this;
    const stream = this.client.watch<T & { code?: number }>(
      this.path,
      {
        ...opts.query,
        resourceVersion: rv,
        ...(opts.bookmarks === false ? {} : { allowWatchBookmarks: 'true' }),
        timeoutSeconds: watchTimeout(opts.watchSeconds),
      },
      this.signal,
      watchHeaders(opts.headers),
    );
    this.on.watching?.();
    const opened = performance.now();
    let events = 0;
    for await (const ev of stream as AsyncIterable<{ type: string; object: T & { code?: number } }>) {
      this.delay = this.min;
      events++;
      if (ev.type === 'ERROR') {
        // An expired resourceVersion (410 Gone) lists again at once; any other error resumes after a back-off.
        if (ev.object.code !== 410) throw new Error(`watch error ${ev.object.code ?? ''}`);
        this.rv = undefined;
        return;
      }
      this.rv = ev.object.metadata.resourceVersion ?? this.rv;
      if (ev.type !== 'BOOKMARK') this.on.event(ev.type as 'ADDED' | 'MODIFIED' | 'DELETED', ev.object);
    }
    // A watch the server ends at once, again and again, is a failure too.
    if (events === 0 && performance.now() - opened < 1_000) throw new Error('watch ended at once');
  }
}
