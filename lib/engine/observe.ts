// observe.ts reads an item's live object in the SKR, or a shared LIST snapshot of it when
// that shows nothing to do (a resync confirms unchanged objects without a read each).
import type { Cluster, KubeObject } from '../kube/objects.ts';
import { getObject } from '../kube/objects.ts';
import { decide, type DecideContext } from './decide.ts';
import type { ResolvedItem } from './plan.ts';
import { ClusterUnreachableError, inSkr } from './unreachable.ts';

/**
 * observe reads an item's live object; unreachable clusters abort the run. With a decide
 * context and a list cache, a recent snapshot (taken at since or later) that shows nothing
 * to do stands in for the read.
 */
export async function observe(
  skr: Cluster,
  p: ResolvedItem,
  ctx?: DecideContext,
  since?: number,
): Promise<KubeObject | undefined> {
  const lists = skr.lists;
  if (ctx && lists && p.object && p.opts.own) {
    // A snapshot that cannot be had (e.g. a fresh CRD's storage still initializing) is no
    // reason to fail: the live read below decides.
    const snap = await inSkr(() => lists.get(p.info, p.id.namespace, p.id.name, since)).catch(
      (err: unknown) => {
        if (err instanceof ClusterUnreachableError) throw err;
        return undefined;
      },
    );
    if (snap) {
      const d = decide(p, snap, ctx);
      if ((d.op === 'unchanged' || d.op === 'ignore') && !d.status && !d.record) return snap;
    }
  }
  return inSkr(() => getObject(skr, p.info, p.id.namespace, p.id.name));
}
