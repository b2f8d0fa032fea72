// Monitoring as an operator deploys it, on the real local stack (Knative Eventing's own
// controllers and data plane, Serving's queue-proxy): Prometheus, built from its Go module,
// discovers the functions' Pods with the scrape job of monitoring/prometheus-scrape.yaml
// (its relabelling as written; file discovery lists the Pods as Kubernetes discovery would),
// scrapes what knative.yaml makes them export (no telemetry setting of the test's own), and
// evaluates monitoring/prometheusrule.yaml. Each alert's condition is made to happen on the
// stack, the way it happens in operation; then each alert is pending or firing in
// Prometheus, with the labels that say where, and each dashboard query returns data.
import { createServer, type Server } from 'node:net';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { dump, load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensurePrometheusBinaries } from '../infra/binaries.ts';
import { kymaObjects } from '../infra/kcp-setup.ts';
import { freePort, waitFor } from '../infra/net.ts';
import { startProcess, stopProcess, type Proc } from '../infra/processes.ts';
import { podTargets } from '../infra/runtime/pods.ts';
import { EventTypes } from '../lib/events/contract.ts';
import { kubectl, startStack, syncResourceYaml, waitSr, type Stack } from './e2e-helpers.ts';
import { Harness } from './engine-harness.ts';
import { eventually, uniqueName } from './helpers.ts';

const root = join(import.meta.dirname, '..');
let s: Stack;
let prometheus: Proc;
let api: string;
let blackhole: Server;
let discovery: NodeJS.Timeout;

type Series = { metric: Record<string, string>; value: [number, string] };
type Rule = {
  name: string;
  type: string;
  state?: string;
  query: string;
  alerts?: { labels: Record<string, string> }[];
};

/** query runs an instant PromQL query against the test's Prometheus. */
async function query(q: string): Promise<Series[]> {
  const res = await fetch(`${api}/api/v1/query?query=${encodeURIComponent(q)}`);
  const body = (await res.json()) as { status: string; error?: string; data: { result: Series[] } };
  if (body.status !== 'success') throw new Error(`${q}: ${body.error}`);
  return body.data.result;
}

async function alerting(): Promise<Rule[]> {
  const body = (await (await fetch(`${api}/api/v1/rules?type=alert`)).json()) as {
    data: { groups: { rules: Rule[] }[] };
  };
  return body.data.groups.flatMap((g) => g.rules);
}

const ns = 'kcp-system';
const cm = (name: string, namespace: string, data: Record<string, string>) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: ${namespace}}\ndata: ${JSON.stringify(data)}\n`;

describe('monitoring on the real local stack', () => {
  beforeAll(async () => {
    s = await startStack('mon', {
      knative: 'real',
      pingIntervalMs: 5_000,
      delivery: { backoffDelay: 'PT0.2S' },
      // An operator's settings the conditions below need: one SKR client per process (three
      // Kymas in use thrash the cache), and sender identity off on the dead-letter function.
      env: { SYNC_MAX_CLUSTER_CLIENTS: '1' },
      envFor: (svc): Record<string, string> =>
        svc === 'sync-dead-letter' ? { SYNC_EVENT_AUTH: 'none' } : {},
    });
    const bins = await ensurePrometheusBinaries();
    const dir = join(s.stateDir, 'prometheus');
    await mkdir(dir, { recursive: true });
    // The operator's scrape job, with file discovery in place of Kubernetes discovery and a 1 s interval.
    const { scrape_configs } = load(
      await readFile(join(root, 'monitoring', 'prometheus-scrape.yaml'), 'utf8'),
    ) as {
      scrape_configs: Record<string, unknown>[];
    };
    const targets = join(dir, 'pods.json');
    const jobs = scrape_configs.map(({ kubernetes_sd_configs: _, ...job }) => ({
      ...job,
      scrape_interval: '1s',
      file_sd_configs: [{ files: [targets], refresh_interval: '1s' }],
    }));
    const rule = load(await readFile(join(root, 'monitoring', 'prometheusrule.yaml'), 'utf8')) as {
      spec: { groups: Record<string, unknown>[] };
    };
    await writeFile(
      join(dir, 'rules.yaml'),
      dump({ groups: rule.spec.groups.map((g) => ({ ...g, interval: '1s' })) }),
    );
    await writeFile(
      join(dir, 'prometheus.yaml'),
      dump({
        global: { scrape_interval: '1s', evaluation_interval: '1s' },
        rule_files: [join(dir, 'rules.yaml')],
        scrape_configs: jobs,
      }),
    );
    // The Pods as they are now (a replica restarted or rolled out is a new Pod).
    const discover = async () => {
      const pods = s.runtime.functions.flatMap((f) => (f.pod ? [f.pod] : []));
      await writeFile(`${targets}.tmp`, JSON.stringify(podTargets(pods)));
      await rename(`${targets}.tmp`, targets);
    };
    await discover();
    discovery = setInterval(() => void discover(), 1_000);
    const port = await freePort();
    api = `http://127.0.0.1:${port}`;
    prometheus = startProcess(
      'prometheus',
      'prometheus',
      bins.prometheus,
      [
        `--config.file=${join(dir, 'prometheus.yaml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { logDir: join(s.stateDir, 'logs') },
    );
    await waitFor('prometheus', async () => (await fetch(`${api}/-/ready`)).ok, 60_000);
  }, 600_000);

  afterAll(async () => {
    clearInterval(discovery);
    blackhole?.close();
    if (prometheus) await stopProcess(prometheus);
    await s?.stop();
  });

  it("scrapes every function's Pod through the operator's scrape job, as knative.yaml exports it", async () => {
    const pods = s.runtime.functions.map((f) => f.pod!.name).sort();
    expect(pods.length).toBe(10);
    await eventually(async () => {
      const up = await query('up{job="kcp-sync-resource"} == 1');
      const targets = (await (await fetch(`${api}/api/v1/targets`)).json()) as {
        data: { activeTargets: { scrapeUrl: string; health: string; lastError: string }[] };
      };
      const seen = targets.data.activeTargets.map((t) => `${t.scrapeUrl} ${t.health} ${t.lastError}`);
      expect(up.map((x) => x.metric.pod).sort(), seen.join('\n')).toEqual(pods);
    }, 60_000);
    // Labelled by the relabelling: the Service, the Pod, the namespace.
    const identity = await query('sync_sender_identity');
    expect(new Set(identity.map((x) => x.metric.service))).toEqual(
      new Set([
        'sync-resync',
        'sync-resolve-cluster',
        'sync-apply-items',
        'sync-write-status',
        'sync-dead-letter',
      ]),
    );
    expect(identity.every((x) => x.metric.namespace === ns && pods.includes(x.metric.pod!))).toBe(true);
  });

  it('fires each alert when its condition happens, and every dashboard query returns data', async () => {
    // 1. An operator's RBAC mistake: write-status loses its status rule; its deliveries fail and are dead-lettered.
    const role = await kubectl(s.kcp, ['get', 'role', 'sync-write-status', '-n', ns, '-o', 'json']);
    const rules = JSON.parse(role) as { rules: { resources: string[] }[]; metadata: Record<string, unknown> };
    await kubectl(
      s.kcp,
      ['replace', '-f', '-'],
      JSON.stringify({
        ...rules,
        rules: rules.rules.filter((r) => !r.resources.includes('syncresources/status')),
      }),
    );
    const lost = uniqueName('lost');
    try {
      await kubectl(
        s.kcp,
        ['apply', '-f', '-'],
        syncResourceYaml(ns, lost, 'kyma-1', [
          { name: 'cm', strategy: 'CreateAndSync', resource: cm(lost, 'default', { a: '1' }) },
        ]),
      );
      await eventually(
        async () => expect((await query('sync_dead_letters_total')).length).toBeGreaterThan(0),
        90_000,
        1_000,
      );
    } finally {
      await kubectl(
        s.kcp,
        ['replace', '-f', '-'],
        JSON.stringify({ ...rules, metadata: { ...rules.metadata, resourceVersion: undefined } }),
      );
    }
    // 2. An SKR that accepts connections and never answers (a runtime being deprovisioned, a partition).
    blackhole = createServer(() => {});
    const downPort = await freePort();
    await new Promise<void>((resolve) => blackhole.listen(downPort, '127.0.0.1', resolve));
    const skr = await readFile(s.skr[0]!, 'utf8');
    const down = uniqueName('kyma-down');
    const downConfig = skr.replace(
      /server: https:\/\/127\.0\.0\.1:\d+/,
      `server: https://127.0.0.1:${downPort}`,
    );
    expect(downConfig).not.toBe(skr);
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      JSON.stringify({ apiVersion: 'v1', kind: 'List', items: kymaObjects(down, downConfig, ns) }),
    );
    // 3. Items that fail, an object that does not work, and, on a second Kyma, fields someone else keeps changing.
    const group = `${uniqueName('mon')}.example.io`;
    const crd = Harness.crd(group, 'Module', 'modules');
    const module = `apiVersion: ${group}/v1alpha1\nkind: Module\nmetadata: {name: m, namespace: default}\n`;
    const fought = Array.from({ length: 60 }, (_, i) => `${uniqueName('fought')}-${i}`);
    const srs = [
      syncResourceYaml(ns, uniqueName('down'), down, [
        { name: 'cm', strategy: 'CreateAndSync', resource: cm('x', 'default', { a: '1' }) },
      ]),
      syncResourceYaml(ns, uniqueName('bad'), 'kyma-1', [
        { name: 'crd', strategy: 'CreateAndSync', resource: crd },
        {
          name: 'module',
          strategy: 'CreateAndSync',
          resource: module,
          subresource: `${module}status: {state: Error}\n`,
        },
        {
          name: 'broken',
          strategy: 'CreateAndSync',
          resource: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n',
        },
      ]),
    ];
    const fight = uniqueName('fight');
    srs.push(
      syncResourceYaml(
        ns,
        fight,
        'kyma-2',
        fought.map((n) => ({
          name: n,
          strategy: 'CreateAndSync',
          resource: cm(n, 'default', { owned: 'ours' }),
        })),
      ),
    );
    for (const sr of srs) await kubectl(s.kcp, ['apply', '-f', '-'], sr);
    await waitSr(s, fight, (x) => expect(x?.status?.state).toBe('Ready'), 120_000);
    // Someone else's controller sets a field the SyncResource holds, in all 60 objects at once.
    await kubectl(
      s.skr[1]!,
      ['apply', '--server-side', '--force-conflicts', '--field-manager=fighter', '-f', '-'],
      fought.map((n) => cm(n, 'default', { owned: 'theirs' })).join('---\n'),
    );
    // 4. Something other than the function's Trigger posts to it.
    const apply = s.runtime.functions.find((f) => f.service === 'sync-apply-items')!;
    const refused = await fetch(apply.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'ce-specversion': '1.0',
        'ce-id': uniqueName('forged'),
        'ce-source': '/forged',
        'ce-type': EventTypes.clusterResolved,
      },
      body: '{}',
    });
    expect(refused.status).toBe(401);

    // Each alert, evaluated by Prometheus on what it scraped: firing, or pending where the rule waits ("for").
    const expected: Record<string, Record<string, string>> = {
      KcpSyncDeadLetters: { type: EventTypes.itemsApplied },
      KcpSyncStepsFailing: {},
      KcpSyncClusterUnreachable: { cluster: down },
      KcpSyncItemsFailing: { reason: 'InvalidManifest' },
      KcpSyncObjectsUnhealthy: {},
      KcpSyncDriftFight: { manager: 'fighter', cluster: 'kyma-2' },
      KcpSyncStepsSlow: {},
      KcpSyncClientCacheThrashing: {},
      KcpSyncSenderIdentityOff: { function: 'dead-letter' },
      KcpSyncSenderRefusals: { function: 'apply-items', reason: 'missing' },
    };
    const t0 = performance.now();
    const inFile = (await alerting()).map((r) => r.name).sort();
    expect(inFile).toEqual(Object.keys(expected).sort());
    await eventually(
      async () => {
        const now = await alerting();
        const state = Object.fromEntries(now.map((r) => [r.name, r.state]));
        expect(state).toEqual(
          Object.fromEntries(inFile.map((n) => [n, expect.stringMatching(/^(pending|firing)$/)])),
        );
        for (const r of now) {
          expect(
            r.alerts?.some((a) => Object.entries(expected[r.name]!).every(([k, v]) => a.labels[k] === v)),
            r.name,
          ).toBe(true);
        }
      },
      240_000,
      2_000,
    );
    console.log(
      `[monitoring] every alert pending or firing ${Math.round((performance.now() - t0) / 1000)} s after the conditions`,
    );
    // The rules that wait for nothing fire at once.
    const firing = (await alerting()).filter((r) => r.state === 'firing').map((r) => r.name);
    for (const n of [
      'KcpSyncDeadLetters',
      'KcpSyncObjectsUnhealthy',
      'KcpSyncDriftFight',
      'KcpSyncSenderRefusals',
    ])
      expect(firing).toContain(n);

    // Every panel of the dashboard shows data.
    const dashboard = JSON.parse(
      await readFile(join(root, 'monitoring', 'grafana-dashboard.json'), 'utf8'),
    ) as unknown;
    const exprs: string[] = [];
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object')
        for (const [k, x] of Object.entries(v)) {
          if (k === 'expr' && typeof x === 'string') exprs.push(x);
          else walk(x);
        }
    };
    walk(dashboard);
    expect(exprs.length).toBeGreaterThan(10);
    for (const e of exprs) {
      const q = e.replaceAll('$__rate_interval', '5m');
      expect((await query(q)).length, q).toBeGreaterThan(0);
    }
  }, 600_000);
});
