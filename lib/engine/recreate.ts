// recreate.ts handles an apply the API server refuses because it would change a field
// that cannot change once set (a Job's template, a Deployment's selector, a Service's
// clusterIP, a StorageClass's parameters, a claim's spec). An item that asks for it
// (onImmutableChange: Recreate, as Gardener's delete-on-invalid-update, Flux's force and
// Argo CD's Replace=true offer) has its object deleted and created anew; never an object
// we adopted, a Namespace or a CRD (deleting those deletes what they hold).
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeApiError } from '../kube/errors.ts';
import { applyObject, deleteObject, getObject, type Cluster, type KubeObject } from '../kube/objects.ts';
import type { ResolvedItem } from './plan.ts';

// The API server's words for a change it refuses because the field is fixed: "field is
// immutable", "may not change once set", "updates to parameters are forbidden", "spec is
// immutable after creation except ...".
const IMMUTABLE = /\bimmutable\b|may not change once set|updates to [\w.]+ are forbidden/i;

/** isImmutableRefusal tells whether err is a 422 whose message or causes say a field cannot change. */
export function isImmutableRefusal(err: unknown): err is KubeApiError {
  if (!(err instanceof KubeApiError) || err.code !== 422) return false;
  const causes = err.status?.details?.causes ?? [];
  return [err.status?.message ?? '', ...causes.map((c) => c.message ?? '')].some((m) => IMMUTABLE.test(m));
}

/**
 * immutableSummary names the fields and the API server's verdict without the values it
 * quotes (a whole Pod template for a Job): "spec.template: field is immutable".
 */
export function immutableSummary(err: KubeApiError): string {
  const causes = (err.status?.details?.causes ?? []).filter((c) => IMMUTABLE.test(c.message ?? ''));
  if (causes.length === 0) return err.status?.message ?? err.message;
  return causes.map((c) => `${c.field ?? 'object'}: ${(c.message ?? '').split(': ').at(-1)}`).join('; ');
}

/** NEVER_RECREATED are kinds whose deletion takes everything they hold with them. */
const NEVER_RECREATED = new Set(['Namespace', 'CustomResourceDefinition']);

/** mayRecreate tells whether an item's object may be deleted and created anew: asked for, ours, and not a container of others. */
export function mayRecreate(p: ResolvedItem, adopted: boolean): boolean {
  return p.item.onImmutableChange === 'Recreate' && p.opts.own && !adopted && !NEVER_RECREATED.has(p.id.kind);
}

/**
 * recreate deletes live (guarded by its uid) and applies desired once it is gone, waiting
 * at most waitMs for finalizers; returns the new object, or undefined while the old one
 * is still being deleted (the next run creates it).
 */
export async function recreate(
  skr: Cluster,
  p: ResolvedItem,
  live: KubeObject,
  desired: KubeObject,
  manager: string,
  waitMs = 5_000,
): Promise<KubeObject | undefined> {
  const { info } = p;
  const deletion = live.metadata.deletionTimestamp ? 'requested' : await deleteObject(skr, info, live);
  const deadline = Date.now() + waitMs;
  while (deletion === 'requested') {
    const now = await getObject(skr, info, p.id.namespace, p.id.name);
    if (!now || now.metadata.uid !== live.metadata.uid) break;
    if (Date.now() > deadline) return undefined;
    await sleep(200);
  }
  return applyObject(skr, info, desired, manager);
}
