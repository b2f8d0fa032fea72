// delete.ts handles a SyncResource being deleted, per its deletionPolicy: what it created
// is deleted (Delete) or left (Orphan), what it adopted is released either way, and the
// finalizer goes once every object is handled.
import { FINALIZER, objectKey } from '../model.ts';
import { deleteEntries } from './prune.ts';
import type { ApplyResult } from './result.ts';
import { kcpWrite, type Run } from './run.ts';

/** Removed is what a deletion run did; gone: the SyncResource went with its finalizer (no other held it). */
export type Removed = Pick<ApplyResult, 'changes' | 'pending' | 'failed' | 'suspended'> & {
  deleting: NonNullable<ApplyResult['deleting']>;
  gone?: boolean;
};

/** removeAll lets go of every object of run.sr's inventory (deleteEntries), then of its finalizer. */
export async function removeAll(run: Run): Promise<Removed> {
  const { sr, deps, inventory } = run;
  const policy = sr.spec.deletionPolicy ?? 'Delete';
  const out: Removed = { changes: [], pending: [], deleting: { finalizerRemoved: false, policy } };
  const unfinalized = async (): Promise<Removed> => {
    const { gone } = await kcpWrite(() => deps.kcp.removeFinalizer(run.latest()));
    return { ...out, deleting: { finalizerRemoved: true, policy }, gone };
  };
  if (!sr.metadata.finalizers?.includes(FINALIZER))
    return { ...out, deleting: { finalizerRemoved: true, policy } };
  // Suspended means no writes to the SKR, deletion included (as Flux does): the objects
  // stay as they are, marks and all. Lift the suspension first to have them deleted.
  if (sr.spec.suspend === true) return { ...(await unfinalized()), suspended: true };
  // Delete deletes what we created; either policy releases what we adopted.
  const handled = policy === 'Delete' ? [...inventory.entries] : inventory.entries.filter((e) => e.adopted);
  if (handled.length === 0) return unfinalized();
  const gone = await deleteEntries(deps.skr, handled, run.writer, deps.config, run.holders);
  const result = { changes: gone.changes, pending: gone.pending.map(objectKey), failed: gone.failed };
  const done = gone.pending.length === 0 && gone.failed.length === 0;
  // Deleting everything, all gone: the inventory goes with the SyncResource, unwritten. A
  // SyncResource deleting its objects holds none (share.ts holdersOf), and a run after a
  // failed removal of the finalizer finds each entry's object gone.
  if (!done || policy === 'Orphan') {
    const goneKeys = new Set(gone.gone.map(objectKey));
    await inventory.replace(inventory.entries.filter((e) => !goneKeys.has(objectKey(e))));
  }
  // The finalizer stays until every object is handled; a failure is reported, and the next run tries again.
  if (!done) return { ...out, ...result };
  return { ...(await unfinalized()), ...result };
}
