// listcache.ts shares short-lived LIST snapshots of the objects the product manages
// (label managed-by) per kind and namespace of one cluster. During a resync burst,
// hundreds of SyncResources confirm "unchanged" from one LIST per kind and namespace
// instead of a GET per object. A snapshot is only ever used to confirm that nothing
// needs doing; every other decision reads the live object.
import type { ResourceInfo } from './discovery.ts';
import type { KubeClient } from './client.ts';
import { listObjects, type Cluster, type KubeObject, type Snapshots } from './objects.ts';
import { TtlMemo } from '../memo.ts';

/** ListCache holds snapshots for ttlMs. */
export class ListCache implements Snapshots {
  private readonly cluster: Pick<Cluster, 'client'>;
  private readonly selector: string;
  // An expired snapshot is dropped, so an idle client holds no copy of a large list.
  private readonly snapshots: TtlMemo<Map<string, KubeObject>>;

  constructor(client: KubeClient, selector: string, ttlMs = 2_000) {
    this.cluster = { client };
    this.selector = selector;
    this.snapshots = new TtlMemo(ttlMs);
  }

  /** get returns the object as of a recent snapshot taken at since (epoch ms) or later, or undefined if the snapshot lacks it. */
  async get(
    info: ResourceInfo,
    namespace: string | undefined,
    name: string,
    since = 0,
  ): Promise<KubeObject | undefined> {
    const key = `${info.apiVersion}/${info.kind}/${namespace ?? ''}`;
    return (await this.snapshots.get(key, () => this.list(info, namespace), false, since)).get(name);
  }

  private async list(info: ResourceInfo, namespace: string | undefined): Promise<Map<string, KubeObject>> {
    const items = await listObjects(this.cluster, info, {
      ...(namespace ? { namespace } : {}),
      labelSelector: this.selector,
    });
    return new Map(items.map((o) => [o.metadata.name, o]));
  }
}
