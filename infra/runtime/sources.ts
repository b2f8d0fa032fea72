// sources.ts plays Knative's ApiServerSource (Reference mode) and PingSource. The
// ApiServerSource lists, then watches, each resource in its namespace and emits
// dev.knative.apiserver.ref.add|update|delete with the real attributes (source =
// API server URL, subject = self link, extensions kind/name/namespace/apiversion,
// data = the object reference) for what the watch reports. As the real adapter
// (eventing pkg/adapter/apiserver/delegate.go: its store's Replace and Resync do
// nothing), it sends nothing for the objects a list finds: not for those that exist
// when it starts, nor for changes made while its watch was broken. The PingSource's
// resync is what catches those up.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { CloudEvent } from 'cloudevents';
import { resourcePath } from '../../lib/kube/discovery.ts';
import { KubeApiError } from '../../lib/kube/errors.ts';
import { mustFind, type Cluster, type KubeObject } from '../../lib/kube/objects.ts';
import type { ApiServerResource } from './knative.ts';

/** Emit sends one event; the ApiServerSource waits for each send before the next, as the real adapter's handler does. */
type Emit = (event: CloudEvent<unknown>) => void | Promise<void>;

/** refEvent builds the event ApiServerSource sends in Reference mode. */
export function refEvent(
  server: string,
  op: 'add' | 'update' | 'delete',
  o: KubeObject,
): CloudEvent<unknown> {
  const { apiVersion, kind } = o;
  const { name, namespace } = o.metadata;
  const versioned =
    apiVersion.includes('.') && !apiVersion.includes('/') ? `${apiVersion}/versionUnknown` : apiVersion;
  return new CloudEvent({
    id: randomUUID(),
    type: `dev.knative.apiserver.ref.${op}`,
    source: server,
    subject: `/apis/${versioned}/namespaces/${namespace ?? ''}/${kind.toLowerCase()}s/${name}`,
    datacontenttype: 'application/json',
    data: { kind, namespace, name, apiVersion },
    kind,
    name,
    ...(namespace ? { namespace } : {}),
    apiversion: apiVersion,
  });
}

/** ApiServerWatch watches one resource kind and emits reference events until stopped. */
export class ApiServerWatch {
  private stopped = false;
  private readonly abort = new AbortController();
  private readonly kcp: Cluster;
  private readonly res: ApiServerResource;
  private readonly namespace: string;
  private readonly emit: Emit;

  constructor(kcp: Cluster, res: ApiServerResource, namespace: string, emit: Emit) {
    this.kcp = kcp;
    this.res = res;
    this.namespace = namespace;
    this.emit = emit;
  }

  /** start lists and watches in the background; resolves after the first list. */
  async start(): Promise<void> {
    const rv = await this.relist();
    void this.loop(rv);
  }

  stop(): void {
    this.stopped = true;
    this.abort.abort();
  }

  /** relist lists the objects (one consistent, paged snapshot) only for the resourceVersion to watch from; it reports nothing. */
  private async relist(): Promise<string> {
    const info = await mustFind(this.kcp, this.res.apiVersion, this.res.kind);
    const page = await this.kcp.client.call<{ metadata: { resourceVersion: string } }>(
      'GET',
      resourcePath(info, this.namespace),
      { query: { labelSelector: this.res.labelSelector, limit: 1 } },
    );
    return page.metadata.resourceVersion;
  }

  private async loop(first: string): Promise<void> {
    let rv: string | undefined = first;
    while (!this.stopped) {
      try {
        rv ??= await this.relist();
        rv = await this.watch(rv);
      } catch {
        rv = undefined;
        if (!this.stopped) await sleep(500);
      }
    }
  }

  /** watch streams changes from rv; returns the last resourceVersion seen, undefined to relist. */
  private async watch(rv: string): Promise<string | undefined> {
    const info = await mustFind(this.kcp, this.res.apiVersion, this.res.kind);
    const events = this.kcp.client.watch<KubeObject>(
      resourcePath(info, this.namespace),
      {
        resourceVersion: rv,
        allowWatchBookmarks: 'true',
        timeoutSeconds: '300',
        labelSelector: this.res.labelSelector,
      },
      this.abort.signal,
    );
    let last: string | undefined = rv;
    try {
      for await (const ev of events) {
        if (ev.type === 'ERROR') return undefined; // e.g. 410 Gone: relist
        last = ev.object.metadata.resourceVersion ?? last;
        if (ev.type === 'BOOKMARK') continue;
        const o = { ...ev.object, apiVersion: this.res.apiVersion, kind: this.res.kind };
        const op = ev.type === 'ADDED' ? 'add' : ev.type === 'DELETED' ? 'delete' : 'update';
        await this.emit(refEvent(this.kcp.client.server, op, o));
      }
    } catch (err) {
      if (err instanceof KubeApiError && err.code !== 0) return undefined; // the watch was refused: relist
      throw err;
    }
    return last;
  }
}

/** PingTimer emits PingSource events every intervalMs until stopped. */
export class PingTimer {
  private timer?: NodeJS.Timeout;
  private readonly opts: {
    source: string;
    intervalMs: number;
    data?: string;
    contentType?: string;
    emit: Emit;
  };

  constructor(opts: PingTimer['opts']) {
    this.opts = opts;
  }

  start(): void {
    this.timer = setInterval(() => this.fire(), this.opts.intervalMs);
  }

  /** fire sends one ping now. */
  fire(): void {
    const { source, data, contentType, emit } = this.opts;
    emit(
      new CloudEvent({
        id: randomUUID(),
        type: 'dev.knative.sources.ping',
        source,
        datacontenttype: contentType ?? 'application/json',
        data: data ? (contentType === 'application/json' ? JSON.parse(data) : data) : undefined,
      }),
    );
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
