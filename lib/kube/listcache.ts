// listcache.ts shares short-lived LIST snapshots of the objects the product manages
// (label managed-by) per kind and namespace of one cluster. During a resync burst,
// hundreds of SyncResources confirm "unchanged" from one LIST per kind and namespace
// instead of a GET per object. A snapshot is only ever used to confirm that nothing
// needs doing; every other decision reads the live object.
import type { ResourceInfo } from './discovery.ts';
import type { KubeClient } from './client.ts';
import { listObjects, type Cluster, type KubeObject } from './objects.ts';

/** ListCache holds snapshots for ttlMs. */
export class ListCache {
  private readonly cluster: Pick<Cluster, 'client'>;
  private readonly selector: string;
  private readonly ttlMs: number;
  private readonly snapshots = new Map<string, { at: number; objects: Promise<Map<string, KubeObject>> }>();

  constructor(client: KubeClient, selector: string, ttlMs = 2_000) {
    this.cluster = { client };
    this.selector = selector;
    this.ttlMs = ttlMs;
  }

  /** get returns the object as of a recent snapshot, or undefined if the snapshot lacks it. */
  async get(info: ResourceInfo, namespace: string | undefined, name: string): Promise<KubeObject | undefined> {
    const key = `${info.apiVersion}/${info.kind}/${namespace ?? ''}`;
    const now = Date.now();
    let snap = this.snapshots.get(key);
    if (!snap || now - snap.at > this.ttlMs) {
      const fresh = { at: now, objects: this.list(info, namespace) };
      this.snapshots.set(key, fresh);
      const drop = () => this.snapshots.get(key) === fresh && this.snapshots.delete(key);
      fresh.objects.catch(drop);
      // An expired snapshot is dropped, so an idle client holds no copy of a large list.
      setTimeout(drop, this.ttlMs).unref();
      snap = fresh;
    }
    return (await snap.objects).get(name);
  }

  private async list(info: ResourceInfo, namespace: string | undefined): Promise<Map<string, KubeObject>> {
    const items = await listObjects(this.cluster, info, { ...(namespace ? { namespace } : {}), labelSelector: this.selector });
    return new Map(items.map((o) => [o.metadata.name, o]));
  }
}
