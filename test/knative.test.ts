// On Knative's own eventing: the eventing controller, the channel-based broker (its
// controller, ingress and filter), the in-memory channel (controller, dispatcher), mtping
// and the ApiServerSource adapters the controller creates, all real processes built from
// knative.dev/eventing, reconciling knative.yaml as applied to a KCP of their own (Knative
// is installed cluster-wide, so this file does not share the test run's KCP). Each function
// replica runs behind Serving's real queue-proxy. The runtime plays the kubelet, cluster
// DNS and Serving's control plane (infra/runtime/real.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterSet } from '../infra/clusters.ts';
import { controlPlaneNamespace, setupKcp } from '../infra/kcp-setup.ts';
import { startKnative, type KnativeRuntime } from '../infra/runtime/real.ts';
import { QUEUE_PROBE } from '../infra/runtime/serving.ts';
import { EventTypes } from '../lib/events/contract.ts';
import { SYNC_SOURCE_LABEL, type SyncResource } from '../lib/model.ts';
import { kubectl, syncResourceYaml } from './e2e-helpers.ts';
import { senderAttacks } from './sender-identity.ts';
import { PRODUCT_COMMAND } from '../infra/runtime/kubelet.ts';
import { metricsPortEnv } from '../infra/net.ts';
import { eventually, uniqueName } from './helpers.ts';

const ns = controlPlaneNamespace;
/** PING_S is the PingSource's period here (mtping takes "@every <n>s"): the bound within which a missed change is caught up. */
const PING_S = 8;
const SERVICES = [
  'sync-resync',
  'sync-resolve-cluster',
  'sync-apply-items',
  'sync-write-status',
  'sync-dead-letter',
];
const metricsPorts: Record<string, number> = {};
let set: ClusterSet;
let rt: KnativeRuntime;
let stateDir: string;
let kcp: string;
let skr: string;

const cm = (name: string, target: string, data: Record<string, string>) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: ${target}}\ndata: ${JSON.stringify(data)}\n`;

async function sr(name: string): Promise<SyncResource | undefined> {
  const out = await kubectl(kcp, ['get', 'syncresource', name, '-n', ns, '-o', 'json', '--ignore-not-found']);
  return out.trim() ? (JSON.parse(out) as SyncResource) : undefined;
}

async function skrData(name: string, target: string): Promise<Record<string, string> | undefined> {
  const out = await kubectl(skr, [
    'get',
    'configmap',
    name,
    '-n',
    target,
    '-o',
    'json',
    '--ignore-not-found',
  ]);
  return out.trim() ? ((JSON.parse(out) as { data?: Record<string, string> }).data ?? {}) : undefined;
}

/** readyConfigMap applies a SyncResource of a Namespace and a ConfigMap cmName (data) in it, and waits until it is Ready. */
async function readyConfigMap(cmName: string, data: Record<string, string> = { a: '1' }) {
  const name = uniqueName('sr');
  const target = uniqueName('target');
  const items = [
    {
      name: 'ns',
      strategy: 'CreateAndSync',
      resource: `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${target}}\n`,
    },
    { name: 'cm', strategy: 'CreateAndSync', resource: cm(cmName, target, data) },
  ];
  await kubectl(kcp, ['apply', '-f', '-'], syncResourceYaml(ns, name, 'kyma-1', items));
  await eventually(async () => expect((await sr(name))?.status?.state).toBe('Ready'), 60_000);
  return { name, target, items };
}

describe('on Knative Eventing v0.49 (real controllers and data plane)', () => {
  beforeAll(async () => {
    stateDir = await mkdtemp(join(tmpdir(), 'kcp-sync-knative-'));
    set = await ClusterSet.start({ skrs: 1, stateDir });
    await setupKcp(set);
    kcp = set.kcp.kubeconfigFile;
    skr = set.skrs[0]!.kubeconfigFile;
    rt = await startKnative({
      kubeconfig: kcp,
      stateDir,
      env: { OTEL_METRICS_EXPORTER: 'prometheus' },
      envFor: metricsPortEnv(metricsPorts),
      pingIntervalMs: PING_S * 1000,
      delivery: { backoffDelay: 'PT0.2S' },
      log: (l) => console.log(`[knative] ${l}`),
    });
  }, 600_000);
  afterAll(async () => {
    await rt?.stop();
    await set?.stop();
    await rm(stateDir, { recursive: true, force: true });
  });

  it('reconciles knative.yaml: the Broker, every Trigger and source Ready, every Service addressed', async () => {
    const get = async (kind: string) =>
      JSON.parse(await kubectl(kcp, ['get', kind, '-n', ns, '-o', 'json'])) as {
        items: {
          metadata: { name: string };
          status?: {
            address?: { url?: string };
            sinkUri?: string;
            subscriberUri?: string;
            conditions?: { type: string; status: string }[];
          };
        }[];
      };
    const ready = (o: { status?: { conditions?: { type: string; status: string }[] } }) =>
      o.status?.conditions?.find((c) => c.type === 'Ready')?.status;
    const [broker] = (await get('brokers.eventing.knative.dev')).items;
    expect(ready(broker!)).toBe('True');
    expect(broker!.status?.address?.url).toBe(
      `http://broker-ingress.knative-eventing.svc.cluster.local/${ns}/kcp-sync`,
    );
    const triggers = (await get('triggers.eventing.knative.dev')).items;
    expect(triggers.map((t) => [t.metadata.name, ready(t), t.status?.subscriberUri]).sort()).toEqual(
      ['sync-apply-items', 'sync-resolve-cluster', 'sync-resync', 'sync-write-status'].map((n) => [
        n,
        'True',
        `http://${n}.${ns}.svc.cluster.local`,
      ]),
    );
    for (const kind of ['apiserversources.sources.knative.dev', 'pingsources.sources.knative.dev']) {
      for (const src of (await get(kind)).items) {
        expect(ready(src), `${kind} ${src.metadata.name}`).toBe('True');
        expect(src.status?.sinkUri).toBe(broker!.status?.address?.url);
      }
    }
    // The controller made one Deployment per ApiServerSource; the kubelet runs each adapter.
    expect(rt.adapters().length).toBe((await get('apiserversources.sources.knative.dev')).items.length);
    // The SinkBinding gave the posting Services the Broker's address as K_SINK.
    const svc = JSON.parse(
      await kubectl(kcp, [
        'get',
        'services.serving.knative.dev',
        'sync-resolve-cluster',
        '-n',
        ns,
        '-o',
        'json',
      ]),
    ) as { spec: { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } } };
    expect(svc.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'K_SINK')?.value).toBe(
      broker!.status?.address?.url,
    );
  });

  it('every function replica serves its probes through queue-proxy', async () => {
    expect(rt.serving.replicas.length).toBe(2 * 5);
    for (const r of rt.serving.replicas) {
      const probe = await fetch(r.url, { headers: QUEUE_PROBE });
      expect(probe.status, `${r.service}/${r.replica}`).toBe(200);
      for (const path of ['health/readiness', 'health/liveness']) {
        expect(
          (await fetch(`http://127.0.0.1:${r.port}/${path}`)).status,
          `${r.service}/${r.replica} ${path}`,
        ).toBe(200);
      }
    }
  });

  it('a SyncResource applied with kubectl goes through the real broker to the SKR, and its status comes back', async () => {
    const { name, target, items } = await readyConfigMap('synced');
    expect(await skrData('synced', target)).toEqual({ a: '1' });
    // Each step was reached through the broker's filter, at a Service's address.
    for (const svc of ['sync-resolve-cluster', 'sync-apply-items', 'sync-write-status']) {
      expect(rt.broker.deliveries.get(svc)?.length, svc).toBeGreaterThan(0);
    }
    // An edit goes the same way.
    items[1] = { name: 'cm', strategy: 'CreateAndSync', resource: cm('synced', target, { a: '2' }) };
    await kubectl(kcp, ['apply', '-f', '-'], syncResourceYaml(ns, name, 'kyma-1', items));
    await eventually(async () => expect(await skrData('synced', target)).toEqual({ a: '2' }), 60_000);
  });

  it('the SKR source, as its own OIDC identity through its EventPolicy: an object deleted in the SKR is back at once', async () => {
    const { target } = await readyConfigMap('watched');
    // Its Pods run the product's image with the SinkBinding's K_SINK and its own token.
    await eventually(async () => {
      const pods = rt.kubelet.byCommand(PRODUCT_COMMAND).filter((p) => p.ready);
      expect(pods.length).toBe(2);
    }, 120_000);
    const skrChanged = () =>
      rt.broker.deliveries.get('sync-resolve-cluster')?.filter((t) => t === EventTypes.skrChanged).length ??
      0;
    const before = skrChanged();
    await kubectl(skr, ['delete', 'configmap', 'watched', '-n', target]);
    await eventually(async () => expect(await skrData('watched', target)).toEqual({ a: '1' }), 30_000, 100);
    // The Broker took the source's event (its EventPolicy) and delivered it to resolve-cluster.
    expect(skrChanged()).toBeGreaterThan(before);
  });

  it('the real ApiServerSource adapters killed and kept down while a source ConfigMap changes: the next ping catches it up', async () => {
    // The adapters carry Kymas, Secrets and source ConfigMaps (SyncResources come from the SKR source).
    const name = uniqueName('sr');
    const target = uniqueName('target');
    const text = (v: string) => cm('synced', target, { v });
    const source = (v: string) =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `${name}-text`, namespace: ns, labels: { [SYNC_SOURCE_LABEL]: 'true' } },
        data: { 'cm.yaml': text(v) },
      });
    await kubectl(kcp, ['apply', '-f', '-'], source('1'));
    await kubectl(
      kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(ns, name, 'kyma-1', [
        {
          name: 'ns',
          strategy: 'CreateAndSync',
          resource: `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${target}}\n`,
        },
        {
          name: 'cm',
          strategy: 'CreateAndSync',
          resourceFrom: { configMapKeyRef: { name: `${name}-text`, key: 'cm.yaml' } },
        },
      ]),
    );
    // Settled: Ready for its generation, and nothing in flight that names it.
    await eventually(async () => {
      const s = await sr(name);
      expect(s?.status?.state).toBe('Ready');
      expect(s?.status?.observedGeneration).toBe(s?.metadata.generation);
    }, 60_000);
    expect(await skrData('synced', target)).toEqual({ v: '1' });
    await rt.broker.idle(60_000, 1_500);
    // SIGKILL every adapter and keep them down (a node that lost them) while the source changes.
    const before = rt.adapters().map((a) => a.proc!.pid);
    const sources = JSON.parse(
      await kubectl(kcp, ['get', 'apiserversources.sources.knative.dev', '-n', ns, '-o', 'json']),
    ) as { items: unknown[] };
    expect(before.length).toBe(sources.items.length);
    await rt.kubelet.pause('apiserver_receive_adapter');
    // Counted from before the change: a tick whose run reads the source while kubectl is
    // still returning catches the change up before kubectl is done.
    const pings = () =>
      rt.broker.deliveries.get('sync-resync')?.filter((t) => t === 'dev.knative.sources.ping').length ?? 0;
    const pingsBefore = pings();
    // What was delivered since the change, by Service: the message a failure below carries.
    const at = new Map([...rt.broker.deliveries].map(([svc, types]) => [svc, types.length]));
    const since = () =>
      JSON.stringify(
        Object.fromEntries([...rt.broker.deliveries].map(([svc, t]) => [svc, t.slice(at.get(svc) ?? 0)])),
      );
    const changed = Date.now();
    await kubectl(kcp, ['apply', '-f', '-'], source('2'));
    // Back up: a new adapter sends nothing for what changed before its watch began (its store's Replace does nothing).
    rt.kubelet.resume('apiserver_receive_adapter');
    await eventually(async () => {
      const now = rt
        .adapters()
        .filter((a) => a.ready)
        .map((a) => a.proc!.pid);
      expect(now.length).toBe(before.length);
      for (const pid of now) expect(before).not.toContain(pid);
    }, 60_000);
    // The documented bound: the next ping (every PING_S here) plus one run.
    await eventually(
      async () => expect(await skrData('synced', target)).toEqual({ v: '2' }),
      (2 * PING_S + 30) * 1000,
      250,
    );
    expect(Date.now() - changed).toBeLessThan((2 * PING_S + 30) * 1000);
    // mtping's tick came in between: the resync is what caught the change up.
    expect(pings(), `no tick came; delivered since the change: ${since()}`).toBeGreaterThan(pingsBefore);
  });

  it('a function whose Role loses one rule fails where it needs it, and recovers once the rule is back', async () => {
    // sync-write-status without patch on syncresources/status: the run applies, the status write is refused.
    const role = JSON.parse(
      await kubectl(kcp, ['get', 'role', 'sync-write-status', '-n', ns, '-o', 'json']),
    ) as { rules: { resources: string[]; verbs: string[] }[] };
    const without = {
      ...role,
      rules: role.rules.filter((r) => !r.resources.includes('syncresources/status')),
    };
    expect(without.rules.length).toBe(role.rules.length - 1);
    await kubectl(kcp, ['replace', '-f', '-'], JSON.stringify(without));
    const name = uniqueName('sr');
    const target = uniqueName('target');
    const items = [
      {
        name: 'ns',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${target}}\n`,
      },
      { name: 'cm', strategy: 'CreateAndSync', resource: cm('synced', target, { r: '1' }) },
    ];
    const failedBefore = rt.broker.stats.deadLettered;
    try {
      await kubectl(kcp, ['apply', '-f', '-'], syncResourceYaml(ns, name, 'kyma-1', items));
      // The objects land (apply-items' own rules are intact); the status never does: the write-status delivery fails until dead-lettered.
      await eventually(async () => expect(await skrData('synced', target)).toEqual({ r: '1' }), 60_000);
      await eventually(
        async () => expect(rt.broker.stats.deadLettered).toBeGreaterThan(failedBefore),
        90_000,
        500,
      );
      expect((await sr(name))?.status?.state).toBeUndefined();
    } finally {
      await kubectl(
        kcp,
        ['replace', '-f', '-'],
        JSON.stringify({
          ...role,
          metadata: { ...(role as unknown as { metadata: object }).metadata, resourceVersion: undefined },
        }),
      );
    }
    // With the rule back, the next ping's resync writes it.
    await eventually(
      async () => expect((await sr(name))?.status?.state).toBe('Ready'),
      (2 * PING_S + 30) * 1000,
      500,
    );
  });

  it("a function replica killed mid-pipeline, and the adapters' watches cut: every edit still lands", async () => {
    const name = uniqueName('sr');
    const target = uniqueName('target');
    const items = (v: number) => [
      {
        name: 'ns',
        strategy: 'CreateAndSync',
        resource: `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${target}}\n`,
      },
      { name: 'cm', strategy: 'CreateAndSync', resource: cm('synced', target, { v: String(v) }) },
    ];
    await kubectl(kcp, ['apply', '-f', '-'], syncResourceYaml(ns, name, 'kyma-1', items(1)));
    for (let v = 2; v <= 4; v++) {
      await kubectl(kcp, ['apply', '-f', '-'], syncResourceYaml(ns, name, 'kyma-1', items(v)));
      if (v === 2) await rt.serving.restart('sync-apply-items', 0);
      if (v === 3) expect(rt.proxy.breakWatches()).toBeGreaterThan(0);
    }
    await eventually(
      async () => expect(await skrData('synced', target)).toEqual({ v: '4' }),
      (2 * PING_S + 30) * 1000,
      250,
    );
    await eventually(async () => {
      const s = await sr(name);
      expect(s?.status?.state).toBe('Ready');
      expect(s?.status?.observedGeneration).toBe(s?.metadata.generation);
    }, 60_000);
  });

  it("sender identity: forged events of every type, with no token or another ServiceAccount's, are refused by the broker and by every function, nothing changes, refusals are counted", async () => {
    await senderAttacks({ rt, set, kcp, skr, ns, metricsPorts, services: SERVICES });
  }, 300_000);
});
