// credentials.ts turns a kubeconfig's current context, or a Pod's service account,
// into what KubeClient needs: server URL, TLS material and a bearer token source.
// The kubeconfig is parsed by @kubernetes/client-node's own parser (config_types).
// Its package root is not imported: that loads the whole generated API, the larger part
// of a function's cold start (BENCHMARKS.md), for clients this project never uses.
// Exec and auth-provider plugins are not supported; the KCP client uses in-cluster
// service account credentials, client certificates or tokens.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { newClusters, newContexts, newUsers } from '@kubernetes/client-node/dist/config_types.js';
import { load } from 'js-yaml';

/** Credentials authenticate to one API server. Never log them. */
export interface Credentials {
  server: string;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  /** token returns the current bearer token (token files are re-read, see fileToken). */
  token?: () => string;
  insecure?: boolean;
  servername?: string;
}

/** fileToken reads a token file, re-reading it at most once a minute (client-go's cached file token source). */
export function fileToken(path: string, refreshMs = 60_000): () => string {
  let value = '';
  let readAt = -Infinity;
  return () => {
    const now = performance.now();
    if (now - readAt >= refreshMs) {
      value = readFileSync(path, 'utf8').trim();
      readAt = now;
    }
    return value;
  };
}

/** fromData decodes a kubeconfig `*-data` field (base64); empty or absent is undefined. */
export const fromData = (data: string | undefined): Buffer | undefined =>
  data ? Buffer.from(data, 'base64') : undefined;

/** staticToken is the token source of an inline token. */
export const staticToken =
  (token: string): (() => string) =>
  () =>
    token;

/** credentialsFromKubeconfig reads the current context of kubeconfig text; relative file paths resolve against baseDir. */
export function credentialsFromKubeconfig(text: string, baseDir = process.cwd()): Credentials {
  const doc = load(text, { maxAliases: 0 }) as Record<string, unknown> | null;
  if (!doc || typeof doc !== 'object') throw new Error('kubeconfig is not a YAML mapping');
  const contexts = newContexts(doc.contexts);
  const current = typeof doc['current-context'] === 'string' ? doc['current-context'] : contexts[0]?.name;
  const context = contexts.find((c) => c.name === current);
  if (!context) throw new Error(`kubeconfig has no context "${String(current)}"`);
  const cluster = newClusters(doc.clusters).find((c) => c.name === context.cluster);
  if (!cluster)
    throw new Error(
      `kubeconfig context "${context.name}" names cluster "${context.cluster}", which is missing`,
    );
  const user = context.user ? newUsers(doc.users).find((u) => u.name === context.user) : undefined;
  if (user?.exec || user?.authProvider) {
    throw new Error(
      `kubeconfig user "${user.name}" uses a credential plugin, which is not supported: use a token, a token file or a client certificate`,
    );
  }
  const file = (path: string | undefined) => (path ? readFileSync(resolve(baseDir, path)) : undefined);
  const tokenFile = (doc.users as { name?: string; user?: { tokenFile?: string } }[] | undefined)?.find(
    (u) => u.name === context.user,
  )?.user?.tokenFile;
  const creds: Credentials = {
    server: cluster.server,
    ca: fromData(cluster.caData) ?? file(cluster.caFile),
    cert: fromData(user?.certData) ?? file(user?.certFile),
    key: fromData(user?.keyData) ?? file(user?.keyFile),
    insecure: cluster.skipTLSVerify,
  };
  if (cluster.tlsServerName) creds.servername = cluster.tlsServerName;
  if (user?.token) {
    creds.token = staticToken(user.token);
  } else if (tokenFile) {
    creds.token = fileToken(resolve(baseDir, tokenFile));
  }
  return creds;
}

/** credentialsFromFile reads a kubeconfig file. */
export function credentialsFromFile(path: string): Credentials {
  return credentialsFromKubeconfig(readFileSync(path, 'utf8'), dirname(resolve(path)));
}

const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';

/** inClusterCredentials uses the Pod's service account, as client-go's rest.InClusterConfig does. */
export function inClusterCredentials(
  env: Record<string, string | undefined> = process.env,
  dir = serviceAccountDir,
): Credentials {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port)
    throw new Error(
      'not running in a cluster (KUBERNETES_SERVICE_HOST/PORT unset) and KUBECONFIG is not set',
    );
  const token = fileToken(`${dir}/token`);
  token();
  return {
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    ca: readFileSync(`${dir}/ca.crt`),
    token,
  };
}
