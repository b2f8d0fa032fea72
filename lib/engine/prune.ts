// prune.ts lets go of the objects of inventory entries that no item claims any more (item
// removed, object renamed or moved), and of all of them when a SyncResource is deleted.
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
import type { InventoryEntry } from '../model.ts';
import { installRank } from '../strategies.ts';
import { mapLimit } from '../concurrency.ts';
import { guard } from './unreachable.ts';
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
  const info = await guard(() => skr.mapper.find(e.apiVersion, e.kind));
  // A kind the SKR no longer serves has no objects left.
  if (!info) return void out.gone.push(e);
  const live = await guard(() => getObject(skr, info, e.namespace, e.name));
  const shared = live !== undefined && entryHolders(await holders(), e).length > 0;
  const action = live && pruneAction(live, w.owner, e.adopted === true, shared, writtenByUsOnly(live, w));
  if (!live || action === 'leave') return void out.gone.push(e);
  if (action === 'share') {
    await guard(() => letGo(skr, info, live, w, e.adopted === true));
    out.changes.push({ subject: subjectOf(e), action: 'released', item: e.item });
    return void out.gone.push(e);
  }
  if (action === 'release') {
    // Our label goes, and our name on its fields: they stay as they are, no one's now.
    const after = (await guard(() => release(skr, info, live, w.manager, true))) as KubeObject | undefined;
    await guard(() => letGo(skr, info, after ?? live, w, true));
    out.changes.push({ subject: subjectOf(e), action: 'released', item: e.item });
    return void out.gone.push(e);
  }
  if (!live.metadata.deletionTimestamp) {
    await guard(() => deleteObject(skr, info, live));
    out.changes.push({ subject: subjectOf(e), action: 'deleted', item: e.item });
    const after = await guard(() => getObject(skr, info, e.namespace, e.name));
    if (!after || after.metadata.uid !== live.metadata.uid) return void out.gone.push(e);
  }
  out.pending.push(e);
}
