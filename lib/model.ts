// model.ts: the SyncResource API as TypeScript types, and the names (labels,
// annotations, finalizer) the product writes.
import type { KubeObject } from './kube/types.ts';

/** Group and version of SyncResource. */
export const SYNC_API_VERSION = 'operator.kyma-project.io/v1alpha1';
/** Kyma's API version. */
export const KYMA_API_VERSION = 'operator.kyma-project.io/v1beta2';
/** FINALIZER guards a SyncResource until its synced objects are handled. */
export const FINALIZER = 'operator.kyma-project.io/sync-resource';
// The product's marks on SKR objects use a key prefix of its own: operator.kyma-project.io
// belongs to Kyma's conventions (btp-manager's objects set operator.kyma-project.io/managed-by:
// kyma), and a manifest may set such labels like any other.
/** MANAGED_BY_LABEL marks every object the product creates in an SKR. */
export const MANAGED_BY_LABEL = 'kcp-sync.kyma-project.io/managed-by';
/** MANAGED_BY_VALUE is the value of MANAGED_BY_LABEL. */
export const MANAGED_BY_VALUE = 'kcp-sync-resource';
/**
 * OWNER_ANNOTATION named the one owning SyncResource ("<namespace>/<name>") on objects of
 * 0.1.0, which wrote every object with one field manager. The product no longer
 * writes it: each SyncResource has a field manager of its own (engine/share.ts), and the
 * first run takes such an object over (and the annotation off).
 */
export const OWNER_ANNOTATION = 'kcp-sync.kyma-project.io/owned-by';
/** HASH_ANNOTATION holds the digest of the last applied manifest on an object we do not own (UpdateAndDelete); the inventory holds it for the rest. */
export const HASH_ANNOTATION = 'kcp-sync.kyma-project.io/applied-digest';
/**
 * LEGACY_MARKS are the keys 0.1.0 marked objects with (engine/migrate.ts). An object that carries
 * them is ours as if it carried the new ones; the next run moves it to the new keys.
 */
export const LEGACY_MARKS = {
  label: 'operator.kyma-project.io/managed-by',
  owner: 'operator.kyma-project.io/owned-by',
  hash: 'operator.kyma-project.io/applied-digest',
} as const;
/** KYMA_NAME_LABEL links SyncResources and access Secrets to a Kyma. */
export const KYMA_NAME_LABEL = 'operator.kyma-project.io/kyma-name';
/**
 * RECONCILE_ANNOTATION asks for a run now (as Flux's reconcile.fluxcd.io/requestedAt): a new
 * value, any value, runs the SyncResource ahead of bulk work; the run does what its spec says.
 */
export const RECONCILE_ANNOTATION = 'kcp-sync.kyma-project.io/reconcile-requested-at';
/**
 * TEAM_NAMESPACE_LABEL (value "true") marks a KCP namespace an operator onboarded for a
 * team (docs/user/operating.md "Team namespaces"): its SyncResources are seen, and told
 * NotPermitted while no SyncPolicy governs it. Namespace labels are the operator's.
 */
export const TEAM_NAMESPACE_LABEL = 'kcp-sync.kyma-project.io/team-namespace';
/** SYNC_SOURCE_LABEL (value "true") marks a KCP Secret whose data items may ship by reference; such a Secret is never an access Secret. */
export const SYNC_SOURCE_LABEL = 'operator.kyma-project.io/sync-source';

/** Strategy says how an item's object is kept in the SKR. */
export type Strategy = 'CreateAndSync' | 'CreateAndIgnore' | 'Delete' | 'UpdateAndDelete';

/** State is the state of an item or of a whole SyncResource. */
export type State = 'Ready' | 'Processing' | 'Error' | 'Warning' | 'Deleting';

/** SyncItem is one entry of spec.items. */
export interface SyncItem {
  name: string;
  strategy: Strategy;
  resource?: string;
  subresource?: string;
  /** dataFrom takes a v1 Secret's data from a labelled Secret in the SyncResource's namespace (values by reference). */
  dataFrom?: { secretRef: { name: string } };
  /** resourceFrom takes the resource text from a key of a labelled ConfigMap in the SyncResource's namespace (large objects). */
  resourceFrom?: { configMapKeyRef: { name: string; key: string } };
  /** onImmutableChange Recreate deletes and creates the object again when an apply changes an immutable field. */
  onImmutableChange?: 'Fail' | 'Recreate';
  /** health replaces the kind's health rules with CEL expressions over the live object. */
  health?: HealthRules;
  /** feedback copies fields of the live object into status.items[].feedback. */
  feedback?: FeedbackRule[];
}

/** InventoryEntry records one object this SyncResource has put into its SKR. */
export interface InventoryEntry {
  item: string;
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  /** adopted marks an object that existed before this SyncResource took it over: it is released, never deleted. */
  adopted?: boolean;
  /** digest is of what our field manager owned of the object right after our last apply, as the server stored it (drift.ts). */
  digest?: string;
  /** statusDigest is the same for the status a subresource item writes, tied to its text. */
  statusDigest?: string;
  /** manifest is the digest of the body of our last apply: a changed manifest is applied, not taken for drift. */
  manifest?: string;
}

/** ItemStatus is one entry of status.items. */
export interface ItemStatus {
  name: string;
  state: State;
  reason: string;
  message: string;
  /** health is the live object's, by kstatus's rules or the item's own (health.ts). */
  health?: Health;
  feedback?: FeedbackValue[];
}

/** Condition has the shape of metav1.Condition. */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

/** SyncStatus is the status of a SyncResource. */
export interface SyncStatus {
  state?: State;
  observedGeneration?: number;
  conditions?: Condition[];
  lastOperation?: { operation: string; lastUpdateTime?: string };
  items?: ItemStatus[];
  synced?: InventoryEntry[];
  /** lastHandledReconcileAt is the RECONCILE_ANNOTATION value of the last run that saw one (as Flux's). */
  lastHandledReconcileAt?: string;
  /** preview is what a preview SyncResource's items would do (spec.preview). */
  preview?: PreviewStatus;
}

/** PreviewItem is what one item (or an inventory entry no item names) would come to. */
export interface PreviewItem {
  item: string;
  outcome: string;
  object?: string;
  reason?: string;
  message?: string;
  /** diff is a unified diff of the fields the product would own (Secret values masked). */
  diff?: string;
}

/** PreviewStatus is a preview run's result: nothing was written to the SKR. */
export interface PreviewStatus {
  observedGeneration: number;
  time: string;
  /** of is the SyncResource previewed as, if any. */
  of?: string;
  changes: boolean;
  items: PreviewItem[];
}

/** SyncResource is the custom resource. */
export interface SyncResource extends KubeObject {
  spec: {
    kyma: string;
    deletionPolicy?: 'Delete' | 'Orphan';
    suspend?: boolean;
    /** preview makes it a preview: runs compute by dry run and write status.preview, never the SKR. */
    preview?: { of?: string };
    items: SyncItem[];
  };
  status?: SyncStatus;
}

/** HolderView is what a SyncResource's holding of objects is read from: who it is, whether it is letting go, its inventory. */
export interface HolderView {
  metadata: { namespace?: string; name: string; deletionTimestamp?: string };
  spec: Pick<SyncResource['spec'], 'kyma' | 'deletionPolicy' | 'suspend'>;
  status?: { synced?: InventoryEntry[] };
}

/** ownerKey is the value of OWNER_ANNOTATION for a SyncResource: "<namespace>/<name>". */
export const ownerKey = (sr: { metadata: { namespace?: string; name: string } }): string =>
  `${sr.metadata.namespace ?? ''}/${sr.metadata.name}`;

/** ObjectId identifies an object in an SKR. */
export interface ObjectId {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
}

/** objectKey renders an ObjectId as "kind/namespace/name" (namespace empty when cluster-scoped), group included for uniqueness. */
export function objectKey(id: ObjectId): string {
  const group = id.apiVersion.includes('/') ? id.apiVersion.split('/')[0] : '';
  return `${id.kind}${group ? `.${group}` : ''}/${id.namespace ?? ''}/${id.name}`;
}

/** HEALTH_STATUSES are kstatus's statuses of an object. */
export const HEALTH_STATUSES = ['Current', 'InProgress', 'Failed', 'Terminating', 'Unknown'] as const;
export type HealthStatus = (typeof HEALTH_STATUSES)[number];

/** Health is an item's health as status.items[].health shows it. */
export interface Health {
  status: HealthStatus;
  /** reason is kstatus's (the Reconciling or Stalled condition's) or the rule's. */
  reason?: string;
  message: string;
}

/** HealthRules are an item's own CEL expressions over the live object (items[].health). */
export interface HealthRules {
  current: string;
  failed?: string;
  inProgress?: string;
}

/** FeedbackRule is one entry of items[].feedback. */
export interface FeedbackRule {
  name: string;
  jsonPath: string;
}

/** FeedbackValue is one entry of status.items[].feedback: the value as text (JSON for lists and maps), or why there is none. */
export interface FeedbackValue {
  name: string;
  value?: string;
  message?: string;
}

/**
 * settled tells whether a SyncResource has a final status for its current generation
 * (Ready, or Error/Warning: what is wrong stays wrong until its spec, its cluster or the
 * SKR changes), so that a watch event (our own status, label or inventory write) needs no
 * run; resync, Kyma and Secret changes, and spec changes (a new generation; deletion
 * bumps it too) always run. Processing (waiting for a CRD, a pruned object still being
 * deleted) is run again by what it waits for (the SKR source) or the resync.
 */
export function settled(sr: SyncResource): boolean {
  const state = sr.status?.state;
  return (
    !sr.metadata.deletionTimestamp &&
    (state === 'Ready' || state === 'Error' || state === 'Warning') &&
    sr.status!.observedGeneration === sr.metadata.generation
  );
}
