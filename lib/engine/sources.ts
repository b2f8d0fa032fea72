// sources.ts reads what items take by reference, before a run parses and applies them:
// the texts of resourceFrom items (KCP ConfigMaps) and the values of dataFrom items (KCP
// Secrets), and confirms after the run that no source Secret changed meanwhile.
import { SourceError } from '../cluster/sources.ts';
import { TransientError } from '../kube/errors.ts';
import { mapLimit } from '../concurrency.ts';
import type { SyncItem } from '../model.ts';
import { secretValues } from '../policy/rules.ts';
import { settle, type PlanItem, type ResourceTexts } from './plan.ts';
import { result } from './result.ts';

/** SourceReader returns the data and resourceVersion of the source Secret name for this SyncResource, or throws a SourceError. */
export type SourceReader = (name: string) => Promise<{ data: Record<string, string>; version: string }>;

/** ResourceSourceReader returns the text a resourceFrom item names, or throws a SourceError. */
export type ResourceSourceReader = (name: string, key: string) => Promise<string>;

/** readResourceTexts reads the text of every resourceFrom item; a failure to read the KCP is the run's (transient). */
export async function readResourceTexts(
  items: SyncItem[],
  read: ResourceSourceReader | undefined,
  concurrency: number,
): Promise<ResourceTexts> {
  const texts: ResourceTexts = new Map();
  await mapLimit(
    items.filter((i) => i.resourceFrom !== undefined && i.resource === undefined),
    concurrency,
    async (i) => {
      const { name, key } = i.resourceFrom!.configMapKeyRef;
      if (!read)
        return void texts.set(
          i.name,
          new SourceError(`ConfigMap ${name} (resourceFrom) cannot be read here`, 'ResourceSourceNotFound'),
        );
      try {
        texts.set(i.name, await read(name, key));
      } catch (err) {
        if (!(err instanceof SourceError)) throw err;
        texts.set(i.name, err);
      }
    },
  );
  return texts;
}

/**
 * fillSources gives every dataFrom item its source Secret's data; a source that is missing
 * or may not ship here settles the item (SecretSourceNotFound, SecretSourceRejected) before
 * anything is read or written in the SKR. A failure to read is the run's (transient).
 */
export function fillSources(
  plan: readonly PlanItem[],
  read: SourceReader | undefined,
  concurrency: number,
): Promise<PlanItem[]> {
  return mapLimit(plan, concurrency, async (p): Promise<PlanItem> => {
    if (p.done || p.item.dataFrom === undefined) return p;
    const name = p.item.dataFrom.secretRef.name;
    if (!read)
      return settle(
        p,
        result(
          p.item.name,
          'Error',
          'SecretSourceNotFound',
          `Secret ${name} (dataFrom.secretRef) cannot be read here`,
        ),
      );
    try {
      const { data, version } = await read(name);
      return { ...p, object: { ...p.object!, data }, sourceVersion: version, secrets: secretValues(data) };
    } catch (err) {
      if (!(err instanceof SourceError)) throw err;
      return settle(p, result(p.item.name, 'Error', err.reason, err.message));
    }
  });
}

/**
 * confirmSources re-reads the source of every dataFrom item this run wrote and fails the
 * run (transient: it is redelivered) if one changed meanwhile. Two runs of one
 * SyncResource may overlap (two replicas): one that read a source before a rotation and
 * wrote after the other wrote the new value must not be the last word.
 */
export async function confirmSources(plan: PlanItem[], read: SourceReader | undefined): Promise<void> {
  for (const p of plan) {
    if (p.sourceVersion === undefined || !read) continue;
    const name = p.item.dataFrom!.secretRef.name;
    const now = await read(name).then(
      (s) => s.version,
      (err: unknown) => (err instanceof SourceError ? undefined : Promise.reject(err)),
    );
    if (now !== p.sourceVersion)
      throw new TransientError(
        `Secret ${name} (dataFrom.secretRef) changed while this run applied it; retry`,
        'SecretSourceChanged',
      );
  }
}
