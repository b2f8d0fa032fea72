// strategies.ts: the strategy table of docs/user/api.md, as data. The engine
// reads these options; it never branches on a strategy's name.
import type { Strategy } from './model.ts';

/** StrategyOptions say what a strategy does in each situation. */
export interface StrategyOptions {
  /** create: make the object when it is absent (and again after a user deleted it). */
  create: boolean;
  /** sync: re-apply when it is present, reverting user edits to the fields we set. */
  sync: boolean;
  /** stopOnDeletion: leave a present object alone once it has a deletionTimestamp (state Deleting). */
  stopOnDeletion: boolean;
  /** remove: delete the object; its absence is success. */
  remove: boolean;
  /** own: stamp the owner annotation and managed-by label and record it in the inventory, so removal of the item prunes it. */
  own: boolean;
  /** status: when the subresource is written: on every run, only when the object was just created, or never. */
  status: 'always' | 'onCreate' | 'never';
}

/** strategies maps each strategy to its options. */
export const strategies: Record<Strategy, StrategyOptions> = {
  CreateAndSync: {
    create: true,
    sync: true,
    stopOnDeletion: false,
    remove: false,
    own: true,
    status: 'always',
  },
  CreateAndIgnore: {
    create: true,
    sync: false,
    stopOnDeletion: false,
    remove: false,
    own: true,
    status: 'onCreate',
  },
  Delete: { create: false, sync: false, stopOnDeletion: false, remove: true, own: false, status: 'never' },
  UpdateAndDelete: {
    create: false,
    sync: true,
    stopOnDeletion: true,
    remove: false,
    own: false,
    status: 'always',
  },
};

// Install order by kind, as Helm and Gardener use it, with CRDs moved up next to
// Namespaces so that custom resources find their kinds; unknown kinds go last.
const INSTALL_ORDER = [
  'Namespace',
  'CustomResourceDefinition',
  'NetworkPolicy',
  'ResourceQuota',
  'LimitRange',
  'PodDisruptionBudget',
  'ServiceAccount',
  'Secret',
  'ConfigMap',
  'StorageClass',
  'PersistentVolume',
  'PersistentVolumeClaim',
  'ClusterRole',
  'ClusterRoleBinding',
  'Role',
  'RoleBinding',
  'Service',
  'DaemonSet',
  'Pod',
  'ReplicationController',
  'ReplicaSet',
  'Deployment',
  'HorizontalPodAutoscaler',
  'StatefulSet',
  'Job',
  'CronJob',
  'IngressClass',
  'Ingress',
  'APIService',
  'MutatingWebhookConfiguration',
  'ValidatingWebhookConfiguration',
];

/** installRank orders kinds for creation; deletions run in reverse. */
export function installRank(kind: string): number {
  const i = INSTALL_ORDER.indexOf(kind);
  return i === -1 ? INSTALL_ORDER.length : i;
}

/** isFoundation tells whether a kind must exist before other kinds can be applied (first phase). */
export const isFoundation = (kind: string): boolean =>
  kind === 'Namespace' || kind === 'CustomResourceDefinition';
