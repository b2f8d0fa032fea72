// outcome.ts reads what an items.applied event carries: a run's result (ApplyResult), the
// SyncResource's status as the run saw it, and the status the run computed. Every field
// the status step uses is checked here; the texts of a status are cut to what the CRD
// holds, as a computed status is cut (result.ts statusItemOf; a status write never fails
// for its size).
import type { Action, Change } from '../changeset.ts';
import { statusItemOf, type ApplyResult, type ItemResult } from '../engine/result.ts';
import { DIGESTS, type Recorded } from '../engine/inventory.ts';
import { MAX_FEEDBACK } from '../feedback.ts';
import {
  HEALTH_STATUSES,
  type Condition,
  type FeedbackValue,
  type Health,
  type InventoryEntry,
} from '../model.ts';
import type { ItemStatus, PreviewStatus, State, SyncStatus } from '../model.ts';
import type { ClusterReason, ItemReason } from '../reasons.ts';
import { bounded, MAX_MESSAGE } from '../policy/rules.ts';
import type { Seen } from './contract.ts';
import { bool, count, list, map, oneOf, optional, str, text, type Data } from './fields.ts';

const STATES: readonly State[] = ['Ready', 'Processing', 'Error', 'Warning', 'Deleting'];
const ACTIONS: readonly Action[] = [
  'created',
  'configured',
  'unchanged',
  'skipped',
  'deleted',
  'released',
  'recreated',
];
const isDigest = (v: string) => /^[0-9a-f:]+$/.test(v);

/** checkResult validates a run's result. */
export function checkResult(v: unknown): ApplyResult {
  const at = 'data.result';
  const r = map(v, at);
  return {
    generation: count(r, 'generation', at),
    observedAt: str(r, 'observedAt', undefined, 64, at),
    items: list(r, 'items', at, itemResult),
    changes: list(r, 'changes', at, change),
    inventory: list(r, 'inventory', at, entry),
    pending: list(r, 'pending', at, (p, a) => str({ p }, 'p', undefined, 1024, a)),
    ...optional(r, 'recorded', () => list(r, 'recorded', at, recorded)),
    ...optional(r, 'failed', () => list(r, 'failed', at, failure)),
    ...optional(r, 'deleting', () => deleting(r.deleting)),
    ...optional(r, 'suspended', () => bool(r, 'suspended', at)),
    ...optional(r, 'requested', () => str(r, 'requested', undefined, 256, at)),
    ...optional(r, 'clusterError', () => clusterError(r.clusterError)),
  };
}

/** itemStatus validates what an item's result and its status entry share. */
function itemStatus(v: unknown, at: string): ItemStatus {
  const i = map(v, at);
  return {
    name: str(i, 'name', undefined, 253, at),
    state: oneOf(i, 'state', STATES, at),
    reason: str(i, 'reason', undefined, 256, at),
    message: text(i, 'message', at),
    ...optional(i, 'health', () => checkHealth(i.health, `${at}.health`)),
    ...optional(i, 'feedback', () => list(i, 'feedback', at, feedback, MAX_FEEDBACK)),
  };
}

/** statusItem is an entry of status.items, its texts cut as a computed status's are. */
const statusItem = (v: unknown, at: string): ItemStatus => statusItemOf(itemStatus(v, at));

function itemResult(v: unknown, at: string): ItemResult {
  const i = map(v, at);
  return {
    ...itemStatus(v, at),
    reason: str(i, 'reason', undefined, 256, at) as ItemReason,
    ...optional(i, 'transient', () => bool(i, 'transient', at)),
    ...optional(i, 'change', () => change(i.change, `${at}.change`)),
    ...optional(i, 'object', () => str(i, 'object', undefined, 1024, at)),
  };
}

/** checkHealth validates an object's health as a result or a report carries it. */
export function checkHealth(v: unknown, at: string): Health {
  const h = map(v, at);
  return {
    status: oneOf(h, 'status', HEALTH_STATUSES, at),
    ...optional(h, 'reason', () => text(h, 'reason', at)),
    message: text(h, 'message', at),
  };
}

function feedback(v: unknown, at: string): FeedbackValue {
  const f = map(v, at);
  return {
    name: text(f, 'name', at),
    ...optional(f, 'value', () => text(f, 'value', at)),
    ...optional(f, 'message', () => text(f, 'message', at)),
  };
}

function change(v: unknown, at: string): Change {
  const c = map(v, at);
  const strings = (o: Data, key: string, a: string) => list(o, key, a, (s, e) => text({ s }, 's', e));
  return {
    subject: str(c, 'subject', undefined, 1024, at),
    action: oneOf(c, 'action', ACTIONS, at),
    ...optional(c, 'item', () => str(c, 'item', undefined, 253, at)),
    ...optional(c, 'drift', () => bool(c, 'drift', at)),
    ...optional(c, 'cause', () => {
      const cause = map(c.cause, `${at}.cause`);
      return {
        paths: strings(cause, 'paths', `${at}.cause`),
        managers: strings(cause, 'managers', `${at}.cause`),
      };
    }),
  };
}

function entry(v: unknown, at: string): InventoryEntry {
  const e = map(v, at);
  return {
    item: str(e, 'item', undefined, 253, at),
    apiVersion: str(e, 'apiVersion', undefined, 317, at),
    kind: str(e, 'kind', undefined, 253, at),
    ...optional(e, 'namespace', () => str(e, 'namespace', undefined, 253, at)),
    name: str(e, 'name', undefined, 253, at),
    ...optional(e, 'adopted', () => bool(e, 'adopted', at)),
    ...digests(e, at),
  };
}

const digests = (e: Data, at: string) =>
  Object.fromEntries(DIGESTS.flatMap((k) => (e[k] === undefined ? [] : [[k, str(e, k, isDigest, 80, at)]])));

function recorded(v: unknown, at: string): Recorded {
  const e = map(v, at);
  return {
    index: count(e, 'index', at),
    kind: str(e, 'kind', undefined, 253, at),
    name: str(e, 'name', undefined, 253, at),
    ...digests(e, at),
  };
}

function failure(v: unknown, at: string) {
  const f = map(v, at);
  return { subject: str(f, 'subject', undefined, 1024, at), message: text(f, 'message', at) };
}

function deleting(v: unknown): NonNullable<ApplyResult['deleting']> {
  const at = 'data.result.deleting';
  const d = map(v, at);
  return {
    finalizerRemoved: bool(d, 'finalizerRemoved', at),
    policy: oneOf(d, 'policy', ['Delete', 'Orphan'], at),
  };
}

function clusterError(v: unknown): NonNullable<ApplyResult['clusterError']> {
  const at = 'data.result.clusterError';
  const c = map(v, at);
  return {
    reason: str(c, 'reason', undefined, 256, at) as ClusterReason,
    message: text(c, 'message', at),
    transient: bool(c, 'transient', at),
  };
}

/** checkSeen validates the SyncResource as the run saw it: the basis the status step writes on. */
export function checkSeen(v: unknown): Seen {
  const at = 'data.seen';
  const s = map(v, at);
  return {
    resourceVersion: str(s, 'resourceVersion', undefined, 64, at),
    generation: count(s, 'generation', at),
    labelled: bool(s, 'labelled', at),
    ...optional(s, 'status', () => checkStatus(s.status, `${at}.status`)),
  };
}

/** checkStatus validates a status as the status step writes it (without the inventory). */
export function checkStatus(v: unknown, at: string): Omit<SyncStatus, 'synced'> {
  const s = map(v, at);
  return {
    ...optional(s, 'state', () => oneOf(s, 'state', STATES, at)),
    ...optional(s, 'observedGeneration', () => count(s, 'observedGeneration', at)),
    ...optional(s, 'conditions', () => list(s, 'conditions', at, condition)),
    ...optional(s, 'lastOperation', () => {
      const o = map(s.lastOperation, `${at}.lastOperation`);
      return {
        operation: bounded(text(o, 'operation', `${at}.lastOperation`), 4 * MAX_MESSAGE),
        ...optional(o, 'lastUpdateTime', () => text(o, 'lastUpdateTime', `${at}.lastOperation`)),
      };
    }),
    ...optional(s, 'items', () => list(s, 'items', at, statusItem)),
    ...optional(s, 'lastHandledReconcileAt', () => text(s, 'lastHandledReconcileAt', at)),
    ...optional(s, 'preview', () => preview(s.preview, `${at}.preview`)),
  };
}

function condition(v: unknown, at: string): Condition {
  const c = map(v, at);
  return {
    type: str(c, 'type', undefined, 316, at),
    status: oneOf(c, 'status', ['True', 'False', 'Unknown'], at),
    reason: str(c, 'reason', undefined, 1024, at),
    message: bounded(text(c, 'message', at), 4 * MAX_MESSAGE),
    lastTransitionTime: str(c, 'lastTransitionTime', undefined, 64, at),
    ...optional(c, 'observedGeneration', () => count(c, 'observedGeneration', at)),
  };
}

function preview(v: unknown, at: string): PreviewStatus {
  const p = map(v, at);
  const item = (e: unknown, a: string) => {
    const i = map(e, a);
    const opt = (k: 'object' | 'reason' | 'message' | 'diff') => optional(i, k, () => text(i, k, a));
    return {
      item: text(i, 'item', a),
      outcome: text(i, 'outcome', a),
      ...opt('object'),
      ...opt('reason'),
      ...opt('message'),
      ...opt('diff'),
    };
  };
  return {
    observedGeneration: count(p, 'observedGeneration', at),
    time: text(p, 'time', at),
    ...optional(p, 'of', () => text(p, 'of', at)),
    changes: bool(p, 'changes', at),
    items: list(p, 'items', at, item),
  };
}
