// knative.yaml passes a server-side dry run against the real KCP with the Knative
// CRDs of ../shared/crds/knative installed, and is consistent with the product.
import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadAll } from 'js-yaml';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { installCrds, knativeYaml } from '../infra/kcp-setup.ts';
import { EventTypes } from '../lib/events.ts';
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
    await installCrds(await cluster('kcp'), [
      ...files,
      join(import.meta.dirname, 'fixtures', 'sinkbinding-crd.yaml'),
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

  it('deploys what the pipeline needs: four function Services of one image, a trigger per step, sources, a sink binding', async () => {
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
    expect(images.size).toBe(1);
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
    expect(of('SinkBinding')).toHaveLength(1);
    const text = await readFile(knativeYaml, 'utf8');
    for (const t of [EventTypes.reconcile, EventTypes.clusterResolved, EventTypes.itemsApplied])
      expect(text).toContain(t);
  });
});
