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
}
