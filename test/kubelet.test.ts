// The local kubelet (infra/runtime/kubelet.ts) against the real KCP: a Pod it cannot start
// yet is started once it can, as a kubelet syncs it again (a Pod left unstarted kept a
// Deployment unavailable, and the real Knative stack not ready, until the suite timed out).
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyObjects } from '../infra/kcp-setup.ts';
import { ClusterNet } from '../infra/runtime/clusternet.ts';
import { Kubelet } from '../infra/runtime/kubelet.ts';
import type { Cluster } from '../lib/kube/objects.ts';
import { cluster, eventually, uniqueName } from './helpers.ts';

const ns = uniqueName('kubelet');
let kcp: Cluster;
let dir: string;
let kubelet: Kubelet;

type PodStatus = { status?: { conditions?: { type: string; status: string }[] } };
const ready = async (name: string) =>
  (await kcp.client.call<PodStatus>('GET', `/api/v1/namespaces/${ns}/pods/${name}`)).status?.conditions?.find(
    (c) => c.type === 'Ready',
  )?.status;

describe('local kubelet', () => {
  beforeAll(async () => {
    kcp = await cluster('kcp');
    dir = await mkdtemp(join(tmpdir(), 'kcp-sync-kubelet-'));
    await applyObjects(kcp, [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default', namespace: ns } },
    ]);
    kubelet = new Kubelet({
      kcp,
      namespaces: [ns],
      binaries: { sleep: '/bin/sleep', sh: '/bin/sh' },
      net: new ClusterNet(kcp, () => undefined),
      apiServer: { url: 'https://127.0.0.1:1', caFile: '' },
      tokenDir: join(dir, 'tokens'),
      logDir: dir,
    });
    await kubelet.start();
  });
  afterAll(async () => {
    await kubelet?.stop();
    await kcp?.client.call('DELETE', `/api/v1/namespaces/${ns}`).catch(() => {});
    await rm(dir, { recursive: true, force: true });
  });

  it('starts a Pod whose env names a ConfigMap key once the ConfigMap is there, and reports it Ready', async () => {
    await applyObjects(kcp, [
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'waits', namespace: ns },
        spec: {
          automountServiceAccountToken: false,
          containers: [
            {
              name: 'c',
              image: 'ko://example.dev/cmd/sleep',
              args: ['600'],
              env: [{ name: 'V', valueFrom: { configMapKeyRef: { name: 'later', key: 'v' } } }],
            },
          ],
        },
      } as never,
    ]);
    // The kubelet took the Pod (bound it to its Node) but cannot start it.
    await eventually(async () => expect(kubelet.notReady()).toContain(`${ns}/waits (not started)`));
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await ready('waits')).toBeUndefined();
    expect(kubelet.notReady()).toContain('configmaps later has no key v; trying again');
    await applyObjects(kcp, [
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'later', namespace: ns }, data: { v: 'x' } },
    ]);
    await eventually(async () => expect(await ready('waits')).toBe('True'), 20_000);
    expect(kubelet.notReady()).toMatch(/^Pods not ready: none;/);
  });

  it('stops a Pod deleted through the API as a kubelet does: SIGTERM, then SIGKILL once its grace period is over', async () => {
    // Each Pod's shell notes the SIGTERM it gets in a file; "stays" then goes on, "leaves" exits.
    const pod = (name: string, onTerm: string, grace?: number) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns },
      spec: {
        automountServiceAccountToken: false,
        ...(grace !== undefined ? { terminationGracePeriodSeconds: grace } : {}),
        containers: [
          {
            name: 'c',
            image: 'ko://example.dev/cmd/sh',
            args: ['-c', `trap 'echo term >> ${dir}/${name}; ${onTerm}' TERM; while :; do sleep 0.1; done`],
          },
        ],
      },
    });
    await applyObjects(kcp, [pod('leaves', 'exit 0'), pod('stays', ':', 1)] as never);
    await eventually(async () => {
      expect(await ready('leaves')).toBe('True');
      expect(await ready('stays')).toBe('True');
    }, 20_000);
    const gone = (name: string) =>
      kcp.client.call('GET', `/api/v1/namespaces/${ns}/pods/${name}`).then(
        () => false,
        () => true,
      );
    for (const name of ['leaves', 'stays'])
      await kcp.client.call('DELETE', `/api/v1/namespaces/${ns}/pods/${name}`);
    await eventually(async () => {
      expect(await gone('leaves')).toBe(true);
      expect(await gone('stays')).toBe(true);
    }, 20_000);
    // Both were told; the one that stayed was killed after its second.
    expect(await readFile(join(dir, 'leaves'), 'utf8')).toBe('term\n');
    expect(await readFile(join(dir, 'stays'), 'utf8')).toMatch(/^(term\n)+$/);
    expect(kubelet.byCommand('sh')).toEqual([]);
  });
});
