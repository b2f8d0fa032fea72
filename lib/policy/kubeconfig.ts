// kubeconfig.ts validates an access Secret's kubeconfig, which is untrusted input:
// exactly one context, an https server, inline credentials only. Rejected: exec and
// auth-provider plugins, every file path, proxies, basic auth, and skipping TLS
// verification unless configured. Messages name the field, never its value.
import { load } from 'js-yaml';
import { fromData, staticToken, type Credentials } from '../kube/credentials.ts';
import { TerminalError } from '../kube/errors.ts';
import { isMap } from '../values.ts';

/** InvalidKubeconfigError is a rejected kubeconfig (reason InvalidKubeconfig). */
export class InvalidKubeconfigError extends TerminalError {
  constructor(message: string) {
    super(`kubeconfig rejected: ${message}`, 'InvalidKubeconfig');
  }
}

type Named<T> = { name?: unknown } & { [k: string]: T | unknown };

const forbiddenUser: Record<string, string> = {
  exec: 'an exec credential plugin',
  'auth-provider': 'an auth-provider plugin',
  tokenFile: 'a token file path',
  'client-certificate': 'a client certificate file path',
  'client-key': 'a client key file path',
  username: 'basic authentication',
  password: 'basic authentication',
};
const forbiddenCluster: Record<string, string> = {
  'certificate-authority': 'a certificate authority file path',
  'proxy-url': 'a proxy',
};

function entries(doc: Record<string, unknown>, key: string): Named<unknown>[] {
  const list = doc[key];
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list) || !list.every(isMap))
    throw new InvalidKubeconfigError(`${key} is not a list of entries`);
  return list as Named<unknown>[];
}

/** validateKubeconfig checks text and returns the credentials of its one context. */
export function validateKubeconfig(text: string, opts: { allowInsecure: boolean }): Credentials {
  let doc: unknown;
  try {
    doc = load(text, { maxAliases: 0, maxDepth: 20 });
  } catch {
    throw new InvalidKubeconfigError('not valid YAML');
  }
  if (!isMap(doc)) throw new InvalidKubeconfigError('not a YAML mapping');
  const { current, ctx } = theContext(doc);
  refuseForbidden(doc, opts);
  const cluster = entries(doc, 'clusters').find((c) => c.name === ctx.cluster)?.cluster;
  if (!isMap(cluster))
    throw new InvalidKubeconfigError(
      `context "${current}" names cluster "${String(ctx.cluster)}", which is missing`,
    );
  const user = entries(doc, 'users').find((u) => u.name === ctx.user)?.user;
  if (!isMap(user))
    throw new InvalidKubeconfigError(
      `context "${current}" names user "${String(ctx.user)}", which is missing`,
    );
  return credentialsOf(cluster, user);
}

/** theContext is the kubeconfig's one context, which current-context must name. */
function theContext(doc: Record<string, unknown>): { current: string; ctx: Record<string, unknown> } {
  const contexts = entries(doc, 'contexts');
  if (contexts.length !== 1)
    throw new InvalidKubeconfigError(
      `it has ${contexts.length} contexts; an access kubeconfig has exactly one`,
    );
  const current = doc['current-context'];
  if (typeof current !== 'string' || current === '')
    throw new InvalidKubeconfigError('it has no current-context');
  const ctx = contexts[0]!;
  if (ctx.name !== current) throw new InvalidKubeconfigError(`current-context "${current}" names no context`);
  if (!isMap(ctx.context)) throw new InvalidKubeconfigError(`context "${current}" has no cluster and user`);
  return { current, ctx: ctx.context };
}

/** refuseForbidden refuses every user and cluster entry that uses a field we never follow, or skips TLS verification unless allowed. */
function refuseForbidden(doc: Record<string, unknown>, opts: { allowInsecure: boolean }): void {
  for (const [key, forbidden] of [
    ['users', forbiddenUser],
    ['clusters', forbiddenCluster],
  ] as const) {
    for (const e of entries(doc, key)) {
      const body = e[key === 'users' ? 'user' : 'cluster'];
      if (!isMap(body)) continue;
      for (const field of Object.keys(body)) {
        if (field in forbidden)
          throw new InvalidKubeconfigError(
            `${key.slice(0, -1)} "${String(e.name)}" uses ${forbidden[field]} (${field})`,
          );
      }
      if (key === 'clusters' && body['insecure-skip-tls-verify'] === true && !opts.allowInsecure)
        throw new InvalidKubeconfigError(
          `cluster "${String(e.name)}" skips TLS verification (insecure-skip-tls-verify)`,
        );
    }
  }
}

/** credentialsOf reads the context's cluster and user: inline data only, every field a string. */
function credentialsOf(cluster: Record<string, unknown>, user: Record<string, unknown>): Credentials {
  const server = checkServer(cluster.server);
  if (!user.token && !(user['client-certificate-data'] && user['client-key-data']))
    throw new InvalidKubeconfigError(
      'the user has neither an inline token nor inline client certificate and key',
    );
  const strings = [
    ['certificate-authority-data', cluster],
    ['tls-server-name', cluster],
    ['client-certificate-data', user],
    ['client-key-data', user],
    ['token', user],
  ] as const;
  for (const [field, body] of strings) {
    if (body[field] !== undefined && typeof body[field] !== 'string')
      throw new InvalidKubeconfigError(`${field} is not a string`);
  }
  // Every field read below was checked to be a string or absent.
  const str = (v: unknown) => v as string | undefined;
  const creds: Credentials = {
    server,
    ca: fromData(str(cluster['certificate-authority-data'])),
    cert: fromData(str(user['client-certificate-data'])),
    key: fromData(str(user['client-key-data'])),
    insecure: cluster['insecure-skip-tls-verify'] === true,
  };
  const servername = str(cluster['tls-server-name']);
  if (servername) creds.servername = servername;
  const token = str(user.token);
  if (token !== undefined) {
    if (token.length > MAX_TOKEN || !/^[\x21-\x7e]+$/.test(token))
      throw new InvalidKubeconfigError(
        `the user's token is not 1 to ${MAX_TOKEN} printable ASCII characters without whitespace`,
      );
    creds.token = staticToken(token);
  }
  return creds;
}

/** MAX_TOKEN bounds a bearer token's length (service-account JWTs are 1-2 KiB). */
const MAX_TOKEN = 16_384;

/**
 * checkServer accepts exactly https://host[:port] (a trailing "/" allowed): a host, a
 * port of 1-65535 if any, and no user info, path, query or fragment.
 */
function checkServer(server: unknown): string {
  const invalid = () => new InvalidKubeconfigError('the cluster server is not https://host[:port]');
  if (typeof server !== 'string' || server.length > 2048) throw invalid();
  const m = /^https:\/\/(\[[0-9A-Fa-f:.]+\]|[^/?#@\s:[\]]+)(?::(\d{1,5}))?\/?$/.exec(server);
  if (!m) throw invalid();
  const port = m[2] === undefined ? 443 : Number(m[2]);
  if (port < 1 || port > 65535) throw invalid();
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw invalid();
  }
  if (
    url.protocol !== 'https:' ||
    url.username ||
    url.password ||
    url.pathname !== '/' ||
    url.search ||
    url.hash ||
    !url.hostname
  )
    throw invalid();
  return `https://${url.host}`;
}
