// events.ts: every CloudEvent type the product consumes or emits, with builders and
// parsers. Events carry identity only: never manifests, never credentials.
import { randomUUID } from 'node:crypto';
import { CloudEvent } from 'cloudevents';
import type { ApplyResult } from './engine/result.ts';
import type { SyncStatus } from './model.ts';

/** Types the product consumes from Knative sources. */
export const ApiServerRefTypes = ['dev.knative.apiserver.ref.add', 'dev.knative.apiserver.ref.update', 'dev.knative.apiserver.ref.delete'] as const;
/** PING_TYPE is PingSource's event type. */
export const PING_TYPE = 'dev.knative.sources.ping';

/** Types the product emits. */
export const EventTypes = {
  reconcile: 'io.kyma-project.syncresource.reconcile',
  clusterResolved: 'io.kyma-project.syncresource.cluster.resolved',
  itemsApplied: 'io.kyma-project.syncresource.items.applied',
} as const;

/** SOURCE_PREFIX prefixes the source attribute of emitted events: /kcp-sync-resource/<step>. */
export const SOURCE_PREFIX = '/kcp-sync-resource';

/** SyncRef identifies a SyncResource. */
export interface SyncRef {
  namespace: string;
  name: string;
}

/** ReconcileRequest is the data of a reconcile event. */
export interface ReconcileRequest extends SyncRef {
  /** trigger says why: resync (cron), kyma (its Kyma changed), secret (its access Secret changed). */
  trigger: 'resync' | 'kyma' | 'secret';
  /** since is when the fan-out began (ISO time): SKR snapshots taken before it confirm nothing for this run. */
  since?: string;
}

/** ClusterResolved is the data of a cluster.resolved event. */
export interface ClusterResolved extends SyncRef {
  /** trigger says what started this run: a watch event of the SyncResource, or a reconcile request. */
  trigger?: 'watch' | ReconcileRequest['trigger'];
  uid: string;
  generation: number;
  kyma: string;
  /** secret references the access Secret version (no content). */
  secret: { namespace: string; name: string; uid: string; resourceVersion: string };
  /** urgent marks an edit or deletion of a SyncResource reconciled before: its run goes ahead of new SyncResources and resyncs. */
  urgent?: boolean;
  /** since carries ReconcileRequest.since. */
  since?: string;
}

/** ItemsApplied is the data of an items.applied event: the run's outcome (reasons and messages, no manifests). */
export interface ItemsApplied extends SyncRef {
  uid: string;
  kyma: string;
  result: ApplyResult;
  /** urgent carries ClusterResolved.urgent to the status step. */
  urgent?: boolean;
  /**
   * seen is the SyncResource as the run last read or wrote it: the status step writes a
   * changed status on this basis, guarded by its resourceVersion, and reads only when
   * the guard fails or nothing changed.
   */
  seen?: Seen;
}

/** Seen is what the status step needs of the SyncResource a run saw (its status, never its spec). */
export interface Seen {
  resourceVersion: string;
  /** status without status.synced (the inventory is the engine's, and in result already). */
  status?: Omit<SyncStatus, 'synced'>;
  /** labelled tells whether the kyma-name label equalled spec.kyma. */
  labelled: boolean;
}

/** ObjectRef is the data of ApiServerSource Reference-mode events. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}

/** makeEvent builds an event emitted by step about a SyncResource. */
export function makeEvent<T extends SyncRef>(step: string, type: string, data: T, extensions: Record<string, string> = {}): CloudEvent<T> {
  return new CloudEvent<T>({
    id: randomUUID(),
    source: `${SOURCE_PREFIX}/${step}`,
    type,
    subject: `${data.namespace}/${data.name}`,
    datacontenttype: 'application/json',
    data,
    ...extensions,
  });
}

/** refFromEvent extracts a SyncResource ref from an ApiServerSource or product event, or undefined. */
export function refFromEvent(event: CloudEvent<unknown>): SyncRef | undefined {
  const data = event.data as Partial<ObjectRef & SyncRef> | undefined;
  if (!data || typeof data.name !== 'string' || typeof data.namespace !== 'string') return undefined;
  return { namespace: data.namespace, name: data.name };
}
