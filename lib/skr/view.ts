// view.ts is what the SKR source keeps of a SyncResource (SrView): its items' strategies
// and health rules, the health and reasons its status reports, and its inventory entries.
// No manifests, no status messages.
import { managerOf } from '../engine/share.ts';
import { compileRules, type CompiledRules } from '../health-rules.ts';
import { outOfSync } from '../status.ts';
import type { KubeObject } from '../kube/objects.ts';
import {
  FINALIZER,
  objectKey,
  type HealthStatus,
  type State,
  type Strategy,
  type SyncResource,
} from '../model.ts';

/** Entry is an inventory entry of a SyncResource, as its object is watched. */
export interface Entry {
  key: string;
  gk: string;
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  item: string;
  digest?: string;
}

/** SrView is what the source keeps of a SyncResource: no manifests, no status messages. */
export interface SrView {
  key: string;
  namespace: string;
  name: string;
  uid: string;
  /** version is its resourceVersion as last listed or watched (posted with its findings: the step reads at no older one). */
  version?: string;
  kyma: string;
  manager: string;
  deleting: boolean;
  /** claimed: it carries our finalizer (objects of its may exist; its deletion must be seen). */
  claimed: boolean;
  state?: State;
  /** inSync: its status is of its spec's generation with every item applied, so a health report may move it (status.ts reportedResult). */
  inSync: boolean;
  /** items: runRead marks one with health rules or feedback of its own (a run reads its object, never a report). */
  items: Map<string, { strategy: Strategy; rules?: CompiledRules; runRead?: true }>;
  health: Map<string, HealthStatus>;
  /** reasons are the items' reasons in the status. */
  reasons: Map<string, string>;
  entries: Entry[];
}

/** keyOf is an object's key (objectKey) as a watch event names it. */
export const keyOf = (o: KubeObject): string =>
  objectKey({
    apiVersion: o.apiVersion,
    kind: o.kind,
    ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
    name: o.metadata.name,
  });

export const gkOf = (apiVersion: string, kind: string): string =>
  `${kind}.${apiVersion.includes('/') ? apiVersion.split('/')[0] : ''}`;

const rulesMemo = new Map<string, CompiledRules | undefined>();
function rulesOf(item: SyncResource['spec']['items'][number]): CompiledRules | undefined {
  if (!item.health) return undefined;
  const text = JSON.stringify(item.health);
  if (!rulesMemo.has(text)) {
    if (rulesMemo.size > 1_000) rulesMemo.clear();
    let compiled: CompiledRules | undefined;
    try {
      compiled = compileRules(item.health);
    } catch {
      compiled = undefined; // The run reports the item InvalidManifest; kstatus's rules meanwhile.
    }
    rulesMemo.set(text, compiled);
  }
  return rulesMemo.get(text);
}

/** viewOf keeps what the source needs of a SyncResource. */
export function viewOf(
  sr: SyncResource,
  fieldManager: string,
  home: string = sr.metadata.namespace ?? '',
): SrView {
  const ns = sr.metadata.namespace ?? '';
  const items = new Map<string, { strategy: Strategy; rules?: CompiledRules; runRead?: true }>();
  for (const i of Array.isArray(sr.spec?.items) ? sr.spec.items : []) {
    if (typeof i?.name !== 'string') continue;
    const rules = rulesOf(i);
    items.set(i.name, {
      strategy: i.strategy,
      ...(rules ? { rules } : {}),
      ...(i.health || i.feedback ? { runRead: true as const } : {}),
    });
  }
  const inSync = outOfSync(sr) === undefined;
  const health = new Map<string, HealthStatus>();
  const reasons = new Map<string, string>();
  for (const i of sr.status?.items ?? []) {
    if (i.health?.status) health.set(i.name, i.health.status);
    if (i.reason) reasons.set(i.name, i.reason);
  }
  const entries: Entry[] = [];
  for (const e of sr.status?.synced ?? []) {
    if (typeof e?.apiVersion !== 'string' || typeof e.kind !== 'string' || typeof e.name !== 'string')
      continue;
    entries.push({
      key: objectKey(e),
      gk: gkOf(e.apiVersion, e.kind),
      apiVersion: e.apiVersion,
      kind: e.kind,
      ...(e.namespace ? { namespace: e.namespace } : {}),
      name: e.name,
      item: e.item,
      ...(e.digest ? { digest: e.digest } : {}),
    });
  }
  return {
    key: `${ns}/${sr.metadata.name}`,
    namespace: ns,
    name: sr.metadata.name,
    uid: sr.metadata.uid ?? '',
    ...(sr.metadata.resourceVersion ? { version: sr.metadata.resourceVersion } : {}),
    kyma: `${home}/${sr.spec?.kyma ?? ''}`,
    manager: managerOf(fieldManager, { namespace: ns, name: sr.metadata.name }),
    deleting: sr.metadata.deletionTimestamp !== undefined,
    claimed: sr.metadata.finalizers?.includes(FINALIZER) === true,
    ...(sr.status?.state ? { state: sr.status.state } : {}),
    inSync,
    items,
    health,
    reasons,
    entries,
  };
}

/** sameMap tells whether two maps hold the same values under the same keys. */
export function sameMap<K, V>(a: Map<K, V>, b: Map<K, V>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}
