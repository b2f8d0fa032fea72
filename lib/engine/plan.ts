// plan.ts turns spec items into planned operations: parsed objects with their
// identity, strategy options and REST mapping, or an item result when the item
// cannot be applied (invalid text, restricted kind, unknown kind).
import type { Config } from '../config.ts';
import type { ResourceInfo } from '../kube/discovery.ts';
import type { Cluster, KubeObject } from '../kube/objects.ts';
import { describeId, idOf, ManifestError, parseManifest } from '../manifest.ts';
import type { ObjectId, SyncItem } from '../model.ts';
import { strategies, type StrategyOptions } from '../strategies.ts';
import { guard } from './items.ts';
import { result, type ItemResult } from './result.ts';

/** PlanItem is one spec item on its way through a run. */
export interface PlanItem {
  item: SyncItem;
  opts: StrategyOptions;
  /** object is the parsed resource (absent for subresource-only items). */
  object?: KubeObject;
  /** status is the parsed subresource text. */
  status?: KubeObject;
  id?: ObjectId;
  info?: ResourceInfo;
  /** done is set once the item's outcome is known without touching the SKR. */
  done?: ItemResult;
}

const sameId = (a: ObjectId, b: ObjectId) =>
  a.apiVersion === b.apiVersion && a.kind === b.kind && a.name === b.name && (a.namespace ?? '') === (b.namespace ?? '');

/** parseItems parses every item; problems stay on their item. */
export function parseItems(items: SyncItem[], config: Config): PlanItem[] {
  return items.map((item) => {
    const p: PlanItem = { item, opts: strategies[item.strategy] };
    try {
      if (item.resource !== undefined) p.object = parseManifest(item.resource, 'resource', config.maxManifestBytes);
      if (item.subresource !== undefined) {
        p.status = parseManifest(item.subresource, 'subresource', config.maxManifestBytes);
        if (p.status.status === undefined) throw new ManifestError('subresource has no status');
        if (p.object && !sameId(idOf(p.object), idOf(p.status))) {
          throw new ManifestError(`subresource names ${describeId(idOf(p.status))} but resource names ${describeId(idOf(p.object))}`);
        }
      }
      const obj = p.object ?? p.status;
      if (!obj) throw new ManifestError('item has neither resource nor subresource');
      p.id = idOf(obj);
      const gvk = `${obj.apiVersion}/${obj.kind}`;
      if (config.restrictedKinds.includes(gvk)) {
        p.done = result(item.name, 'Warning', 'Restricted', `kind ${gvk} is restricted and never synced`);
      }
    } catch (err) {
      if (!(err instanceof ManifestError)) throw err;
      p.done = result(item.name, 'Error', 'InvalidManifest', err.message);
    }
    return p;
  });
}

/** crdProvides returns the CRD item of plan that defines apiVersion/kind, if any. */
export function crdProvides(plan: PlanItem[], apiVersion: string, kind: string): PlanItem | undefined {
  const [group, version] = apiVersion.split('/');
  return plan.find((p) => {
    if (p.object?.kind !== 'CustomResourceDefinition') return false;
    const spec = p.object.spec as { group?: string; names?: { kind?: string }; versions?: { name?: string }[] } | undefined;
    return spec?.group === group && spec?.names?.kind === kind && (spec?.versions ?? []).some((v) => v.name === version);
  });
}

/**
 * resolveKind maps an item to its REST resource and settles its namespace: a
 * namespaced object without one gets the default; a cluster-scoped one with one is
 * an error. A kind the SKR does not serve is an error, unless a CRD item of the same
 * SyncResource defines it (then the item waits for it).
 */
export async function resolveKind(p: PlanItem, plan: PlanItem[], skr: Cluster, config: Config): Promise<void> {
  if (p.done || !p.id) return;
  const info = await guard(() => skr.mapper.find(p.id!.apiVersion, p.id!.kind));
  if (!info) {
    const crd = crdProvides(plan, p.id.apiVersion, p.id.kind);
    p.done = crd
      ? result(p.item.name, 'Processing', 'WaitingForCRD', `waiting for CustomResourceDefinition ${crd.object!.metadata.name} to be established`)
      : result(p.item.name, 'Error', 'UnknownKind', `the SKR does not serve kind ${p.id.kind} in ${p.id.apiVersion}`);
    return;
  }
  p.info = info;
  if (info.namespaced && !p.id.namespace) {
    p.id.namespace = config.defaultNamespace;
    for (const o of [p.object, p.status]) if (o) o.metadata.namespace = config.defaultNamespace;
  } else if (!info.namespaced && p.id.namespace) {
    p.done = result(p.item.name, 'Error', 'InvalidManifest', `kind ${p.id.kind} is cluster-scoped; remove metadata.namespace`);
  }
}
