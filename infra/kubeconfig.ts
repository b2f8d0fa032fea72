// kubeconfig.ts renders kubeconfigs with inline credentials only (the form the
// product accepts in access Secrets).
import { dump } from 'js-yaml';

/** Credential is how a kubeconfig user authenticates: a client certificate or a token. */
export type Credential = { cert: string; key: string } | { token: string };

const b64 = (s: string): string => Buffer.from(s).toString('base64');

/** renderKubeconfig returns a one-context kubeconfig for server, trusting caPem. */
export function renderKubeconfig(name: string, server: string, caPem: string, cred: Credential): string {
  const user =
    'token' in cred
      ? { token: cred.token }
      : { 'client-certificate-data': b64(cred.cert), 'client-key-data': b64(cred.key) };
  return dump({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'certificate-authority-data': b64(caPem) } }],
    users: [{ name: `${name}-user`, user }],
    contexts: [{ name, context: { cluster: name, user: `${name}-user` } }],
    'current-context': name,
  });
}
