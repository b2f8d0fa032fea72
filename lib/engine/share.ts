// share.ts: objects several SyncResources name. Each SyncResource writes with a field
// manager of its own (managerOf), so the SKR's managedFields say which SyncResource set
// which field: two that set the same value share it, as server-side apply shares fields,
// and one that would change a field another SyncResource holds gets a Conflict naming
// both, with nothing forced. A field held by anyone else (a user's edit) is drift: taken
// back. Who else names an object is read from the KCP's inventories (holders), never from
// the SKR; the last SyncResource to let go deletes the object (or releases it, adopted).
import { createHash } from 'node:crypto';
import type { Config } from '../config.ts';
import { PatchType } from '../kube/client.ts';
import { resourcePath, type ResourceInfo } from '../kube/discovery.ts';
import { isConflict, KubeApiError } from '../kube/errors.ts';
import { managedFieldsOf } from '../fields.ts';
import { applyObject, getObject, type Cluster, type KubeObject } from '../kube/objects.ts';
import { describeId } from '../manifest.ts';
import {
  objectKey,
  ownerKey,
  type HolderView,
  type InventoryEntry,
  type ObjectId,
  type SyncResource,
} from '../model.ts';
import { ownerOf } from '../policy/rules.ts';

/** MAX_MANAGER is the API server's limit on a field manager's length. */
const MAX_MANAGER = 128;

/**
 * managerOf is the field manager of one SyncResource: "<base>/<namespace>/<name>" (base is
 * SYNC_FIELD_MANAGER, default kcp-sync-resource). A longer one keeps its first 117
 * characters and ends in "~" and ten hex digits of the SHA-256 of "<namespace>/<name>".
 */
export function managerOf(base: string, sr: { namespace?: string; name: string }): string {
  const id = `${sr.namespace ?? ''}/${sr.name}`;
  const full = `${base}/${id}`;
  if (full.length <= MAX_MANAGER) return full;
  const hash = createHash('sha256').update(id).digest('hex').slice(0, 10);
  return `${full.slice(0, MAX_MANAGER - 11)}~${hash}`;
}

/** Writer is who writes in the SKR for one SyncResource: its owner key, its field manager, and the one field manager of earlier versions. */
export interface Writer {
  owner: string;
  manager: string;
  legacy: string;
}

export const writerOf = (sr: SyncResource, config: Pick<Config, 'fieldManager'>): Writer => ({
  owner: ownerKey(sr),
  manager: managerOf(config.fieldManager, sr.metadata),
  legacy: config.fieldManager,
});

/**
 * syncResourceOf names the SyncResource behind a field manager, or undefined when the
 * manager is not one of ours (a user, a controller). The one manager of earlier versions
 * speaks for the SyncResource its owner annotation names (none: an object it did not own).
 */
export function syncResourceOf(manager: string, w: Writer, live?: KubeObject): string | undefined {
  if (manager === w.legacy) return ownerOf(live);
  if (manager.startsWith(`${w.legacy}/`)) return manager.slice(w.legacy.length + 1);
  return undefined;
}

/** otherSyncResource names the SyncResource other than w's behind manager, or undefined (w's own, or no SyncResource's). */
export function otherSyncResource(manager: string, w: Writer, live?: KubeObject): string | undefined {
  const owner = syncResourceOf(manager, w, live);
  return owner !== w.owner ? owner : undefined;
}

/** heldElsewhere are the conflicts of an apply that other SyncResources hold, with the SyncResource each. */
export const heldElsewhere = (conflicts: FieldConflict[], w: Writer, live?: KubeObject) =>
  conflicts.flatMap((c) => {
    const owner = otherSyncResource(c.manager, w, live);
    return owner !== undefined ? [{ owner, field: c.field }] : [];
  });

/** FieldConflict is one field another manager holds with another value (the API server's 409 on a non-forced apply). */
export interface FieldConflict {
  manager: string;
  field: string;
}

/** fieldConflicts reads the conflicts of an apply's 409; undefined when err is not one. */
export function fieldConflicts(err: unknown): FieldConflict[] | undefined {
  if (!(err instanceof KubeApiError) || err.code !== 409) return undefined;
  const causes = err.status?.details?.causes ?? [];
  const out: FieldConflict[] = [];
  for (const c of causes) {
    // The server writes `conflict with "<manager>"` (then " using <apiVersion>" for an update).
    const m = /^conflict with ("(?:[^"\\]|\\.)*")/.exec(c.message ?? '');
    if (!m || c.field === undefined) continue;
    try {
      out.push({ manager: JSON.parse(m[1]!) as string, field: c.field });
    } catch {
      continue;
    }
  }
  return out.length > 0 ? out : undefined;
}

/** OwnedFieldConflict: an apply would change fields other SyncResources hold; nothing was written. */
export class OwnedFieldConflict extends Error {
  constructor(id: ObjectId, held: { owner: string; field: string }[]) {
    const owners = [...new Set(held.map((h) => h.owner))];
    const fields = [...new Set(held.map((h) => h.field))].sort();
    const shown = fields.slice(0, 5).join(', ') + (fields.length > 5 ? ` and ${fields.length - 5} more` : '');
    super(
      `${describeId(id)}: ${fields.length > 1 ? 'fields' : 'field'} ${shown} ${fields.length > 1 ? 'are' : 'is'} ` +
        `set to another value by SyncResource ${owners.join(', SyncResource ')}; nothing was forced`,
    );
    this.name = 'OwnedFieldConflict';
  }
}

/**
 * applyShared applies body as w's manager without force. Fields other SyncResources hold
 * with other values make it an OwnedFieldConflict; fields anyone else holds are drift: the
 * apply is forced, on the object as read (its resourceVersion), so a field another
 * SyncResource took meanwhile is never taken from it. A drift whose fields no SyncResource
 * holds (drift.ts names their managers: takeBack) is forced at once, on the same condition.
 */
export async function applyShared(
  skr: Cluster,
  info: ResourceInfo,
  id: ObjectId,
  body: KubeObject,
  w: Writer,
  opts: { live?: KubeObject | undefined; subresource?: 'status'; takeBack?: string[] } = {},
  again = true,
): Promise<KubeObject> {
  const forced = async () => {
    const rv = opts.live?.metadata.resourceVersion;
    if (!rv) return applyObject(skr, info, body, w.manager, opts.subresource);
    try {
      const guarded = { ...body, metadata: { ...body.metadata, resourceVersion: rv } };
      return await applyObject(skr, info, guarded, w.manager, opts.subresource);
    } catch (err) {
      // The object changed since it was read (another replica's run, its user): decide once more on it as it is now.
      if (!again || !isConflict(err) || fieldConflicts(err)) throw err;
      const now = await getObject(skr, info, id.namespace, id.name);
      return applyShared(skr, info, id, body, w, { live: now, subresource: opts.subresource }, false);
    }
  };
  if (opts.live && opts.takeBack?.every((m) => otherSyncResource(m, w, opts.live) === undefined))
    return forced();
  try {
    return await applyObject(skr, info, body, w.manager, opts.subresource, false, false);
  } catch (err) {
    const conflicts = fieldConflicts(err);
    if (!conflicts) throw err;
    const held = heldElsewhere(conflicts, w, opts.live);
    if (held.length > 0) throw new OwnedFieldConflict(id, held);
    return forced();
  }
}

/** othersWrite tells whether the field manager of a SyncResource other than w's holds fields of live. */
export const othersWrite = (live: KubeObject, w: Writer): boolean =>
  managedFieldsOf(live).some(
    (f) => !f.subresource && otherSyncResource(f.manager ?? '', w, live) !== undefined,
  );

/** hasManager tells whether manager holds fields of obj (any operation, the object itself). */
export const hasManager = (obj: KubeObject, manager: string): boolean =>
  managedFieldsOf(obj).some((f) => f.manager === manager && !f.subresource);

/** emptyBody is an apply body that names live and holds no field: applied as a manager, it lets go of every field only that manager held. */
export const emptyBody = (live: KubeObject): KubeObject => ({
  apiVersion: live.apiVersion,
  kind: live.kind,
  metadata: {
    name: live.metadata.name,
    ...(live.metadata.namespace ? { namespace: live.metadata.namespace } : {}),
  },
});

/**
 * letGo hands an object another SyncResource still names over to it. A created object: an
 * empty apply as each of w's managers, so that the fields only w set are removed, as
 * server-side apply removes fields a manifest dropped; one the server refuses without those
 * fields (a required field only w set) keeps them, and only w's name is taken off them. An
 * adopted object keeps every field: w's name is taken off its fields.
 */
export async function letGo(
  skr: Cluster,
  info: ResourceInfo,
  live: KubeObject,
  w: Writer,
  adopted: boolean,
): Promise<void> {
  const managers = [w.manager, ...(ownerOf(live) === w.owner ? [w.legacy] : [])].filter((m) =>
    hasManager(live, m),
  );
  if (managers.length === 0) return;
  if (!adopted) {
    try {
      for (const m of managers) await applyObject(skr, info, emptyBody(live), m, undefined, false, false);
      return;
    } catch (err) {
      if (!(err instanceof KubeApiError) || err.code !== 422) throw err;
    }
  }
  await forget(skr, info, live, managers);
}

/**
 * forget removes managers' entries from live's managedFields (a JSON patch tested on uid and
 * each entry): the fields stay as they are. The last entries go as the API server takes it
 * (a list of one empty entry): an empty list leaves managedFields as they were.
 */
async function forget(skr: Cluster, info: ResourceInfo, live: KubeObject, managers: string[]): Promise<void> {
  const fields = managedFieldsOf(live);
  const keep = fields.filter((f) => f.subresource || !managers.includes(f.manager ?? ''));
  if (keep.length === fields.length) return;
  const tests = fields.map((f, i) => ({
    op: 'test',
    path: `/metadata/managedFields/${i}/manager`,
    value: f.manager,
  }));
  await skr.client.call('PATCH', resourcePath(info, live.metadata.namespace, live.metadata.name), {
    body: [
      { op: 'test', path: '/metadata/uid', value: live.metadata.uid },
      ...tests,
      { op: 'replace', path: '/metadata/managedFields', value: keep.length > 0 ? keep : [{}] },
    ],
    contentType: PatchType.json,
  });
}

/**
 * writtenByUsOnly tells whether no one but SyncResources (this product, any version) holds
 * a field of live: an object a SyncResource created and every SyncResource let go of (an
 * empty apply leaves no mark either), not one someone else made under the same name.
 */
export const writtenByUsOnly = (live: KubeObject, w: Writer): boolean =>
  managedFieldsOf(live).every(
    (f) => f.subresource !== undefined || f.manager === w.legacy || f.manager?.startsWith(`${w.legacy}/`),
  );

/** Holder is another SyncResource whose inventory names an object. */
export interface Holder {
  owner: string;
  adopted: boolean;
}

/** Holders are, by object key, the other SyncResources of a Kyma that name each object. */
export type Holders = Map<string, Holder[]>;

/**
 * holdersOf indexes the inventories of the other SyncResources of sr's Kyma. A SyncResource
 * being deleted with deletionPolicy Delete (and not suspended) is letting go, so it holds
 * nothing: two deleted together do not leave their shared objects to each other.
 */
export function holdersOf(sr: SyncResource, all: readonly HolderView[]): Holders {
  const self = ownerKey(sr);
  const out: Holders = new Map();
  for (const other of all) {
    if (ownerKey(other) === self || other.spec?.kyma !== sr.spec.kyma) continue;
    const leaving =
      other.metadata.deletionTimestamp !== undefined &&
      (other.spec.deletionPolicy ?? 'Delete') === 'Delete' &&
      other.spec.suspend !== true;
    if (leaving) continue;
    for (const e of other.status?.synced ?? []) {
      const key = objectKey(e);
      out.set(key, [...(out.get(key) ?? []), { owner: ownerKey(other), adopted: e.adopted === true }]);
    }
  }
  return out;
}

/** createdBy tells whether an object a holder names was created by a SyncResource (not adopted). */
export const createdBy = (holders: Holder[] | undefined): boolean => (holders ?? []).some((h) => !h.adopted);

/** entryHolders are the holders of an inventory entry's object. */
export const entryHolders = (holders: Holders, e: InventoryEntry | ObjectId): Holder[] =>
  holders.get(objectKey(e)) ?? [];
