// identities.ts gives each function process the identity its Pod would have: the
// ServiceAccount, Role and RoleBinding of knative.yaml (moved into the runtime's
// namespace), a token from the TokenRequest API, and a kubeconfig that reads the token
// from its file. A ServiceAccount with automountServiceAccountToken: false gets none: its
// function runs without KCP access, as its Pod would. So the Roles are exercised by
// every local run, and a missing rule fails there first.
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { dump } from 'js-yaml';
import type { Cluster, KubeObject } from '../../lib/kube/objects.ts';
import { applyObjects } from '../kcp-setup.ts';
import type { Doc, Routing } from './knative.ts';

/**
 * moved returns an RBAC document of knative.yaml placed in namespace (subjects included). A
 * ClusterRole is the same for every stack on a KCP; a ClusterRoleBinding gets a name of
 * its namespace's, so that stacks side by side bind their own ServiceAccounts.
 */
function moved(d: Doc, namespace: string): KubeObject {
  const o = structuredClone(d) as unknown as KubeObject & { subjects?: { namespace?: string }[] };
  if (d.kind === 'ClusterRole') return o;
  if (d.kind === 'ClusterRoleBinding') o.metadata.name = `${o.metadata.name}-${namespace}`;
  else o.metadata.namespace = namespace;
  for (const s of o.subjects ?? []) s.namespace = namespace;
  return o;
}

/** applyRbac applies the RBAC of routing into its namespace; edit may change it first (tests take a rule away). */
export async function applyRbac(
  kcp: Cluster,
  routing: Routing,
  edit: (docs: Doc[]) => Doc[] = (d) => d,
): Promise<KubeObject[]> {
  const rbac = edit(structuredClone(routing.rbac)).map((d) => moved(d, routing.namespace));
  await applyObjects(kcp, rbac);
  return rbac;
}

/**
 * mountedToken is what a Pod of ServiceAccount sa in namespace gets: the path of a
 * kubeconfig with its token, or undefined when automounting is off for the Pod (podMount)
 * or, the Pod saying nothing, for the ServiceAccount.
 */
export async function mountedToken(
  kcp: Cluster,
  namespace: string,
  sa: string,
  podMount: boolean | undefined,
  server: { url: string; caFile: string },
  dir: string,
  file?: string,
): Promise<string | undefined> {
  const mount =
    podMount ??
    (
      await kcp.client.call<{ automountServiceAccountToken?: boolean }>(
        'GET',
        `/api/v1/namespaces/${namespace}/serviceaccounts/${sa}`,
      )
    ).automountServiceAccountToken ??
    true;
  return mount ? tokenKubeconfig(kcp, namespace, sa, server, join(dir, namespace), file) : undefined;
}

/**
 * serviceAccountKubeconfigs applies the RBAC of routing into its namespace and returns,
 * per service, the path of a kubeconfig for its ServiceAccount (dir/<namespace>/<name>/,
 * as mountedToken), or null when its token is not mounted. edit may change the RBAC documents first (tests take a rule away).
 */
export async function serviceAccountKubeconfigs(
  kcp: Cluster,
  routing: Routing,
  server: { url: string; caFile: string },
  dir: string,
  edit: (docs: Doc[]) => Doc[] = (d) => d,
): Promise<Map<string, string | null>> {
  const rbac = await applyRbac(kcp, routing, edit);
  const out = new Map<string, string | null>();
  for (const svc of [...routing.services, ...routing.deployments]) {
    const sa = rbac.find((d) => d.kind === 'ServiceAccount' && d.metadata.name === svc.serviceAccountName);
    if (!sa || (sa as { automountServiceAccountToken?: boolean }).automountServiceAccountToken === false) {
      out.set(svc.name, null);
      continue;
    }
    const kubeconfig = await tokenKubeconfig(
      kcp,
      routing.namespace,
      sa.metadata.name,
      server,
      join(dir, routing.namespace),
    );
    out.set(svc.name, kubeconfig);
  }
  return out;
}

/**
 * tokenKubeconfig requests a token for the ServiceAccount name (TokenRequest API, a day)
 * and writes a kubeconfig that reads it from its file, for server; returns its path.
 */
export async function tokenKubeconfig(
  kcp: Cluster,
  namespace: string,
  name: string,
  server: { url: string; caFile: string },
  dir: string,
  file = 'kubeconfig.yaml',
): Promise<string> {
  const request = await kcp.client.call<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
    {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 86_400 },
      },
    },
  );
  const saDir = join(dir, name);
  await mkdir(saDir, { recursive: true });
  await writeFile(join(saDir, 'token'), request.status.token, { mode: 0o600 });
  const kubeconfig = join(saDir, file);
  await writeFile(
    kubeconfig,
    dump({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'kcp',
      clusters: [{ name: 'kcp', cluster: { server: server.url, 'certificate-authority': server.caFile } }],
      users: [{ name, user: { tokenFile: join(saDir, 'token') } }],
      contexts: [{ name: 'kcp', context: { cluster: 'kcp', user: name, namespace } }],
    }),
  );
  return kubeconfig;
}

/**
 * projectedToken requests a token of ServiceAccount name for audience (TokenRequest), as the
 * kubelet does for a projected serviceAccountToken volume, writes it to file, and returns
 * when the kubelet would renew it (80 % of its lifetime, in ms).
 */
export async function projectedToken(
  kcp: Cluster,
  namespace: string,
  name: string,
  projection: { audience?: string; expirationSeconds?: number },
  file: string,
): Promise<number> {
  const seconds = projection.expirationSeconds ?? 3_600;
  const request = await kcp.client.call<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
    {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {
          expirationSeconds: seconds,
          ...(projection.audience ? { audiences: [projection.audience] } : {}),
        },
      },
    },
  );
  await mkdir(dirname(file), { recursive: true });
  await writeFile(`${file}.tmp`, request.status.token, { mode: 0o600 });
  await rename(`${file}.tmp`, file);
  return seconds * 800;
}

/** TokenVolume is a Pod volume as far as projected ServiceAccount tokens go. */
export interface TokenVolume {
  name: string;
  projected?: {
    sources?: { serviceAccountToken?: { audience?: string; expirationSeconds?: number; path: string } }[];
  };
}

/**
 * projectTokens plays the kubelet for the projected serviceAccountToken volumes a container
 * mounts: writes each token (dir/<volume>/<path>), renews it at 80 % of its lifetime, and
 * points env values under a mount path at the files (there is no mount namespace here).
 * Returns the renewal timers.
 */
export async function projectTokens(
  kcp: Cluster,
  o: {
    namespace: string;
    serviceAccount: string;
    mounts: { name: string; mountPath: string }[];
    volumes: TokenVolume[];
    dir: string;
    env: Record<string, string>;
    stopped: () => boolean;
    log: (line: string) => void;
  },
): Promise<NodeJS.Timeout[]> {
  const timers: NodeJS.Timeout[] = [];
  for (const mount of o.mounts) {
    const volume = o.volumes.find((v) => v.name === mount.name);
    const local = join(o.dir, mount.name);
    let projected = false;
    for (const src of volume?.projected?.sources ?? []) {
      const p = src.serviceAccountToken;
      if (!p) continue;
      projected = true;
      const file = join(local, p.path);
      const renew = async () => {
        const next = await projectedToken(kcp, o.namespace, o.serviceAccount, p, file).catch(
          (err: unknown) => {
            o.log(`projected token ${mount.name}: ${String(err)}`);
            return 10_000;
          },
        );
        if (!o.stopped()) timers.push(setTimeout(() => void renew(), next).unref());
      };
      const first = await projectedToken(kcp, o.namespace, o.serviceAccount, p, file);
      timers.push(setTimeout(() => void renew(), first).unref());
    }
    if (!projected) continue;
    const base = mount.mountPath.replace(/\/$/, '');
    for (const [k, v] of Object.entries(o.env))
      if (v === base || v.startsWith(`${base}/`)) o.env[k] = local + v.slice(base.length);
  }
  return timers;
}
