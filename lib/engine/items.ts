// items.ts decides and carries out what one item needs, given the live object:
// decide() is pure (strategy options + live state -> decision), execute() writes.
import { createHash } from 'node:crypto';
import { subjectOf, type Change } from '../changeset.ts';
import type { Config } from '../config.ts';
import { IdentityError, UnsafePathError } from '../identity.ts';
import { KubeApiError } from '../kube/errors.ts';
import { applyObject, deleteObject, getObject, IdentityMismatchError, type Cluster, type KubeObject } from '../kube/objects.ts';
import { describeId } from '../manifest.ts';
import { HASH_ANNOTATION, LEGACY_MARKS, MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER_ANNOTATION } from '../model.ts';
import { canonical, deepFreeze, isSubset } from '../util.ts';
import { ownedFields, project } from '../fields.ts';
import type { InventoryEntry } from '../model.ts';
import { appliedDigest, driftCause, statusDigest, type DriftCause } from './drift.ts';
import type { PlanItem } from './plan.ts';
import { hasLegacyMarks, release, stamp } from './marks.ts';
import { readFeedback } from '../feedback.ts';
import { healthOf, type Health } from '../health.ts';
import { immutableSummary, isImmutableRefusal, mayRecreate, recreate } from './recreate.ts';
import { result, type ItemResult } from './result.ts';

/** ClusterUnreachableError aborts a run: the SKR cannot be reached or refuses our credential. */
export class ClusterUnreachableError extends Error {
  constructor(cause: KubeApiError) {
    super(`SKR ${cause.cluster} is unreachable: ${cause.message}`, { cause });
    this.name = 'ClusterUnreachableError';
  }
}

/** Decision is what an item needs in this run. */
export interface Decision {
  /** op on the object itself; adopt puts only our marks on an object we did not create (marks.ts). */
  op: 'create' | 'update' | 'adopt' | 'unchanged' | 'ignore' | 'delete' | 'none';
  /** status: write the subresource. */
  status: boolean;
  /** record: the object must be in the inventory before the write (write-ahead). */
  record: boolean;
  /** adopt: the object exists without an owner; it is recorded as adopted (released, never deleted). */
  adopt?: boolean;
  /** release: a strategy that does not own (UpdateAndDelete) acts on an object that still carries our marks: take them off. */
  release?: boolean;
  /** drift: the update reverts changes made in the SKR (the manifest itself did not change); cause says which and by whom. */
  drift: boolean;
  cause?: DriftCause;
  /** recreate: an apply refused for an immutable field deletes the object and creates it anew (recreate.ts). */
  recreate?: boolean;
  /** confirm: no digest of our last apply is known; a dry run tells whether the values really differ before anything is written. */
  confirm?: boolean;
  /** desired is the body to apply for create/update. */
  desired?: KubeObject;
  /** done is the result when nothing is to be written. */
  done?: ItemResult;
}

/** desiredMemo keeps an object's desired bodies (by owner and options), so that deciding an item twice in a run builds it once. */
const desiredMemo = new WeakMap<KubeObject, Map<string, KubeObject>>();

/** desiredObject is the body we apply: the manifest plus our marks (and without status when /status exists); shared and frozen. */
export function desiredObject(p: PlanItem, owner: string): KubeObject {
  const src = p.object!;
  const key = `${owner}\n${p.info?.hasStatus ?? false}\n${p.opts.own}`;
  let bodies = desiredMemo.get(src);
  const hit = bodies?.get(key);
  if (hit) return hit;
  const o = structuredClone(src);
  if (p.info?.hasStatus) delete o.status;
  const digest = createHash('sha256').update(canonical({ o, own: p.opts.own })).digest('hex').slice(0, 32);
  o.metadata.annotations = { ...o.metadata.annotations, [HASH_ANNOTATION]: digest };
  if (p.opts.own) {
    o.metadata.labels = { ...o.metadata.labels, [MANAGED_BY_LABEL]: MANAGED_BY_VALUE };
    o.metadata.annotations[OWNER_ANNOTATION] = owner;
  }
  if (!bodies) desiredMemo.set(src, (bodies = new Map()));
  bodies.set(key, deepFreeze(o));
  return o;
}

/** ownerOf returns the owner annotation of a live object (the former key's, for an object marked before 0.2). */
export const ownerOf = (o: KubeObject | undefined): string | undefined =>
  o?.metadata.annotations?.[OWNER_ANNOTATION] ?? o?.metadata.annotations?.[LEGACY_MARKS.owner];

/** DecideContext is what decide needs besides the item and its live object. */
export interface DecideContext {
  /** owner is the owning SyncResource ("<namespace>/<name>"). */
  owner: string;
  fieldManager: string;
  /** entry is the item's object's inventory entry, with the digests of our last apply. */
  entry?: InventoryEntry | undefined;
}

/** decide computes the decision for an item from its live object (undefined: absent). */
export function decide(p: PlanItem, live: KubeObject | undefined, ctx: DecideContext): Decision {
  const { owner, entry, fieldManager } = ctx;
  const name = p.item.name;
  const what = describeId(p.id!);
  const none = (done: ItemResult): Decision => ({ op: 'none', status: false, record: false, drift: false, done });
  const liveOwner = ownerOf(live);
  if (live && liveOwner && liveOwner !== owner) {
    return none(result(name, 'Error', 'Conflict', `${what} is owned by SyncResource ${liveOwner}`));
  }
  // The status is written again when its text changed or a field of ours in it changed (digest);
  // without a digest (first run, an object we do not own) when it is not contained in the live status.
  const statusDrifted = () => (entry?.statusDigest
    ? entry.statusDigest !== statusDigest(p.status!.status, live!, fieldManager)
    : !isSubset(p.status!.status, live?.status));
  const wantStatus = (creating: boolean) =>
    p.status !== undefined && (p.opts.status === 'always' || (p.opts.status === 'onCreate' && creating)) &&
    (creating || statusDrifted());
  if (p.opts.remove) {
    if (!live) return none(result(name, 'Ready', 'Deleted', 'resource has been deleted', { change: change(p, 'unchanged') }));
    if (live.metadata.deletionTimestamp) return none(result(name, 'Deleting', 'DeletionInProgress', `${what} is being deleted`));
    return { op: 'delete', status: false, record: false, drift: false };
  }
  if (!live) {
    if (!p.opts.create || !p.object) {
      return p.object
        ? none(result(name, 'Ready', 'NotFound', `${what} does not exist; strategy ${p.item.strategy} never creates it`))
        : none(result(name, 'Warning', 'NotFound', `${what} does not exist; an item with only a subresource never creates it`));
    }
    return { op: 'create', status: wantStatus(true), record: p.opts.own, drift: false, desired: desiredObject(p, owner) };
  }
  if (p.opts.stopOnDeletion && live.metadata.deletionTimestamp) {
    return none(result(name, 'Deleting', 'DeletionInProgress', `${what} is being deleted; sync stopped`));
  }
  if (!p.object) return { op: 'none', status: wantStatus(false), record: false, drift: false };
  // An object without an owner annotation was not created by us: we may adopt it, never delete it.
  const adopting = p.opts.own && liveOwner === undefined;
  if (!p.opts.sync) {
    return adopting
      ? { op: 'adopt', status: false, record: true, adopt: true, drift: false }
      : { op: 'ignore', status: false, record: false, drift: false };
  }
  const desired = desiredObject(p, owner);
  const release = !p.opts.own && liveOwner === owner;
  const recreate = mayRecreate(p, adopting || entry?.adopted === true);
  const update = { op: 'update', status: wantStatus(false), record: adopting, adopt: adopting, desired, release, recreate } as const;
  const sameManifest = live.metadata.annotations?.[HASH_ANNOTATION] === desired.metadata.annotations?.[HASH_ANNOTATION];
  if (!sameManifest || adopting) return { ...update, drift: false };
  const unchanged: Decision = { op: 'unchanged', status: wantStatus(false), record: false, drift: false, release };
  // Drift is decided on what our field manager owns, as the server stores it (drift.ts).
  if (entry?.digest) {
    return entry.digest === appliedDigest(live, fieldManager) ? unchanged : { ...update, drift: true, cause: driftCause(desired, live, fieldManager) };
  }
  if (isSubset(desired, live)) return unchanged;
  return { ...update, drift: true, confirm: true, cause: driftCause(desired, live, fieldManager) };
}

function change(p: PlanItem, action: Change['action'], cause?: DriftCause): Change {
  return { subject: subjectOf(p.id!), action, item: p.item.name, ...(cause ? { drift: true, cause } : {}) };
}

/**
 * observe reads an item's live object; unreachable clusters abort the run. With a decide
 * context and a list cache, a recent snapshot (taken at since or later) that shows nothing
 * to do stands in for the read.
 */
export async function observe(skr: Cluster, p: PlanItem, ctx?: DecideContext, since?: number): Promise<KubeObject | undefined> {
  if (ctx && skr.lists && p.object && p.opts.own) {
    // A snapshot that cannot be had (e.g. a fresh CRD's storage still initializing) is no
    // reason to fail: the live read below decides.
    const snap = await guard(() => skr.lists!.get(p.info!, p.id!.namespace, p.id!.name, since)).catch((err: unknown) => {
      if (err instanceof ClusterUnreachableError) throw err;
      return undefined;
    });
    if (snap) {
      const d = decide(p, snap, ctx);
      if ((d.op === 'unchanged' || d.op === 'ignore') && !d.status && !d.record) return snap;
    }
  }
  return guard(() => getObject(skr, p.info!, p.id!.namespace, p.id!.name));
}

/** guard turns cluster-level failures into ClusterUnreachableError. */
export async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof KubeApiError && (err.code === 0 || err.authFailure)) throw new ClusterUnreachableError(err);
    throw err;
  }
}

/**
 * execute carries out a decision and returns the item's result; the digests of what the
 * server stored after our apply (or of what it holds unchanged) go to p.applied for the inventory.
 */
export async function execute(skr: Cluster, p: PlanItem, d: Decision, live: KubeObject | undefined, owner: string, config: Config): Promise<ItemResult> {
  if (d.done) return d.done.state === 'Error' ? d.done : observed(p, d.done, live);
  const name = p.item.name;
  const what = describeId(p.id!);
  const fm = config.fieldManager;
  const applied = (obj: KubeObject) => (p.applied = { ...p.applied, digest: appliedDigest(obj, fm) });
  try {
    let res: ItemResult;
    let current = live;
    switch (d.op) {
      case 'create':
        current = await guard(() => applyObject(skr, p.info!, d.desired!, fm));
        applied(current);
        res = result(name, 'Ready', 'Created', 'resource has been created', { change: change(p, 'created') });
        break;
      case 'update': {
        // Without a digest of our last apply, a dry run tells whether the values really differ.
        // A dry run refused for an immutable field goes on to the apply, which recreates.
        const dry = d.confirm ? await guard(() => applyObject(skr, p.info!, d.desired!, fm, undefined, true)).catch((err: unknown) => {
          if (d.recreate && isImmutableRefusal(err)) return undefined;
          throw err;
        }) : undefined;
        if (dry && sameValues(dry, live!, fm)) {
          // Nothing to write but, for a strategy that does not own it, our marks to take off.
          if (d.release) await guard(() => release(skr, p.info!, live!, config, false));
          applied(live!);
          res = result(name, 'Ready', 'Unchanged', 'resource has been synced', { change: change(p, 'unchanged') });
          break;
        }
        try {
          current = await guard(() => applyObject(skr, p.info!, d.desired!, fm));
        } catch (err) {
          if (!d.recreate || !isImmutableRefusal(err)) throw err;
          const why = immutableSummary(err);
          current = await guard(() => recreate(skr, p, live!, d.desired!, config));
          if (!current) {
            res = result(name, 'Processing', 'Recreating', `${what} is being deleted to be created again: ${why}`, { change: change(p, 'deleted') });
            break;
          }
          applied(current);
          res = result(name, 'Ready', 'Recreated', `${what} was deleted and created again: ${why}`, { change: change(p, 'recreated') });
          break;
        }
        applied(current);
        if (d.release) await guard(() => release(skr, p.info!, current!, config, false));
        res = d.adopt
          ? adopted(p, change(p, 'configured'))
          : result(name, 'Ready', 'Applied', 'resource has been synced', { change: change(p, 'configured', d.cause) });
        break;
      }
      case 'adopt':
        await guard(() => stamp(skr, p.info!, live!, owner, undefined, config));
        res = adopted(p, change(p, 'configured'));
        break;
      case 'unchanged':
        if (d.release) await guard(() => release(skr, p.info!, live!, config, false));
        applied(live!);
        res = result(name, 'Ready', 'Unchanged', 'resource has been synced', { change: change(p, 'unchanged') });
        break;
      case 'ignore':
        res = result(name, 'Ready', 'Ignored', 'resource exists; changes made in the SKR are kept', { change: change(p, 'skipped') });
        break;
      case 'delete': {
        await guard(() => deleteObject(skr, p.info!, live!));
        const after = await observe(skr, p);
        current = after;
        res = after && after.metadata.uid === live?.metadata.uid
          ? result(name, 'Deleting', 'DeletionInProgress', `${what} is being deleted`, { change: change(p, 'deleted') })
          : result(name, 'Ready', 'Deleted', 'resource has been deleted', { change: change(p, 'deleted') });
        break;
      }
      case 'none':
        res = result(name, 'Ready', 'Unchanged', 'status has been synced', { change: change(p, 'unchanged') });
        break;
    }
    // An object marked by an earlier version keeps no former mark once it is ours again.
    if (current && ['update', 'unchanged', 'ignore'].includes(d.op) && !d.release && hasLegacyMarks(current)) {
      await guard(() => stamp(skr, p.info!, current!, p.opts.own ? owner : undefined, d.desired, config));
    }
    if (d.status) {
      const body = { apiVersion: p.status!.apiVersion, kind: p.status!.kind, metadata: { name: p.id!.name, ...(p.id!.namespace ? { namespace: p.id!.namespace } : {}) }, status: p.status!.status };
      const after = await guard(() => applyObject(skr, p.info!, body as KubeObject, fm, 'status'));
      current = after;
      p.applied = { ...p.applied, statusDigest: statusDigest(p.status!.status, after, fm) };
      if (res.reason === 'Unchanged') res = result(name, 'Ready', 'Applied', p.object ? 'resource has been synced' : 'status has been synced', { change: change(p, 'configured') });
    } else if (p.status && current && p.opts.status === 'always') {
      p.applied = { ...p.applied, statusDigest: statusDigest(p.status.status, current, fm) };
    }
    return observed(p, res, current ?? (res.reason === 'Recreating' ? live : undefined));
  } catch (err) {
    return observed(p, itemFailure(p, err), live);
  }
}

/**
 * observed adds to an item's result the health and feedback of its object as the run left
 * it (undefined: not there). A Delete item is healthy once its object is gone; an item
 * whose object does not exist and is never created has nothing to report.
 */
export function observed(p: PlanItem, r: ItemResult, obj: KubeObject | undefined): ItemResult {
  let health: Health | undefined;
  if (p.opts.remove) {
    health = obj ? { status: 'Terminating', message: obj.metadata.deletionTimestamp ? 'Resource scheduled for deletion' : 'Resource is still there' } : { status: 'Current', message: 'Resource is gone' };
  } else if (obj) {
    // Items of a list carry no apiVersion and kind: the item's own say which rules apply.
    health = healthOf({ ...obj, apiVersion: obj.apiVersion ?? p.id!.apiVersion, kind: obj.kind ?? p.id!.kind }, p.rules);
  }
  const feedback = p.feedback && obj ? readFeedback(p.feedback, obj) : undefined;
  return { ...r, ...(health ? { health, object: describeId(p.id!) } : {}), ...(feedback ? { feedback } : {}) };
}

/** sameValues tells whether live holds, in every field the dry run says we would own, the values the dry run would store. */
export function sameValues(dry: KubeObject, live: KubeObject, manager: string): boolean {
  const fields = ownedFields(dry, manager);
  return canonical(project(dry, fields) ?? null) === canonical(project(live, fields) ?? null);
}

/** adopted is the result of an item whose object existed before this SyncResource took it over. */
export function adopted(p: PlanItem, c?: Change): ItemResult {
  return result(p.item.name, 'Ready', 'Adopted',
    `${describeId(p.id!)} existed before and was adopted; removing the item releases it, never deletes it`, c ? { change: c } : {});
}

/**
 * requestFailure describes a failed request about the object what: any status code from
 * the SKR (ApplyFailed), a path or an answer that does not match the object
 * (InvalidManifest). Cluster-level failures and bugs are rethrown.
 */
export function requestFailure(what: string, err: unknown): { reason: string; message: string; transient: boolean } {
  if (err instanceof KubeApiError && !(err.code === 0 || err.authFailure)) {
    return { reason: 'ApplyFailed', message: `${what}: ${stableMessage(err.status?.message ?? err.message)}`, transient: err.transient };
  }
  if (err instanceof IdentityError || err instanceof UnsafePathError || err instanceof IdentityMismatchError) {
    return { reason: 'InvalidManifest', message: `${what}: ${err.message}`, transient: false };
  }
  throw err;
}

/**
 * stableMessage sorts the lines of an "errors:" list in an API server message: the server
 * builds it from a Go map, in an order that changes from request to request, and a status
 * that quotes it would be written anew on every run.
 */
export function stableMessage(message: string): string {
  const at = message.indexOf('errors:\n');
  if (at < 0) return message;
  const head = message.slice(0, at + 'errors:\n'.length);
  const rest = message.slice(head.length);
  const end = rest.search(/\n(?! )/);
  const list = end < 0 ? rest : rest.slice(0, end);
  return head + list.split('\n').sort().join('\n') + (end < 0 ? '' : rest.slice(end));
}

/** itemFailure turns a failed request of one item into that item's result (see requestFailure). */
export function itemFailure(p: PlanItem, err: unknown): ItemResult {
  const f = requestFailure(p.id ? describeId(p.id) : `item ${p.item.name}`, err);
  return result(p.item.name, 'Error', f.reason, f.message, { transient: f.transient });
}
