// knative.yaml passes a server-side dry run against the real KCP with the Knative
// CRDs of ../shared/crds/knative installed, and is consistent with the product.
import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadAll } from 'js-yaml';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { ensureKnativeBinaries } from '../infra/binaries.ts';
import { installCrds, knativeYaml } from '../infra/kcp-setup.ts';
import { EventTypes } from '../lib/events/contract.ts';
import { EVENT_CONTRACT } from '../lib/events/table.ts';
import { triggerSubject } from '../lib/policy/senders.ts';
import { cluster } from './helpers.ts';

const run = promisify(execFile);
const knativeCrds = join(import.meta.dirname, '..', '..', 'shared', 'crds', 'knative');

type Doc = { apiVersion: string; kind: string; metadata: { name: string }; spec?: Record<string, unknown> };

describe('knative.yaml', () => {
  let kubeconfig: string;
  beforeAll(async () => {
    const files = (await readdir(knativeCrds))
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => join(knativeCrds, f));
    // EventPolicy is not in ../shared/crds/knative: read it from Knative's own configuration (the module built by infra/knative).
    const { config } = await ensureKnativeBinaries();
    await installCrds(await cluster('kcp'), [
      ...files,
      join(import.meta.dirname, 'fixtures', 'sinkbinding-crd.yaml'),
      join(config, 'core', 'resources', 'eventpolicy.yaml'),
    ]);
    kubeconfig = `${inject('clusters').stateDir}/kubeconfig/kcp.yaml`;
  });

  it('passes kubectl apply --dry-run=server with strict field validation', async () => {
    const { stdout, stderr } = await run('kubectl', [
      '--kubeconfig',
      kubeconfig,
      'apply',
      '--dry-run=server',
      '--validate=strict',
      '-f',
      knativeYaml,
    ]);
    // kubectl's only remark may be about the CRD the test setup created without it.
    for (const line of stderr.split('\n').filter(Boolean)) expect(line).toMatch(/last-applied-configuration/);
    const lines = stdout.trim().split('\n');
    const docs = (loadAll(await readFile(knativeYaml, 'utf8')) as Doc[]).filter(Boolean);
    expect(lines).toHaveLength(docs.length);
    for (const l of lines) expect(l).toMatch(/ (created|configured|unchanged) \(server dry run\)$/);
  });

  it('fails the dry run on a schema error (the check can fail)', async () => {
    const bad = (await readFile(knativeYaml, 'utf8')).replace('    retry: 6\n', '    retry: six\n');
    expect(bad).toContain('retry: six');
    const child = execFile('kubectl', [
      '--kubeconfig',
      kubeconfig,
      'apply',
      '--dry-run=server',
      '--validate=strict',
      '-f',
      '-',
    ]);
    child.stdin!.end(bad);
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    expect(code).not.toBe(0);
  });

  it('deploys what the pipeline needs: four function Services and the SKR source of one image, a trigger per step, sources, sink bindings', async () => {
    const docs = (loadAll(await readFile(knativeYaml, 'utf8')) as Doc[]).filter(Boolean);
    const of = (kind: string) => docs.filter((d) => d.kind === kind);
    const services = of('Service').filter((d) => d.apiVersion === 'serving.knative.dev/v1');
    const images = new Set(
      services.map((s) =>
        JSON.stringify(
          (s.spec as { template: { spec: { containers: { image: string }[] } } }).template.spec.containers[0]!
            .image,
        ),
      ),
    );
    // The SKR source runs the same image, as a Deployment with a SinkBinding of its own.
    const [skrSource, ...more] = of('Deployment');
    expect(more).toEqual([]);
    expect(skrSource?.metadata.name).toBe('sync-skr-source');
    const pod = (
      skrSource!.spec as {
        template: {
          spec: { serviceAccountName: string; containers: { image: string; command: string[] }[] };
        };
      }
    ).template.spec;
    images.add(JSON.stringify(pod.containers[0]!.image));
    expect(images.size).toBe(1);
    expect(pod.containers[0]!.command).toEqual(['node', 'skr-source/main.js']);
    expect(pod.serviceAccountName).toBe('sync-skr-source');
    expect(services.map((s) => s.metadata.name).sort()).toEqual([
      'sync-apply-items',
      'sync-dead-letter',
      'sync-resolve-cluster',
      'sync-resync',
      'sync-write-status',
    ]);
    expect(
      of('Trigger')
        .map((t) => t.metadata.name)
        .sort(),
    ).toEqual(['sync-apply-items', 'sync-resolve-cluster', 'sync-resync', 'sync-write-status']);
    for (const s of of('ApiServerSource')) expect(s.spec!.mode).toBe('Reference');
    expect(of('PingSource')[0]!.spec!.schedule).toBe('*/5 * * * *');
    expect(
      of('SinkBinding')
        .map((b) => (b.spec as { subject: { kind: string } }).subject.kind)
        .sort(),
    ).toEqual(['Deployment', 'Service']);
    expect(of('PingSource')).toHaveLength(1);
    const text = await readFile(knativeYaml, 'utf8');
    for (const t of [EventTypes.reconcile, EventTypes.clusterResolved, EventTypes.itemsApplied])
      expect(text).toContain(t);
  });

  it("exports every function's metrics by default on the port its Pods are annotated to be scraped on", async () => {
    const docs = (loadAll(await readFile(knativeYaml, 'utf8')) as Doc[]).filter(Boolean);
    type Template = {
      metadata?: { annotations?: Record<string, string> };
      spec: { containers: { env?: { name: string; value?: string }[] }[] };
    };
    const services = docs.filter((d) => d.kind === 'Service' && d.apiVersion === 'serving.knative.dev/v1');
    expect(services.length).toBe(5);
    for (const svc of services) {
      const t = (svc.spec as { template: Template }).template;
      const env = Object.fromEntries((t.spec.containers[0]!.env ?? []).map((e) => [e.name, e.value]));
      expect(env.OTEL_METRICS_EXPORTER?.split(','), svc.metadata.name).toContain('prometheus');
      expect(t.metadata?.annotations, svc.metadata.name).toMatchObject({
        'prometheus.io/scrape': 'true',
        'prometheus.io/port': env.OTEL_EXPORTER_PROMETHEUS_PORT ?? '9464',
        'prometheus.io/path': '/metrics',
      });
    }
  });

  it('lets each sender post to the Broker only the types the events table says it sends (EventPolicies)', async () => {
    type Filter = { exact?: { type?: string }; prefix?: { type?: string }; any?: Filter[] };
    type Policy = Doc & {
      spec: {
        to: { ref: { kind: string; name: string } }[];
        from: { ref?: { kind: string; name: string; namespace?: string }; sub?: string }[];
        filters: Filter[];
      };
    };
    const docs = (loadAll(await readFile(knativeYaml, 'utf8')) as Doc[]).filter(Boolean);
    const policies = docs.filter((d) => d.kind === 'EventPolicy') as Policy[];
    expect(policies.length).toBeGreaterThan(0);
    const steps = ['resync', 'resolve-cluster', 'apply-items', 'write-status', 'skr-source'];
    // A sender is a source (by name) or a step: its own ServiceAccount (posts) or its Trigger's identity (replies).
    const senderOf = (f: Policy['spec']['from'][number]): string => {
      if (f.ref) {
        expect(f.ref.namespace, 'set: no webhook defaults it').toBe('kcp-system');
        return f.ref.name;
      }
      const step = steps.find(
        (st) =>
          f.sub === `system:serviceaccount:kcp-system:sync-${st}` ||
          f.sub === triggerSubject('kcp-system', `sync-${st}`),
      );
      expect(step, f.sub).toBeDefined();
      return `step:${step}`;
    };
    const allows = (filters: Filter[], type: string): boolean =>
      filters.every((f) =>
        f.any
          ? f.any.some((g) => allows([g], type))
          : f.exact
            ? f.exact.type === type
            : f.prefix
              ? type.startsWith(f.prefix.type ?? '')
              : false,
      );
    const identities = new Set<string>();
    const allowed = new Set<string>();
    for (const p of policies) {
      expect(p.spec.to).toEqual([
        { ref: { apiVersion: 'eventing.knative.dev/v1', kind: 'Broker', name: 'kcp-sync' } },
      ]);
      for (const f of p.spec.from) {
        const id = JSON.stringify(f);
        // The first policy naming a sender decides: each is named once.
        expect(identities.has(id), id).toBe(false);
        identities.add(id);
        for (const c of EVENT_CONTRACT)
          if (allows(p.spec.filters, c.type)) allowed.add(`${senderOf(f)} ${c.type}`);
      }
    }
    const expected = new Set(
      EVENT_CONTRACT.flatMap((c) => [
        ...(c.from.sources ?? []).map((s) => `${s} ${c.type}`),
        ...(c.from.steps ?? []).map((s) => `step:${s} ${c.type}`),
      ]),
    );
    expect([...allowed].sort()).toEqual([...expected].sort());
  });
});
