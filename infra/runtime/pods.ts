// pods.ts gives each local function process what its Pod would have to itself: an IP
// address of its own, from the loopback network (Linux routes all of 127.0.0.0/8 to lo,
// with no setup), so that a port the Pod template names (`prometheus.io/port`, the
// metrics exporter's OTEL_EXPORTER_PROMETHEUS_PORT) is the same number in every replica
// of every Service, as on a cluster. A Prometheus that discovers Pods finds a local
// replica as it would find the Pod: podTargets writes the labels its Kubernetes service
// discovery gives a Pod (`__meta_kubernetes_pod_*`), for file-based discovery, so that
// the relabelling an operator configures (monitoring/prometheus-scrape.yaml) is what
// selects and addresses them.
import { randomInt } from 'node:crypto';
import { createServer } from 'node:net';

/** Pod is what a Pod of a replica would say about itself. */
export interface Pod {
  name: string;
  namespace: string;
  ip: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

const used = new Set<string>();

/** free tells whether port can be bound on ip now. */
const free = (ip: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, ip, () => srv.close(() => resolve(true)));
  });

/**
 * newPod is the Pod a replica plays: its names, and an address of its own on which the
 * metrics port its annotations name is free.
 */
export async function newPod(
  name: string,
  namespace: string,
  labels: Record<string, string>,
  annotations: Record<string, string>,
): Promise<Pod> {
  return { name, namespace, ip: await podIp(metricsPortOf(annotations)), labels, annotations };
}

/**
 * podIp picks an address of 127.0.0.0/8 no other local Pod of this process uses, on which
 * the ports named are free (other test processes pick theirs at random too).
 */
async function podIp(ports: number[]): Promise<string> {
  for (;;) {
    const ip = `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
    if (used.has(ip)) continue;
    used.add(ip);
    if ((await Promise.all(ports.map((p) => free(ip, p)))).every(Boolean)) return ip;
  }
}

/** podEnv is what a replica's env gets for its Pod: its exporter listens on the Pod's IP. */
export function podEnv(env: Record<string, string | undefined>, ip: string): Record<string, string> {
  return env.OTEL_METRICS_EXPORTER?.split(',').includes('prometheus')
    ? { OTEL_EXPORTER_PROMETHEUS_HOST: ip }
    : {};
}

/** metricsPortOf is the port a template's prometheus.io/port annotation names, if any. */
function metricsPortOf(annotations: Record<string, string>): number[] {
  const p = Number(annotations['prometheus.io/port']);
  return Number.isInteger(p) && p > 0 ? [p] : [];
}

/** metaName turns a label or annotation key into the name Prometheus' Kubernetes discovery gives it. */
const metaName = (key: string) => key.replace(/[^a-zA-Z0-9_]/g, '_');

/**
 * podTargets are Prometheus file-discovery groups for pods, one target each, labelled as
 * Prometheus' Kubernetes discovery (role: pod) labels a Pod's container without ports:
 * the target is the Pod's IP, and relabelling chooses the port.
 */
export function podTargets(pods: Pod[]): { targets: string[]; labels: Record<string, string> }[] {
  return pods.map((p) => ({
    targets: [p.ip],
    labels: {
      __meta_kubernetes_namespace: p.namespace,
      __meta_kubernetes_pod_name: p.name,
      __meta_kubernetes_pod_ip: p.ip,
      __meta_kubernetes_pod_ready: 'true',
      __meta_kubernetes_pod_phase: 'Running',
      ...Object.fromEntries(
        Object.entries(p.labels).map(([k, v]) => [`__meta_kubernetes_pod_label_${metaName(k)}`, v]),
      ),
      ...Object.fromEntries(
        Object.entries(p.annotations).map(([k, v]) => [`__meta_kubernetes_pod_annotation_${metaName(k)}`, v]),
      ),
    },
  }));
}
