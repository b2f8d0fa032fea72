// drift.ts decides drift from server-side apply's own records (metadata.managedFields):
// what our field manager owns, projected from the object as the server stores it. Right
// after an apply its digest goes into the inventory; a later read whose digest differs had
// a field of ours changed or taken by another manager, or removed. Values the server
// normalizes (1000m and 1, an empty map, a defaulted field) are stored normalized, so
// they are never drift. A correction names the field managers that took our fields and
// the field paths (never a value).
import { createHash, createHmac } from 'node:crypto';
import { managedFieldsOf, ownedFields, ownsPath, project } from '../fields.ts';
import type { KubeObject } from '../kube/objects.ts';
import { canonical, isMap } from '../values.ts';
import { Memo } from '../memo.ts';

const sha = (v: unknown): string =>
  createHash('sha256')
    .update(canonical(v ?? null))
    .digest('hex')
    .slice(0, 32);

/**
 * digests remembers appliedDigest by object, resourceVersion, manager and subresource (an
 * object the server has not changed has the same digest): a run decides each item twice,
 * from a list snapshot and again from what it read, and a busy process interleaves a few
 * hundred runs. Small, so that it costs nothing at scale.
 */
const digests = new Memo<string>(4_096);

/**
 * appliedDigest is the digest of what manager owns of obj (or of its subresource), with the
 * values the server stores. A Secret's is keyed with its uid (HMAC), which only readers of
 * the Secret know: the digest in the KCP status cannot be used to test guesses of a value.
 */
export function appliedDigest(obj: KubeObject, manager: string, subresource?: 'status'): string {
  const { uid, resourceVersion } = obj.metadata;
  const compute = () => {
    const owned = canonical(project(obj, ownedFields(obj, manager, subresource)) ?? null);
    if (obj.apiVersion === 'v1' && obj.kind === 'Secret' && uid) {
      return createHmac('sha256', uid).update(owned).digest('hex').slice(0, 32);
    }
    return createHash('sha256').update(owned).digest('hex').slice(0, 32);
  };
  // Without a uid and resourceVersion (not read from a server) there is nothing to key by.
  return uid && resourceVersion
    ? digests.get(`${uid}/${resourceVersion}/${subresource ?? ''}/${manager}`, compute)
    : compute();
}

/** statusDigest ties the status a subresource item writes (its text) to what manager owns of obj's status. */
export function statusDigest(status: unknown, obj: KubeObject, manager: string): string {
  return `${sha(status)}:${appliedDigest(obj, manager, 'status')}`;
}

/** DriftCause says which of our fields changed (dotted paths) and which field managers hold them now. */
export interface DriftCause {
  paths: string[];
  managers: string[];
}

const identity = new Set(['apiVersion', 'kind', 'metadata.name', 'metadata.namespace']);

function leafPaths(v: unknown, prefix: string[] = []): string[][] {
  if (!isMap(v) || Object.keys(v).length === 0) return prefix.length > 0 ? [prefix] : [];
  return Object.entries(v).flatMap(([k, child]) => leafPaths(child, [...prefix, k]));
}

/**
 * driftCause lists the fields of desired that manager no longer owns in live (another
 * manager took them, or they were removed) and the managers that own them now.
 */
export function driftCause(
  desired: KubeObject,
  live: KubeObject,
  manager: string,
  subresource?: 'status',
): DriftCause {
  const ours = ownedFields(live, manager, subresource);
  const taken = leafPaths(subresource ? { status: desired.status } : desired).filter(
    (path) => !identity.has(path.join('.')) && !ownsPath(ours, path),
  );
  const managers = new Set<string>();
  for (const e of managedFieldsOf(live)) {
    if (e.manager === manager || !e.fieldsV1 || !e.manager) continue;
    if (taken.some((path) => ownsPath(e.fieldsV1!, path))) managers.add(e.manager);
  }
  return { paths: taken.map((p) => p.join('.')), managers: [...managers].sort() };
}
