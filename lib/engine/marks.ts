// marks.ts puts our mark (the managed-by label) on an object we adopt, takes the marks of
// earlier versions off, and takes ours off an object we release, and nothing else: a JSON
// patch on the object read, guarded by its uid. (A server-side apply of only the marks
// would also drop every field our field manager had applied to the object before.)
import { PatchType } from '../kube/client.ts';
import { resourcePath, type ResourceInfo } from '../kube/discovery.ts';
import type { Cluster, KubeObject } from '../kube/objects.ts';
import { pointerToken } from '../values.ts';
import {
  HASH_ANNOTATION,
  LEGACY_MARKS,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  OWNER_ANNOTATION,
} from '../model.ts';

function patch(
  skr: Cluster,
  info: ResourceInfo,
  live: KubeObject,
  ops: object[],
  manager: string,
): Promise<unknown> {
  return skr.client.call('PATCH', resourcePath(info, live.metadata.namespace, live.metadata.name), {
    query: { fieldManager: manager },
    body: [{ op: 'test', path: '/metadata/uid', value: live.metadata.uid }, ...ops],
    contentType: PatchType.json,
  });
}

/** remove is the JSON patch op that removes one key of a label or annotation map. */
const remove = (map: 'labels' | 'annotations', key: string) => ({
  op: 'remove',
  path: `/metadata/${map}/${pointerToken(key)}`,
});

/**
 * legacyOps are the ops that take the former marks off live: those of 0.1.0 (migrate.ts),
 * and the owner annotation that versions with one field manager wrote (their digest
 * annotation goes with their field manager: share.ts takeOver). desired keeps a former
 * label its manifest sets.
 */
function legacyOps(live: KubeObject, desired?: KubeObject): object[] {
  const ops: object[] = [];
  const label = live.metadata.labels?.[LEGACY_MARKS.label];
  if (label === MANAGED_BY_VALUE && desired?.metadata.labels?.[LEGACY_MARKS.label] === undefined) {
    ops.push(remove('labels', LEGACY_MARKS.label));
  }
  for (const a of [LEGACY_MARKS.owner, LEGACY_MARKS.hash, OWNER_ANNOTATION]) {
    if (live.metadata.annotations?.[a] !== undefined) ops.push(remove('annotations', a));
  }
  return ops;
}

/** hasLegacyMarks tells whether live still carries a mark of the former keys. */
export const hasLegacyMarks = (live: KubeObject | undefined): boolean =>
  live !== undefined && legacyOps(live).length > 0;

/**
 * stamp puts our label on the object read (adoption; mark true) and takes the former marks
 * off: the apply of an object we created moves its marks itself, but not those a JSON
 * patch put on (an adopted object) or of an object we no longer write.
 */
export function stamp(
  skr: Cluster,
  info: ResourceInfo,
  live: KubeObject,
  mark: boolean,
  desired: KubeObject | undefined,
  manager: string,
): Promise<unknown> {
  const ops = legacyOps(live, desired);
  if (mark) {
    // The removals go first: a map they empty still exists for the adds.
    const add = (map: 'labels' | 'annotations', key: string, value: string) => {
      const has = live.metadata[map];
      if (has?.[key] === value) return;
      ops.push(
        has
          ? { op: 'add', path: `/metadata/${map}/${pointerToken(key)}`, value }
          : { op: 'add', path: `/metadata/${map}`, value: { [key]: value } },
      );
    };
    add('labels', MANAGED_BY_LABEL, MANAGED_BY_VALUE);
  }
  return ops.length > 0 ? patch(skr, info, live, ops, manager) : Promise.resolve(undefined);
}

/**
 * release removes our label and owner annotation from the object read, and with digest
 * our applied-digest annotation too (no request when it carries none of them); the former
 * marks go with them. An object still synced by a strategy that does not own it keeps its digest.
 */
export async function release(
  skr: Cluster,
  info: ResourceInfo,
  live: KubeObject,
  manager: string,
  digest: boolean,
): Promise<unknown> {
  const ops: object[] = [];
  if (live.metadata.labels?.[MANAGED_BY_LABEL] !== undefined) ops.push(remove('labels', MANAGED_BY_LABEL));
  for (const a of digest ? [OWNER_ANNOTATION, HASH_ANNOTATION] : [OWNER_ANNOTATION]) {
    if (live.metadata.annotations?.[a] !== undefined) ops.push(remove('annotations', a));
  }
  if (live.metadata.labels?.[LEGACY_MARKS.label] === MANAGED_BY_VALUE)
    ops.push(remove('labels', LEGACY_MARKS.label));
  for (const a of digest ? [LEGACY_MARKS.owner, LEGACY_MARKS.hash] : [LEGACY_MARKS.owner]) {
    if (live.metadata.annotations?.[a] !== undefined) ops.push(remove('annotations', a));
  }
  return ops.length > 0 ? patch(skr, info, live, ops, manager) : undefined;
}
