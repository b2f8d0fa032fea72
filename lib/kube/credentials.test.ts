import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import {
  credentialsFromFile,
  credentialsFromKubeconfig,
  fileToken,
  inClusterCredentials,
} from './credentials.ts';

const kubeconfig = (user: Record<string, unknown>, cluster: Record<string, unknown> = {}) =>
  dump({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'c', cluster: { server: 'https://10.0.0.1:6443/', ...cluster } },
      { name: 'other', cluster: { server: 'https://10.9.9.9' } },
    ],
    users: [{ name: 'u', user }],
    contexts: [
      { name: 'x', context: { cluster: 'c', user: 'u' } },
      { name: 'y', context: { cluster: 'other', user: 'u' } },
    ],
    'current-context': 'x',
  });

describe('credentials', () => {
  it('reads the current context: inline data, server without trailing slash, TLS server name', () => {
    const c = credentialsFromKubeconfig(
      kubeconfig(
        {
          'client-certificate-data': Buffer.from('cert').toString('base64'),
          'client-key-data': Buffer.from('key').toString('base64'),
        },
        {
          'certificate-authority-data': Buffer.from('ca').toString('base64'),
          'tls-server-name': 'api.example',
        },
      ),
    );
    expect(c).toMatchObject({
      server: 'https://10.0.0.1:6443',
      ca: Buffer.from('ca'),
      cert: Buffer.from('cert'),
      key: Buffer.from('key'),
      insecure: false,
      servername: 'api.example',
    });
    expect(c.token).toBeUndefined();
  });

  it('resolves file paths against the kubeconfig directory and re-reads token files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'creds-'));
    writeFileSync(join(dir, 'ca.crt'), 'CA');
    writeFileSync(join(dir, 'token'), 'first\n');
    writeFileSync(
      join(dir, 'config'),
      kubeconfig({ tokenFile: 'token' }, { 'certificate-authority': 'ca.crt' }),
    );
    const c = credentialsFromFile(join(dir, 'config'));
    expect(c.ca?.toString()).toBe('CA');
    expect(c.token?.()).toBe('first');
    const t = fileToken(join(dir, 'token'), 0);
    writeFileSync(join(dir, 'token'), 'second');
    expect(t()).toBe('second');
  });

  it('rejects credential plugins and missing contexts with a message naming them', () => {
    expect(() => credentialsFromKubeconfig(kubeconfig({ exec: { command: 'gcloud' } }))).toThrow(
      'kubeconfig user "u" uses a credential plugin, which is not supported',
    );
    expect(() =>
      credentialsFromKubeconfig(
        kubeconfig({ token: 't' }).replace('current-context: x', 'current-context: z'),
      ),
    ).toThrow('kubeconfig has no context "z"');
  });

  it('builds in-cluster credentials from the service account directory', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sa-'));
    writeFileSync(join(dir, 'token'), 'sa-token');
    writeFileSync(join(dir, 'ca.crt'), 'CA');
    const c = inClusterCredentials(
      { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' },
      dir,
    );
    expect(c.server).toBe('https://[fd00::1]:443');
    expect(c.token?.()).toBe('sa-token');
    expect(() => inClusterCredentials({}, dir)).toThrow('not running in a cluster');
  });
});
