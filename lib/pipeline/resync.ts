// resync.ts fans out reconcile requests: for every SyncResource on the cron tick,
// or for the SyncResources of one Kyma when it or its access Secret changed.
import { EventTypes, makeEvent, type ReconcileRequest } from '../events.ts';
import { secretInfo } from '../cluster/resolve.ts';
import { resourcePath } from '../kube/discovery.ts';
import { syncResourceInfo } from '../kcp.ts';
import { KYMA_NAME_LABEL, SYNC_SOURCE_LABEL, type SyncResource } from '../model.ts';
import { mapLimit } from '../util.ts';
import type { Deps } from './deps.ts';

const FANOUT_CONCURRENCY = 16;
const PAGE = 250;
/** METADATA_ONLY asks a LIST for names and labels only (PartialObjectMetadataList). */
const METADATA_ONLY = { accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' };

type Ref = { metadata: { namespace?: string; name: string } };

/**
 * forEachPage walks SyncResources page by page (bounded memory), names only unless the
 * caller needs specs: the fan-out needs none, and full pages of thousands of
 * SyncResources loaded the KCP.
 */
async function forEachPage<T extends Ref = Ref>(deps: Deps, namespace: string, labelSelector: string | undefined, fn: (page: T[]) => Promise<void>, specs = false): Promise<void> {
  let cont: string | undefined;
  do {
    const page = await deps.kcp.client.call<{ items: T[] | null; metadata: { continue?: string } }>('GET', resourcePath(syncResourceInfo, namespace), {
      query: { labelSelector, limit: PAGE, continue: cont },
      ...(specs ? {} : { headers: METADATA_ONLY }),
    });
    // An empty metadata-only list comes back with items: null.
    await fn(page.items ?? []);
    cont = page.metadata.continue || undefined;
  } while (cont);
}

async function send(deps: Deps, srs: Ref[], trigger: ReconcileRequest['trigger'], since: string): Promise<number> {
  const allowed = srs.filter((sr) => deps.config.controlPlaneNamespaces.includes(sr.metadata.namespace ?? ''));
  await mapLimit(allowed, FANOUT_CONCURRENCY, (sr) =>
    deps.send(makeEvent<ReconcileRequest>('resync', EventTypes.reconcile, { namespace: sr.metadata.namespace!, name: sr.metadata.name, trigger, since })));
  return allowed.length;
}

/** resyncAll posts one reconcile request per SyncResource in the control-plane namespaces. */
export async function resyncAll(deps: Deps): Promise<number> {
  let sent = 0;
  const since = new Date().toISOString();
  for (const ns of deps.config.controlPlaneNamespaces) {
    await forEachPage(deps, ns, undefined, async (page) => { sent += await send(deps, page, 'resync', since); });
  }
  return sent;
}

/**
 * resyncKyma posts reconcile requests for the SyncResources that target kyma, selected
 * by their kyma-name label (kept equal to spec.kyma by every run; one not reconciled yet
 * has its own run coming).
 */
export async function resyncKyma(deps: Deps, namespace: string, kyma: string, trigger: ReconcileRequest['trigger']): Promise<number> {
  if (!deps.config.controlPlaneNamespaces.includes(namespace)) return 0;
  let sent = 0;
  const since = new Date().toISOString();
  await forEachPage(deps, namespace, `${KYMA_NAME_LABEL}=${kyma}`, async (page) => {
    sent += await send(deps, page, trigger, since);
  });
  return sent;
}

/**
 * resyncSource posts reconcile requests for the SyncResources of kyma whose items take
 * their data from the source Secret name (dataFrom): a rotation reconciles only those.
 * Their specs are read in pages of the Kyma's SyncResources.
 */
export async function resyncSource(deps: Deps, namespace: string, kyma: string, name: string): Promise<number> {
  if (!deps.config.controlPlaneNamespaces.includes(namespace)) return 0;
  let sent = 0;
  const since = new Date().toISOString();
  await forEachPage<SyncResource>(deps, namespace, `${KYMA_NAME_LABEL}=${kyma}`, async (page) => {
    const using = page.filter((sr) => sr.spec.kyma === kyma && (sr.spec.items ?? []).some((i) => i.dataFrom?.secretRef?.name === name));
    sent += await send(deps, using, 'secret', since);
  }, true);
  return sent;
}

/** SecretOwner is the Kyma a changed Secret is labelled for, and whether it is a sync source (else an access Secret). */
export interface SecretOwner {
  kyma: string;
  source: boolean;
}

/** ownerOfSecret reads a Secret's labels only (a metadata-only list by name: the verb the Secret readers have). */
export async function ownerOfSecret(deps: Deps, namespace: string, name: string): Promise<SecretOwner | undefined> {
  const list = await deps.kcp.client.call<{ items: { metadata: { labels?: Record<string, string> } }[] | null }>(
    'GET', resourcePath(secretInfo, namespace), {
      query: { fieldSelector: `metadata.name=${name}`, labelSelector: KYMA_NAME_LABEL },
      headers: METADATA_ONLY,
    });
  const labels = list.items?.[0]?.metadata.labels;
  const kyma = labels?.[KYMA_NAME_LABEL];
  return kyma ? { kyma, source: labels?.[SYNC_SOURCE_LABEL] !== undefined } : undefined;
}
