import { dump, load } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { validateKubeconfig } from './kubeconfig.ts';

const token = 'sekret-token-value-123';
const base = () => ({
  apiVersion: 'v1',
  kind: 'Config',
  clusters: [
    { name: 'c', cluster: { server: 'https://127.0.0.1:6443', 'certificate-authority-data': 'Q0E=' } },
  ],
  users: [{ name: 'u', user: { token } }],
  contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
  'current-context': 'x',
});
type Doc = ReturnType<typeof base> & Record<string, unknown>;
const edit = (f: (d: Doc) => void): string => {
  const d = base() as Doc;
  f(d);
  return dump(d);
};

describe('validateKubeconfig', () => {
  it('accepts inline token and inline client certificates', () => {
    expect(validateKubeconfig(dump(base()), { allowInsecure: false })).toMatchObject({
      server: 'https://127.0.0.1:6443',
      ca: Buffer.from('CA'),
      insecure: false,
    });
    expect(validateKubeconfig(dump(base()), { allowInsecure: false }).token?.()).toBe(token);
    const cert = edit((d) => {
      d.users[0]!.user = { 'client-certificate-data': 'Y2VydA==', 'client-key-data': 'a2V5' } as never;
    });
    expect(validateKubeconfig(cert, { allowInsecure: false })).toMatchObject({
      cert: Buffer.from('cert'),
      key: Buffer.from('key'),
    });
  });

  it.each([
    [
      'an exec plugin',
      edit((d) => {
        (d.users[0]!.user as Record<string, unknown>).exec = {
          command: '/bin/sh',
          args: ['-c', 'curl evil'],
        };
      }),
      'user "u" uses an exec credential plugin (exec)',
    ],
    [
      'an auth-provider',
      edit((d) => {
        (d.users[0]!.user as Record<string, unknown>)['auth-provider'] = { name: 'gcp' };
      }),
      'user "u" uses an auth-provider plugin (auth-provider)',
    ],
    [
      'a token file',
      edit((d) => {
        d.users[0]!.user = { tokenFile: '/var/run/secrets/token' } as never;
      }),
      'user "u" uses a token file path (tokenFile)',
    ],
    [
      'a client certificate path',
      edit((d) => {
        d.users[0]!.user = { 'client-certificate': '/etc/passwd', 'client-key': '/etc/shadow' } as never;
      }),
      'user "u" uses a client certificate file path (client-certificate)',
    ],
    [
      'a CA path',
      edit((d) => {
        (d.clusters[0]!.cluster as Record<string, unknown>)['certificate-authority'] = '/etc/ca.crt';
      }),
      'cluster "c" uses a certificate authority file path (certificate-authority)',
    ],
    [
      'a proxy',
      edit((d) => {
        (d.clusters[0]!.cluster as Record<string, unknown>)['proxy-url'] = 'http://10.0.0.1:3128';
      }),
      'cluster "c" uses a proxy (proxy-url)',
    ],
    [
      'basic auth',
      edit((d) => {
        d.users[0]!.user = { username: 'admin', password: 'pw' } as never;
      }),
      'user "u" uses basic authentication (username)',
    ],
    [
      'insecure TLS',
      edit((d) => {
        (d.clusters[0]!.cluster as Record<string, unknown>)['insecure-skip-tls-verify'] = true;
      }),
      'cluster "c" skips TLS verification (insecure-skip-tls-verify)',
    ],
    [
      'several contexts',
      edit((d) => {
        d.contexts.push({ name: 'y', context: { cluster: 'c', user: 'u' } });
      }),
      'it has 2 contexts; an access kubeconfig has exactly one',
    ],
    [
      'no contexts',
      edit((d) => {
        d.contexts = [];
      }),
      'it has 0 contexts; an access kubeconfig has exactly one',
    ],
    [
      'no current context',
      edit((d) => {
        delete (d as Record<string, unknown>)['current-context'];
      }),
      'it has no current-context',
    ],
    [
      'a current context naming nothing',
      edit((d) => {
        d['current-context'] = 'nope';
      }),
      'current-context "nope" names no context',
    ],
    [
      'a missing user',
      edit((d) => {
        d.users = [];
      }),
      'context "x" names user "u", which is missing',
    ],
    ...[
      'http://127.0.0.1:8080',
      'https://127.0.0.1:99999',
      'https://127.0.0.1:0',
      'https://127.0.0.1:',
      'https://',
      'https://:6443',
      'https://127.0.0.1:6443/api',
      'https://127.0.0.1:6443/../x',
      'https://127.0.0.1:6443?x=1',
      'https://127.0.0.1:6443#f',
      'https://user:pw@127.0.0.1:6443',
      'https://127.0.0.1 :6443',
      'https://127.0.0.1:6443/%2e%2e',
      ' https://127.0.0.1',
      'HTTPS://127.0.0.1',
      'https://127.0.0.1:6443//',
      'https://127.0.0.1:+6443',
      'https://127.0.0.1:6443\nHost: x',
    ].map((server) => [
      `server ${JSON.stringify(server)}`,
      edit((d) => {
        d.clusters[0]!.cluster.server = server;
      }),
      'the cluster server is not https://host[:port]',
    ]),
    ...['has space', 'tab\there', 'new\nline', 'naïve', '', 'x'.repeat(16_385)].map((t) => [
      `token ${JSON.stringify(t.slice(0, 20))}`,
      edit((d) => {
        d.users[0]!.user = { token: t } as never;
      }),
      t === ''
        ? 'the user has neither an inline token nor inline client certificate and key'
        : "the user's token is not 1 to 16384 printable ASCII characters without whitespace",
    ]),
    [
      'no credential',
      edit((d) => {
        d.users[0]!.user = {} as never;
      }),
      'the user has neither an inline token nor inline client certificate and key',
    ],
    [
      'a token that is not a string',
      edit((d) => {
        d.users[0]!.user = { token: { nested: token } } as never;
      }),
      'token is not a string',
    ],
    ['not YAML', 'a: [', 'not valid YAML'],
    ['a list', '- a\n', 'not a YAML mapping'],
    ['a YAML bomb', 'a: &a [x,x]\nb: [*a,*a]\n', 'not valid YAML'],
  ])('rejects %s with a message that names the field, never the secret', (_, text, message) => {
    let err: unknown;
    try {
      validateKubeconfig(text, { allowInsecure: false });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe(`kubeconfig rejected: ${message}`);
    expect((err as { reason?: string }).reason).toBe('InvalidKubeconfig');
    expect((err as { transient?: boolean }).transient).toBe(false);
    for (const secret of [token, 'curl evil', '/etc/shadow', 'pw', 'Y2VydA=='])
      expect((err as Error).message).not.toContain(secret);
  });

  it('accepts https://host[:port] exactly, a trailing slash and IPv6 included', () => {
    for (const [server, want] of [
      ['https://127.0.0.1:6443', 'https://127.0.0.1:6443'],
      ['https://127.0.0.1:6443/', 'https://127.0.0.1:6443'],
      ['https://api.example.com', 'https://api.example.com'],
      ['https://[::1]:6443', 'https://[::1]:6443'],
      ['https://h:443', 'https://h'],
    ]) {
      expect(
        validateKubeconfig(
          edit((d) => {
            d.clusters[0]!.cluster.server = server!;
          }),
          { allowInsecure: false },
        ).server,
      ).toBe(want);
    }
  });

  it('accepts insecure TLS only when configured', () => {
    const text = edit((d) => {
      (d.clusters[0]!.cluster as Record<string, unknown>)['insecure-skip-tls-verify'] = true;
    });
    expect(validateKubeconfig(text, { allowInsecure: true }).insecure).toBe(true);
    expect(load(text)).toBeTruthy();
  });
});
