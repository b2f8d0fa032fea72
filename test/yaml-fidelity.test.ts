// kubectl is the oracle for how manifest text reads: every scalar form of the corpus
// (test/fixtures/yaml-scalars.txt) goes into a custom resource that kubectl server-side
// applies as a dry run, and the product's reading of the same text is applied the same
// way; the stored objects must be equal. Forms kubectl refuses, the product refuses.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { applyObject, mustFind, type Cluster, type KubeObject } from '../lib/kube/objects.ts';
import { ManifestError, parseManifest } from '../lib/manifest.ts';
import { kubectl } from './e2e-helpers.ts';
import { cluster, eventually, uniqueName } from './helpers.ts';

const forms = (file: string) =>
  readFileSync(join(import.meta.dirname, 'fixtures', file), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'));

const group = `${uniqueName('yaml')}.fidelity.test`;
let skr: Cluster;
let kubeconfig: string;

function probe(fields: string[], keys: string[] = []): string {
  const lines = [
    `apiVersion: ${group}/v1`,
    'kind: Probe',
    `metadata: {name: ${uniqueName('p')}}`,
    'spec:',
    ...fields.map((f, i) => `  f${i}: ${f}`),
    ...(keys.length ? ['  keys:', ...keys.map((k, i) => `    ${k}: k${i}`)] : []),
  ];
  return `${lines.join('\n')}\n`;
}

async function byKubectl(text: string): Promise<KubeObject> {
  const out = await kubectl(
    kubeconfig,
    ['apply', '--server-side', '--dry-run=server', '-o', 'json', '-f', '-'],
    text,
  );
  return JSON.parse(out) as KubeObject;
}

async function byProduct(text: string): Promise<KubeObject> {
  const obj = parseManifest(text, 'resource', 1 << 20);
  const info = await mustFind(skr, obj.apiVersion, obj.kind);
  return applyObject(skr, info, obj, 'kubectl', undefined, true);
}

beforeAll(async () => {
  skr = await cluster(0);
  kubeconfig = `${inject('clusters').stateDir}/kubeconfig/skr-1.yaml`;
  const crd = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `probes.${group}` },
    spec: {
      group,
      scope: 'Cluster',
      names: { plural: 'probes', singular: 'probe', kind: 'Probe', listKind: 'ProbeList' },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
            },
          },
        },
      ],
    },
  };
  await kubectl(kubeconfig, ['apply', '--server-side', '-f', '-'], JSON.stringify(crd));
  await eventually(() => kubectl(kubeconfig, ['get', `probes.${group}`]), 30_000, 250);
});

afterAll(async () => {
  await kubectl(kubeconfig, ['delete', 'crd', `probes.${group}`, '--wait=false']);
});

describe('YAML as kubectl reads it', () => {
  it('reads every scalar form of the corpus into the object kubectl stores', async () => {
    const scalars = forms('yaml-scalars.txt');
    const keys = ['0644', 'yes', 'no', '1_000', '0x1F', '1.5', '2001-12-14', '"on"', 'y2'];
    const text = probe(scalars, keys);
    const [want, got] = await Promise.all([byKubectl(text), byProduct(text)]);
    expect(Object.keys(want.spec as object)).toHaveLength(scalars.length + 1);
    for (const [i, form] of scalars.entries()) {
      expect({ form, value: (got.spec as Record<string, unknown>)[`f${i}`] }).toEqual({
        form,
        value: (want.spec as Record<string, unknown>)[`f${i}`],
      });
    }
    expect((got.spec as { keys: unknown }).keys).toEqual((want.spec as { keys: unknown }).keys);
    // The file modes that motivated this: 0400 is 256 and 0644 is 420, as kubectl reads them.
    expect((got.spec as Record<string, unknown>).f0).toBe(256);
    expect((got.spec as Record<string, unknown>).f1).toBe(420);
  });

  it.each(forms('yaml-refused.txt'))('refuses %s where kubectl refuses it', async (form) => {
    const text = probe([form]);
    await expect(byKubectl(text)).rejects.toThrow();
    expect(() => parseManifest(text, 'resource', 1 << 20)).toThrow(ManifestError);
  });

  // A documented refusal of ours: kubectl keeps the last of two values for one key, silently.
  it('refuses a mapping key given twice, which kubectl reads as its last value', async () => {
    const text = probe(['1', '2']).replace('f1:', 'f0:');
    expect(((await byKubectl(text)).spec as { f0: unknown }).f0).toBe(2);
    expect(() => parseManifest(text, 'resource', 1 << 20)).toThrow(/duplicated mapping key/);
  });

  // Our one documented refusal where kubectl reads a value: an integer a JSON number in
  // JavaScript cannot hold exactly would reach the SKR changed.
  it.each(['9223372036854775807', '-9223372036854775808', '9007199254740993'])(
    'refuses the integer %s, which kubectl carries as int64',
    async (form) => {
      const text = probe([form]);
      expect(((await byKubectl(text)).spec as { f0: unknown }).f0).toBeDefined();
      expect(() => parseManifest(text, 'resource', 1 << 20)).toThrow(
        /beyond ±2\^53 and cannot be carried exactly; quote it/,
      );
    },
  );

  it('reads a real file mode in a Pod template as kubectl does (0400 is 256, not 400)', async () => {
    const text = [
      'apiVersion: apps/v1',
      'kind: Deployment',
      `metadata: {name: ${uniqueName('modes')}, namespace: default}`,
      'spec:',
      '  selector: {matchLabels: {app: m}}',
      '  template:',
      '    metadata: {labels: {app: m}}',
      '    spec:',
      '      enableServiceLinks: yes',
      '      containers: [{name: c, image: busybox}]',
      '      volumes:',
      '      - name: v',
      '        configMap: {name: x, defaultMode: 0400}',
      '      - name: w',
      '        secret: {secretName: creds, defaultMode: 0644}',
      '',
    ].join('\n');
    const obj = parseManifest(text, 'resource', 1 << 20);
    const info = await mustFind(skr, 'apps/v1', 'Deployment');
    const [want, got] = await Promise.all([
      byKubectl(text),
      applyObject(skr, info, obj, 'kubectl', undefined, true),
    ]);
    const spec = (o: KubeObject) => (o.spec as { template: { spec: Record<string, unknown> } }).template.spec;
    expect(spec(got).volumes).toEqual(spec(want).volumes);
    expect(spec(got).enableServiceLinks).toBe(true);
    expect((spec(got).volumes as { configMap?: { defaultMode: number } }[])[0]!.configMap!.defaultMode).toBe(
      0o400,
    );
  });
});
