// The informer as client-go's reflector: a list (in pages when asked), a watch from its
// resourceVersion, resumed from the last one seen after a break, a relist only when the
// server says the version expired (410).
import { describe, expect, it } from 'vitest';
import type { KubeClient } from './client.ts';
import { informer, watchHeaders } from './informer.ts';
import { METADATA_ONLY } from '../cluster/resolve.ts';

type Obj = { metadata: { name: string; resourceVersion: string } };
const obj = (name: string, rv: string): Obj => ({ metadata: { name, resourceVersion: rv } });

/** fakeClient serves pages of two, and each watch from the script (one list of events per watch opened). */
function fakeClient(all: Obj[], watches: { type: string; object: Obj & { code?: number } }[][]) {
  const calls: { path: string; query: Record<string, unknown> }[] = [];
  const watched: (string | undefined)[] = [];
  const timeouts: number[] = [];
  const bookmarks: (string | undefined)[] = [];
  const client = {
    async call(_m: string, path: string, opts: { query?: Record<string, unknown> } = {}) {
      const q = opts.query ?? {};
      calls.push({ path, query: q });
      const from = Number(q.continue ?? 0);
      const size = Number(q.limit ?? all.length);
      // An empty metadata-only list comes back with items: null, as the API server sends it.
      const items = all.length === 0 ? null : all.slice(from, from + size);
      const more = from + size < all.length;
      return {
        metadata: { resourceVersion: '100', ...(more ? { continue: String(from + size) } : {}) },
        items,
      };
    },
    async *watch(_p: string, query: Record<string, string | undefined>, signal: AbortSignal) {
      watched.push(query.resourceVersion);
      timeouts.push(Number(query.timeoutSeconds));
      bookmarks.push(query.allowWatchBookmarks);
      const script = watches.shift();
      if (!script) {
        await new Promise((r) => signal.addEventListener('abort', r));
        return;
      }
      for (const e of script) yield e;
    },
  };
  return { client: client as unknown as KubeClient, calls, watched, timeouts, bookmarks };
}

describe('informer', () => {
  it('lists in pages, resumes a watch that ends from the last version, relists only on 410', async () => {
    const { client, calls, watched } = fakeClient(
      [obj('a', '1'), obj('b', '2'), obj('c', '3')],
      [
        [
          { type: 'ADDED', object: obj('d', '101') },
          { type: 'BOOKMARK', object: obj('', '105') },
        ],
        [{ type: 'ERROR', object: { ...obj('', ''), code: 410 } }],
      ],
    );
    const pages: [string[], boolean][] = [];
    const events: string[] = [];
    const abort = new AbortController();
    await informer<Obj>(
      client,
      '/api/v1/configmaps',
      {
        list: (items, last) => void pages.push([items.map((i) => i.metadata.name), last]),
        event: (type, o) => void events.push(`${type} ${o.metadata.name}`),
      },
      abort.signal,
      { pageSize: 2 },
    );
    await new Promise((r) => setTimeout(r, 100));
    abort.abort();
    // The first list in two pages; the events; then the same list again after the 410.
    expect(pages).toEqual([
      [['a', 'b'], false],
      [['c'], true],
      [['a', 'b'], false],
      [['c'], true],
    ]);
    expect(events).toEqual(['ADDED d']);
    // Watched from the list's version, resumed from the bookmark's, then from the relist's.
    expect(watched).toEqual(['100', '105', '100']);
    expect(calls[1]!.query).toMatchObject({ limit: 2, continue: '2' });
  });

  it('hands over an empty list (items: null) as no items, and asks each watch for a length between its bounds', async () => {
    const { client, timeouts } = fakeClient([], [[], [], []]);
    const lists: number[] = [];
    const abort = new AbortController();
    await informer<Obj>(
      client,
      '/api/v1/namespaces',
      { list: (items) => void lists.push(items.length), event: () => {} },
      abort.signal,
      { watchSeconds: [1800, 3600], minBackoffMs: 1 },
    );
    await new Promise((r) => setTimeout(r, 50));
    abort.abort();
    expect(lists).toEqual([0]);
    expect(timeouts.length).toBeGreaterThan(0);
    for (const t of timeouts) expect(t >= 1800 && t <= 3600, String(t)).toBe(true);
  });

  it('asks for bookmarks unless told not to', async () => {
    for (const [opts, asked] of [
      [{}, 'true'],
      [{ bookmarks: false }, undefined],
    ] as const) {
      const { client, bookmarks } = fakeClient([], [[]]);
      const abort = new AbortController();
      await informer<Obj>(client, '/api/v1/configmaps', { list: () => {}, event: () => {} }, abort.signal, {
        ...opts,
        minBackoffMs: 1,
      });
      await new Promise((r) => setTimeout(r, 20));
      abort.abort();
      expect(bookmarks.length).toBeGreaterThan(0);
      for (const b of bookmarks) expect(b).toBe(asked);
    }
  });

  it('watches a metadata-only list as metadata-only objects (a watch asked for the list form ends at once)', () => {
    expect(watchHeaders(METADATA_ONLY)).toEqual({
      accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
    });
    expect(watchHeaders(undefined)).toBeUndefined();
  });
});
