// prune.ts lets go of the objects of inventory entries that no item claims any more (item
// removed, object renamed or moved), and of all of them when a SyncResource is deleted
// (delete.ts), and writes the inventory as a run leaves the SKR.
// An object another SyncResource still names is handed over to it (share.ts letGo); the
// last to let go deletes it, or releases it (our marks removed) when it was adopted: what
// we did not create we never delete. Only objects that still carry our mark are touched. A
// failure stays on its entry: it is reported and kept, and the other entries proceed.
import { subjectOf, type Change } from '../changeset.ts';
import type { Config } from '../config.ts';
import { checkIdentity } from '../policy/identity.ts';
import { pruneAction, requestFailure } from '../policy/rules.ts';
import { entryHolders, letGo, writtenByUsOnly, type Holders, type Writer } from './share.ts';
import { deleteObject, getObject, type Cluster, type KubeObject } from '../kube/objects.ts';
import { describeId } from '../manifest.ts';
import { objectKey, type InventoryEntry } from '../model.ts';
import type { Recorded } from './inventory.ts';
import { itemRefusal } from '../policy/tenancy.ts';
import type { Executed } from './execute.ts';
import { identityOf, isParsed, type ParsedItem, type PlanItem } from './plan.ts';
import type { Run } from './run.ts';
import { installRank } from '../strategies.ts';
import { mapLimit } from '../concurrency.ts';
import { ClusterUnreachableError, inSkr } from './unreachable.ts';
import { release } from './marks.ts';

/** PruneOutcome says, per entry, whether it may leave the inventory. */
export interface PruneOutcome {
  gone: InventoryEntry[];
  pending: InventoryEntry[];
  /** failed objects (kind/namespace/name) stay in the inventory; message names the object and has the API's answer. */
  failed: { subject: string; message: string }[];
  changes: Change[];
}

/** validEntry tells whether an inventory entry names an object we could have recorded (we validate before recording). */
function validEntry(e: InventoryEntry): boolean {
  try {
    checkIdentity(e);
    return true;
  } catch {
    return false;
  }
}

/** deleteEntries lets go of the objects of w's entries (delete, release or hand over), in reverse install order. */
export async function deleteEntries(
  skr: Cluster,
  entries: InventoryEntry[],
  w: Writer,
  config: Config,
  holders: () => Promise<Holders>,
): Promise<PruneOutcome> {
  const out: PruneOutcome = { gone: [], pending: [], failed: [], changes: [] };
  const ranks = [...new Set(entries.map((e) => installRank(e.kind)))].sort((a, b) => b - a);
  for (const rank of ranks) {
    const group = entries.filter((e) => installRank(e.kind) === rank);
    await mapLimit(group, config.applyConcurrency, async (e) => {
      // An entry we could never have written names nothing of ours.
      if (!validEntry(e)) return void out.gone.push(e);
      try {
        await pruneOne(skr, e, w, out, holders);
      } catch (err) {
        out.failed.push({ subject: subjectOf(e), message: requestFailure(describeId(e), err).message });
      }
    });
  }
  return out;
}

async function pruneOne(
  skr: Cluster,
  e: InventoryEntry,
  w: Writer,
  out: PruneOutcome,
  holders: () => Promise<Holders>,
): Promise<void> {
  const info = await inSkr(() => skr.mapper.find(e.apiVersion, e.kind));
  // A kind the SKR no longer serves has no objects left.
  if (!info) return void out.gone.push(e);
  const live = await inSkr(() => getObject(skr, info, e.namespace, e.name));
  const shared = live !== undefined && entryHolders(await holders(), e).length > 0;
  const action = live && pruneAction(live, w.owner, e.adopted === true, shared, writtenByUsOnly(live, w));
  if (!live || action === 'leave') return void out.gone.push(e);
  if (action === 'share') {
    await inSkr(() => letGo(skr, info, live, w, e.adopted === true));
    out.changes.push({ subject: subjectOf(e), action: 'released', item: e.item });
    return void out.gone.push(e);
  }
  if (action === 'release') {
    // Our label goes, and our name on its fields: they stay as they are, no one's now.
    const after = (await inSkr(() => release(skr, info, live, w.manager, true))) as KubeObject | undefined;
    await inSkr(() => letGo(skr, info, after ?? live, w, true));
    out.changes.push({ subject: subjectOf(e), action: 'released', item: e.item });
    return void out.gone.push(e);
  }
  if (!live.metadata.deletionTimestamp) {
    const deletion = await inSkr(() => deleteObject(skr, info, live));
    out.changes.push({ subject: subjectOf(e), action: 'deleted', item: e.item });
    if (deletion !== 'requested') return void out.gone.push(e);
    const after = await inSkr(() => getObject(skr, info, e.namespace, e.name));
    if (!after || after.metadata.uid !== live.metadata.uid) return void out.gone.push(e);
  }
  out.pending.push(e);
}

/** Pruned is what a run's prune did: changes, objects still going (pending) or kept (failed), and the digests the status step records. */
export interface Pruned {
  changes: Change[];
  pending: string[];
  failed: { subject: string; message: string }[];
  recorded: Recorded[];
}

/**
 * pruneUnclaimed deletes what no current item claims (keeping the entries of items whose
 * text cannot be read now) and writes the inventory as the run leaves the SKR: each
 * claimed entry with the digests its item's outcome gives (executed, by item name),
 * without the entries of objects gone or whose create was refused for good (refused).
 */
export async function pruneUnclaimed(
  run: Run,
  plan: readonly PlanItem[],
  executed: ReadonlyMap<string, Executed>,
  refused: ReadonlySet<string>,
): Promise<Pruned> {
  const { inventory, deps } = run;
  const claimed = claims(plan);
  const unreadable = new Set(plan.filter((p) => !p.id).map((p) => p.item.name));
  const unclaimed = inventory.entries.filter((e) => !claimed.has(objectKey(e)) && !unreadable.has(e.item));
  // Under a policy, an object outside it is never pruned: it stays, and says why.
  const kept = await outsidePolicy(run, unclaimed);
  const orphans = unclaimed.filter((e) => !kept.has(e));
  const pruned = await deleteEntries(deps.skr, orphans, run.writer, deps.config, run.holders);
  const goneKeys = new Set(pruned.gone.map(objectKey));
  const next: InventoryEntry[] = [];
  for (const e of inventory.entries) {
    const key = objectKey(e);
    if (goneKeys.has(key) || refused.has(key)) continue;
    const p = claimed.get(key);
    const outcome = p && executed.get(p.item.name);
    if (p && !p.done && !p.opts.own) {
      // Delete keeps its entry until the object is gone; UpdateAndDelete never owns.
      if (p.opts.remove && outcome?.result.state !== 'Ready') next.push({ ...e, item: p.item.name });
      continue;
    }
    // The digests of what the server holds after this run; an entry whose item wrote nothing keeps its own.
    next.push(p ? { ...e, item: p.item.name, apiVersion: p.id.apiVersion, ...outcome?.applied } : e);
  }
  return {
    changes: pruned.changes,
    pending: pruned.pending.map(objectKey),
    failed: [...pruned.failed, ...kept.values()],
    recorded: await inventory.settle(next),
  };
}

/**
 * claims maps each object key to the item that claims it: an item with a resource wins
 * over a status-only one; a duplicate claims nothing (the first item naming an object owns it).
 */
function claims(plan: readonly PlanItem[]): Map<string, ParsedItem> {
  const claimed = new Map<string, ParsedItem>();
  for (const p of plan.filter(isParsed)) {
    if (p.done?.reason !== 'DuplicateObject' && (p.object || !claimed.has(objectKey(p.id))))
      claimed.set(objectKey(p.id), p);
  }
  return claimed;
}

/** outsidePolicy are the entries (with why) a run under a policy may not prune: their kind, scope or namespace is not allowed now. */
async function outsidePolicy(
  run: Run,
  entries: InventoryEntry[],
): Promise<Map<InventoryEntry, { subject: string; message: string }>> {
  const out = new Map<InventoryEntry, { subject: string; message: string }>();
  const policy = run.deps.policy;
  if (!policy) return out;
  for (const e of entries) {
    const info = await inSkr(() => run.deps.skr.mapper.find(e.apiVersion, e.kind)).catch((err: unknown) => {
      if (err instanceof ClusterUnreachableError) throw err;
      return undefined;
    });
    // A kind the SKR no longer serves has nothing left to prune.
    if (!info) continue;
    const why = itemRefusal(policy, identityOf(e, info), 'CreateAndSync');
    if (why) out.set(e, { subject: subjectOf(e), message: `${describeId(e)} is not pruned: ${why}` });
  }
  return out;
}
