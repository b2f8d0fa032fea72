// marks.ts puts our marks (managed-by label, owner annotation) on an object we adopt and
// takes them off an object we release, and nothing else: a JSON patch on the object
// read, guarded by its uid. (A server-side apply of only the marks would also drop every
// field our field manager had applied to the object before.)
import type { Config } from '../config.ts';
import { PatchType } from '../kube/client.ts';
import { resourcePath, type ResourceInfo } from '../kube/discovery.ts';
import type { Cluster, KubeObject } from '../kube/objects.ts';
import { pointerToken } from '../util.ts';
import { HASH_ANNOTATION, MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER_ANNOTATION } from '../model.ts';

function patch(skr: Cluster, info: ResourceInfo, live: KubeObject, ops: object[], config: Pick<Config, 'fieldManager'>): Promise<unknown> {
  return skr.client.call('PATCH', resourcePath(info, live.metadata.namespace, live.metadata.name), {
    query: { fieldManager: config.fieldManager },
    body: [{ op: 'test', path: '/metadata/uid', value: live.metadata.uid }, ...ops],
    contentType: PatchType.json,
  });
}

/** stamp adds our label and owner annotation to the object read (adoption). */
export function stamp(skr: Cluster, info: ResourceInfo, live: KubeObject, owner: string, config: Pick<Config, 'fieldManager'>): Promise<unknown> {
  const ops: object[] = [];
  const put = (map: 'labels' | 'annotations', key: string, value: string) => ops.push(live.metadata[map]
    ? { op: 'add', path: `/metadata/${map}/${pointerToken(key)}`, value }
    : { op: 'add', path: `/metadata/${map}`, value: { [key]: value } });
  put('labels', MANAGED_BY_LABEL, MANAGED_BY_VALUE);
  // After the label: an annotations map added by the first op exists for the second only if it was there before.
  put('annotations', OWNER_ANNOTATION, owner);
  return patch(skr, info, live, ops, config);
}

/**
 * release removes our label and owner annotation from the object read, and with digest
 * our applied-digest annotation too (no request when it carries none of them). An object
 * still synced by a strategy that does not own it keeps its digest.
 */
export async function release(skr: Cluster, info: ResourceInfo, live: KubeObject, config: Pick<Config, 'fieldManager'>, digest: boolean): Promise<unknown> {
  const ops: object[] = [];
  if (live.metadata.labels?.[MANAGED_BY_LABEL] !== undefined) ops.push({ op: 'remove', path: `/metadata/labels/${pointerToken(MANAGED_BY_LABEL)}` });
  for (const a of digest ? [OWNER_ANNOTATION, HASH_ANNOTATION] : [OWNER_ANNOTATION]) {
    if (live.metadata.annotations?.[a] !== undefined) ops.push({ op: 'remove', path: `/metadata/annotations/${pointerToken(a)}` });
  }
  return ops.length > 0 ? patch(skr, info, live, ops, config) : undefined;
}
