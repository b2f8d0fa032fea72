// prune.ts deletes objects of inventory entries that no item claims any more (item
// removed, object renamed or moved), and all of them when a SyncResource is deleted.
// Only objects that still carry this SyncResource's owner annotation are touched; an
// adopted object is released (our marks removed), never deleted. A failure stays on its
// entry: it is reported and kept, and the other entries proceed.
import { subjectOf, type Change } from '../changeset.ts';
import type { Config } from '../config.ts';
import { parseApiVersion, validateKind, validateName, validateNamespace } from '../identity.ts';
import { PatchType } from '../kube/client.ts';
import { resourcePath, type ResourceInfo } from '../kube/discovery.ts';
import { deleteObject, getObject, type Cluster, type KubeObject } from '../kube/objects.ts';
import { describeId } from '../manifest.ts';
import { HASH_ANNOTATION, MANAGED_BY_LABEL, OWNER_ANNOTATION, type InventoryEntry } from '../model.ts';
import { installRank } from '../strategies.ts';
import { mapLimit } from '../util.ts';
import { guard, ownerOf, requestFailure } from './items.ts';

/** PruneOutcome says, per entry, whether it may leave the inventory. */
export interface PruneOutcome {
  gone: InventoryEntry[];
  pending: InventoryEntry[];
  /** failed entries stay in the inventory; message is the API's answer. */
  failed: { entry: InventoryEntry; message: string }[];
  changes: Change[];
}

/** validEntry tells whether an inventory entry names an object we could have recorded (we validate before recording). */
function validEntry(e: InventoryEntry): boolean {
  try {
    parseApiVersion(e.apiVersion);
    validateKind(e.kind);
    validateName(e.name);
    if (e.namespace !== undefined) validateNamespace(e.namespace);
    return true;
  } catch {
    return false;
  }
}

/** deleteEntries deletes (or, if adopted, releases) the objects of entries owned by owner, in reverse install order. */
export async function deleteEntries(skr: Cluster, entries: InventoryEntry[], owner: string, config: Config): Promise<PruneOutcome> {
  const out: PruneOutcome = { gone: [], pending: [], failed: [], changes: [] };
  const ranks = [...new Set(entries.map((e) => installRank(e.kind)))].sort((a, b) => b - a);
  for (const rank of ranks) {
    const group = entries.filter((e) => installRank(e.kind) === rank);
    await mapLimit(group, config.applyConcurrency, async (e) => {
      // An entry we could never have written names nothing of ours.
      if (!validEntry(e)) return void out.gone.push(e);
      try {
        await pruneOne(skr, e, owner, out);
      } catch (err) {
        out.failed.push({ entry: e, message: requestFailure(describeId(e), err).message });
      }
    });
  }
  return out;
}

async function pruneOne(skr: Cluster, e: InventoryEntry, owner: string, out: PruneOutcome): Promise<void> {
  const info = await guard(() => skr.mapper.find(e.apiVersion, e.kind));
  // A kind the SKR no longer serves has no objects left.
  if (!info) return void out.gone.push(e);
  const live = await guard(() => getObject(skr, info, e.namespace, e.name));
  if (!live || ownerOf(live) !== owner) return void out.gone.push(e);
  if (e.adopted) {
    await guard(() => release(skr, info, live));
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

/** release removes our label and annotations from the object read, on the condition that it is still that object (uid). */
async function release(skr: Cluster, info: ResourceInfo, live: KubeObject): Promise<void> {
  const pointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');
  const ops: object[] = [{ op: 'test', path: '/metadata/uid', value: live.metadata.uid }];
  if (live.metadata.labels?.[MANAGED_BY_LABEL] !== undefined) ops.push({ op: 'remove', path: `/metadata/labels/${pointer(MANAGED_BY_LABEL)}` });
  for (const a of [OWNER_ANNOTATION, HASH_ANNOTATION]) {
    if (live.metadata.annotations?.[a] !== undefined) ops.push({ op: 'remove', path: `/metadata/annotations/${pointer(a)}` });
  }
  await skr.client.call('PATCH', resourcePath(info, live.metadata.namespace, live.metadata.name), { body: ops, contentType: PatchType.json });
}
