// kcp.ts: what the product reads and writes in the control plane: SyncResources,
// their finalizer, their inventory (status.synced) and the rest of their status.
// Inventory and status are written with server-side apply under two field managers,
// so the apply step and the status step never overwrite each other's fields.
import { PatchType } from './kube/client.ts';
import { resourcePath, type ResourceInfo } from './kube/discovery.ts';
import { isNotFound, KubeApiError } from './kube/errors.ts';
import { listObjects, type Cluster } from './kube/objects.ts';
import {
  FINALIZER,
  KYMA_NAME_LABEL,
  SYNC_API_VERSION,
  type HolderView,
  type InventoryEntry,
  type SyncResource,
  type SyncStatus,
} from './model.ts';
import { statusWriteTests } from './policy/rules.ts';
import { pointerToken } from './values.ts';
import { DIGESTS, type Recorded } from './engine/inventory.ts';

/** syncResourceInfo addresses SyncResources without a discovery round trip. */
export const syncResourceInfo: ResourceInfo = {
  apiVersion: SYNC_API_VERSION,
  kind: 'SyncResource',
  resource: 'syncresources',
  namespaced: true,
  hasStatus: true,
};

/** HOLDERS_PAGE bounds the whole SyncResources one holders read parses at a time. */
const HOLDERS_PAGE = 100;

function holderView(sr: SyncResource): HolderView {
  const { namespace, name, deletionTimestamp } = sr.metadata;
  const { kyma, deletionPolicy, suspend } = sr.spec;
  return {
    metadata: { namespace, name, ...(deletionTimestamp ? { deletionTimestamp } : {}) },
    spec: {
      kyma,
      ...(deletionPolicy ? { deletionPolicy } : {}),
      ...(suspend !== undefined ? { suspend } : {}),
    },
    ...(sr.status?.synced ? { status: { synced: sr.status.synced } } : {}),
  };
}

/** StatusPreconditions are what a status write tests besides uid and resourceVersion: the generation, and the spec items' names in order (none: not tested). */
export interface StatusPreconditions {
  generation: number;
  items: string[];
}

/** KcpStore reads and writes SyncResources in the KCP. */
export class KcpStore {
  readonly kcp: Cluster;
  readonly fieldManager: string;

  constructor(kcp: Cluster, fieldManager: string) {
    this.kcp = kcp;
    this.fieldManager = fieldManager;
  }

  private path(sr: { metadata: { namespace?: string; name: string } }, sub?: string): string {
    return resourcePath(syncResourceInfo, sr.metadata.namespace, sr.metadata.name, sub);
  }

  /**
   * get reads a SyncResource, or undefined when it does not exist: from etcd (a quorum
   * read), or, given the resourceVersion an authenticated event saw (notOlderThan), from
   * the API server's watch cache at that version or a newer one, for a third of the CPU
   * (BENCHMARKS.md). A version the server cannot serve so (malformed, or one its cache has
   * not reached within its wait) costs a quorum read, never a failure of its own.
   */
  async get(namespace: string, name: string, notOlderThan?: string): Promise<SyncResource | undefined> {
    const path = this.path({ metadata: { namespace, name } });
    try {
      if (notOlderThan) {
        try {
          return await this.kcp.client.call<SyncResource>('GET', path, {
            query: { resourceVersion: notOlderThan },
          });
        } catch (err) {
          // NotFound is an answer, Forbidden the namespace's (getIfBound); anything else (a
          // malformed version is a 500, one the cache did not reach in time a 504) asks etcd.
          if (!(err instanceof KubeApiError) || err.code === 404 || err.code === 403) throw err;
        }
      }
      return await this.kcp.client.call<SyncResource>('GET', path);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * holdersForKyma reads what the SyncResources of a Kyma (its kyma-name label) in
   * namespaces hold: a quorum read, so that one that just recorded an object is seen. It
   * keeps of each only its holder view, page by page: a Kyma may have hundreds of
   * SyncResources, each with its whole spec, and several runs read them at once. A
   * namespace of mayRefuse whose list the KCP refuses (a team namespace the operator has
   * not bound the product in) holds none the product could have acted for.
   */
  async holdersForKyma(kyma: string, namespaces: string[], mayRefuse: string[] = []): Promise<HolderView[]> {
    const lists = await Promise.all(
      namespaces.map((namespace) =>
        listObjects(
          this.kcp,
          syncResourceInfo,
          { namespace, labelSelector: `${KYMA_NAME_LABEL}=${kyma}`, limit: HOLDERS_PAGE },
          (o) => holderView(o as SyncResource),
        ).catch((err: unknown) => {
          if (mayRefuse.includes(namespace) && err instanceof KubeApiError && err.code === 403) return [];
          throw err;
        }),
      ),
    );
    return lists.flat();
  }

  /**
   * claim adds our finalizer and the kyma-name label (the resync lists a Kyma's
   * SyncResources by it) in one patch, guarded by sr's resourceVersion (refused if the
   * object changed since sr was read); nothing to add, no request.
   */
  async claim(sr: SyncResource): Promise<SyncResource> {
    const finalized = sr.metadata.finalizers?.includes(FINALIZER) === true;
    const labelled = sr.metadata.labels?.[KYMA_NAME_LABEL] === sr.spec.kyma;
    if (finalized && labelled) return sr;
    const ops: unknown[] = [
      { op: 'test', path: '/metadata/resourceVersion', value: sr.metadata.resourceVersion },
    ];
    if (!finalized)
      ops.push(
        sr.metadata.finalizers
          ? { op: 'add', path: '/metadata/finalizers/-', value: FINALIZER }
          : { op: 'add', path: '/metadata/finalizers', value: [FINALIZER] },
      );
    if (!labelled)
      ops.push(
        sr.metadata.labels
          ? { op: 'add', path: `/metadata/labels/${pointerToken(KYMA_NAME_LABEL)}`, value: sr.spec.kyma }
          : { op: 'add', path: '/metadata/labels', value: { [KYMA_NAME_LABEL]: sr.spec.kyma } },
      );
    return this.kcp.client.call<SyncResource>('PATCH', this.path(sr), {
      body: ops,
      contentType: PatchType.json,
    });
  }

  /**
   * removeFinalizer removes our finalizer; a vanished SyncResource is fine. It tells whether
   * the SyncResource is gone: it was, or no other finalizer held it, so the API server
   * deleted it with this write (the answer is its last state, with no finalizer left).
   */
  async removeFinalizer(sr: SyncResource): Promise<{ gone: boolean }> {
    const i = sr.metadata.finalizers?.indexOf(FINALIZER) ?? -1;
    if (i < 0) return { gone: false };
    const ops = [
      { op: 'test', path: '/metadata/resourceVersion', value: sr.metadata.resourceVersion },
      { op: 'remove', path: `/metadata/finalizers/${i}` },
    ];
    try {
      const after = await this.kcp.client.call<SyncResource>('PATCH', this.path(sr), {
        body: ops,
        contentType: PatchType.json,
      });
      return { gone: after.metadata.deletionTimestamp !== undefined && !after.metadata.finalizers?.length };
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return { gone: true };
    }
  }

  /**
   * writeInventory replaces status.synced in one JSON patch that first tests sr's
   * resourceVersion (a failed test changes nothing: 422); returns the updated object. A JSON
   * patch, not an apply: the API server spends a third less CPU on it (no merge of managed
   * fields), and the list is the inventory's alone either way.
   */
  async writeInventory(sr: SyncResource, entries: InventoryEntry[]): Promise<SyncResource> {
    const ops = [
      { op: 'test', path: '/metadata/resourceVersion', value: sr.metadata.resourceVersion },
      sr.status
        ? { op: 'add', path: '/status/synced', value: entries }
        : { op: 'add', path: '/status', value: { synced: entries } },
    ];
    return this.kcp.client.call<SyncResource>('PATCH', this.path(sr, 'status'), {
      query: { fieldManager: `${this.fieldManager}-inventory` },
      body: ops,
      contentType: PatchType.json,
    });
  }

  /**
   * writeStatus writes the status fields (all but status.synced, which is the inventory's)
   * as the status manager, in one JSON patch. With preconditions the patch first tests that the
   * object is still the one decided on: its uid and resourceVersion, its generation, and the
   * names of its spec items in order; a failed test changes nothing (409 or 422).
   */
  async writeStatus(
    sr: SyncResource,
    status: Omit<SyncStatus, 'synced'>,
    preconditions?: StatusPreconditions,
    recorded: readonly Recorded[] = [],
  ): Promise<SyncResource> {
    const tests = preconditions ? statusWriteTests(sr, preconditions) : [];
    const writes = sr.status
      ? Object.entries(status).map(([k, value]) => ({ op: 'add', path: `/status/${k}`, value }))
      : [{ op: 'add', path: '/status', value: status }];
    return this.kcp.client.call<SyncResource>('PATCH', this.path(sr, 'status'), {
      query: { fieldManager: `${this.fieldManager}-status` },
      body: [...tests, ...writes, ...recordedOps(recorded)],
      contentType: PatchType.json,
    });
  }
}

/**
 * recordedOps write a run's digests into the inventory entries they belong to, each
 * entry's kind and name tested first: they fill in digests, never add, drop or move an entry.
 */
function recordedOps(recorded: readonly Recorded[]): unknown[] {
  return recorded.flatMap((r) => {
    const at = `/status/synced/${r.index}`;
    return [
      { op: 'test', path: `${at}/kind`, value: r.kind },
      { op: 'test', path: `${at}/name`, value: r.name },
      ...DIGESTS.flatMap((k) => (r[k] === undefined ? [] : [{ op: 'add', path: `${at}/${k}`, value: r[k] }])),
    ];
  });
}
