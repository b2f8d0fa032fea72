// Observability through the whole pipeline: one trace per reconcile across all hops
// (received by a local OTLP/JSON collector), metrics on each function's Prometheus
// endpoint, and no credential byte in any log, event, status, Kubernetes Event or span.
import { readdir, readFile } from 'node:fs/promises';
import { load } from 'js-yaml';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { metricsPortEnv } from '../infra/net.ts';
import { EventTypes, PING_TYPE, SOURCE_PREFIX } from '../lib/events/contract.ts';
import { EVENT_CONTRACT } from '../lib/events/table.ts';
import { startCollector, type Collector, type Span } from './collector.ts';
import { kubectl, serviceLog, startStack, syncResourceYaml, waitSr, type Stack } from './e2e-helpers.ts';
import { credentialFragments, eventually, uniqueName } from './helpers.ts';

let collector: Collector;
let spans: Span[];
let s: Stack;
const metricsPorts: Record<string, number> = {};

/** scrape sums a Service's metrics over its replicas. */
async function scrape(service: string): Promise<Record<string, number>> {
  const texts = await Promise.all(
    Object.entries(metricsPorts)
      .filter(([k]) => k.startsWith(`${service}/`))
      .map(async ([, port]) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text()),
  );
  const text = texts.join('\n');
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? ([\d.e+-]+|NaN)/.exec(line);
    if (m) out[`${m[1]}${m[2] ?? ''}`] = (out[`${m[1]}${m[2] ?? ''}`] ?? 0) + Number(m[3]);
  }
  return out;
}
const total = (m: Record<string, number>, name: string) =>
  Object.entries(m)
    .filter(([k]) => k === name || k.startsWith(`${name}{`))
    .reduce((a, [, v]) => a + v, 0);

describe('observability', () => {
  beforeAll(async () => {
    collector = await startCollector();
    spans = collector.spans;
    const endpoint = collector.endpoint;
    s = await startStack('obs', {
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_METRICS_EXPORTER: 'prometheus',
        OTEL_BSP_SCHEDULE_DELAY: '100',
        // One SKR client per process: two Kymas in use evict for capacity (the dashboard's eviction panel).
        SYNC_MAX_CLUSTER_CLIENTS: '1',
      },
      envFor: metricsPortEnv(metricsPorts),
      pingIntervalMs: 1500,
    });
    s.runtime.broker.observe = true;
  });
  afterAll(async () => {
    await s?.stop();
    collector?.close();
  });

  it('traces one reconcile as one trace: resolve -> apply (a span per item) -> status, with parent links', async () => {
    const name = uniqueName('traced');
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, name, 'kyma-1', [
        {
          name: 'one',
          strategy: 'CreateAndSync',
          resource: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}-1, namespace: default}\n`,
        },
        {
          name: 'two',
          strategy: 'CreateAndSync',
          resource: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}-2, namespace: default}\n`,
        },
        { name: 'bad', strategy: 'CreateAndSync', resource: 'kind: [' },
      ]),
    );
    await waitSr(s, name, (x) => expect(x?.status?.items).toHaveLength(3));
    const trace = await eventually(
      async () => {
        const created = spans.find(
          (sp) =>
            sp.name === 'apply item' &&
            sp.attributes['sync.item.reason'] === 'Created' &&
            String(sp.attributes['sync.object']).includes(`${name}-1`),
        );
        expect(created).toBeDefined();
        const inTrace = spans.filter((sp) => sp.traceId === created!.traceId);
        expect(inTrace.map((sp) => sp.name)).toEqual(
          expect.arrayContaining(['resolve-cluster', 'apply-items', 'write-status', 'write status']),
        );
        return inTrace;
      },
      30_000,
      250,
    );
    const byName = (n: string) => trace.filter((sp) => sp.name === n);
    const resolve = byName('resolve-cluster')[0]!;
    const apply = byName('apply-items')[0]!;
    const status = byName('write-status')[0]!;
    expect(apply.parentSpanId).toBe(resolve.spanId);
    expect(status.parentSpanId).toBe(apply.spanId);
    const items = byName('apply item');
    expect(items.map((i) => i.attributes['sync.item']).sort()).toEqual(['bad', 'one', 'two']);
    for (const i of items) expect(i.parentSpanId).toBe(apply.spanId);
    expect(items.find((i) => i.attributes['sync.item'] === 'bad')?.attributes['sync.item.reason']).toBe(
      'InvalidManifest',
    );
    expect(new Set(trace.map((sp) => sp.service))).toEqual(
      new Set(['kcp-sync-resolve-cluster', 'kcp-sync-apply-items', 'kcp-sync-write-status']),
    );
    const ms = (sp: Span) =>
      (Number(BigInt(sp.endTimeUnixNano) - BigInt(sp.startTimeUnixNano)) / 1e6).toFixed(1);
    const tree = (parent: string | undefined, depth: number): string[] =>
      trace
        .filter((sp) => (sp.parentSpanId || undefined) === parent)
        .flatMap((sp) => [
          `${'  '.repeat(depth)}${sp.name} [${sp.service}] ${ms(sp)} ms ${sp.attributes['sync.item'] ?? ''} ${sp.attributes['sync.item.reason'] ?? ''}`.trimEnd(),
          ...tree(sp.spanId, depth + 1),
        ]);
    console.log(`trace ${apply.traceId}:\n${tree(resolve.parentSpanId || undefined, 0).join('\n')}`);
    // Logs carry the trace id.
    const applyLog = await serviceLog(s.stateDir, 'sync-apply-items');
    expect(applyLog).toContain(`"traceId":"${apply.traceId}"`);
  });

  it('sends every event as the CloudEvents contract (lib/events.ts) says: type, source, subject, data fields', async () => {
    // An object deleted in the SKR, so that the SKR source's event and the run it starts
    // are among what the broker saw; then a resync tick, for a ping and the Kyma fan-out.
    // (startStack waits for every SKR source replica to take its share: a SyncResource
    // created while a joining replica waits may be run by another trigger, with no change post.)
    const name = uniqueName('contract');
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, name, 'kyma-1', [
        {
          name: 'one',
          strategy: 'CreateAndSync',
          resource: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: default}\n`,
        },
      ]),
    );
    await waitSr(s, name, (x) => expect(x?.status?.state).toBe('Ready'));
    await kubectl(s.skr[0]!, ['delete', 'configmap', name, '-n', 'default']);
    s.runtime.ping[0]!.fire();
    await eventually(
      async () => {
        const seen = s.runtime.broker.observed.map((o) => ({
          type: o.attributes.type,
          trigger: ((typeof o.data === 'string' ? JSON.parse(o.data) : o.data) as { trigger?: string })
            ?.trigger,
        }));
        expect(seen.map((o) => o.type)).toContain(PING_TYPE);
        expect(seen.map((o) => o.type)).toContain(EventTypes.kymaResolved);
        expect(seen.map((o) => o.type)).toContain(EventTypes.skrChanged);
        expect(seen).toContainEqual({ type: EventTypes.clusterResolved, trigger: 'skr' });
      },
      20_000,
      250,
    );
    const seen = new Set<string>();
    for (const { attributes: a, data: raw } of s.runtime.broker.observed) {
      const c = EVENT_CONTRACT.find((e) => e.type === a.type);
      expect(c, `type ${a.type}`).toBeDefined();
      seen.add(a.type!);
      const data = (typeof raw === 'string' ? JSON.parse(raw) : raw) as Record<string, unknown>;
      const fields = c!.data.map((f) => f.replace(/\?$/, ''));
      const required = c!.data.filter((f) => !f.endsWith('?'));
      expect(
        Object.keys(data).filter((k) => !fields.includes(k)),
        `${a.type} data`,
      ).toEqual([]);
      for (const f of required) expect(data, `${a.type} data.${f}`).toHaveProperty(f);
      if (c!.from.steps) {
        expect(
          c!.from.steps.map((st) => `${SOURCE_PREFIX}/${st}`),
          `${a.type} source`,
        ).toContain(a.source);
        expect(a.subject).toBe(`${String(data.namespace)}/${String(data.name)}`);
      }
    }
    for (const t of [
      EventTypes.changed,
      PING_TYPE,
      EventTypes.skrChanged,
      EventTypes.reconcileKyma,
      EventTypes.kymaResolved,
      EventTypes.clusterResolved,
      EventTypes.itemsApplied,
    ]) {
      expect(seen, 'a run sends it').toContain(t);
    }
  });

  it('counts drift corrections and skipped status writes', async () => {
    const name = uniqueName('metered');
    const cmName = `${name}-cm`;
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, name, 'kyma-1', [
        {
          name: 'cm',
          strategy: 'CreateAndSync',
          resource: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${cmName}, namespace: default}\ndata: {a: "1"}\n`,
        },
      ]),
    );
    await waitSr(s, name, (x) => expect(x?.status?.state).toBe('Ready'));
    // A no-op resync: skipped status writes grow (counted by apply-items when a Kyma's run
    // changed nothing, by write-status when an outcome leaves the status as it is), no drift is counted.
    const before = { apply: await scrape('sync-apply-items'), status: await scrape('sync-write-status') };
    const skipped = async () =>
      total(await scrape('sync-apply-items'), 'sync_status_writes_skipped_total') +
      total(await scrape('sync-write-status'), 'sync_status_writes_skipped_total');
    const skippedBefore =
      total(before.apply, 'sync_status_writes_skipped_total') +
      total(before.status, 'sync_status_writes_skipped_total');
    await eventually(async () => expect(await skipped()).toBeGreaterThan(skippedBefore), 20_000, 300);
    expect(total(await scrape('sync-apply-items'), 'sync_drift_corrections_total')).toBe(
      total(before.apply, 'sync_drift_corrections_total'),
    );
    // Drift in the SKR: corrected at the next resync and counted.
    await kubectl(s.skr[0]!, [
      'patch',
      'configmap',
      cmName,
      '-n',
      'default',
      '--type',
      'merge',
      '-p',
      '{"data":{"a":"edited"}}',
    ]);
    await eventually(
      async () =>
        expect(total(await scrape('sync-apply-items'), 'sync_drift_corrections_total')).toBeGreaterThan(
          total(before.apply, 'sync_drift_corrections_total'),
        ),
      20_000,
      300,
    );
    expect(
      await kubectl(s.skr[0]!, ['get', 'configmap', cmName, '-n', 'default', '-o', 'jsonpath={.data.a}']),
    ).toBe('1');
    // Event, metric, log line and span name the field manager (kubectl patch's) and the path; never a value.
    await eventually(
      async () =>
        expect(await kubectl(s.kcp, ['describe', 'syncresource', name, '-n', s.ns])).toMatch(
          new RegExp(
            `Normal\\s+DriftCorrected\\s+.*ConfigMap default/${cmName}: data\\.a changed by kubectl-patch; reverted`,
          ),
        ),
      10_000,
      300,
    );
    const apply = await scrape('sync-apply-items');
    expect(
      Object.keys(apply).some(
        (k) => k.startsWith('sync_drift_corrections_total{') && k.includes('manager="kubectl-patch"'),
      ),
    ).toBe(true);
    const applyLog = await serviceLog(s.stateDir, 'sync-apply-items');
    const driftLine = applyLog.split('\n').find((l) => l.includes('"drift corrected"') && l.includes(cmName));
    expect(driftLine).toContain('"managers":["kubectl-patch"]');
    expect(driftLine).toContain('"paths":["data.a"]');
    expect(driftLine).not.toContain('edited');
    await eventually(
      async () => {
        const span = spans.find(
          (sp) =>
            sp.name === 'apply item' &&
            String(sp.attributes['sync.object']).includes(cmName) &&
            sp.attributes['sync.drift.managers'],
        );
        expect(span?.attributes['sync.drift.managers']).toEqual(['kubectl-patch']);
        expect(span?.attributes['sync.drift.paths']).toEqual(['data.a']);
      },
      10_000,
      300,
    );
    expect(total(apply, 'sync_api_requests_total')).toBeGreaterThan(0);
    expect(
      Object.keys(apply).some((k) => k.startsWith('sync_items_total{') && k.includes('reason="Applied"')),
    ).toBe(true);
    expect(total(apply, 'sync_client_cache_hits_total')).toBeGreaterThan(0);
  });

  it('never lets a credential byte into logs, events, status, Kubernetes Events or spans', async () => {
    // A failing SyncResource too, so error paths are captured.
    const name = uniqueName('leak');
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, name, 'kyma-1', [
        {
          name: 'x',
          strategy: 'CreateAndSync',
          resource: 'apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\n',
        },
      ]),
    );
    await waitSr(s, name, (x) => expect(x?.status?.state).toBe('Warning'));
    const secrets = inject('clusters').skrs.flatMap((skr) => credentialFragments(skr.kubeconfig, true));
    expect(secrets.length).toBeGreaterThan(6);
    const logs = await Promise.all(
      (await readdir(join(s.stateDir, 'logs'))).map((f) => readFile(join(s.stateDir, 'logs', f), 'utf8')),
    );
    const captured = {
      logs: logs.join('\n'),
      events: JSON.stringify(s.runtime.broker.observed),
      status: await kubectl(s.kcp, ['get', 'syncresources', '-n', s.ns, '-o', 'json']),
      kubeEvents: await kubectl(s.kcp, ['get', 'events.events.k8s.io', '-n', s.ns, '-o', 'json']),
      spans: JSON.stringify(spans),
    };
    for (const [where, text] of Object.entries(captured)) {
      expect(text.length, where).toBeGreaterThan(100);
      for (const secret of secrets)
        expect(text.includes(secret), `${where} holds credential bytes`).toBe(false);
    }
  });

  it('exports every metric the Grafana dashboard and the alert rules query', async () => {
    const root = join(import.meta.dirname, '..', 'monitoring');
    const dashboard = JSON.parse(await readFile(join(root, 'grafana-dashboard.json'), 'utf8')) as unknown;
    const rules = load(await readFile(join(root, 'prometheusrule.yaml'), 'utf8')) as {
      kind: string;
      spec: {
        groups: {
          rules: {
            alert: string;
            expr: string;
            labels: { severity: string };
            annotations: Record<string, string>;
          }[];
        }[];
      };
    };
    expect(rules.kind).toBe('PrometheusRule');
    const alerts = rules.spec.groups.flatMap((g) => g.rules);
    for (const a of alerts) {
      expect(a.alert, JSON.stringify(a)).toMatch(/^KcpSync[A-Za-z]+$/);
      expect(['warning', 'info']).toContain(a.labels.severity);
      expect(a.annotations.summary && a.annotations.description, a.alert).toBeTruthy();
    }
    const exprs: string[] = alerts.map((a) => a.expr);
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object') {
        for (const [k, x] of Object.entries(v)) {
          if (k === 'expr' && typeof x === 'string') exprs.push(x);
          else walk(x);
        }
      }
    };
    walk(dashboard);
    const queried = new Set(exprs.flatMap((e) => e.match(/\bsync_[a-z0-9_]+/g) ?? []));
    // What operators look at: step durations and outcomes, items by reason, drift by manager,
    // API errors by cluster, dead letters, the client cache.
    for (const m of [
      'sync_step_duration_count',
      'sync_step_duration_bucket',
      'sync_items_total',
      'sync_drift_corrections_total',
      'sync_api_errors_total',
      'sync_dead_letters_total',
      'sync_client_cache_hits_total',
    ]) {
      expect(queried).toContain(m);
    }

    // A dead letter, posted to the sink as the broker posts an event it gave up on.
    for (const f of s.runtime.functions.filter((fn) => fn.service === 'sync-dead-letter')) {
      const res = await fetch(f.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'ce-specversion': '1.0',
          'ce-id': uniqueName('dl'),
          'ce-source': '/kcp-sync-resource/apply-items',
          'ce-type': 'io.kyma-project.syncresource.items.applied',
        },
        body: '{}',
      });
      expect(res.status).toBeLessThan(300);
    }
    // A SyncResource on a second Kyma: with one client per process, its runs evict the first Kyma's client.
    const name = uniqueName('second-kyma');
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(s.ns, name, 'kyma-2', [
        {
          name: 'cm',
          strategy: 'CreateAndSync',
          resource: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: default}\n`,
        },
      ]),
    );
    await waitSr(s, name, (x) => expect(x?.status?.state).toBe('Ready'));
    const services = [
      'sync-resync',
      'sync-resolve-cluster',
      'sync-apply-items',
      'sync-write-status',
      'sync-dead-letter',
    ];
    await eventually(
      async () => {
        const exported = new Set<string>();
        for (const svc of services)
          for (const k of Object.keys(await scrape(svc))) exported.add(k.replace(/\{.*$/, ''));
        // The stand-in plays Knative without sender identity: no refusal happens here (test/monitoring.test.ts makes one).
        expect([...queried].filter((m) => !exported.has(m) && m !== 'sync_sender_refusals_total')).toEqual(
          [],
        );
      },
      30_000,
      500,
    );
  });
});
