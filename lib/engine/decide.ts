// decide.ts says what a run does to one item's object, from the item and the object's
// live state alone: pure (no cluster, no KCP), so every (strategy x live state) cell of the
// strategies table is a unit test (decide.test.ts). execute.ts carries a decision out.
import { createHash } from 'node:crypto';
import { subjectOf, type Change } from '../changeset.ts';
import type { KubeObject } from '../kube/objects.ts';
import { ownerOf } from '../policy/rules.ts';
import { ADOPTION_REFUSAL, foreignHolders } from '../policy/tenancy.ts';
import { describeId } from '../manifest.ts';
import { HASH_ANNOTATION, MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../model.ts';
import { createdBy, hasManager, othersWrite, type Holder, type Writer } from './share.ts';
import { canonical, deepFreeze, isSubset } from '../values.ts';
import type { InventoryEntry } from '../model.ts';
import { appliedDigest, driftCause, statusDigest, type DriftCause } from './drift.ts';
import type { ParsedItem, PlanItem, ResolvedItem } from './plan.ts';
import { mayRecreate } from './recreate.ts';
import { result, type ItemResult } from './result.ts';

/**
 * Decision is what an item needs in this run: an op on the object itself (adopt puts only
 * our marks on an object we did not create, marks.ts), with the body to apply for create
 * and update and the live object for every op that acts on one.
 */
export type Decision = DecisionFlags &
  (
    | { op: 'create'; desired: KubeObject; live?: undefined }
    | { op: 'update'; desired: KubeObject; live: KubeObject }
    | { op: 'adopt' | 'delete'; desired?: undefined; live: KubeObject }
    | { op: 'unchanged'; desired?: KubeObject; live: KubeObject }
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
  if (p.opts.remove) return decideDelete(p, live, ctx);
  if (!live) return decideAbsent(p, ctx);
  if (p.opts.stopOnDeletion && live.metadata.deletionTimestamp)
    return settled(
      result(
        p.item.name,
        'Deleting',
        'DeletionInProgress',
        `${describeId(p.id)} is being deleted; sync stopped`,
      ),
      live,
    );
  if (!hasObject(p))
    return { op: 'none', status: wantsStatus(p, live, ctx, false), record: false, drift: false, live };
  return decidePresent(p, live, ctx);
}

/**
 * wantsStatus tells whether the item's status is to be written: when its text changed or a
 * field of ours in it changed (digest); without a digest (first run, an object we do not
 * own) when it is not contained in the live status.
 */
function wantsStatus(p: ResolvedItem, live: KubeObject | undefined, ctx: DecideContext, creating: boolean) {
  const want = p.status?.status;
  if (want === undefined || !(p.opts.status === 'always' || (p.opts.status === 'onCreate' && creating)))
    return false;
  if (creating || !live) return true;
  const recorded = ctx.entry?.statusDigest;
  return recorded ? recorded !== statusDigest(want, live, ctx.writer.manager) : !isSubset(want, live.status);
}

/** decideDelete is a Delete item's decision: never an object another SyncResource names too. */
function decideDelete(p: ResolvedItem, live: KubeObject | undefined, ctx: DecideContext): Decision {
  const name = p.item.name;
  const what = describeId(p.id);
  if (!live)
    return settled(
      result(name, 'Ready', 'Deleted', 'resource has been deleted', { change: change(p, 'unchanged') }),
    );
  const others = (ctx.holders ?? []).map((h) => h.owner);
  if (others.length > 0)
    return settled(
      result(
        name,
        'Error',
        'Conflict',
        `${what} is named by SyncResource ${others.join(', SyncResource ')} too: a shared object is never deleted by a Delete item`,
      ),
      live,
    );
  if (live.metadata.deletionTimestamp)
    return settled(result(name, 'Deleting', 'DeletionInProgress', `${what} is being deleted`), live);
  return { op: 'delete', status: false, record: false, drift: false, live };
}

/** decideAbsent is the decision for an object that does not exist: created, or reported missing. */
function decideAbsent(p: ResolvedItem, ctx: DecideContext): Decision {
  if (p.opts.create && hasObject(p))
    return {
      op: 'create',
      status: wantsStatus(p, undefined, ctx, true),
      record: p.opts.own,
      drift: false,
      desired: desiredObject(p),
    };
  const what = describeId(p.id);
  return p.object
    ? settled(
        result(
          p.item.name,
          'Ready',
          'NotFound',
          `${what} does not exist; strategy ${p.item.strategy} never creates it`,
        ),
      )
    : settled(
        result(
          p.item.name,
          'Warning',
          'NotFound',
          `${what} does not exist; an item with only a subresource never creates it`,
        ),
      );
}

/**
 * decidePresent is the decision for an object that exists. One not in our inventory is
 * recorded first (write-ahead). It is ours if this SyncResource wrote it (its manager and
 * our label, or 0.1.0's owner annotation naming it: migrate.ts): an inventory lost, or
 * kcp-sync diff, which has none. Any other is taken on: as created when another
 * SyncResource created it, else as adopted (it existed before: released, never deleted).
 */
function decidePresent(
  p: ResolvedItem & { object: KubeObject },
  live: KubeObject,
  ctx: DecideContext,
): Decision {
  const { writer, entry } = ctx;
  const record = p.opts.own && entry === undefined;
  const wrote =
    (hasManager(live, writer.manager) && live.metadata.labels?.[MANAGED_BY_LABEL] === MANAGED_BY_VALUE) ||
    ownerOf(live) === writer.owner;
  const joining = record && !wrote;
  const adopt = joining && !createdBy(ctx.holders);
  if (!p.opts.sync)
    return joining
      ? { op: 'adopt', status: false, record, adopt, drift: false, live }
      : { op: 'ignore', status: false, record, drift: false, live };
  const desired = desiredObject(p);
  const release = !p.opts.own && (entry !== undefined || ownerOf(live) === writer.owner);
  // Recreating deletes the object: never one another SyncResource writes too.
  const recreate = mayRecreate(p, adopt || entry?.adopted === true) && !othersWrite(live, writer);
  const status = wantsStatus(p, live, ctx, false);
  const update = { op: 'update', status, record, adopt, desired, live, release, recreate } as const;
  // Unchanged, the digests of what it holds are recorded with the manifest they hold.
  const unchanged: Decision = {
    op: 'unchanged',
    desired,
    status,
    record: false,
    drift: false,
    release,
    live,
  };
  // Not recorded yet (the status step writes what a run applied; a run may come before it,
  // and its result may lose the status to this one's) while the object holds what we want:
  // nothing to do, as the recorded digests would say; this run records them, so that a
  // later change by someone else is drift, not a manifest applied anew.
  const unrecorded = p.opts.own && entry !== undefined && entry.manifest === undefined && !entry.digest;
  if (!joining && unrecorded && isSubset(desired, live)) return unchanged;
  // A changed manifest (or one whose digest we do not have) is applied as it is: no drift.
  if (joining || !sameManifest(p, desired, live, entry)) return { ...update, drift: false };
  // Drift is decided on what our field manager owns, as the server stores it (drift.ts).
  const cause = () => driftCause(desired, live, writer.manager);
  if (entry?.digest)
    return entry.digest === appliedDigest(live, writer.manager)
      ? unchanged
      : { ...update, drift: true, cause: cause() };
  if (isSubset(desired, live)) return unchanged;
  return { ...update, drift: true, confirm: true, cause: cause() };
}

/** sameManifest tells whether desired is the manifest of our last apply (inventory digest, or the annotation of an object we do not own). */
const sameManifest = (
  p: ResolvedItem,
  desired: KubeObject,
  live: KubeObject,
  entry: InventoryEntry | undefined,
) =>
  p.opts.own
    ? entry?.manifest === manifestDigest(desired)
    : live.metadata.annotations?.[HASH_ANNOTATION] === desired.metadata.annotations?.[HASH_ANNOTATION];

export const hasObject = <P extends PlanItem>(p: P): p is P & { object: KubeObject } =>
  p.object !== undefined;

/** change is the changeset entry of an item's object. */
export function change(p: ParsedItem, action: Change['action'], cause?: DriftCause): Change {
  return { subject: subjectOf(p.id), action, item: p.item.name, ...(cause ? { drift: true, cause } : {}) };
}

/** settled is the decision for an item whose result is known: nothing is written (live: its health is still reported). */
export const settled = (done: ItemResult, live?: KubeObject): Decision => ({
  op: 'none',
  status: false,
  record: false,
  drift: false,
  done,
  live,
});

/**
 * tenancyRefusal: under a policy, a SyncResource never adopts an object the product did
 * not create, and never joins, takes over or deletes one that a SyncResource of another
 * namespace names; says why, or undefined.
 */
export function tenancyRefusal(namespace: string, d: Decision, ctx: DecideContext): string | undefined {
  if (d.op === 'none' || d.op === 'create') return undefined;
  const foreign = foreignHolders(
    namespace,
    (ctx.holders ?? []).map((h) => h.owner),
  );
  if (foreign && !ctx.entry) return foreign;
  if (d.adopt === true) return ADOPTION_REFUSAL;
  return undefined;
}
