// Helpers shared by the integration tests: clients for the injected clusters and
// unique names so tests never collide.
import { randomBytes } from 'node:crypto';
import { KubeConfig } from '@kubernetes/client-node';
import { load } from 'js-yaml';
import { afterAll, inject } from 'vitest';
import { connect } from '../infra/kcp-setup.ts';
import type { Cluster } from '../lib/kube/objects.ts';

/** uniqueName returns prefix plus a random DNS-safe suffix. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/** kubeConfig loads kubeconfig text into a KubeConfig. */
export function kubeConfig(text: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(text);
  return kc;
}

/** kcpConfig is the admin KubeConfig of the test KCP. */
export function kcpConfig(): KubeConfig {
  return kubeConfig(inject('clusters').kcp.kubeconfig);
}

/**
 * credentialFragments returns pieces of a kubeconfig's credential bytes (the base64
 * values and lines of the decoded PEM bodies) to search captured output for; withCa
 * adds the cluster's CA certificate.
 */
export function credentialFragments(kubeconfig: string, withCa = false): string[] {
  const kc = load(kubeconfig) as {
    clusters: { cluster: Record<string, string> }[];
    users: { user: Record<string, string> }[];
  };
  const values = [
    ...Object.values(kc.users[0]!.user),
    ...(withCa ? [kc.clusters[0]!.cluster['certificate-authority-data']!] : []),
  ];
  const out: string[] = [];
  for (const v of values) {
    out.push(v.slice(0, 48));
    for (const line of Buffer.from(v, 'base64').toString().split('\n'))
      if (line.length >= 32 && !line.startsWith('-----')) out.push(line.slice(0, 32));
  }
  return out;
}

/** eventually retries check until it stops throwing, or rethrows after timeoutMs. */
export async function eventually<T>(
  check: () => Promise<T>,
  timeoutMs = 30_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}

const connections = new Map<string, Promise<Cluster>>();

/** cluster returns an engine-grade connection to "kcp" or SKR index i, closed after the file's tests. */
export function cluster(which: 'kcp' | number): Promise<Cluster> {
  const key = String(which);
  let c = connections.get(key);
  if (!c) {
    const clusters = inject('clusters');
    const text = which === 'kcp' ? clusters.kcp.kubeconfig : clusters.skrs[which]?.kubeconfig;
    if (!text) throw new Error(`no cluster ${key}`);
    c = connect(text, which === 'kcp' ? 'kcp' : `skr-${which + 1}`);
    connections.set(key, c);
  }
  return c;
}

afterAll(async () => {
  for (const c of connections.values()) await (await c).client.close();
  connections.clear();
});

/** heldBy tells whether the field manager of the SyncResource owner ("<namespace>/<name>") holds fields of o. */
export const heldBy = (o: { metadata: { [k: string]: unknown } }, owner: string): boolean =>
  ((o.metadata.managedFields ?? []) as { manager?: string }[]).some(
    (f) => f.manager === `kcp-sync-resource/${owner}`,
  );
