// reasons.ts is every reason the product writes into a SyncResource's status, each with
// the state it goes with and what it means: the types below make the code unable to
// write any other, and infra/docs.ts renders these tables into docs/user/api.md (the
// docs test fails when the two differ).
import type { State } from './model.ts';

type Entry = { state: State | 'any'; when: string };

/** ON_EVERY_ITEM is a cluster reason (CLUSTER_REASONS) as the items of the last run show it. */
const ON_EVERY_ITEM = {
  state: 'Error',
  when: 'as the SyncResource’s reason, on every item of the last run',
} as const;

/** ITEM_REASONS are status.items[].reason. */
export const ITEM_REASONS = {
  Created: { state: 'Ready', when: 'the object was created' },
  Applied: { state: 'Ready', when: 'the object was updated to the manifest (or its drift reverted)' },
  Unchanged: { state: 'Ready', when: 'the object already holds what the manifest says' },
  Ignored: { state: 'Ready', when: '`CreateAndIgnore`: the object exists and is left as it is' },
  Adopted: {
    state: 'Ready',
    when: 'the object existed before any SyncResource named it and is now kept in sync (released, never deleted, when the item goes)',
  },
  Recreated: {
    state: 'Ready',
    when: 'an immutable field changed and the object was deleted and created again (`onImmutableChange: Recreate`)',
  },
  Deleted: { state: 'Ready', when: '`Delete`: the object is gone' },
  NotFound: { state: 'Ready', when: '`UpdateAndDelete`: there is no such object, nothing is created' },
  DeletionInProgress: {
    state: 'Deleting',
    when: '`Delete` or `UpdateAndDelete`: the object is being deleted (finalizers in the SKR)',
  },
  WaitingForCRD: {
    state: 'Processing',
    when: 'a custom resource whose CRD (in the same SyncResource) is not established yet',
  },
  Recreating: { state: 'Processing', when: 'the object is deleted, to be created again' },
  ResourceSourcePending: {
    state: 'Processing',
    when: '`resourceFrom`: the text is read from its ConfigMap in the KCP by the next step (dry runs and `kcp-sync diff` without the KCP)',
  },
  Restricted: {
    state: 'Warning',
    when: 'a kind or namespace the operator keeps out of reach (`SYNC_RESTRICTED_KINDS`, `SYNC_PROTECTED_NAMESPACES`)',
  },
  InvalidManifest: {
    state: 'Error',
    when: 'the text is not one object kubectl would apply, or it sets what only the product may',
  },
  UnknownKind: { state: 'Error', when: 'the SKR serves no such kind' },
  Conflict: {
    state: 'Error',
    when: 'the object is someone else’s, or another SyncResource holds a field with another value',
  },
  DuplicateObject: { state: 'Error', when: 'another item of the same SyncResource names the same object' },
  ApplyFailed: { state: 'Error', when: 'the SKR refused the request; the message is its answer' },
  SecretSourceNotFound: { state: 'Error', when: '`dataFrom`: the Secret or its key does not exist' },
  SecretSourceRejected: {
    state: 'Error',
    when: '`dataFrom`: the Secret may not be used (not labelled, too large)',
  },
  ResourceSourceNotFound: { state: 'Error', when: '`resourceFrom`: the ConfigMap or its key does not exist' },
  ResourceSourceRejected: {
    state: 'Error',
    when: '`resourceFrom`: the ConfigMap may not be used (not labelled)',
  },
  ResourceSourceTooLarge: { state: 'Error', when: '`resourceFrom`: the text is over its limit' },
  NotPermitted: {
    state: 'Error',
    when: 'the team namespace’s SyncPolicy does not allow it (names the rule and the policy)',
  },
  ClusterUnreachable: {
    state: 'Error',
    when: 'the SKR could not be reached (the items of the last run keep their objects)',
  },
  KymaNotFound: ON_EVERY_ITEM,
  AccessSecretNotFound: ON_EVERY_ITEM,
  AmbiguousAccessSecret: ON_EVERY_ITEM,
  InvalidKubeconfig: ON_EVERY_ITEM,
} as const satisfies Record<string, Entry>;

/** CLUSTER_REASONS are the target cluster's: why a run could not reach its SKR at all. */
export const CLUSTER_REASONS = {
  KymaNotFound: { state: 'Error', when: '`spec.kyma` names no Kyma in the control-plane namespace' },
  AccessSecretNotFound: { state: 'Error', when: 'no Secret is labelled with the Kyma’s name' },
  AmbiguousAccessSecret: { state: 'Error', when: 'more than one Secret is labelled with the Kyma’s name' },
  InvalidKubeconfig: {
    state: 'Error',
    when: 'the access Secret’s kubeconfig is refused (the message says which rule)',
  },
  ClusterUnreachable: { state: 'Error', when: 'the SKR does not answer (retried with a back-off)' },
  NotPermitted: {
    state: 'Error',
    when: 'a team’s SyncResource no SyncPolicy allows, or whose Kyma its policy does not',
  },
} as const satisfies Record<string, Entry>;

/** RESOURCES_REASONS are the `Resources` condition's (every item applied). */
export const RESOURCES_REASONS = {
  Ready: { state: 'Ready', when: 'every item is applied (condition True)' },
  Processing: {
    state: 'Processing',
    when: 'some item is on its way (a CRD to wait for, an object recreated)',
  },
  Warning: { state: 'Warning', when: 'some item is `Restricted`' },
  Error: { state: 'Error', when: 'some item failed; the message names the first five' },
  Deleting: { state: 'Deleting', when: 'the SyncResource is being deleted, its objects with it' },
  DeletionFailed: {
    state: 'Error',
    when: 'objects could not be deleted or released; the message names them',
  },
  Suspended: { state: 'Warning', when: '`spec.suspend`: nothing is read or written in the SKR' },
  ...CLUSTER_REASONS,
} as const satisfies Record<string, Entry>;

/** HEALTHY_REASONS are the `Healthy` condition's (every object works). */
export const HEALTHY_REASONS = {
  Healthy: { state: 'Ready', when: 'every object is `Current` (condition True)' },
  Progressing: { state: 'Processing', when: 'some object is on its way; the message names at most five' },
  Unhealthy: { state: 'Error', when: 'some object `Failed`; the message names at most five' },
  Degraded: { state: 'Warning', when: 'some module CR is working but reports `Warning`' },
} as const satisfies Record<string, Entry>;

/** PROGRESSING_REASONS are the `Progressing` condition's (something is on its way). */
export const PROGRESSING_REASONS = {
  Progressing: {
    state: 'any',
    when: 'an object rolls out, or pruned or deleted objects are still there (condition True)',
  },
  Settled: { state: 'any', when: 'nothing is on its way' },
} as const satisfies Record<string, Entry>;

/**
 * RETRY_REASONS end a run with a retry (the broker redelivers, the status stays as it
 * was): they appear in logs and in the dead-letter function's, never in a status.
 */
export const RETRY_REASONS = {
  KcpWriteFailed: 'writing the SyncResource in the KCP failed',
  KcpReadFailed: 'reading the SyncResources of a Kyma in the KCP failed',
  SecretSourceChanged: 'a `dataFrom` Secret changed while the run applied it',
  SyncResourceChanged: 'the SyncResource changed since its Kyma’s batch listed it',
} as const;

export type ItemReason = keyof typeof ITEM_REASONS;
export type RetryReason = keyof typeof RETRY_REASONS;
export type ClusterReason = keyof typeof CLUSTER_REASONS;
export type ResourcesReason = keyof typeof RESOURCES_REASONS;
export type HealthyReason = keyof typeof HEALTHY_REASONS;
export type ProgressingReason = keyof typeof PROGRESSING_REASONS;

/** CONDITIONS are the three condition types, each with its reasons. */
export const CONDITIONS = {
  Resources: RESOURCES_REASONS,
  Healthy: HEALTHY_REASONS,
  Progressing: PROGRESSING_REASONS,
} as const;
