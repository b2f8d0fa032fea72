// resync.ts fans out reconcile requests: one per Kyma on the cron tick (its
// SyncResources are reconciled in one delivery, applyKymaStep in apply.ts), one for a Kyma when
// it or its access Secret changed, one per SyncResource that references a changed
// source Secret or ConfigMap, and one per SyncResource not yet labelled with its Kyma. Its
// steps answer the tick and the changes of Kymas, Secrets and ConfigMaps at once and run
// the fan-out after the answer (fanout.ts).
import { EventTypes, makeEvent, type KymaRequest, type ReconcileRequest } from '../events/contract.ts';
import { METADATA_ONLY, secretInfo } from '../cluster/resolve.ts';
import { resourcePath } from '../kube/discovery.ts';
import { syncResourceInfo } from '../kcp.ts';
import { KYMA_NAME_LABEL, SYNC_SOURCE_LABEL, type SyncResource } from '../model.ts';
import { isDnsSubdomain } from '../policy/identity.ts';
import { mapLimit } from '../concurrency.ts';
import type { Deps, Logger } from './deps.ts';
import type { Answer } from './answer.ts';
import type { ObjectChange } from './requests.ts';
import { governedNamespaces, isControlPlane, type SyncPolicy } from '../policy/tenancy.ts';
import { readPolicies } from '../cluster/policies.ts';

const FANOUT_CONCURRENCY = 16;
const PAGE = 250;

type Ref = { metadata: { namespace?: string; name: string; labels?: Record<string, string> } };

/**
 * forEachPage walks SyncResources page by page (bounded memory), names only unless the
 * caller needs specs: the fan-out needs none, and full pages of thousands of
 * SyncResources loaded the KCP.
 */
export async function forEachPage<T extends Ref = Ref>(
  deps: Deps,
  namespace: string,
  labelSelector: string | undefined,
  fn: (page: T[]) => Promise<void>,
  specs = false,
): Promise<void> {
  let cont: string | undefined;
  do {
    const page = await deps.kcp.client.call<{ items: T[] | null; metadata: { continue?: string } }>(
      'GET',
      resourcePath(syncResourceInfo, namespace),
      {
        query: { labelSelector, limit: PAGE, continue: cont },
        ...(specs ? {} : { headers: METADATA_ONLY }),
      },
    );
    // An empty metadata-only list comes back with items: null.
    await fn(page.items ?? []);
    cont = page.metadata.continue || undefined;
  } while (cont);
}

async function send(
  deps: Deps,
  namespace: string,
  srs: Ref[],
  trigger: ReconcileRequest['trigger'],
  since: string,
): Promise<number> {
  // Only what the page of namespace holds: an answer naming another namespace is not taken.
  const allowed = srs.filter((sr) => sr.metadata.namespace === namespace);
  await mapLimit(allowed, FANOUT_CONCURRENCY, (sr) =>
    deps.send(
      makeEvent<ReconcileRequest>('resync', EventTypes.reconcile, {
        namespace: sr.metadata.namespace!,
        name: sr.metadata.name,
        trigger,
        since,
      }),
    ),
  );
  return allowed.length;
}

function sendKyma(
  deps: Deps,
  namespace: string,
  kyma: string,
  trigger: KymaRequest['trigger'],
  since: string,
): Promise<void> {
  return deps.send(
    makeEvent<KymaRequest>('resync', EventTypes.reconcileKyma, { namespace, name: kyma, trigger, since }),
  );
}

/**
 * actedOn are the namespaces whose SyncResources are reconciled: the control-plane
 * namespaces, then the team namespaces one SyncPolicy governs (policies read now).
 */
async function actedOn(deps: Deps): Promise<{ namespaces: string[]; policies: SyncPolicy[] }> {
  const policies = await readPolicies(deps.kcp);
  return {
    namespaces: [...deps.config.controlPlaneNamespaces, ...governedNamespaces(policies, deps.config)],
    policies,
  };
}

/**
 * resyncAll posts one reconcile request per Kyma that SyncResources are labelled for
 * (the kyma-name label, kept equal to spec.kyma by every run), from a names-only walk of
 * the SyncResources in the namespaces acted on, and one per SyncResource without
 * the label (never run to the end: its creation's run failed or is still coming).
 * Returns the number of requests.
 */
export async function resyncAll(deps: Deps): Promise<number> {
  let sent = 0;
  const since = new Date().toISOString();
  for (const ns of (await actedOn(deps)).namespaces) {
    const kymas = new Set<string>();
    await forEachPage(deps, ns, undefined, async (page) => {
      const unlabelled: Ref[] = [];
      for (const sr of page) {
        // Labels are anyone's to write: only a name a Kyma can have is requested.
        const kyma = sr.metadata.labels?.[KYMA_NAME_LABEL];
        if (kyma && isDnsSubdomain(kyma)) kymas.add(kyma);
        else unlabelled.push(sr);
      }
      sent += await send(deps, ns, unlabelled, 'resync', since);
    });
    await mapLimit([...kymas], FANOUT_CONCURRENCY, (kyma) => sendKyma(deps, ns, kyma, 'resync', since));
    sent += kymas.size;
  }
  return sent;
}

/**
 * resyncKyma posts one reconcile request for the SyncResources of kyma (those labelled
 * with it; one not reconciled yet has its own run coming): those of its own namespace,
 * and those of each team namespace whose policy may target it (by name, or by a selector).
 */
export async function resyncKyma(
  deps: Deps,
  namespace: string,
  kyma: string,
  trigger: KymaRequest['trigger'],
): Promise<number> {
  if (!isControlPlane(namespace, deps.config)) return 0;
  const since = new Date().toISOString();
  const { namespaces, policies } = await actedOn(deps);
  const teams = namespaces.filter((ns) => {
    if (isControlPlane(ns, deps.config)) return false;
    const p = policies.find((x) => x.spec.namespaces.includes(ns));
    return p?.spec.kymas?.names?.includes(kyma) === true || p?.spec.kymas?.selector !== undefined;
  });
  const targets = deps.config.controlPlaneNamespaces[0] === namespace ? [namespace, ...teams] : [namespace];
  await mapLimit(targets, FANOUT_CONCURRENCY, (ns) => sendKyma(deps, ns, kyma, trigger, since));
  return targets.length;
}

/**
 * resyncUsers posts reconcile requests for the SyncResources of namespace (pages of those
 * matching labelSelector, specs read) that uses: a changed source reaches only them.
 */
async function resyncUsers(
  deps: Deps,
  namespace: string,
  labelSelector: string,
  uses: (sr: SyncResource) => boolean,
  trigger: ReconcileRequest['trigger'] = 'secret',
): Promise<number> {
  if (!isControlPlane(namespace, deps.config)) return 0;
  let sent = 0;
  const since = new Date().toISOString();
  await forEachPage<SyncResource>(
    deps,
    namespace,
    labelSelector,
    async (page) => {
      sent += await send(deps, namespace, page.filter(uses), trigger, since);
    },
    true,
  );
  return sent;
}

/**
 * resyncSource posts reconcile requests for the SyncResources of kyma whose items take
 * their data from the source Secret name (dataFrom): a rotation reconciles only those.
 */
export function resyncSource(deps: Deps, namespace: string, kyma: string, name: string): Promise<number> {
  return resyncUsers(
    deps,
    namespace,
    `${KYMA_NAME_LABEL}=${kyma}`,
    (sr) => sr.spec.kyma === kyma && (sr.spec.items ?? []).some((i) => i.dataFrom?.secretRef?.name === name),
  );
}

/**
 * resyncResourceSource posts reconcile requests for the SyncResources of namespace whose
 * resourceFrom items name the ConfigMap name. A ConfigMap may serve every Kyma, so the
 * pages are of the namespace's labelled SyncResources (a new one runs on its creation anyway).
 */
export function resyncResourceSource(deps: Deps, namespace: string, name: string): Promise<number> {
  return resyncUsers(deps, namespace, KYMA_NAME_LABEL, (sr) =>
    (sr.spec.items ?? []).some((i) => i.resourceFrom?.configMapKeyRef?.name === name),
  );
}

/** SecretOwner is the Kyma a changed Secret is labelled for, and whether it is a sync source (else an access Secret). */
export interface SecretOwner {
  kyma: string;
  source: boolean;
}

/** ownerOfSecret reads a Secret's labels only (a metadata-only list by name: the verb the Secret readers have). */
export async function ownerOfSecret(
  deps: Deps,
  namespace: string,
  name: string,
): Promise<SecretOwner | undefined> {
  const list = await deps.kcp.client.call<{
    items: { metadata: { labels?: Record<string, string> } }[] | null;
  }>('GET', resourcePath(secretInfo, namespace), {
    query: { fieldSelector: `metadata.name=${name}`, labelSelector: KYMA_NAME_LABEL },
    headers: METADATA_ONLY,
  });
  const labels = list.items?.[0]?.metadata.labels;
  const kyma = labels?.[KYMA_NAME_LABEL];
  return kyma ? { kyma, source: labels?.[SYNC_SOURCE_LABEL] !== undefined } : undefined;
}

/** tickStep is the resync function's answer to the PingSource tick: resyncAll, after the answer. */
export async function tickStep(deps: Deps, _req: unknown, log: Logger): Promise<Answer> {
  log.info({ step: 'resync', trigger: 'ping' }, 'resync started');
  return { fanOut: { key: 'all', job: () => resyncAll(deps) } };
}

/** kymaChangedStep answers a change of a Kyma of a control-plane namespace: resyncKyma, after the answer. */
export async function kymaChangedStep(deps: Deps, { ref, kind }: ObjectChange, log: Logger): Promise<Answer> {
  const fields = { step: 'resync', trigger: kind, object: `${ref.namespace}/${ref.name}` };
  if (!isControlPlane(ref.namespace, deps.config)) {
    log.warn(fields, 'namespace not allowed');
    return {};
  }
  log.info(fields, 'resync started');
  return {
    fanOut: {
      key: `kyma ${ref.namespace}/${ref.name}`,
      job: () => resyncKyma(deps, ref.namespace, ref.name, 'kyma'),
    },
  };
}

/**
 * sourceChangedStep answers a change of a Secret or ConfigMap of a control-plane
 * namespace (sources elsewhere are never read): an access Secret reconciles every
 * SyncResource of its Kyma, a source Secret or ConfigMap those that reference it; the
 * posts run after the answer.
 */
export async function sourceChangedStep(
  deps: Deps,
  { ref, kind }: ObjectChange,
  log: Logger,
): Promise<Answer> {
  const object = `${ref.namespace}/${ref.name}`;
  if (!isControlPlane(ref.namespace, deps.config)) {
    log.warn({ step: 'resolve-cluster', trigger: kind, object }, 'namespace not allowed');
    return {};
  }
  if (kind === 'ConfigMap') {
    log.info({ step: 'resolve-cluster', trigger: 'source ConfigMap', object }, 'resync started');
    return {
      fanOut: { key: `configmap ${object}`, job: () => resyncResourceSource(deps, ref.namespace, ref.name) },
    };
  }
  const owner = await ownerOfSecret(deps, ref.namespace, ref.name);
  log.info(
    {
      step: 'resolve-cluster',
      trigger: owner?.source ? 'source Secret' : 'Secret',
      object,
      cluster: owner?.kyma,
    },
    owner ? 'resync started' : 'not labelled for a Kyma',
  );
  if (!owner) return {};
  const job = owner.source
    ? () => resyncSource(deps, ref.namespace, owner.kyma, ref.name)
    : () => resyncKyma(deps, ref.namespace, owner.kyma, 'secret');
  return { fanOut: { key: `secret ${object}`, job } };
}
