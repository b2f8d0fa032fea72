// prune.ts deletes objects of inventory entries that no item claims any more (item
// removed, object renamed or moved), and all of them when a SyncResource is deleted.
// Only objects that still carry this SyncResource's owner annotation are touched; an
// adopted object is released (our marks removed), never deleted. A failure stays on its
// entry: it is reported and kept, and the other entries proceed.
import { subjectOf, type Change } from '../changeset.ts';
import type { Config } from '../config.ts';
import { checkIdentity } from '../policy/identity.ts';
import { pruneAction, requestFailure } from '../policy/rules.ts';
import { deleteObject, getObject, type Cluster } from '../kube/objects.ts';
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

/** deleteEntries deletes (or, if adopted, releases) the objects of entries owned by owner, in reverse install order. */
export async function deleteEntries(
  skr: Cluster,
  entries: InventoryEntry[],
  owner: string,
  config: Config,
): Promise<PruneOutcome> {
  const out: PruneOutcome = { gone: [], pending: [], failed: [], changes: [] };
  const ranks = [...new Set(entries.map((e) => installRank(e.kind)))].sort((a, b) => b - a);
  for (const rank of ranks) {
    const group = entries.filter((e) => installRank(e.kind) === rank);
    await mapLimit(group, config.applyConcurrency, async (e) => {
      // An entry we could never have written names nothing of ours.
      if (!validEntry(e)) return void out.gone.push(e);
      try {
        await pruneOne(skr, e, owner, out, config);
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
  owner: string,
  out: PruneOutcome,
  config: Config,
): Promise<void> {
  const info = await guard(() => skr.mapper.find(e.apiVersion, e.kind));
  // A kind the SKR no longer serves has no objects left.
  if (!info) return void out.gone.push(e);
  const live = await guard(() => getObject(skr, info, e.namespace, e.name));
  const action = pruneAction(live, owner, e.adopted === true);
  if (!live || action === 'leave') return void out.gone.push(e);
  if (action === 'release') {
    await guard(() => release(skr, info, live, config, true));
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
