// contract.ts is the events' contract: every CloudEvent type the product consumes or
// emits, and the data each carries. Events carry identity only: never manifests, never
// credentials. parse.ts checks incoming data against these types; table.ts renders them
// for the docs.
import { randomUUID } from 'node:crypto';
import { CloudEvent } from 'cloudevents';
import type { ApplyResult } from '../engine/result.ts';
import type { Health, ObjectId, SyncStatus } from '../model.ts';

/** Types the product consumes from Knative sources. */
export const ApiServerRefTypes = [
  'dev.knative.apiserver.ref.add',
  'dev.knative.apiserver.ref.update',
  'dev.knative.apiserver.ref.delete',
] as const;
/** PING_TYPE is PingSource's event type. */
export const PING_TYPE = 'dev.knative.sources.ping';

/** Types the product emits. */
export const EventTypes = {
  reconcile: 'io.kyma-project.syncresource.reconcile',
  /** reconcileKyma asks for a reconcile of every SyncResource of one Kyma (resync, Kyma or access Secret change). */
  reconcileKyma: 'io.kyma-project.syncresource.kyma.reconcile',
  clusterResolved: 'io.kyma-project.syncresource.cluster.resolved',
  /** kymaResolved is the resolved cluster of one Kyma, for all its SyncResources. */
  kymaResolved: 'io.kyma-project.syncresource.kyma.resolved',
  itemsApplied: 'io.kyma-project.syncresource.items.applied',
  /** skrChanged says that objects a SyncResource holds in its SKR are gone, drifted or moved in health (the SKR source). */
  skrChanged: 'io.kyma-project.syncresource.skr.changed',
  /** skrHealth reports the health the SKR source read from objects of a settled SyncResource: written without a run (write-status). */
  skrHealth: 'io.kyma-project.syncresource.skr.health',
  /** changed says that a SyncResource needs a run: new, its spec edited, or its deletion begun (the SKR source, from the KCP). */
  changed: 'io.kyma-project.syncresource.changed',
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
  /** trigger says why: resync (cron), kyma (its Kyma, or the SyncPolicy of its namespace, changed), secret (its access Secret changed). */
  trigger: 'resync' | 'kyma' | 'secret';
  /** since is when the fan-out began (ISO time): SKR snapshots taken before it confirm nothing for this run. */
  since?: string;
}

/** SkrChange is one object of a SyncResource that the SKR source saw change. */
export interface SkrChange {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  /** change: gone, drift (a field its manager owns changed by another), health (not what the status says). */
  change: 'gone' | 'drift' | 'health';
}

/** SourceVersion is what the SKR source's events carry of the SyncResource's version. */
export interface SourceVersion {
  /**
   * resourceVersion: the SyncResource's as the source last saw it. The step that reads the
   * SyncResource reads it from the KCP's watch cache at no older version (kcp.ts get); the
   * read, not the event, decides.
   */
  resourceVersion?: string;
}

/** SkrChanged is the data of an skr.changed event: a SyncResource (as the KCP inventory says) and what changed. */
export interface SkrChanged extends SyncRef, SourceVersion {
  uid: string;
  kyma: string;
  /** changes are at most 16 objects, for logs and the reason of the run; the run reads live state. */
  changes: SkrChange[]; /**
   * ahead: objects the SyncResource held as the source saw it (its inventory, at most 16),
   * which apply-items reads while it reads the SyncResource; a run takes such a read only as
   * its own read of the same object before its first write (objects.ts usingReadsAhead).
   */
  ahead?: ObjectId[];
}

/** ReportedHealth is one object's health as the SKR source read it from its watch. */
export interface ReportedHealth {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  health: Health;
}

/**
 * SkrHealth is the data of an skr.health event: the health of objects a SyncResource holds,
 * read by the SKR source from the objects it watches, for a SyncResource whose status is of
 * its spec's generation and whose items are all applied. write-status writes it (the live
 * SyncResource's inventory and spec must name each object's item) or, when the status is
 * not one a report may change, asks for a run instead (an skr.changed reply).
 */
export interface SkrHealth extends SyncRef, SourceVersion {
  uid: string;
  kyma: string;
  /** objects are at most 16, each once. */
  objects: ReportedHealth[];
}

/**
 * SyncResourceChanged is the data of a syncresource.changed event: the SyncResource as the
 * source saw it (uid, generation, Kyma), whether it had been reconciled before (change: an
 * edit or a deletion, ahead of bulk) and whether it is being deleted. A claim that saves
 * resolve-cluster a read; apply-items reads the SyncResource and writes only under its
 * preconditions.
 */
export interface SyncResourceChanged extends SyncRef, SourceVersion {
  uid: string;
  generation: number;
  kyma: string;
  change?: true;
  deleting?: true;
  /** policy: the SyncPolicy of its namespace was created, changed or deleted (a run at a generation already run). */
  policy?: true;
  /** requested: a run was asked for (a new value of the reconcile annotation), at a generation already run. */
  requested?: true; /**
   * ahead: objects the SyncResource held as the source saw it (its inventory, at most 16),
   * which apply-items reads while it reads the SyncResource; a run takes such a read only as
   * its own read of the same object before its first write (objects.ts usingReadsAhead).
   */
  ahead?: ObjectId[];
}

/**
 * KymaRequest is the data of a kyma.reconcile event: every SyncResource of the Kyma
 * name (in namespace) is reconciled in one delivery, so a resync costs about one
 * delivery and one KCP request per Kyma, not per SyncResource.
 */
export interface KymaRequest extends SyncRef {
  trigger: ReconcileRequest['trigger'];
  since?: string;
}

/** KymaResolved is the data of a kyma.resolved event: the Kyma (name) and its access Secret version. */
export interface KymaResolved extends KymaRequest {
  secret: ClusterResolved['secret'];
}

/** ClusterResolved is the data of a cluster.resolved event. */
export interface ClusterResolved extends SyncRef {
  /** trigger says what started this run: a watch event of the SyncResource, of its SKR objects (skr), or a reconcile request. */
  trigger?: 'watch' | 'skr' | ReconcileRequest['trigger'];
  uid: string;
  generation: number;
  kyma: string;
  /** secret references the access Secret version (no content). */
  secret: { namespace: string; name: string; uid: string; resourceVersion: string };
  /** resourceVersion: the source's event's SyncResource version, passed on (apply-items reads at no older version). */
  resourceVersion?: string;
  /** urgent marks an edit or deletion of a SyncResource reconciled before: its run goes ahead of new SyncResources and resyncs. */
  urgent?: boolean;
  /** deleting marks an urgent run of a SyncResource being deleted: it goes behind edits (ordering only; the run reads the live object). */
  deleting?: boolean;
  /** since carries ReconcileRequest.since. */
  since?: string;
  /**
   * held: the run is for objects the SKR source saw change (skr.changed, at most 16);
   * apply-items runs only if the live inventory holds one of them (rules.ts heldBy).
   * generation is then 0: the run is for whatever generation is live.
   */
  held?: ObjectId[]; /** ahead: the source's event's ahead, passed on. */
  ahead?: ObjectId[];
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
   * changed status on this basis in one request that tests uid, resourceVersion,
   * generation and item names first (a false claim changes nothing), and reads the live
   * object when a test fails or nothing seems to change.
   */
  seen?: Seen;
  /**
   * status is the status the result computes to on seen.status (lib/status.ts), computed
   * once by the run's step: the status step writes it while seen is still current, and
   * computes anew only on a live object it had to read.
   */
  status?: Omit<SyncStatus, 'synced'>;
}

/** Seen is what the status step needs of the SyncResource a run saw (its status, never its spec). */
export interface Seen {
  resourceVersion: string;
  generation: number;
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

/** MAX_AHEAD bounds an event's ahead: the reads a run makes before it knows it needs them. */
export const MAX_AHEAD = 16;

/** aheadOf is an event's ahead for a SyncResource's inventory entries: their identities, the first MAX_AHEAD (none: {}). */
export function aheadOf(entries: readonly ObjectId[] | undefined): { ahead?: ObjectId[] } {
  if (!entries?.length) return {};
  return {
    ahead: entries.slice(0, MAX_AHEAD).map(({ apiVersion, kind, namespace, name }) => ({
      apiVersion,
      kind,
      ...(namespace ? { namespace } : {}),
      name,
    })),
  };
}

/** makeEvent builds an event emitted by step about a SyncResource. */
export function makeEvent<T extends SyncRef>(
  step: string,
  type: string,
  data: T,
  extensions: Record<string, string> = {},
): CloudEvent<T> {
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
