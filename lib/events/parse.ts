// parse.ts reads the data of every event the product consumes: one parser per event
// type, each returning a copy of exactly the fields it checked. A parser's EventDataError
// (fields.ts) is a 400 (redelivery cannot fix bad data). What the data claims is still only a claim:
// the steps read live state before they act (docs/user/security.md).
import type { CloudEvent } from 'cloudevents';
import { objectKey, type ObjectId } from '../model.ts';
import { isDnsLabel, isDnsSubdomain } from '../policy/identity.ts';
import {
  bool,
  count,
  EventDataError,
  fail,
  isTime,
  list,
  map,
  oneOf,
  optional,
  str,
  type Data,
} from './fields.ts';
import { checkHealth, checkResult, checkSeen, checkStatus } from './outcome.ts';
import {
  MAX_AHEAD,
  type ClusterResolved,
  type ItemsApplied,
  type KymaRequest,
  type KymaResolved,
  type ReconcileRequest,
  type SkrChange,
  type SkrChanged,
  type SkrHealth,
  type SyncRef,
  type SyncResourceChanged,
} from './contract.ts';

/** checkRef validates a SyncResource (or Kyma, Secret) reference's namespace and name. */
export function checkRef(data: unknown, at = 'data'): SyncRef {
  const d = map(data, at);
  return {
    namespace: str(d, 'namespace', isDnsLabel, 253, at),
    name: str(d, 'name', isDnsSubdomain, 253, at),
  };
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

const TRIGGERS = ['resync', 'kyma', 'secret'] as const;

/** checkReconcileRequest validates a reconcile event's data. */
export function checkReconcileRequest(data: unknown): ReconcileRequest {
  const ref = checkRef(data);
  const d = data as Data;
  return {
    ...ref,
    trigger: oneOf(d, 'trigger', TRIGGERS),
    ...optional(d, 'since', () => str(d, 'since', isTime, 64)),
  };
}

/** checkKymaRequest validates a kyma.reconcile event's data. */
export const checkKymaRequest = (data: unknown): KymaRequest => checkReconcileRequest(data);

/** checkSecretRef validates a reference to an access Secret version. */
function checkSecretRef(v: unknown): ClusterResolved['secret'] {
  const s = map(v, 'data.secret');
  return {
    ...checkRef(s, 'data.secret'),
    uid: str(s, 'uid', undefined, 64, 'data.secret'),
    resourceVersion: str(s, 'resourceVersion', undefined, 64, 'data.secret'),
  };
}

/** checkKymaResolved validates a kyma.resolved event's data. */
export function checkKymaResolved(data: unknown): KymaResolved {
  return { ...checkKymaRequest(data), secret: checkSecretRef((data as Data).secret) };
}

const CLUSTER_TRIGGERS = ['watch', 'skr', ...TRIGGERS] as const;

/** checkClusterResolved validates a cluster.resolved event's data: identity, generation and Secret reference. */
export function checkClusterResolved(data: unknown): ClusterResolved {
  const ref = checkRef(data);
  const d = data as Data;
  return {
    ...ref,
    ...optional(d, 'trigger', () => oneOf(d, 'trigger', CLUSTER_TRIGGERS)),
    uid: str(d, 'uid', undefined, 64),
    generation: count(d, 'generation'),
    kyma: str(d, 'kyma', isDnsSubdomain),
    secret: checkSecretRef(d.secret),
    ...version(d),
    ...optional(d, 'urgent', () => bool(d, 'urgent', 'data')),
    ...optional(d, 'deleting', () => bool(d, 'deleting', 'data')),
    ...optional(d, 'since', () => str(d, 'since', isTime, 64)),
    ...objectIds(d, 'held'),
    ...objectIds(d, 'ahead'),
  };
}

/** version validates an optional resourceVersion of the SyncResource: opaque to the product, bounded here, parsed by the API server. */
const version = (d: Data) => optional(d, 'resourceVersion', () => str(d, 'resourceVersion', undefined, 64));

/** objectIds validates an optional list of at most MAX_AHEAD (16) SKR objects' identities. */
const objectIds = (d: Data, key: 'held' | 'ahead') =>
  optional(d, key, () => list(d, key, 'data', (v, at) => checkObjectId(map(v, at), at), MAX_AHEAD));

const CHANGES = ['gone', 'drift', 'health'] as const;

/** checkObjectId validates an SKR object's identity as the SKR source's events name it. */
function checkObjectId(o: Data, at: string): ObjectId {
  return {
    apiVersion: str(o, 'apiVersion', undefined, 317, at),
    kind: str(o, 'kind', undefined, 63, at),
    ...optional(o, 'namespace', () => str(o, 'namespace', isDnsLabel, 253, at)),
    name: str(o, 'name', undefined, 253, at),
  };
}

/** checkSkrChanged validates an skr.changed event's data. */
export function checkSkrChanged(data: unknown): SkrChanged {
  const ref = checkRef(data);
  const d = data as Data;
  const change = (v: unknown, at: string): SkrChange => {
    const c = map(v, at);
    return { ...checkObjectId(c, at), change: oneOf(c, 'change', CHANGES, at) };
  };
  return {
    ...ref,
    uid: str(d, 'uid', undefined, 64),
    kyma: str(d, 'kyma', isDnsSubdomain),
    changes: list(d, 'changes', 'data', change, 16),
    ...version(d),
    ...objectIds(d, 'ahead'),
  };
}

/** checkSkrHealth validates an skr.health event's data: each object once. */
export function checkSkrHealth(data: unknown): SkrHealth {
  const ref = checkRef(data);
  const d = data as Data;
  const objects = list(
    d,
    'objects',
    'data',
    (v, at) => {
      const o = map(v, at);
      return { ...checkObjectId(o, at), health: checkHealth(o.health, `${at}.health`) };
    },
    16,
  );
  const keys = new Set(objects.map(objectKey));
  if (keys.size !== objects.length) fail('data.objects names an object twice');
  return {
    ...ref,
    uid: str(d, 'uid', undefined, 64),
    kyma: str(d, 'kyma', isDnsSubdomain),
    objects,
    ...version(d),
  };
}

/** checkSyncResourceChanged validates a syncresource.changed event's data. */
export function checkSyncResourceChanged(data: unknown): SyncResourceChanged {
  const ref = checkRef(data);
  const d = data as Data;
  const flag = (key: 'change' | 'deleting' | 'policy' | 'requested') => {
    if (d[key] === undefined) return {};
    if (d[key] !== true) fail(`data.${key} is not true`);
    return { [key]: true as const };
  };
  return {
    ...ref,
    uid: str(d, 'uid', undefined, 64),
    generation: count(d, 'generation'),
    kyma: str(d, 'kyma', isDnsSubdomain),
    ...version(d),
    ...flag('change'),
    ...flag('deleting'),
    ...flag('policy'),
    ...flag('requested'),
    ...objectIds(d, 'ahead'),
  };
}

/** checkItemsApplied validates an items.applied event's data: identity, the run's result and what the run saw. */
export function checkItemsApplied(data: unknown): ItemsApplied {
  const ref = checkRef(data);
  const d = data as Data;
  return {
    ...ref,
    uid: str(d, 'uid', undefined, 64),
    kyma: str(d, 'kyma', isDnsSubdomain),
    result: checkResult(d.result),
    ...optional(d, 'urgent', () => bool(d, 'urgent', 'data')),
    ...optional(d, 'seen', () => checkSeen(d.seen)),
    ...optional(d, 'status', () => checkStatus(d.status, 'data.status')),
  };
}

export { EventDataError } from './fields.ts';
