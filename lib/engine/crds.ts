// crds.ts lets items whose kind a CRD of the same SyncResource defines wait for it: the
// CRD Established, then its kind in discovery.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config.ts';
import { getObject, mustFind, type Cluster } from '../kube/objects.ts';
import { requestFailure } from '../policy/rules.ts';
import { crdProvides, type PlanItem } from './plan.ts';
import { ClusterUnreachableError, inSkr } from './unreachable.ts';

type CrdStatus = { status?: { conditions?: { type: string; status: string }[] } } | undefined;

/**
 * waitForCrds waits (bounded) for CRDs of this SyncResource that the items of later stages
 * (later) need: each Established, then its kind in discovery (the API server serves a new
 * group-version a moment after the CRD is Established).
 */
export async function waitForCrds(
  plan: readonly PlanItem[],
  later: ReadonlySet<string>,
  skr: Cluster,
  config: Config,
): Promise<void> {
  const needed = new Map<PlanItem, { apiVersion: string; kind: string }[]>();
  for (const p of plan) {
    if (!later.has(p.item.name) || p.done || !p.id) continue;
    const crd = crdProvides(plan, p.id.apiVersion, p.id.kind);
    if (crd && !crd.done)
      needed.set(crd, [...(needed.get(crd) ?? []), { apiVersion: p.id.apiVersion, kind: p.id.kind }]);
  }
  if (needed.size === 0) return;
  const info = await inSkr(() => mustFind(skr, 'apiextensions.k8s.io/v1', 'CustomResourceDefinition'));
  const deadline = Date.now() + config.crdWaitMs;
  for (const [crd, kinds] of needed) {
    let established = false;
    while (!established && Date.now() < deadline) {
      let live: CrdStatus;
      try {
        live = (await inSkr(() => getObject(skr, info, undefined, crd.object!.metadata.name))) as CrdStatus;
      } catch (err) {
        // A read the SKR refuses ends the wait: the items that need the CRD report what they find.
        requestFailure(crd.item.name, err);
        break;
      }
      established =
        live?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ?? false;
      if (!established) await sleep(100);
    }
    // What a later item finds here, resolveKind finds too (the mapper caches it); what is still missing it looks up again.
    for (const { apiVersion, kind } of kinds) {
      if (!established) skr.mapper.forget(apiVersion);
      else while (!(await served(skr, apiVersion, kind)) && Date.now() < deadline) await sleep(100);
    }
  }
}

/** served tells whether discovery, read afresh, lists kind; a refusal other than the cluster being unreachable is for resolveKind to report. */
async function served(skr: Cluster, apiVersion: string, kind: string): Promise<boolean> {
  skr.mapper.forget(apiVersion);
  try {
    return (await inSkr(() => skr.mapper.find(apiVersion, kind))) !== undefined;
  } catch (err) {
    if (err instanceof ClusterUnreachableError) throw err;
    return true;
  }
}
