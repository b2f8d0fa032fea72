// plan.ts turns spec items into planned operations: parsed objects with their
// identity, strategy options and REST mapping, or an item result when the item
// cannot be applied (invalid text, restricted kind, unknown kind).
import { isRestrictedKind, type Config } from '../config.ts';
import type { ResourceInfo } from '../kube/discovery.ts';
import type { Cluster, KubeObject } from '../kube/objects.ts';
import { describeId, idOf, ManifestError, parseManifest } from '../manifest.ts';
import { objectKey, type ObjectId, type SyncItem } from '../model.ts';
import { parseApiVersion } from '../identity.ts';
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
  /** applied holds the digests of the object (and status) as the server holds them after this run (drift.ts). */
  applied?: { digest?: string; statusDigest?: string };
}

const sameId = (a: ObjectId, b: ObjectId) =>
  a.apiVersion === b.apiVersion && a.kind === b.kind && a.name === b.name && (a.namespace ?? '') === (b.namespace ?? '');

/** parseItems parses every item; problems stay on their item. */
export function parseItems(items: SyncItem[], config: Config): PlanItem[] {
  const plan = items.map((item) => {
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
      const restricted = restriction(p.id, config);
      if (restricted) p.done = result(item.name, 'Warning', 'Restricted', restricted);
    } catch (err) {
      if (!(err instanceof ManifestError)) throw err;
      p.done = result(item.name, 'Error', 'InvalidManifest', err.message);
    }
    return p;
  });
  markDuplicates(plan, config);
  return plan;
}

/**
 * restriction says why an object may not be touched: a restricted kind (group and kind,
 * any version), a protected namespace, or a Namespace object that is never taken over or
 * deleted (the protected ones, default, kube-*). undefined when it may.
 */
export function restriction(id: ObjectId, config: Config): string | undefined {
  const { group } = parseApiVersion(id.apiVersion);
  if (isRestrictedKind(config, group, id.kind)) return `kind ${id.apiVersion}/${id.kind} is restricted and never synced`;
  if (group === '' && id.kind === 'Namespace' && !id.namespace) {
    const name = id.name;
    if (name === 'default' || name.startsWith('kube-') || config.protectedNamespaces.includes(name)) {
      return `Namespace ${name} is protected: it is never taken over or deleted`;
    }
  }
  if (id.namespace && config.protectedNamespaces.includes(id.namespace)) {
    return `namespace ${id.namespace} is protected: nothing is created, changed or deleted in it`;
  }
  return undefined;
}

/**
 * markDuplicates makes every item that names an object an earlier item already names an
 * Error (DuplicateObject): the first in spec order owns it. Items that only write a status
 * are compared among themselves (they may name an object another item creates).
 */
function markDuplicates(plan: PlanItem[], config: Config): void {
  const first = new Map<string, string>();
  for (const p of plan) {
    if (!p.id) continue;
    const key = `${p.object ? 'object' : 'status'} ${objectKey({ ...p.id, namespace: p.id.namespace ?? config.defaultNamespace })}`;
    const owner = first.get(key);
    if (owner === undefined) {
      first.set(key, p.item.name);
      continue;
    }
    p.done = result(p.item.name, 'Error', 'DuplicateObject', `${describeId(p.id)} is already named by item ${owner}; an object belongs to one item`);
  }
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
    return;
  }
  // The namespace is settled only now (defaulted): check it again.
  const restricted = restriction(p.id, config);
  if (restricted) p.done = result(p.item.name, 'Warning', 'Restricted', restricted);
}
