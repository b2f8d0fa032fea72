// items.ts decides and carries out what one item needs, given the live object:
// decide() is pure (strategy options + live state -> decision), execute() writes.
import { createHash } from 'node:crypto';
import { subjectOf, type Change } from '../changeset.ts';
import type { Config } from '../config.ts';
import { applyObject, deleteObject, getObject, type Cluster, type KubeObject } from '../kube/objects.ts';
import { ownerOf, requestFailure } from '../policy/rules.ts';
import { describeId } from '../manifest.ts';
import { HASH_ANNOTATION, MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../model.ts';
import {
  applyShared,
  createdBy,
  hasManager,
  othersWrite,
  OwnedFieldConflict,
  takeOver,
  type Holder,
  type Writer,
} from './share.ts';
import { canonical, deepFreeze, isSubset } from '../values.ts';
import { ownedFields, project } from '../fields.ts';
import type { Health, InventoryEntry } from '../model.ts';
import { appliedDigest, driftCause, statusDigest, type DriftCause } from './drift.ts';
import type { ParsedItem, PlanItem, ResolvedItem } from './plan.ts';
import { hasLegacyMarks, release, stamp } from './marks.ts';
import { readFeedback } from '../feedback.ts';
import { healthOf } from '../health.ts';
import { immutableSummary, isImmutableRefusal, mayRecreate, recreate } from './recreate.ts';
import { result, type ItemResult } from './result.ts';
import { ClusterUnreachableError, guard } from './unreachable.ts';

/**
 * Decision is what an item needs in this run: an op on the object itself (adopt puts only
 * our marks on an object we did not create, marks.ts), with the body to apply for create
 * and update and the live object for every op that acts on one.
 */
export type Decision = DecisionFlags &
  (
    | { op: 'create'; desired: KubeObject; live?: undefined }
    | { op: 'update'; desired: KubeObject; live: KubeObject }
    | { op: 'adopt' | 'unchanged' | 'delete'; desired?: undefined; live: KubeObject }
    | { op: 'ignore' | 'none'; desired?: undefined; live?: KubeObject }
  );

/** DecisionFlags say what goes with a decision's op. */
export interface DecisionFlags {
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
  /** done is the result when nothing is to be written. */
  done?: ItemResult;
}

/** desiredMemo keeps an object's desired bodies (by options), so that deciding an item twice in a run builds it once. */
const desiredMemo = new WeakMap<KubeObject, Map<string, KubeObject>>();
/** digestMemo keeps the manifest digest of each desired body. */
const digestMemo = new WeakMap<KubeObject, string>();

/**
 * desiredObject is the body we apply: the manifest plus our label (and without status when
 * /status exists); shared and frozen. It names no SyncResource: several may apply it. An
 * object we do not own (UpdateAndDelete) has no inventory entry: it carries the digest of
 * its manifest in an annotation instead.
 */
export function desiredObject(p: ResolvedItem & { object: KubeObject }): KubeObject {
  const src = p.object;
  const key = `${p.info.hasStatus}\n${p.opts.own}`;
  let bodies = desiredMemo.get(src);
  const hit = bodies?.get(key);
  if (hit) return hit;
  const o = structuredClone(src);
  if (p.info.hasStatus) delete o.status;
  if (p.opts.own) o.metadata.labels = { ...o.metadata.labels, [MANAGED_BY_LABEL]: MANAGED_BY_VALUE };
  else o.metadata.annotations = { ...o.metadata.annotations, [HASH_ANNOTATION]: manifestDigest(o) };
  if (!bodies) desiredMemo.set(src, (bodies = new Map()));
  bodies.set(key, deepFreeze(o));
  return o;
}

/** manifestDigest is the digest of a desired body: the inventory keeps it to tell a changed manifest from drift. */
export function manifestDigest(desired: KubeObject): string {
  let d = digestMemo.get(desired);
  if (d === undefined) {
    d = createHash('sha256').update(canonical(desired)).digest('hex').slice(0, 32);
    digestMemo.set(desired, d);
  }
  return d;
}

/** DecideContext is what decide needs besides the item and its live object. */
export interface DecideContext {
  /** writer is the SyncResource that writes: its owner key and field manager. */
  writer: Writer;
  /** entry is the item's object's inventory entry, with the digests of our last apply. */
  entry?: InventoryEntry | undefined;
  /** holders are the other SyncResources that name the item's object (read from the KCP when the item needs them). */
  holders?: Holder[] | undefined;
}

/** needsHolders tells whether deciding p on live needs to know who else names its object. */
export const needsHolders = (
  p: ResolvedItem,
  live: KubeObject | undefined,
  entry: InventoryEntry | undefined,
) => live !== undefined && (p.opts.remove || (p.opts.own && entry === undefined));

/** decide computes the decision for an item from its live object (undefined: absent). */
export function decide(p: ResolvedItem, live: KubeObject | undefined, ctx: DecideContext): Decision {
  const { writer, entry } = ctx;
  const fieldManager = writer.manager;
  const name = p.item.name;
  const what = describeId(p.id);
  // A settled decision keeps the live object: its health is still reported (a Delete item's object being deleted).
  const none = (done: ItemResult): Decision => ({
    op: 'none',
    status: false,
    record: false,
    drift: false,
    done,
    live,
  });
  // The status is written again when its text changed or a field of ours in it changed (digest);
  // without a digest (first run, an object we do not own) when it is not contained in the live status.
  const wantStatus = (creating: boolean) => {
    const want = p.status?.status;
    if (want === undefined || !(p.opts.status === 'always' || (p.opts.status === 'onCreate' && creating)))
      return false;
    if (creating || !live) return true;
    return entry?.statusDigest
      ? entry.statusDigest !== statusDigest(want, live, fieldManager)
      : !isSubset(want, live.status);
  };
  if (p.opts.remove) {
    if (!live)
      return none(
        result(name, 'Ready', 'Deleted', 'resource has been deleted', { change: change(p, 'unchanged') }),
      );
    const others = (ctx.holders ?? []).map((h) => h.owner);
    if (others.length > 0)
      return none(
        result(
          name,
          'Error',
          'Conflict',
          `${what} is named by SyncResource ${others.join(', SyncResource ')} too: a shared object is never deleted by a Delete item`,
        ),
      );
    if (live.metadata.deletionTimestamp)
      return none(result(name, 'Deleting', 'DeletionInProgress', `${what} is being deleted`));
    return { op: 'delete', status: false, record: false, drift: false, live };
  }
  if (!live) {
    if (!p.opts.create || !hasObject(p)) {
      return p.object
        ? none(
            result(
              name,
              'Ready',
              'NotFound',
              `${what} does not exist; strategy ${p.item.strategy} never creates it`,
            ),
          )
        : none(
            result(
              name,
              'Warning',
              'NotFound',
              `${what} does not exist; an item with only a subresource never creates it`,
            ),
          );
    }
    return {
      op: 'create',
      status: wantStatus(true),
      record: p.opts.own,
      drift: false,
      desired: desiredObject(p),
    };
  }
  if (p.opts.stopOnDeletion && live.metadata.deletionTimestamp) {
    return none(result(name, 'Deleting', 'DeletionInProgress', `${what} is being deleted; sync stopped`));
  }
  if (!hasObject(p)) return { op: 'none', status: wantStatus(false), record: false, drift: false, live };
  // An object not in our inventory is recorded first (write-ahead). It is ours if this
  // SyncResource wrote it (its manager and our label, or an earlier version's owner
  // annotation naming it): an inventory lost, or kcp-sync diff, which has none. Any other is
  // taken on: as created when another SyncResource created it, else as adopted (it existed
  // before: released, never deleted).
  const record = p.opts.own && entry === undefined;
  const wrote =
    (hasManager(live, writer.manager) && live.metadata.labels?.[MANAGED_BY_LABEL] === MANAGED_BY_VALUE) ||
    ownerOf(live) === writer.owner;
  const joining = record && !wrote;
  const adopt = joining && !createdBy(ctx.holders);
  if (!p.opts.sync) {
    return joining
      ? { op: 'adopt', status: false, record, adopt, drift: false, live }
      : { op: 'ignore', status: false, record, drift: false, live };
  }
  const desired = desiredObject(p);
  const release = !p.opts.own && (entry !== undefined || ownerOf(live) === writer.owner);
  // Recreating deletes the object: never one another SyncResource writes too.
  const recreate = mayRecreate(p, adopt || entry?.adopted === true) && !othersWrite(live, writer);
  const status = wantStatus(false);
  const update = {
    op: 'update',
    status,
    record,
    adopt,
    desired,
    live,
    release,
    recreate,
  } as const;
  // A changed manifest (or one whose digest we do not have) is applied as it is: no drift.
  const sameManifest = p.opts.own
    ? entry?.manifest === manifestDigest(desired)
    : live.metadata.annotations?.[HASH_ANNOTATION] === desired.metadata.annotations?.[HASH_ANNOTATION];
  const unchanged: Decision = { op: 'unchanged', status, record: false, drift: false, release, live };
  // Not recorded yet (the status step writes what a run applied; a run may come before it)
  // while the object holds what we want: nothing to do, as the recorded digests would say.
  const unrecorded = p.opts.own && entry !== undefined && entry.manifest === undefined && !entry.digest;
  if (!joining && unrecorded && isSubset(desired, live)) return unchanged;
  if (joining || !sameManifest) return { ...update, drift: false };
  // Drift is decided on what our field manager owns, as the server stores it (drift.ts).
  if (entry?.digest) {
    return entry.digest === appliedDigest(live, fieldManager)
      ? unchanged
      : { ...update, drift: true, cause: driftCause(desired, live, fieldManager) };
  }
  if (isSubset(desired, live)) return unchanged;
  return { ...update, drift: true, confirm: true, cause: driftCause(desired, live, fieldManager) };
}

const hasObject = <P extends PlanItem>(p: P): p is P & { object: KubeObject } => p.object !== undefined;

function change(p: ParsedItem, action: Change['action'], cause?: DriftCause): Change {
  return { subject: subjectOf(p.id), action, item: p.item.name, ...(cause ? { drift: true, cause } : {}) };
}

/**
 * observe reads an item's live object; unreachable clusters abort the run. With a decide
 * context and a list cache, a recent snapshot (taken at since or later) that shows nothing
 * to do stands in for the read.
 */
export async function observe(
  skr: Cluster,
  p: ResolvedItem,
  ctx?: DecideContext,
  since?: number,
): Promise<KubeObject | undefined> {
  const lists = skr.lists;
  if (ctx && lists && p.object && p.opts.own) {
    // A snapshot that cannot be had (e.g. a fresh CRD's storage still initializing) is no
    // reason to fail: the live read below decides.
    const snap = await guard(() => lists.get(p.info, p.id.namespace, p.id.name, since)).catch(
      (err: unknown) => {
        if (err instanceof ClusterUnreachableError) throw err;
        return undefined;
      },
    );
    if (snap) {
      const d = decide(p, snap, ctx);
      if ((d.op === 'unchanged' || d.op === 'ignore') && !d.status && !d.record) return snap;
    }
  }
  return guard(() => getObject(skr, p.info, p.id.namespace, p.id.name));
}

/**
 * execute carries out a decision and returns the item's result; the digests of what the
 * server stored after our apply (or of what it holds unchanged) go to p.applied for the inventory.
 */
export async function execute(
  skr: Cluster,
  p: ResolvedItem,
  d: Decision,
  w: Writer,
  config: Config,
): Promise<ItemResult> {
  if (d.done) return d.done.state === 'Error' ? d.done : observed(p, d.done, d.live);
  const name = p.item.name;
  const what = describeId(p.id);
  const fm = w.manager;
  const { info } = p;
  // What the server holds of ours after the apply, and of which manifest.
  const applied = (obj: KubeObject) =>
    (p.applied = {
      ...p.applied,
      digest: appliedDigest(obj, fm),
      ...(d.desired && p.opts.own ? { manifest: manifestDigest(d.desired) } : {}),
    });
  const unmark = (obj: KubeObject) =>
    d.release ? guard(() => release(skr, info, obj, fm, false)) : undefined;
  try {
    let res: ItemResult;
    let current = d.live;
    switch (d.op) {
      case 'create':
        current = await guard(() => applyShared(skr, info, p.id, d.desired, w));
        applied(current);
        res = result(name, 'Ready', 'Created', 'resource has been created', { change: change(p, 'created') });
        break;
      case 'update': {
        const { live, desired } = d;
        // Without a digest of our last apply, a dry run tells whether the values really differ.
        // A dry run refused for an immutable field goes on to the apply, which recreates.
        const dry = d.confirm
          ? await guard(() => applyObject(skr, info, desired, fm, undefined, true)).catch((err: unknown) => {
              if (d.recreate && isImmutableRefusal(err)) return undefined;
              throw err;
            })
          : undefined;
        if (dry && sameValues(dry, live, fm)) {
          // Nothing to write but, for a strategy that does not own it, our marks to take off.
          await unmark(live);
          applied(live);
          res = result(name, 'Ready', 'Unchanged', 'resource has been synced', {
            change: change(p, 'unchanged'),
          });
          break;
        }
        let after: KubeObject;
        try {
          // Drift from someone else than a SyncResource is taken back in one forced apply.
          const takeBack = d.drift && d.cause ? d.cause.managers : undefined;
          after = await guard(() => applyShared(skr, info, p.id, desired, w, { live, takeBack }));
        } catch (err) {
          if (!d.recreate || !isImmutableRefusal(err)) throw err;
          const why = immutableSummary(err);
          current = await guard(() => recreate(skr, p, live, desired, fm));
          if (!current) {
            res = result(
              name,
              'Processing',
              'Recreating',
              `${what} is being deleted to be created again: ${why}`,
              { change: change(p, 'deleted') },
            );
            break;
          }
          applied(current);
          res = result(name, 'Ready', 'Recreated', `${what} was deleted and created again: ${why}`, {
            change: change(p, 'recreated'),
          });
          break;
        }
        current = after;
        applied(after);
        await unmark(after);
        res = d.adopt
          ? adopted(p, change(p, 'configured'))
          : result(name, 'Ready', 'Applied', 'resource has been synced', {
              change: change(p, 'configured', d.cause),
            });
        break;
      }
      case 'adopt':
        await guard(() => stamp(skr, info, d.live, true, undefined, fm));
        res = d.adopt
          ? adopted(p, change(p, 'configured'))
          : result(name, 'Ready', 'Ignored', 'resource exists; changes made in the SKR are kept', {
              change: change(p, 'skipped'),
            });
        break;
      case 'unchanged':
        await unmark(d.live);
        applied(d.live);
        res = result(name, 'Ready', 'Unchanged', 'resource has been synced', {
          change: change(p, 'unchanged'),
        });
        break;
      case 'ignore':
        res = result(name, 'Ready', 'Ignored', 'resource exists; changes made in the SKR are kept', {
          change: change(p, 'skipped'),
        });
        break;
      case 'delete': {
        const { live } = d;
        await guard(() => deleteObject(skr, info, live));
        const after = await observe(skr, p);
        current = after;
        res =
          after && after.metadata.uid === live.metadata.uid
            ? result(name, 'Deleting', 'DeletionInProgress', `${what} is being deleted`, {
                change: change(p, 'deleted'),
              })
            : result(name, 'Ready', 'Deleted', 'resource has been deleted', { change: change(p, 'deleted') });
        break;
      }
      case 'none':
        res = result(name, 'Ready', 'Unchanged', 'status has been synced', {
          change: change(p, 'unchanged'),
        });
        break;
    }
    // An object an earlier version wrote is this SyncResource's alone from now on, and keeps no former mark.
    const held = current;
    if (held && (d.op === 'update' || d.op === 'unchanged') && !d.release)
      current = (await guard(() => takeOver(skr, info, held, w))) ?? held;
    const marked = current;
    if (marked && ['update', 'unchanged', 'ignore'].includes(d.op) && !d.release && hasLegacyMarks(marked)) {
      await guard(() => stamp(skr, info, marked, p.opts.own, d.desired, fm));
    }
    const sub = p.status;
    const status = sub?.status;
    if (d.status && sub && status !== undefined) {
      const metadata = { name: p.id.name, ...(p.id.namespace ? { namespace: p.id.namespace } : {}) };
      const body = { apiVersion: sub.apiVersion, kind: sub.kind, metadata, status };
      const after = await guard(() =>
        applyShared(skr, info, p.id, body as KubeObject, w, { subresource: 'status' }),
      );
      current = after;
      p.applied = { ...p.applied, statusDigest: statusDigest(status, after, fm) };
      if (res.reason === 'Unchanged')
        res = result(
          name,
          'Ready',
          'Applied',
          p.object ? 'resource has been synced' : 'status has been synced',
          { change: change(p, 'configured') },
        );
    } else if (status !== undefined && current && p.opts.status === 'always') {
      p.applied = { ...p.applied, statusDigest: statusDigest(status, current, fm) };
    }
    return observed(p, res, current ?? (res.reason === 'Recreating' ? d.live : undefined));
  } catch (err) {
    if (err instanceof OwnedFieldConflict)
      return observed(p, result(name, 'Error', 'Conflict', err.message), d.live);
    return observed(p, itemFailure(p, err), d.live);
  }
}

/**
 * observed adds to an item's result the health and feedback of its object as the run left
 * it (undefined: not there). A Delete item is healthy once its object is gone; an item
 * whose object does not exist and is never created has nothing to report.
 */
export function observed(p: ParsedItem, r: ItemResult, obj: KubeObject | undefined): ItemResult {
  let health: Health | undefined;
  if (p.opts.remove) {
    health = obj
      ? {
          status: 'Terminating',
          message: obj.metadata.deletionTimestamp
            ? 'Resource scheduled for deletion'
            : 'Resource is still there',
        }
      : { status: 'Current', message: 'Resource is gone' };
  } else if (obj) {
    // Items of a list carry no apiVersion and kind: the item's own say which rules apply.
    health = healthOf(
      { ...obj, apiVersion: obj.apiVersion ?? p.id.apiVersion, kind: obj.kind ?? p.id.kind },
      p.rules,
    );
  }
  const feedback = p.feedback && obj ? readFeedback(p.feedback, obj) : undefined;
  return { ...r, ...(health ? { health, object: describeId(p.id) } : {}), ...(feedback ? { feedback } : {}) };
}

/** sameValues tells whether live holds, in every field the dry run says we would own, the values the dry run would store. */
export function sameValues(dry: KubeObject, live: KubeObject, manager: string): boolean {
  const fields = ownedFields(dry, manager);
  return canonical(project(dry, fields) ?? null) === canonical(project(live, fields) ?? null);
}

/** adopted is the result of an item whose object existed before this SyncResource took it over. */
export function adopted(p: ParsedItem, c?: Change): ItemResult {
  return result(
    p.item.name,
    'Ready',
    'Adopted',
    `${describeId(p.id)} existed before and was adopted; removing the item releases it, never deletes it`,
    c ? { change: c } : {},
  );
}

/** itemFailure turns a failed request of one item into that item's result (see requestFailure). */
export function itemFailure(p: PlanItem, err: unknown): ItemResult {
  const f = requestFailure(p.id ? describeId(p.id) : `item ${p.item.name}`, err);
  return result(p.item.name, 'Error', f.reason, f.message, { transient: f.transient });
}
