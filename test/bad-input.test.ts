// The bad-input corpus (test/fixtures/bad-input): hostile or broken SyncResources and
// kubeconfigs, each with the exact outcome its header states: rejected at admission
// with a message, an item Error/Warning with a reason, or a cluster-level reason. Each
// runs through the real KCP, the function handlers and the real SKR; nothing crashes and
// nothing else is affected.
import { ProcessState } from '../lib/pipeline/process.ts';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { handle as applyItems } from '../functions/apply-items/index.ts';
import { handle as writeStatus } from '../functions/write-status/index.ts';
import { setDeps } from '../functions/deps.ts';
import { applyObjects, kymaObjects } from '../infra/kcp-setup.ts';
import { signCert } from '../infra/pki.ts';
import { ClientCache } from '../lib/cluster/cache.ts';
import { Lookups } from '../lib/cluster/resolve.ts';
import { parseConfig } from '../lib/config.ts';
import { EventTypes } from '../lib/events/contract.ts';
import { KcpStore, syncResourceInfo } from '../lib/kcp.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import type { KubeApiError } from '../lib/kube/errors.ts';
import type { Cluster } from '../lib/kube/objects.ts';
import { Recorder } from '../lib/kube/recorder.ts';
import type { SyncResource } from '../lib/model.ts';
import type { Deps } from '../lib/pipeline/deps.ts';
import { syncResourceSpecSchema } from '../lib/crd.ts';
import { validateText } from '../lib/validate.ts';
import { resolvePosted } from './resolve-posted.ts';
import { cluster, uniqueName } from './helpers.ts';

const dir = join(import.meta.dirname, 'fixtures', 'bad-input');
const specSchema = syncResourceSpecSchema();
const ctx = {} as Context;
let kcp: Cluster;
let deps: Deps;
let ns: string;
const sent: CloudEvent<unknown>[] = [];

const resolveCluster = (c: Context, e: CloudEvent<unknown>) => resolvePosted(sent, c, e);
const subst: Record<string, string> = {};

async function pipeline(name: string): Promise<SyncResource | undefined> {
  const ref = new CloudEvent({
    type: EventTypes.reconcile,
    source: '/test',
    data: { namespace: ns, name, trigger: 'resync' },
  });
  const resolved = (await resolveCluster(ctx, ref)) as CloudEvent<unknown> | undefined;
  let applied = resolved;
  if (resolved?.type === EventTypes.clusterResolved) {
    sent.length = 0;
    applied = (await applyItems(ctx, resolved).catch(() => sent.at(-1))) as CloudEvent<unknown>;
  }
  if (applied) await writeStatus(ctx, applied);
  return deps.store.get(ns, name);
}

const fill = (text: string) => Object.entries(subst).reduce((t, [k, v]) => t.split(k).join(v), text);

describe('bad-input corpus', async () => {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort();

  beforeAll(async () => {
    kcp = await cluster('kcp');
    ns = uniqueName('bad');
    const clusters = inject('clusters');
    const config = { ...parseConfig({}), controlPlaneNamespaces: [ns] };
    await applyObjects(kcp, [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
      ...kymaObjects('kyma-1', clusters.skrs[0]!.kubeconfig, ns),
    ]);
    deps = {
      config,
      kcp,
      store: new KcpStore(kcp, config.fieldManager),
      cache: new ClientCache(config),
      lookups: new Lookups(kcp),
      recorder: new Recorder(kcp, 'test'),
      process: new ProcessState(config),
      send: async (e) => {
        sent.push(e);
      },
      log: { info() {}, warn() {}, error() {} },
    };
    setDeps(deps);
    const skr = load(clusters.skrs[0]!.kubeconfig) as {
      clusters: { cluster: { server: string; 'certificate-authority-data': string } }[];
    };
    const other = load(clusters.skrs[1]!.kubeconfig) as typeof skr;
    const expired = await signCert(
      await mkdtemp(join(tmpdir(), 'expired-')),
      'expired',
      '/O=system:masters/CN=expired',
      { days: -1, ca: clusters.skrs[0]!.ca },
    );
    Object.assign(subst, {
      NAMESPACE: ns,
      SERVER: skr.clusters[0]!.cluster.server,
      WRONG_CA: other.clusters[0]!.cluster['certificate-authority-data'],
      CA: skr.clusters[0]!.cluster['certificate-authority-data'],
      TOKEN: 'not-a-real-token',
      EXPIRED_CERT: Buffer.from(expired.pem.cert).toString('base64'),
      EXPIRED_KEY: Buffer.from(expired.pem.key).toString('base64'),
      HUGE_TEXT: 'x'.repeat(300_000),
      DEEP_NESTING: `${'['.repeat(5000)}${']'.repeat(5000)}`,
    });
  });
  afterAll(async () => {
    await deps.cache.closeAll();
  });

  it('has at least 30 fixtures, each with an expectation', () => {
    expect(files.length).toBeGreaterThanOrEqual(30);
  });

  it.each(files)('%s', async (file) => {
    const text = await readFile(join(dir, file), 'utf8');
    const expectLine = /^# expect: (\S+) (.*)$/m.exec(text);
    expect(expectLine, 'fixture header').not.toBeNull();
    const [, kind, rest] = expectLine!;
    const name = uniqueName('bad');
    if (file.endsWith('.kubeconfig.yaml')) {
      const [reason, ...msg] = rest!.split(' ');
      const kyma = uniqueName('kc');
      await applyObjects(kcp, kymaObjects(kyma, fill(text), ns));
      await kcp.client.call('POST', resourcePath(syncResourceInfo, ns), {
        body: {
          apiVersion: 'operator.kyma-project.io/v1alpha1',
          kind: 'SyncResource',
          metadata: { name, namespace: ns },
          spec: {
            kyma,
            items: [
              {
                name: 'cm',
                strategy: 'CreateAndSync',
                resource: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: default}\n`,
              },
            ],
          },
        },
      });
      const sr = await pipeline(name);
      expect(sr?.status?.state).toBe('Error');
      expect(sr?.status?.conditions?.[0]?.reason).toBe(reason);
      expect(sr?.status?.conditions?.[0]?.message).toMatch(new RegExp(fill(msg.join(' '))));
      expect(JSON.stringify(sr?.status)).not.toContain(subst.EXPIRED_KEY!.slice(0, 40));
      return;
    }
    const filled = fill(text).replace('name: NAME', `name: ${name}`);
    const obj = load(filled) as object;
    // The CLI's offline check runs the product's own code: what it finds, the product writes (or the API server refuses).
    const offline = validateText(filled, file, deps.config, specSchema).findings;
    let created = true;
    try {
      await kcp.client.call('POST', resourcePath(syncResourceInfo, ns), { body: obj });
    } catch (err) {
      created = false;
      expect(kind).toBe('admission');
      expect((err as KubeApiError).status?.message).toMatch(new RegExp(rest!));
    }
    if (kind === 'admission') {
      expect(created, 'rejected at admission').toBe(false);
      expect(
        offline
          .filter((f) => f.reason === 'Rejected')
          .map((f) => f.message)
          .join('\n'),
        'validate refuses it too',
      ).toMatch(new RegExp(rest!));
      return;
    }
    expect(
      offline.filter((f) => f.reason === 'Rejected'),
      'validate accepts what the API server accepts',
    ).toEqual([]);
    expect(created).toBe(true);
    const sr = await pipeline(name);
    if (kind === 'cluster') {
      const [reason, ...msg] = rest!.split(' ');
      expect(sr?.status?.conditions?.[0]?.reason).toBe(reason);
      expect(sr?.status?.conditions?.[0]?.message).toMatch(new RegExp(fill(msg.join(' '))));
      return;
    }
    const [item, state, reason, ...msg] = rest!.split(' ');
    expect(kind).toBe('item');
    expect(sr?.status?.items?.find((i) => i.name === item)).toMatchObject({ state, reason });
    // Every finding of validate is exactly what the product wrote; what validate can know offline, it finds.
    for (const f of offline) {
      expect(
        sr?.status?.items?.find((i) => i.name === f.item),
        `${f.item} ${f.reason}`,
      ).toEqual({ name: f.item, state: f.state, reason: f.reason, message: f.message });
    }
    const knowable =
      reason === 'Restricted' ||
      reason === 'DuplicateObject' ||
      (reason === 'InvalidManifest' && !/cluster-scoped/.test(msg.join(' ')));
    expect(
      offline.map((f) => f.item),
      'validate finds what it can know offline',
    ).toEqual(knowable ? [item] : []);
    if (msg.length > 0)
      expect(sr?.status?.items?.find((i) => i.name === item)?.message).toMatch(new RegExp(msg.join(' ')));
  });
});
