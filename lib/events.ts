// events.ts: every CloudEvent type the product consumes or emits, with builders and
// parsers. Events carry identity only: never manifests, never credentials.
import { randomUUID } from 'node:crypto';
import { CloudEvent } from 'cloudevents';
import { DIGESTS } from './engine/inventory.ts';
import type { ApplyResult } from './engine/result.ts';
import { MAX_FEEDBACK } from './feedback.ts';
import { HEALTH_STATUSES } from './model.ts';
import type { SyncStatus } from './model.ts';
import { isDnsLabel, isDnsSubdomain } from './policy/identity.ts';
import { isMap } from './values.ts';

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
  /** changed says that a SyncResource needs a run: new, its spec edited, or its deletion begun (the SKR source, from the KCP). */
  changed: 'io.kyma-project.syncresource.changed',
} as const;

/** SOURCE_PREFIX prefixes the source attribute of emitted events: /kcp-sync-resource/<step>. */
export const SOURCE_PREFIX = '/kcp-sync-resource';

/**
 * EventContract is one event type as it crosses the broker. EVENT_CONTRACT lists every type
 * the product consumes or emits; docs/contributor/architecture.md's table is rendered from
 * it (node infra/docs.ts), and tests hold it against the constants above, the Triggers of
 * knative.yaml and the events a real run sends (test/docs.test.ts, observability).
 */
export interface EventContract {
  type: string;
  /** from names the senders: Knative sources by name, or the product's steps (source /kcp-sync-resource/<step>). */
  from: { sources?: string[]; steps?: string[] };
  /** to names the functions whose Trigger takes the type. */
  to: string[];
  source: string;
  subject: string;
  /** data are the top-level fields of the data; a trailing "?" marks an optional one. */
  data: string[];
  /** what says what the event asks for, in a few words. */
  what: string;
}

const ADAPTERS = ['sync-kymas', 'sync-access-secrets', 'sync-source-secrets', 'sync-source-configmaps'];
const apiServerRef = (type: string): EventContract => ({
  type,
  from: { sources: ADAPTERS },
  to: ['sync-resync', 'sync-resolve-cluster'],
  source: 'the KCP API server URL',
  subject: '/apis/<apiVersion>/namespaces/<ns>/<kind>s/<name>',
  data: ['apiVersion', 'kind', 'name', 'namespace'],
  what: 'a Kyma, access Secret, source Secret or ConfigMap changed (Reference mode: identity only)',
});

export const EVENT_CONTRACT: readonly EventContract[] = [
  ...ApiServerRefTypes.map(apiServerRef),
  {
    type: PING_TYPE,
    from: { sources: ['sync-resync'] },
    to: ['sync-resync'],
    source: '/apis/v1/namespaces/kcp-system/pingsources/<name>',
    subject: 'none',
    data: ['reason'],
    what: 'resync: every SyncResource, by Kyma',
  },
  {
    type: EventTypes.reconcile,
    from: { steps: ['resync', 'resolve-cluster', 'apply-items'] },
    to: ['sync-resolve-cluster'],
    source: `${SOURCE_PREFIX}/<step>`,
    subject: '<namespace>/<name>',
    data: ['namespace', 'name', 'trigger', 'since?'],
    what: 'reconcile one SyncResource',
  },
  {
    type: EventTypes.skrChanged,
    from: { steps: ['skr-source'] },
    to: ['sync-resolve-cluster'],
    source: `${SOURCE_PREFIX}/skr-source`,
    subject: '<namespace>/<name>',
    data: ['namespace', 'name', 'uid', 'kyma', 'changes'],
    what: 'objects of one SyncResource gone, drifted or moved in health in its SKR: reconcile it',
  },
  {
    type: EventTypes.changed,
    from: { steps: ['skr-source'] },
    to: ['sync-resolve-cluster'],
    source: `${SOURCE_PREFIX}/skr-source`,
    subject: '<namespace>/<name>',
    data: ['namespace', 'name', 'uid', 'generation', 'kyma', 'change?', 'deleting?', 'policy?', 'requested?'],
    what: 'a SyncResource is new, edited or being deleted, a run of it was asked for (the reconcile annotation), or the SyncPolicy of its namespace changed: reconcile it (not sent for its own writes)',
  },
  {
    type: EventTypes.reconcileKyma,
    from: { steps: ['resync', 'resolve-cluster'] },
    to: ['sync-resolve-cluster'],
    source: `${SOURCE_PREFIX}/<step>`,
    subject: '<namespace>/<kyma>',
    data: ['namespace', 'name', 'trigger', 'since?'],
    what: 'reconcile every SyncResource of one Kyma',
  },
  {
    type: EventTypes.kymaResolved,
    from: { steps: ['resolve-cluster'] },
    to: ['sync-apply-items'],
    source: `${SOURCE_PREFIX}/resolve-cluster`,
    subject: '<namespace>/<kyma>',
    data: ['namespace', 'name', 'trigger', 'since?', 'secret'],
    what: "the Kyma's access Secret version: apply each of its SyncResources",
  },
  {
    type: EventTypes.clusterResolved,
    from: { steps: ['resolve-cluster'] },
    to: ['sync-apply-items'],
    source: `${SOURCE_PREFIX}/resolve-cluster`,
    subject: '<namespace>/<name>',
    data: ['namespace', 'name', 'trigger?', 'uid', 'generation', 'kyma', 'secret', 'urgent?', 'since?'],
    what: 'apply one SyncResource with this access Secret version',
  },
  {
    type: EventTypes.itemsApplied,
    from: { steps: ['apply-items', 'resolve-cluster'] },
    to: ['sync-write-status'],
    source: `${SOURCE_PREFIX}/<step>`,
    subject: '<namespace>/<name>',
    data: ['namespace', 'name', 'uid', 'kyma', 'result', 'urgent?', 'seen?'],
    what: "a run's outcome (or a resolution failure): write the status",
  },
];

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

/** SkrChanged is the data of an skr.changed event: a SyncResource (as the KCP inventory says) and what changed. */
export interface SkrChanged extends SyncRef {
  uid: string;
  kyma: string;
  /** changes are at most 16 objects, for logs and the reason of the run; the run reads live state. */
  changes: SkrChange[];
}

/**
 * SyncResourceChanged is the data of a syncresource.changed event: the SyncResource as the
 * source saw it (uid, generation, Kyma), whether it had been reconciled before (change: an
 * edit or a deletion, ahead of bulk) and whether it is being deleted. A claim that saves
 * resolve-cluster a read; apply-items reads the SyncResource and writes only under its
 * preconditions.
 */
export interface SyncResourceChanged extends SyncRef {
  uid: string;
  generation: number;
  kyma: string;
  change?: true;
  deleting?: true;
  /** policy: the SyncPolicy of its namespace was created, changed or deleted (a run at a generation already run). */
  policy?: true;
  /** requested: a run was asked for (a new value of the reconcile annotation), at a generation already run. */
  requested?: true;
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
   * changed status on this basis in one request that tests uid, resourceVersion,
   * generation and item names first (a false claim changes nothing), and reads the live
   * object when a test fails or nothing seems to change.
   */
  seen?: Seen;
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

/** refFromEvent extracts a SyncResource ref from an ApiServerSource or product event, or undefined. */
export function refFromEvent(event: CloudEvent<unknown>): SyncRef | undefined {
  try {
    return checkRef(event.data);
  } catch (err) {
    if (err instanceof EventDataError) return undefined;
    throw err;
  }
}

/** EventDataError says what is wrong with an event's data (the function answers 400: redelivery cannot fix it). */
export class EventDataError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EventDataError';
  }
}

function str(o: Record<string, unknown>, key: string, valid?: (s: string) => boolean, max = 253): string {
  const v = o[key];
  if (typeof v !== 'string' || v === '' || v.length > max || (valid && !valid(v)))
    throw new EventDataError(`data.${key} is not valid`);
  return v;
}

function count(o: Record<string, unknown>, key: string): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
    throw new EventDataError(`data.${key} is not a non-negative integer`);
  return v;
}

/** checkRef validates a SyncResource (or Kyma, Secret) reference's namespace and name. */
export function checkRef(data: unknown): SyncRef {
  if (!isMap(data)) throw new EventDataError('data is not an object');
  return { namespace: str(data, 'namespace', isDnsLabel), name: str(data, 'name', isDnsSubdomain) };
}

const CHANGES = new Set(['gone', 'drift', 'health']);

/** checkSkrChanged validates an skr.changed event's data and returns a copy of exactly its fields. */
export function checkSkrChanged(data: unknown): SkrChanged {
  const ref = checkRef(data);
  const d = data as Record<string, unknown>;
  const uid = str(d, 'uid', undefined, 64);
  const kyma = str(d, 'kyma', isDnsSubdomain);
  if (!Array.isArray(d.changes) || d.changes.length > 16)
    throw new EventDataError('data.changes is not a list of at most 16');
  const changes = d.changes.map((c: unknown): SkrChange => {
    if (!isMap(c)) throw new EventDataError('data.changes[] is not an object');
    if (!CHANGES.has(c.change as string))
      throw new EventDataError('data.changes[].change is not gone, drift or health');
    return {
      apiVersion: str(c, 'apiVersion', undefined, 317),
      kind: str(c, 'kind', undefined, 63),
      ...(c.namespace !== undefined ? { namespace: str(c, 'namespace', isDnsLabel) } : {}),
      name: str(c, 'name', undefined, 253),
      change: c.change as SkrChange['change'],
    };
  });
  return { ...ref, uid, kyma, changes };
}

/** checkSyncResourceChanged validates a syncresource.changed event's data and returns a copy of exactly its fields. */
export function checkSyncResourceChanged(data: unknown): SyncResourceChanged {
  const ref = checkRef(data);
  const d = data as Record<string, unknown>;
  const flag = (key: string): boolean => {
    if (d[key] === undefined) return false;
    if (d[key] !== true) throw new EventDataError(`data.${key} is not true`);
    return true;
  };
  return {
    ...ref,
    uid: str(d, 'uid', undefined, 64),
    generation: count(d, 'generation'),
    kyma: str(d, 'kyma', isDnsSubdomain),
    ...(flag('change') ? { change: true } : {}),
    ...(flag('deleting') ? { deleting: true } : {}),
    ...(flag('policy') ? { policy: true } : {}),
    ...(flag('requested') ? { requested: true } : {}),
  };
}

/** checkClusterResolved validates a cluster.resolved event's data: identity, generation and Secret reference. */
export function checkClusterResolved(data: unknown): ClusterResolved {
  checkRef(data);
  const d = data as Record<string, unknown>;
  str(d, 'uid', undefined, 64);
  count(d, 'generation');
  str(d, 'kyma', isDnsSubdomain);
  if (!isMap(d.secret)) throw new EventDataError('data.secret is not an object');
  checkRef(d.secret);
  str(d.secret, 'uid', undefined, 64);
  str(d.secret, 'resourceVersion', undefined, 64);
  return data as unknown as ClusterResolved;
}

const TRIGGERS = new Set(['resync', 'kyma', 'secret']);

/** checkKymaRequest validates a kyma.reconcile event's data. */
export function checkKymaRequest(data: unknown): KymaRequest {
  const ref = checkRef(data);
  const d = data as Record<string, unknown>;
  if (!TRIGGERS.has(d.trigger as string))
    throw new EventDataError('data.trigger is not resync, kyma or secret');
  if (d.since !== undefined) str(d, 'since', (s) => !Number.isNaN(Date.parse(s)), 64);
  return {
    ...ref,
    trigger: d.trigger as KymaRequest['trigger'],
    ...(d.since !== undefined ? { since: d.since as string } : {}),
  };
}

/** checkKymaResolved validates a kyma.resolved event's data. */
export function checkKymaResolved(data: unknown): KymaResolved {
  const req = checkKymaRequest(data);
  const d = data as Record<string, unknown>;
  if (!isMap(d.secret)) throw new EventDataError('data.secret is not an object');
  const secret = checkRef(d.secret);
  const uid = str(d.secret, 'uid', undefined, 64);
  const resourceVersion = str(d.secret, 'resourceVersion', undefined, 64);
  return { ...req, secret: { ...secret, uid, resourceVersion } };
}

const STATES = new Set(['Ready', 'Processing', 'Error', 'Warning', 'Deleting']);

const HEALTH: ReadonlySet<string> = new Set(HEALTH_STATUSES);

/** checkItemsApplied validates an items.applied event's data: identity and the shape of the result. */
export function checkItemsApplied(data: unknown): ItemsApplied {
  checkRef(data);
  const d = data as Record<string, unknown>;
  str(d, 'uid', undefined, 64);
  str(d, 'kyma', isDnsSubdomain);
  const r = d.result;
  if (!isMap(r)) throw new EventDataError('data.result is not an object');
  count(r, 'generation');
  str(r, 'observedAt', undefined, 64);
  if (r.requested !== undefined) str(r, 'requested', undefined, 256);
  for (const key of ['items', 'changes', 'inventory', 'pending']) {
    if (!Array.isArray(r[key])) throw new EventDataError(`data.result.${key} is not a list`);
  }
  if (r.recorded !== undefined) {
    if (!Array.isArray(r.recorded)) throw new EventDataError('data.result.recorded is not a list');
    for (const e of r.recorded as unknown[]) {
      if (!isMap(e)) throw new EventDataError('data.result.recorded holds an entry that is not an object');
      count(e, 'index');
      str(e, 'kind', undefined, 253);
      str(e, 'name', undefined, 253);
      for (const k of DIGESTS) if (e[k] !== undefined) str(e, k, (v) => /^[0-9a-f:]+$/.test(v), 80);
    }
  }
  if (d.seen !== undefined) {
    if (
      !isMap(d.seen) ||
      typeof d.seen.labelled !== 'boolean' ||
      (d.seen.status !== undefined && !isMap(d.seen.status))
    )
      throw new EventDataError('data.seen is not valid');
    str(d.seen, 'resourceVersion', undefined, 64);
    count(d.seen, 'generation');
  }
  for (const i of r.items as unknown[]) {
    if (
      !isMap(i) ||
      typeof i.name !== 'string' ||
      !STATES.has(i.state as string) ||
      typeof i.reason !== 'string' ||
      typeof i.message !== 'string'
    ) {
      throw new EventDataError('data.result.items holds an entry that is not {name, state, reason, message}');
    }
    if (i.object !== undefined && typeof i.object !== 'string')
      throw new EventDataError('data.result.items[].object is not a string');
    if (
      i.health !== undefined &&
      !(
        isMap(i.health) &&
        HEALTH.has(i.health.status as string) &&
        typeof i.health.message === 'string' &&
        (i.health.reason === undefined || typeof i.health.reason === 'string')
      )
    ) {
      throw new EventDataError('data.result.items[].health is not {status, reason, message}');
    }
    if (
      i.feedback !== undefined &&
      !(
        Array.isArray(i.feedback) &&
        i.feedback.length <= MAX_FEEDBACK &&
        i.feedback.every(
          (f: unknown) =>
            isMap(f) &&
            typeof f.name === 'string' &&
            (f.value === undefined || typeof f.value === 'string') &&
            (f.message === undefined || typeof f.message === 'string'),
        )
      )
    ) {
      throw new EventDataError('data.result.items[].feedback is not a list of {name, value, message}');
    }
  }
  return data as unknown as ItemsApplied;
}
