// prune.ts deletes objects of inventory entries that no item claims any more (item
// removed, object renamed or moved), and all of them when a SyncResource is deleted.
// Only objects that still carry this SyncResource's owner annotation are deleted.
import { subjectOf, type Change } from '../changeset.ts';
import type { Config } from '../config.ts';
import { deleteObject, getObject, type Cluster } from '../kube/objects.ts';
import type { InventoryEntry } from '../model.ts';
import { installRank } from '../strategies.ts';
import { mapLimit } from '../util.ts';
import { guard, ownerOf } from './items.ts';

/** PruneOutcome says, per entry, whether it may leave the inventory. */
export interface PruneOutcome {
  gone: InventoryEntry[];
  pending: InventoryEntry[];
  changes: Change[];
}

/** deleteEntries deletes the objects of entries owned by owner, in reverse install order. */
export async function deleteEntries(skr: Cluster, entries: InventoryEntry[], owner: string, config: Config): Promise<PruneOutcome> {
  const out: PruneOutcome = { gone: [], pending: [], changes: [] };
  const ranks = [...new Set(entries.map((e) => installRank(e.kind)))].sort((a, b) => b - a);
  for (const rank of ranks) {
    const group = entries.filter((e) => installRank(e.kind) === rank);
    await mapLimit(group, config.applyConcurrency, async (e) => {
      const info = await guard(() => skr.mapper.find(e.apiVersion, e.kind));
      // A kind the SKR no longer serves has no objects left.
      if (!info) return void out.gone.push(e);
      const live = await guard(() => getObject(skr, info, e.namespace, e.name));
      if (!live || ownerOf(live) !== owner) return void out.gone.push(e);
      if (!live.metadata.deletionTimestamp) {
        await guard(() => deleteObject(skr, info, e.namespace, e.name, { uid: live.metadata.uid }));
        out.changes.push({ subject: subjectOf(e), action: 'deleted', item: e.item });
        const after = await guard(() => getObject(skr, info, e.namespace, e.name));
        if (!after || after.metadata.uid !== live.metadata.uid) return void out.gone.push(e);
      }
      out.pending.push(e);
    });
  }
  return out;
}
