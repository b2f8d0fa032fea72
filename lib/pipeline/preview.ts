// preview.ts runs a preview SyncResource (spec.preview): what its items would do in the
// SKR, computed as `kcp-sync diff` computes it (lib/diff.ts: the engine's parsing, kind
// resolution, reads and decisions, server-side dry runs), written to status.preview. It
// writes nothing to the SKR, claims nothing (no finalizer: deleting a preview deletes
// nothing there) and keeps no inventory. A preview `of` another SyncResource of its
// namespace is computed as that one's field manager, with that one's inventory (what its
// run would prune); a dry run writes nothing, so acting as its manager changes nothing.
import { diffSyncResource, CHANGES, type ItemDiff } from '../diff.ts';
import { readResourceTexts } from '../engine/sources.ts';
import type { Cluster } from '../kube/objects.ts';
import type { PreviewItem, PreviewStatus, SyncResource } from '../model.ts';
import { bounded } from '../policy/rules.ts';
import type { SyncPolicy } from '../policy/tenancy.ts';
import type { Deps } from './deps.ts';
import { canonical } from '../values.ts';

/** MAX_DIFF bounds one item's diff in the status (the CRD's limit). */
const MAX_DIFF = 8192;

/** previewRun computes sr's preview in skr and writes it to sr's status. */
export async function previewRun(
  deps: Deps,
  sr: SyncResource,
  skr: Cluster,
  policy: SyncPolicy | undefined,
  readText: (name: string, key: string) => Promise<string>,
): Promise<PreviewStatus> {
  const namespace = sr.metadata.namespace!;
  const of = sr.spec.preview?.of;
  // Only a SyncResource of the preview's own namespace, and never another preview.
  const target = of ? await deps.store.get(namespace, of) : undefined;
  const as = target && !target.spec.preview && target.spec.kyma === sr.spec.kyma ? target : undefined;
  const texts = await readResourceTexts(sr.spec.items ?? [], readText, deps.config.applyConcurrency);
  const items = await diffSyncResource(sr, skr, deps.config, policy, { texts, ...(as ? { as } : {}) });
  const note =
    of && !as
      ? [
          {
            item: of,
            outcome: 'error',
            message: target
              ? `SyncResource ${namespace}/${of} is a preview or targets another Kyma: previewed as a new SyncResource`
              : `SyncResource ${namespace}/${of} does not exist: previewed as a new SyncResource`,
          },
        ]
      : [];
  const preview: PreviewStatus = {
    observedGeneration: sr.metadata.generation ?? 0,
    time: new Date().toISOString(),
    ...(as ? { of: as.metadata.name } : {}),
    changes: items.some((i) => CHANGES.has(i.outcome)),
    items: [...note, ...items.map(toStatus)].slice(0, 300),
  };
  // Unchanged since the last write (a resync's rerun): nothing is written.
  const last = sr.status?.preview;
  if (
    last?.observedGeneration === preview.observedGeneration &&
    sr.status?.observedGeneration === preview.observedGeneration &&
    canonical(last.items) === canonical(preview.items) &&
    last.of === preview.of
  )
    return last;
  await deps.store.writeStatus(
    sr,
    { state: 'Ready', observedGeneration: preview.observedGeneration, preview },
    { generation: preview.observedGeneration, items: (sr.spec.items ?? []).map((i) => i.name) },
  );
  return preview;
}

/** toStatus bounds an item's outcome for the status (as the CRD bounds each field). */
function toStatus(i: ItemDiff): PreviewItem {
  return {
    item: i.item,
    outcome: i.outcome,
    ...(i.object ? { object: bounded(i.object, 1024) } : {}),
    ...(i.reason ? { reason: bounded(i.reason, 64) } : {}),
    ...(i.message ? { message: bounded(i.message, 2048) } : {}),
    ...(i.diff ? { diff: bounded(i.diff, MAX_DIFF) } : {}),
  };
}
