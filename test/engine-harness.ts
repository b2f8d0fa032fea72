// A harness for engine tests: SyncResources in the real KCP, applied with the real
// engine to a real SKR, status computed and written as the functions do.
import { parseConfig, type Config } from '../lib/config.ts';
import { stillRecordable } from '../lib/engine/inventory.ts';
import { reconcile, type ReconcileDeps } from '../lib/engine/reconcile.ts';
import type { ApplyResult } from '../lib/engine/result.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { isConflict, lostRace } from '../lib/kube/errors.ts';
import { getObject, mustFind, applyObject, type Cluster, type KubeObject } from '../lib/kube/objects.ts';
import { KcpStore, syncResourceInfo } from '../lib/kcp.ts';
import { KYMA_NAME_LABEL, SYNC_API_VERSION, type SyncItem, type SyncResource } from '../lib/model.ts';
import { computeStatus, sameStatus } from '../lib/status.ts';
import { cluster, uniqueName } from './helpers.ts';

/** Harness drives one SyncResource against SKR 0. */
export class Harness {
  readonly name: string;
  readonly ns: string;
  readonly config: Config;
  kcp!: Cluster;
  skr!: Cluster;
  store!: KcpStore;
  statusWrites = 0;

  constructor(prefix: string, config: Partial<Config> = {}) {
    this.name = uniqueName(prefix);
    this.ns = uniqueName(`${prefix}-ns`);
    this.config = { ...parseConfig({}), crdWaitMs: 15_000, ...config };
  }

  async init(skrIndex = 0): Promise<this> {
    this.kcp = await cluster('kcp');
    this.skr = await cluster(skrIndex);
    this.store = new KcpStore(this.kcp, this.config.fieldManager);
    await applyObject(
      this.skr,
      await mustFind(this.skr, 'v1', 'Namespace'),
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: this.ns } },
      'test',
    );
    return this;
  }

  /** put creates or replaces the SyncResource's spec. */
  async put(
    items: SyncItem[],
    extra: { deletionPolicy?: 'Delete' | 'Orphan'; kyma?: string } = {},
  ): Promise<void> {
    const body = {
      apiVersion: SYNC_API_VERSION,
      kind: 'SyncResource',
      // The kyma-name label, as write-status puts it after the first run: the other SyncResources of the Kyma find this one by it.
      metadata: {
        name: this.name,
        namespace: 'kcp-system',
        labels: { [KYMA_NAME_LABEL]: extra.kyma ?? 'kyma-1' },
      },
      spec: {
        kyma: extra.kyma ?? 'kyma-1',
        items,
        ...(extra.deletionPolicy ? { deletionPolicy: extra.deletionPolicy } : {}),
      },
    };
    // Create, or merge-patch the spec (server-side apply would drop an empty items list).
    try {
      await this.kcp.client.call('POST', resourcePath(syncResourceInfo, 'kcp-system'), { body });
    } catch (err) {
      if (!isConflict(err)) throw err;
      await this.kcp.client.call('PATCH', resourcePath(syncResourceInfo, 'kcp-system', this.name), {
        body: { spec: { ...body.spec, deletionPolicy: extra.deletionPolicy ?? null } },
        contentType: 'application/merge-patch+json',
      });
    }
  }

  async get(): Promise<SyncResource | undefined> {
    return this.store.get('kcp-system', this.name);
  }

  /** sync runs one reconcile and writes the status like the functions; returns both. */
  async sync(
    deps: Partial<ReconcileDeps> = {},
  ): Promise<{ result: ApplyResult; sr: SyncResource | undefined }> {
    const sr = await this.get();
    if (!sr) throw new Error(`SyncResource ${this.name} is gone`);
    const result = await reconcile(sr, { skr: this.skr, kcp: this.store, config: this.config, ...deps });
    // As write-status: decided on what was read; a write another run's beat (its tests fail) reads again.
    for (let attempt = 1; ; attempt++) {
      const fresh = await this.get();
      if (!fresh || result.deleting) break;
      const status = computeStatus(result, fresh.status, new Date());
      // The run's digests the KCP's inventory does not hold yet go with the status, as in write-status.
      const recorded = stillRecordable(result.recorded, fresh.status?.synced);
      const changed = !sameStatus(fresh.status, status);
      try {
        if (changed || recorded.length > 0)
          await this.store.writeStatus(fresh, changed ? status : {}, undefined, recorded);
      } catch (err) {
        if (!lostRace(err) || attempt >= 3) throw err;
        continue;
      }
      if (changed) this.statusWrites++;
      break;
    }
    return { result, sr: await this.get() };
  }

  /** crd is the manifest of a namespaced CRD of one version, v1alpha1, with a status subresource. */
  static crd(group: string, kind: string, plural: string): string {
    return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ${plural}.${group}}
spec:
  group: ${group}
  names: {kind: ${kind}, listKind: ${kind}List, plural: ${plural}, singular: ${plural.slice(0, -1)}}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`;
  }

  /** item returns the status entry of an item after the last sync. */
  static item(sr: SyncResource | undefined, name: string) {
    return sr?.status?.items?.find((i) => i.name === name);
  }

  async delete(): Promise<void> {
    await this.kcp.client.call('DELETE', resourcePath(syncResourceInfo, 'kcp-system', this.name));
  }

  /** skrGet reads an object from the SKR. */
  async skrGet(
    apiVersion: string,
    kind: string,
    name: string,
    namespace?: string,
  ): Promise<KubeObject | undefined> {
    return getObject(this.skr, await mustFind(this.skr, apiVersion, kind), namespace, name);
  }

  /** skrPatch merge-patches an object in the SKR, as a user would edit it. */
  async skrPatch(
    apiVersion: string,
    kind: string,
    name: string,
    namespace: string | undefined,
    patch: unknown,
  ): Promise<void> {
    const info = await mustFind(this.skr, apiVersion, kind);
    await this.skr.client.call('PATCH', resourcePath(info, namespace, name), {
      body: patch,
      contentType: 'application/merge-patch+json',
    });
  }

  /** skrPatchStatus merge-patches the /status of an object in the SKR. */
  async skrPatchStatus(
    apiVersion: string,
    kind: string,
    name: string,
    namespace: string | undefined,
    patch: unknown,
  ): Promise<void> {
    const info = await mustFind(this.skr, apiVersion, kind);
    await this.skr.client.call('PATCH', resourcePath(info, namespace, name, 'status'), {
      body: patch,
      contentType: 'application/merge-patch+json',
    });
  }

  async skrDelete(apiVersion: string, kind: string, name: string, namespace?: string): Promise<void> {
    await this.skr.client.call(
      'DELETE',
      resourcePath(await mustFind(this.skr, apiVersion, kind), namespace, name),
    );
  }

  /** skrCreate creates an object in the SKR as someone else would. */
  async skrCreate(obj: KubeObject): Promise<void> {
    await applyObject(this.skr, await mustFind(this.skr, obj.apiVersion, obj.kind), obj, 'someone-else');
  }

  cm(name: string, data: Record<string, string>, ns = this.ns): string {
    return `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: ${ns}}\ndata: ${JSON.stringify(data)}\n`;
  }
}
