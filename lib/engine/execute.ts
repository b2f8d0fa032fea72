// execute.ts carries out one item's decision (decide.ts) in the SKR: one operation per op,
// then what goes with any of them (our marks, the status subresource), and the item's
// result with the health and feedback of its object as the run left it.
import type { Change } from '../changeset.ts';
import { applyObject, deleteObject, type Cluster, type KubeObject } from '../kube/objects.ts';
import { requestFailure } from '../policy/rules.ts';
import { describeId } from '../manifest.ts';
import { applyShared, OwnedFieldConflict, type Writer } from './share.ts';
import { canonical } from '../values.ts';
import { ownedFields, project } from '../fields.ts';
import type { Health, InventoryEntry } from '../model.ts';
import { appliedDigest, statusDigest, type DriftCause } from './drift.ts';
import type { ParsedItem, PlanItem, ResolvedItem } from './plan.ts';
import { release, stamp } from './marks.ts';
import { migrate } from './migrate.ts';
import { readFeedback } from '../feedback.ts';
import { healthOf } from '../health.ts';
import { immutableSummary, isImmutableRefusal, recreate } from './recreate.ts';
import { result, type ItemResult } from './result.ts';
import { inSkr } from './unreachable.ts';
import { change, manifestDigest, type Decision } from './decide.ts';
import { observe } from './observe.ts';

/** Applied are the digests of what the server holds of ours after a run (drift.ts): the inventory keeps them. */
export type Applied = Pick<InventoryEntry, 'digest' | 'statusDigest' | 'manifest'>;

/** Executed is an item's outcome: its result, and the digests for its inventory entry (none: the entry keeps its own). */
export interface Executed {
  result: ItemResult;
  applied: Applied;
}

/** Acted is what an operation did: its result and the object as it left it (undefined: not there). */
interface Acted {
  res: ItemResult;
  current: KubeObject | undefined;
}

/** Act is the context an operation runs in. */
interface Act<D extends Decision> {
  skr: Cluster;
  p: ResolvedItem;
  d: D;
  w: Writer;
  /** applied notes what the server holds of ours after an apply (or unchanged), and of which manifest. */
  applied: (obj: KubeObject) => void;
  /** unmark takes our marks off an object a strategy that does not own acts on (d.release). */
  unmark: (obj: KubeObject) => Promise<unknown>;
}

type Op = Decision['op'];
type Operation<O extends Op> = (a: Act<Decision & { op: O }>) => Promise<Acted>;

const synced = (
  p: ResolvedItem,
  action: 'unchanged' | 'configured' = 'unchanged',
  message = 'resource has been synced',
  cause?: DriftCause,
) =>
  result(p.item.name, 'Ready', action === 'unchanged' ? 'Unchanged' : 'Applied', message, {
    change: change(p, action, cause),
  });
const ignored = (p: ResolvedItem) =>
  result(p.item.name, 'Ready', 'Ignored', 'resource exists; changes made in the SKR are kept', {
    change: change(p, 'skipped'),
  });

/** operations are what each op writes, one function each. */
const operations: { [O in Op]: Operation<O> } = {
  async create({ skr, p, d, w, applied }) {
    const current = await inSkr(() => applyShared(skr, p.info, p.id, d.desired, w));
    applied(current);
    return {
      res: result(p.item.name, 'Ready', 'Created', 'resource has been created', {
        change: change(p, 'created'),
      }),
      current,
    };
  },
  update: updateObject,
  async adopt({ skr, p, d, w }) {
    await inSkr(() => stamp(skr, p.info, d.live, true, undefined, w.manager));
    return { res: d.adopt ? adopted(p, change(p, 'configured')) : ignored(p), current: d.live };
  },
  async unchanged({ p, d, applied, unmark }) {
    await unmark(d.live);
    applied(d.live);
    return { res: synced(p), current: d.live };
  },
  ignore: async ({ p, d }) => ({ res: ignored(p), current: d.live }),
  async delete({ skr, p, d }) {
    const deletion = await inSkr(() => deleteObject(skr, p.info, d.live));
    const after = deletion === 'requested' ? await observe(skr, p) : undefined;
    const what = describeId(p.id);
    const res =
      after && after.metadata.uid === d.live.metadata.uid
        ? result(p.item.name, 'Deleting', 'DeletionInProgress', `${what} is being deleted`, {
            change: change(p, 'deleted'),
          })
        : result(p.item.name, 'Ready', 'Deleted', 'resource has been deleted', {
            change: change(p, 'deleted'),
          });
    return { res, current: after };
  },
  none: async ({ p, d }) => ({ res: synced(p, 'unchanged', 'status has been synced'), current: d.live }),
};

/**
 * updateObject applies the desired body over the live object. Without a digest of our last
 * apply, a dry run first tells whether the values really differ (a dry run refused for an
 * immutable field goes on to the apply, which recreates). Drift from someone else than a
 * SyncResource is taken back in one forced apply.
 */
async function updateObject(a: Act<Decision & { op: 'update' }>): Promise<Acted> {
  const { skr, p, d, w } = a;
  const { live, desired } = d;
  const dry = d.confirm
    ? await inSkr(() => applyObject(skr, p.info, desired, w.manager, undefined, true)).catch(
        (err: unknown) => {
          if (d.recreate && isImmutableRefusal(err)) return undefined;
          throw err;
        },
      )
    : undefined;
  if (dry && sameValues(dry, live, w.manager)) {
    await a.unmark(live);
    a.applied(live);
    return { res: synced(p), current: live };
  }
  let after: KubeObject;
  try {
    const takeBack = d.drift && d.cause ? d.cause.managers : undefined;
    after = await inSkr(() => applyShared(skr, p.info, p.id, desired, w, { live, takeBack }));
  } catch (err) {
    if (!d.recreate || !isImmutableRefusal(err)) throw err;
    return recreateObject(a, immutableSummary(err));
  }
  a.applied(after);
  await a.unmark(after);
  return {
    res: d.adopt ? adopted(p, change(p, 'configured')) : synced(p, 'configured', undefined, d.cause),
    current: after,
  };
}

/** recreateObject deletes an object whose apply was refused for an immutable field and creates it anew. */
async function recreateObject(a: Act<Decision & { op: 'update' }>, why: string): Promise<Acted> {
  const { skr, p, d, w } = a;
  const what = describeId(p.id);
  const current = await inSkr(() => recreate(skr, p, d.live, d.desired, w.manager));
  if (!current)
    return {
      res: result(
        p.item.name,
        'Processing',
        'Recreating',
        `${what} is being deleted to be created again: ${why}`,
        {
          change: change(p, 'deleted'),
        },
      ),
      current: undefined,
    };
  a.applied(current);
  return {
    res: result(p.item.name, 'Ready', 'Recreated', `${what} was deleted and created again: ${why}`, {
      change: change(p, 'recreated'),
    }),
    current,
  };
}

/**
 * execute carries out a decision and returns the item's result, with the digests of what
 * the server stored after our apply (or of what it holds unchanged) for the inventory.
 */
export async function execute(skr: Cluster, p: ResolvedItem, d: Decision, w: Writer): Promise<Executed> {
  let applied: Applied = {};
  const outcome = (r: ItemResult, obj: KubeObject | undefined): Executed => ({
    result: observed(p, r, obj),
    applied,
  });
  if (d.done) return { result: d.done.state === 'Error' ? d.done : observed(p, d.done, d.live), applied };
  const act: Act<Decision> = {
    skr,
    p,
    d,
    w,
    applied: (obj) => {
      applied = {
        ...applied,
        digest: appliedDigest(obj, w.manager),
        ...(d.desired && p.opts.own ? { manifest: manifestDigest(d.desired) } : {}),
      };
    },
    unmark: async (obj) => (d.release ? inSkr(() => release(skr, p.info, obj, w.manager, false)) : undefined),
  };
  try {
    const acted = await (operations[d.op] as Operation<Op>)(act);
    const current = await migrate(act, acted.current);
    const status = await writeStatus(act, acted.res, current);
    applied = { ...applied, ...status.applied };
    return outcome(status.res, status.current ?? (acted.res.reason === 'Recreating' ? d.live : undefined));
  } catch (err) {
    if (err instanceof OwnedFieldConflict)
      return outcome(result(p.item.name, 'Error', 'Conflict', err.message), d.live);
    return outcome(itemFailure(p, err), d.live);
  }
}

/**
 * writeStatus writes the item's status subresource when the decision says so; the digest
 * of our fields in it goes to the inventory whenever the item keeps it in sync.
 */
async function writeStatus(
  { skr, p, d, w }: Act<Decision>,
  res: ItemResult,
  current: KubeObject | undefined,
): Promise<Acted & { applied?: Applied }> {
  const sub = p.status;
  const status = sub?.status;
  if (!(d.status && sub && status !== undefined)) {
    if (status !== undefined && current && p.opts.status === 'always')
      return { res, current, applied: { statusDigest: statusDigest(status, current, w.manager) } };
    return { res, current };
  }
  const metadata = { name: p.id.name, ...(p.id.namespace ? { namespace: p.id.namespace } : {}) };
  const body = { apiVersion: sub.apiVersion, kind: sub.kind, metadata, status } as KubeObject;
  const after = await inSkr(() => applyShared(skr, p.info, p.id, body, w, { subresource: 'status' }));
  const written =
    res.reason === 'Unchanged'
      ? synced(p, 'configured', p.object ? 'resource has been synced' : 'status has been synced')
      : res;
  return { res: written, current: after, applied: { statusDigest: statusDigest(status, after, w.manager) } };
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
