// resolve.ts finds a SyncResource's target cluster (docs/contributor/architecture.md): the
// Kyma named by spec.kyma where the SyncResource's Kymas are (its namespace, or the
// control-plane namespace for a team's: policy/tenancy.ts kymaHome), and the one access
// Secret there labelled with that Kyma's name, whose key "config" is the SKR's kubeconfig.
import { resourcePath, type ResourceInfo } from '../kube/discovery.ts';
import { isNotFound, TerminalError } from '../kube/errors.ts';
import type { Cluster, KubeObject } from '../kube/objects.ts';
import { KYMA_API_VERSION, KYMA_NAME_LABEL, SYNC_SOURCE_LABEL } from '../model.ts';
import { configMapInfo, readSource, type SourceConfigMap, type SourceSecret } from './sources.ts';
import { listObjects } from '../kube/objects.ts';
import { TtlMemo } from '../memo.ts';
import type { ClusterReason } from '../reasons.ts';

/** METADATA_ONLY asks a LIST for names and labels only (PartialObjectMetadataList). */
export const METADATA_ONLY = { accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' };

/** SNAPSHOT_TTL_MS is how long a LIST snapshot of a namespace's Kymas or access Secrets serves a resync. */
const SNAPSHOT_TTL_MS = 10_000;

/** kymaInfo and secretInfo address Kymas and Secrets in the KCP without discovery. */
export const kymaInfo: ResourceInfo = {
  apiVersion: KYMA_API_VERSION,
  kind: 'Kyma',
  resource: 'kymas',
  namespaced: true,
  hasStatus: true,
};
export const secretInfo: ResourceInfo = {
  apiVersion: 'v1',
  kind: 'Secret',
  resource: 'secrets',
  namespaced: true,
  hasStatus: false,
};

/** SecretRef identifies one version of an access Secret (never its content). */
export interface SecretRef {
  namespace: string;
  name: string;
  uid: string;
  resourceVersion: string;
}

/** AccessSecret is an access Secret's reference and its kubeconfig text. */
export interface AccessSecret {
  ref: SecretRef;
  kubeconfig: string;
}

/** ResolutionError says why a target cluster could not be found (reasons KymaNotFound, AccessSecretNotFound, ...). */
export class ResolutionError extends TerminalError<ClusterReason> {}

/**
 * getKyma reads the Kyma, failing with KymaNotFound; at: from the API server's watch cache,
 * no older than that resourceVersion (from etcd without it).
 */
export async function getKyma(
  kcp: Cluster,
  namespace: string,
  kyma: string,
  at?: string,
): Promise<KubeObject> {
  try {
    return await kcp.client.call<KubeObject>('GET', resourcePath(kymaInfo, namespace, kyma), {
      ...(at ? { query: { resourceVersion: at } } : {}),
    });
  } catch (err) {
    if (isNotFound(err))
      throw new ResolutionError(`Kyma ${namespace}/${kyma} does not exist`, 'KymaNotFound');
    throw err;
  }
}

/**
 * findAccessSecret returns the one Secret labelled for kyma, failing with AccessSecretNotFound
 * or AmbiguousAccessSecret. Secrets labelled as sync sources are never access Secrets. at:
 * from the API server's watch cache, no older than that resourceVersion.
 */
export async function findAccessSecret(
  kcp: Cluster,
  namespace: string,
  kyma: string,
  at?: string,
): Promise<AccessSecret> {
  const found = await kcp.client.call<{ items: KubeObject[] | null }>(
    'GET',
    resourcePath(secretInfo, namespace),
    {
      query: {
        labelSelector: `${KYMA_NAME_LABEL}=${kyma},!${SYNC_SOURCE_LABEL}`,
        ...(at ? { resourceVersion: at, resourceVersionMatch: 'NotOlderThan' } : {}),
      },
    },
  );
  return accessSecretOf(namespace, kyma, found.items ?? []);
}

/** accessSecretOf picks the access Secret of kyma out of the Secrets labelled for it. */
function accessSecretOf(namespace: string, kyma: string, items: KubeObject[]): AccessSecret {
  const list = { items };
  if (list.items.length === 0) {
    throw new ResolutionError(
      `no Secret in ${namespace} has label ${KYMA_NAME_LABEL}=${kyma}`,
      'AccessSecretNotFound',
    );
  }
  if (list.items.length > 1) {
    const names = list.items
      .map((s) => s.metadata.name)
      .sort()
      .join(', ');
    throw new ResolutionError(
      `${list.items.length} Secrets in ${namespace} have label ${KYMA_NAME_LABEL}=${kyma} (${names}); exactly one is allowed`,
      'AmbiguousAccessSecret',
    );
  }
  const s = list.items[0]!;
  const data = (s as { data?: Record<string, string> }).data?.config;
  if (!data)
    throw new ResolutionError(
      `Secret ${namespace}/${s.metadata.name} has no key "config"`,
      'InvalidKubeconfig',
    );
  return {
    ref: {
      namespace,
      name: s.metadata.name,
      uid: s.metadata.uid!,
      resourceVersion: s.metadata.resourceVersion!,
    },
    kubeconfig: Buffer.from(data, 'base64').toString('utf8'),
  };
}

/**
 * Lookups memoizes Kyma and access-Secret lookups per process for ttlMs: a burst of
 * SyncResources that target the same Kyma (a bulk create, a resync) costs one read of
 * each instead of one per SyncResource. Definite answers (found, or a ResolutionError)
 * are kept; other failures are not. Callers pass fresh when a change of the Kyma or the
 * Secret itself is being handled. Otherwise they may pass at, the resourceVersion of the
 * event that asked: what the memo does not answer is then read from the API server's
 * watch cache no older than that event (no etcd read, which the KCP answers late under
 * bulk writes), and a cache read that finds nothing, or fails, is read again from etcd,
 * so an error is never reported from the cache. A memo hit may be older than at; such a
 * read never is.
 */
export class Lookups {
  private readonly kcp: Cluster;
  private readonly kymas: TtlMemo<KubeObject>;
  private readonly secrets: TtlMemo<AccessSecret>;
  private readonly kymaLists = new TtlMemo<Set<string>>(SNAPSHOT_TTL_MS);
  private readonly secretLists = new TtlMemo<Map<string, KubeObject[]>>(SNAPSHOT_TTL_MS);

  constructor(kcp: Cluster, ttlMs = 2_000) {
    this.kcp = kcp;
    const definite = (err: unknown) => err instanceof ResolutionError;
    this.kymas = new TtlMemo(ttlMs, definite);
    this.secrets = new TtlMemo(ttlMs, definite);
  }

  /**
   * resolveFromSnapshots resolves a Kyma and its access Secret for a resync from LIST
   * snapshots of the namespace's Kymas (names only) and access Secrets, taken at since
   * (epoch ms) or later and shared for a few seconds: a resync of a thousand Kymas costs a
   * few pages instead of two reads each. Only a found answer is taken from a snapshot; a
   * missing or ambiguous one is read afresh, so an error is never reported from one.
   */
  async resolveFromSnapshots(namespace: string, kyma: string, since = 0): Promise<AccessSecret> {
    const [kymas, secrets] = await Promise.all([
      this.kymaLists.get(namespace, () => this.listKymas(namespace), false, since),
      this.secretLists.get(namespace, () => this.listAccessSecrets(namespace), false, since),
    ]);
    const labelled = secrets.get(kyma) ?? [];
    if (!kymas.has(kyma) || labelled.length !== 1) return this.resolve(namespace, kyma, true);
    return accessSecretOf(namespace, kyma, labelled);
  }

  /**
   * resolve reads the Kyma and its access Secret at once (shared for a moment unless
   * fresh); a missing Kyma is the error reported before any Secret's.
   */
  async resolve(namespace: string, kyma: string, fresh = false, at?: string): Promise<AccessSecret> {
    const [k, s] = await Promise.allSettled([
      this.kyma(namespace, kyma, fresh, at),
      this.accessSecret(namespace, kyma, fresh, at),
    ]);
    if (k.status === 'rejected') throw k.reason;
    if (s.status === 'rejected') throw s.reason;
    return s.value;
  }

  private async listKymas(namespace: string): Promise<Set<string>> {
    const kymas = await listObjects(this.kcp, kymaInfo, { namespace, headers: METADATA_ONLY });
    return new Set(kymas.map((k) => k.metadata.name));
  }

  private async listAccessSecrets(namespace: string): Promise<Map<string, KubeObject[]>> {
    const byKyma = new Map<string, KubeObject[]>();
    const items = await listObjects(this.kcp, secretInfo, {
      namespace,
      labelSelector: `${KYMA_NAME_LABEL},!${SYNC_SOURCE_LABEL}`,
      limit: 250,
    });
    for (const s of items) {
      const kyma = s.metadata.labels?.[KYMA_NAME_LABEL];
      if (!kyma) continue;
      let list = byKyma.get(kyma);
      if (!list) byKyma.set(kyma, (list = []));
      list.push(s);
    }
    return byKyma;
  }

  kyma(namespace: string, kyma: string, fresh = false, at?: string): Promise<KubeObject> {
    const read = (v?: string) => getKyma(this.kcp, namespace, kyma, v);
    return this.kymas.get(`${namespace}/${kyma}`, () => cachedFirst(read, fresh ? undefined : at), fresh);
  }

  accessSecret(namespace: string, kyma: string, fresh = false, at?: string): Promise<AccessSecret> {
    const read = (v?: string) => findAccessSecret(this.kcp, namespace, kyma, v);
    return this.secrets.get(`${namespace}/${kyma}`, () => cachedFirst(read, fresh ? undefined : at), fresh);
  }

  /**
   * source reads a source Secret (sources.ts) for one run; the caller checks it. Never
   * shared between runs: a value read a moment ago may be older than what another replica
   * just applied, and applying it would turn a rotation back until the next resync.
   */
  source(namespace: string, name: string): Promise<SourceSecret | undefined> {
    return readSource(this.kcp, secretInfo, namespace, name);
  }

  /** configMap reads the ConfigMap of a resourceFrom item for one run, as source does a Secret. */
  configMap(namespace: string, name: string): Promise<SourceConfigMap | undefined> {
    return readSource(this.kcp, configMapInfo, namespace, name);
  }
}

/** cachedFirst reads from the watch cache at resourceVersion at when given, and from etcd when that finds nothing or fails. */
export function cachedFirst<T>(read: (at?: string) => Promise<T>, at: string | undefined): Promise<T> {
  return at ? read(at).catch(() => read()) : read();
}
