// inventory.ts keeps status.synced with the write-ahead invariant: an object is
// recorded before it is created, and dropped only after it is gone (or no longer ours).
import { objectKey, type InventoryEntry, type ObjectId } from '../model.ts';

/** InventoryWriter persists the inventory (status.synced) in the KCP. */
export type InventoryWriter = (entries: InventoryEntry[]) => Promise<void>;

/** entryOf makes an inventory entry for an item's object. */
export const entryOf = (item: string, id: ObjectId, adopted = false): InventoryEntry => ({
  item,
  apiVersion: id.apiVersion,
  kind: id.kind,
  ...(id.namespace ? { namespace: id.namespace } : {}),
  name: id.name,
  ...(adopted ? { adopted } : {}),
});

const sameEntry = (a: InventoryEntry, b: InventoryEntry) =>
  a.item === b.item &&
  objectKey(a) === objectKey(b) &&
  a.apiVersion === b.apiVersion &&
  (a.adopted === true) === (b.adopted === true) &&
  a.digest === b.digest &&
  a.statusDigest === b.statusDigest &&
  a.manifest === b.manifest;
const same = (a: InventoryEntry[], b: InventoryEntry[]) =>
  a.length === b.length && a.every((e, i) => sameEntry(e, b[i]!));

/** sameObject tells entries for the same object, item and adoption apart from their digests. */
const sameObject = (a: InventoryEntry, b: InventoryEntry) =>
  a.item === b.item &&
  objectKey(a) === objectKey(b) &&
  a.apiVersion === b.apiVersion &&
  (a.adopted === true) === (b.adopted === true);

/** DIGESTS are an entry's fields taken from what the server holds after an apply. */
export const DIGESTS = ['digest', 'statusDigest', 'manifest'] as const;
type Digests = Pick<InventoryEntry, (typeof DIGESTS)[number]>;
const sameDigests = (a: Digests, b: Digests) => DIGESTS.every((k) => a[k] === b[k]);

/**
 * Recorded is a digest the KCP's inventory does not hold yet: the entry at index (checked by
 * its kind and name) gets these fields. Only the status step writes it, in its own patch.
 */
export type Recorded = { index: number; kind: string; name: string } & Digests;

/** withoutDigests is an inventory as far as what it holds goes (what a conflict must not have changed). */
export const withoutDigests = (entries: readonly InventoryEntry[]): InventoryEntry[] =>
  entries.map(({ digest: _d, statusDigest: _s, manifest: _m, ...e }) => e);

/**
 * stillRecordable keeps the digests whose inventory entry synced still holds at the same
 * place and without them (another run may have rewritten the inventory since).
 */
export function stillRecordable(
  recorded: readonly Recorded[] | undefined,
  synced: readonly InventoryEntry[] | undefined,
): Recorded[] {
  return (recorded ?? []).filter((r) => {
    const e = synced?.[r.index];
    return e !== undefined && e.kind === r.kind && e.name === r.name && !sameDigests(e, r);
  });
}

/** Inventory is the in-memory inventory of one run, written through on change. */
export class Inventory {
  private current: InventoryEntry[];
  private readonly write: InventoryWriter;
  /** writes counts KCP writes, for tests and benchmarks. */
  writes = 0;

  constructor(initial: InventoryEntry[], write: InventoryWriter) {
    this.current = [...initial];
    this.write = write;
  }

  get entries(): readonly InventoryEntry[] {
    return this.current;
  }

  /** find returns the entry for an object, whatever item recorded it. */
  find(id: ObjectId): InventoryEntry | undefined {
    const key = objectKey(id);
    return this.current.find((e) => objectKey(e) === key);
  }

  /**
   * record adds entries that are missing, and sets the adopted mark of entries present
   * with the other one, and writes before returning (write-ahead).
   */
  async record(entries: InventoryEntry[]): Promise<void> {
    const byKey = new Map(entries.map((e) => [objectKey(e), e]));
    const next = this.current.map((e) => {
      const r = byKey.get(objectKey(e));
      byKey.delete(objectKey(e));
      return r && (r.adopted === true) !== (e.adopted === true) ? { ...e, adopted: r.adopted === true } : e;
    });
    for (const e of entries) if (byKey.delete(objectKey(e))) next.push(e);
    await this.replace(next.map(({ adopted, ...e }) => (adopted ? { ...e, adopted } : e)));
  }

  /** replace writes a new inventory when it differs from the current one. */
  async replace(next: InventoryEntry[]): Promise<void> {
    if (same(this.current, next)) return;
    await this.write(next);
    this.writes++;
    this.current = next;
  }

  /**
   * settle ends a run's inventory: when next holds the same objects as the KCP's, in the same
   * order, and only digests differ, nothing is written here and the digests are returned for
   * the status step to write with the status (a digest missing is never unsafe: that object
   * is applied as it is next time); otherwise next is written as replace does.
   */
  async settle(next: InventoryEntry[]): Promise<Recorded[]> {
    const cur = this.current;
    if (cur.length !== next.length || !next.every((e, i) => sameObject(e, cur[i]!))) {
      await this.replace(next);
      return [];
    }
    const recorded: Recorded[] = [];
    next.forEach((e, i) => {
      if (sameDigests(e, cur[i]!)) return;
      const r: Recorded = { index: i, kind: e.kind, name: e.name };
      for (const k of DIGESTS) if (e[k] !== undefined) r[k] = e[k];
      recorded.push(r);
    });
    this.current = next;
    return recorded;
  }
}
