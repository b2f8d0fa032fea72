// informer.ts lists and watches one collection of the KCP as client-go's reflector does:
// a list (every object handed over), then a watch from its resourceVersion, resumed
// from the last one seen (bookmarks keep it fresh); an expired or failed watch lists again.
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeClient } from '../../lib/kube/client.ts';

type Obj = { metadata: { resourceVersion?: string } };

/** Handlers receive each full list (the first and any after a failure) and every change between them. */
export interface Handlers<T> {
  list(items: T[]): void | Promise<void>;
  event(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: T): void;
}

/** informer resolves once the first list is handled, and follows the collection until signal aborts. */
export async function informer<T extends Obj>(
  client: KubeClient,
  path: string,
  on: Handlers<T>,
  signal: AbortSignal,
): Promise<void> {
  const list = async () => {
    const l = await client.call<{ metadata: { resourceVersion: string }; items: T[] }>('GET', path);
    await on.list(l.items);
    return l.metadata.resourceVersion;
  };
  let rv: string | undefined = await list();
  void (async () => {
    while (!signal.aborted) {
      try {
        rv ??= await list();
        for await (const ev of client.watch<T>(
          path,
          { resourceVersion: rv, allowWatchBookmarks: 'true', timeoutSeconds: '300' },
          signal,
        )) {
          if (ev.type === 'ERROR') {
            rv = undefined;
            break;
          }
          rv = ev.object.metadata.resourceVersion ?? rv;
          if (ev.type !== 'BOOKMARK') on.event(ev.type as 'ADDED' | 'MODIFIED' | 'DELETED', ev.object);
        }
      } catch {
        rv = undefined;
        if (!signal.aborted) await sleep(500);
      }
    }
  })();
}
