// migrate.ts is the one place that takes over what 0.1.0 wrote (CHANGELOG.md, 0.2.0): one
// field manager (kcp-sync-resource) for every object, an owner annotation naming the
// SyncResource, and the former label and annotation keys (model.ts LEGACY_MARKS). A run
// that finds such an object moves it to its own field manager and marks; no value of the
// manifest changes (test/engine-fidelity.test.ts, test/shared-objects.test.ts).
import { applyObject, type Cluster, type KubeObject } from '../kube/objects.ts';
import type { ResourceInfo } from '../kube/discovery.ts';
import { ownerOf } from '../policy/rules.ts';
import type { Decision } from './decide.ts';
import type { ResolvedItem } from './plan.ts';
import { hasLegacyMarks, stamp } from './marks.ts';
import { emptyBody, hasManager, type Writer } from './share.ts';
import { inSkr } from './unreachable.ts';

/**
 * migrate: after an update, or an object found unchanged or ignored, an object 0.1.0 wrote
 * is this SyncResource's alone from now on (takeOver), and keeps no former mark (marks.ts).
 * Returns the object as it left it. Not for a strategy that does not own (release).
 */
export async function migrate(
  { skr, p, d, w }: { skr: Cluster; p: ResolvedItem; d: Decision; w: Writer },
  current: KubeObject | undefined,
) {
  if (!current || d.release) return current;
  if (d.op === 'update' || d.op === 'unchanged')
    current = (await inSkr(() => takeOver(skr, p.info, current!, w))) ?? current;
  const marked = current;
  if ((d.op === 'update' || d.op === 'unchanged' || d.op === 'ignore') && hasLegacyMarks(marked))
    await inSkr(() => stamp(skr, p.info, marked, p.opts.own, d.desired, w.manager));
  return current;
}

/**
 * takeOver moves an object 0.1.0 wrote (its one field manager, its owner
 * annotation naming this SyncResource) to w's manager once w's own apply holds the
 * manifest's fields: an empty apply as the former manager lets go of what only it held
 * (the former marks). No value of the manifest changes: w's manager holds each of them.
 * Returns the object as it is then (undefined: nothing to take over).
 */
export async function takeOver(
  skr: Cluster,
  info: ResourceInfo,
  after: KubeObject,
  w: Writer,
): Promise<KubeObject | undefined> {
  if (!hasManager(after, w.legacy) || ownerOf(after) !== w.owner) return undefined;
  return applyObject(skr, info, emptyBody(after), w.legacy, undefined, false, false);
}
