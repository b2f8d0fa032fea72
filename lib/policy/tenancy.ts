// tenancy.ts is the tenancy rule (docs/user/api.md "Team namespaces"): a SyncResource outside the
// control-plane namespaces is acted on only as the one SyncPolicy that governs its namespace
// allows: which Kymas it may target, which SKR namespaces and kinds its items may write, which
// strategies they may use. Exact names only; absent lists allow what the API documents
// (docs/user/api.md "SyncPolicy"). Pure: the callers read the policies and the Kyma, and
// check every item after its identity is resolved through the SKR's discovery.
import type { Config } from '../config.ts';
import type { Strategy } from '../model.ts';

/** SYNC_POLICY_PATH lists the SyncPolicies (cluster-scoped) in the KCP. */
export const SYNC_POLICY_PATH = '/apis/operator.kyma-project.io/v1alpha1/syncpolicies';

/** GroupKind names a kind in an API group ("" for the core group). */
export interface GroupKind {
  group: string;
  kind: string;
}

/** SyncPolicy is the operator's object that governs team namespaces. */
export interface SyncPolicy {
  metadata: { name: string; uid?: string; resourceVersion?: string };
  spec: {
    namespaces: string[];
    kymas?: { names?: string[]; selector?: { matchLabels?: Record<string, string> } };
    destinationNamespaces?: string[];
    clusterResources?: GroupKind[];
    namespacedResources?: GroupKind[];
    strategies?: Strategy[];
  };
}

/** DEFAULT_STRATEGIES are the strategies a policy allows when it lists none: never Delete or UpdateAndDelete. */
export const DEFAULT_STRATEGIES: readonly Strategy[] = ['CreateAndSync', 'CreateAndIgnore'];

/**
 * Governance is how a SyncResource's namespace is acted on: with the global rules alone
 * (a control-plane namespace), under one policy, or not at all (why says so).
 */
export type Governance =
  { kind: 'control-plane' } | { kind: 'policy'; policy: SyncPolicy } | { kind: 'refused'; why: string };

/** isControlPlane tells whether namespace is one of the operator's own (today's behaviour there). */
export const isControlPlane = (namespace: string, config: Pick<Config, 'controlPlaneNamespaces'>): boolean =>
  config.controlPlaneNamespaces.includes(namespace);

/**
 * kymaHome is where the Kyma and the access Secret of a SyncResource in namespace are: its
 * own namespace if that is a control-plane namespace, else the first control-plane
 * namespace (a team holds only the Kyma's name; the credential stays with the operator).
 */
export const kymaHome = (namespace: string, config: Pick<Config, 'controlPlaneNamespaces'>): string =>
  isControlPlane(namespace, config) ? namespace : config.controlPlaneNamespaces[0]!;

/**
 * governance decides how namespace is acted on, given every SyncPolicy: a control-plane
 * namespace by the global rules; another by the one policy that names it. None, or more
 * than one (never their union), refuses.
 */
export function governance(
  namespace: string,
  policies: readonly SyncPolicy[],
  config: Pick<Config, 'controlPlaneNamespaces'>,
): Governance {
  if (isControlPlane(namespace, config)) return { kind: 'control-plane' };
  const governing = policies.filter(
    (p) => Array.isArray(p.spec?.namespaces) && p.spec.namespaces.includes(namespace),
  );
  if (governing.length === 1) return { kind: 'policy', policy: governing[0]! };
  if (governing.length === 0)
    return {
      kind: 'refused',
      why: `no SyncPolicy governs namespace ${namespace}: nothing is written to any SKR until an operator's SyncPolicy names it in spec.namespaces`,
    };
  const names = governing.map((p) => p.metadata.name).sort();
  return {
    kind: 'refused',
    why: `namespace ${namespace} is named by ${names.length} SyncPolicies (${names.join(', ')}): one must govern it, so none applies`,
  };
}

/** governedNamespaces are the namespaces governed by exactly one policy (those a run may act in). */
export function governedNamespaces(
  policies: readonly SyncPolicy[],
  config: Pick<Config, 'controlPlaneNamespaces'>,
): string[] {
  const count = new Map<string, number>();
  for (const p of policies)
    for (const ns of new Set(Array.isArray(p.spec?.namespaces) ? p.spec.namespaces : []))
      count.set(ns, (count.get(ns) ?? 0) + 1);
  return [...count]
    .filter(([ns, n]) => n === 1 && !isControlPlane(ns, config))
    .map(([ns]) => ns)
    .sort();
}

/**
 * kymaRefusal says why policy does not let its SyncResources target kyma (a Kyma of the
 * control-plane namespace, with its labels as read now), or undefined when it does: by
 * name in spec.kymas.names, or by every label of spec.kymas.selector.matchLabels.
 */
export function kymaRefusal(
  policy: SyncPolicy,
  kyma: { name: string; labels?: Record<string, string> | undefined },
): string | undefined {
  const k = policy.spec.kymas;
  if (k?.names?.includes(kyma.name)) return undefined;
  const match = k?.selector?.matchLabels;
  if (match && Object.entries(match).every(([key, v]) => kyma.labels?.[key] === v)) return undefined;
  return `SyncPolicy ${policy.metadata.name}: Kyma ${kyma.name} is not allowed (spec.kymas)`;
}

/** ItemIdentity is an item's object as the SKR's discovery resolved it. */
export interface ItemIdentity {
  group: string;
  kind: string;
  name: string;
  /** namespace is the object's namespace, settled (defaulted) for a namespaced kind; absent for a cluster-scoped one. */
  namespace?: string | undefined;
  namespaced: boolean;
}

const listed = (list: GroupKind[] | undefined, id: ItemIdentity): boolean =>
  list?.some((gk) => gk.group === id.group && gk.kind === id.kind) ?? false;

const kindName = (id: ItemIdentity): string => (id.group ? `${id.kind}.${id.group}` : id.kind);

/**
 * itemRefusal says which rule of policy an item breaks, or undefined when it may proceed:
 * its strategy (spec.strategies), a namespaced kind (spec.namespacedResources when listed)
 * and its namespace (spec.destinationNamespaces), a cluster-scoped kind
 * (spec.clusterResources: none unless listed; a Namespace, only one of
 * spec.destinationNamespaces). Scope is discovery's, never the manifest's.
 */
export function itemRefusal(policy: SyncPolicy, id: ItemIdentity, strategy: Strategy): string | undefined {
  const name = `SyncPolicy ${policy.metadata.name}`;
  const strategies = policy.spec.strategies ?? DEFAULT_STRATEGIES;
  if (!strategies.includes(strategy)) return `${name}: strategy ${strategy} is not allowed (spec.strategies)`;
  if (!id.namespaced) {
    if (!listed(policy.spec.clusterResources, id))
      return `${name}: cluster-scoped kind ${kindName(id)} is not allowed (spec.clusterResources)`;
    if (
      id.group === '' &&
      id.kind === 'Namespace' &&
      !(policy.spec.destinationNamespaces ?? []).includes(id.name)
    )
      return `${name}: Namespace ${id.name} is not allowed (spec.destinationNamespaces)`;
    return undefined;
  }
  if (policy.spec.namespacedResources !== undefined && !listed(policy.spec.namespacedResources, id))
    return `${name}: kind ${kindName(id)} is not allowed (spec.namespacedResources)`;
  if (!id.namespace || !(policy.spec.destinationNamespaces ?? []).includes(id.namespace))
    return `${name}: namespace ${id.namespace ?? '(none)'} is not allowed (spec.destinationNamespaces)`;
  return undefined;
}

/**
 * foreignHolders: a SyncResource under a policy never joins, takes over or deletes an
 * object that a SyncResource of another KCP namespace names (another team's, or the
 * operator's). holders are the owner keys ("<namespace>/<name>") of the others that name it.
 */
export function foreignHolders(namespace: string, holders: readonly string[]): string | undefined {
  const foreign = holders.filter((h) => !h.startsWith(`${namespace}/`));
  if (foreign.length === 0) return undefined;
  return `the object is named by SyncResource ${foreign.sort().join(', ')} of another namespace: a SyncResource under a SyncPolicy never shares, takes over or deletes it`;
}

/** ADOPTION_REFUSAL: a SyncResource under a policy never takes on an object the product did not create. */
export const ADOPTION_REFUSAL =
  'the object exists and was not created by this product: a SyncResource under a SyncPolicy never adopts it';
