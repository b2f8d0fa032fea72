// recorder.ts records Kubernetes Events (events.k8s.io/v1) about SyncResources, so
// that `kubectl describe` tells the story. Repeats of the same reason for the same
// object within a window are dropped, so resync never floods the KCP.
import { randomBytes } from 'node:crypto';
import type { Cluster, KubeObject } from './objects.ts';

/** EventType is Normal or Warning. */
export type EventType = 'Normal' | 'Warning';

/** Recorder writes Events; failures to record never fail a reconcile. */
export class Recorder {
  private readonly kcp: Cluster;
  private readonly instance: string;
  private readonly windowMs: number;
  private readonly recent = new Map<string, number>();
  /** recorded counts Events written, for tests and metrics. */
  recorded = 0;

  constructor(kcp: Cluster, instance: string, windowMs = 60_000) {
    this.kcp = kcp;
    this.instance = instance;
    this.windowMs = windowMs;
  }

  /** event records one Event about obj unless the same (object, reason, note) was recorded within the window. */
  async event(obj: KubeObject, type: EventType, reason: string, action: string, note: string): Promise<void> {
    const key = `${obj.metadata.uid}/${reason}/${note}`;
    const now = Date.now();
    const last = this.recent.get(key);
    if (last !== undefined && now - last < this.windowMs) return;
    this.recent.set(key, now);
    if (this.recent.size > 10_000) this.recent.clear();
    const ns = obj.metadata.namespace ?? 'default';
    const body = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: `${obj.metadata.name}.${randomBytes(8).toString('hex')}`, namespace: ns },
      eventTime: new Date(now).toISOString().replace('Z', '000Z'),
      reportingController: 'kcp-sync-resource',
      reportingInstance: this.instance,
      action,
      reason,
      type,
      note: note.slice(0, 1000),
      regarding: {
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        name: obj.metadata.name,
        namespace: ns,
        uid: obj.metadata.uid,
      },
    };
    try {
      await this.kcp.client.call('POST', `/apis/events.k8s.io/v1/namespaces/${ns}/events`, { body });
      this.recorded++;
    } catch {
      this.recent.delete(key);
    }
  }
}
