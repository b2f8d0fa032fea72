// Large objects by reference (items[].resourceFrom.configMapKeyRef), end to end with
// kubectl on the whole pipeline: a CRD over the 256 KiB of an item's text ships from a
// gzip-compressed ConfigMap key; a changed text reaches the SKR through the ConfigMap's
// event alone (no resync tick runs); a missing, unlabelled or oversize source is refused
// on its item with nothing written in the SKR, and the other items are applied.
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYNC_SOURCE_LABEL } from '../lib/model.ts';
import { kubectl, startStack, waitSr, type Stack } from './e2e-helpers.ts';
import { eventually, uniqueName } from './helpers.ts';

let s: Stack;
const P = uniqueName('rfrom');
const group = `${P}.example.io`;

/** bigCrd is a CRD of about 400 KiB (descriptions, as generated CRDs carry), over an item's 256 KiB. */
function bigCrd(): string {
  const props = Array.from(
    { length: 400 },
    (_, i) => `              f${i}: {type: string, description: "${'x'.repeat(1000)}"}`,
  );
  return [
    'apiVersion: apiextensions.k8s.io/v1',
    'kind: CustomResourceDefinition',
    `metadata: {name: bigs.${group}}`,
    'spec:',
    `  group: ${group}`,
    '  names: {kind: Big, plural: bigs}',
    '  scope: Namespaced',
    '  versions:',
    '  - name: v1',
    '    served: true',
    '    storage: true',
    '    schema:',
    '      openAPIV3Schema:',
    '        type: object',
    '        properties:',
    '          spec:',
    '            type: object',
    '            properties:',
    ...props,
    '',
  ].join('\n');
}

const cm = (name: string, version: string) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: default}\ndata: {version: "${version}"}\n`;

function source(
  name: string,
  labelled: boolean,
  content: { data?: Record<string, string>; binaryData?: Record<string, string> },
): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: s.ns, labels: labelled ? { [SYNC_SOURCE_LABEL]: 'true' } : {} },
    ...content,
  });
}

const ref = (name: string, key: string) => ({ configMapKeyRef: { name, key } });

beforeAll(async () => {
  // No resync tick during the test: what reaches the SKR comes from events.
  s = await startStack('rfrom', { pingIntervalMs: 3_600_000 });
}, 300_000);

afterAll(async () => {
  await s?.stop();
});

describe('resourceFrom', () => {
  it('ships a large CRD from a gzip-compressed ConfigMap key, follows a changed text by its event, and refuses bad sources on their item', async () => {
    const crd = bigCrd();
    expect(Buffer.byteLength(crd)).toBeGreaterThan(262_144);
    const bomb = gzipSync(
      Buffer.concat([Buffer.from(cm(`${P}-bomb`, '1')), Buffer.alloc(3 * 1024 * 1024, '#')]),
    );
    const sources = [
      source(`${P}-crd`, true, { binaryData: { 'crd.yaml.gz': gzipSync(crd).toString('base64') } }),
      source(`${P}-text`, true, { data: { 'cm.yaml': cm(`${P}-text`, '1') } }),
      source(`${P}-unlabelled`, false, { data: { 'cm.yaml': cm(`${P}-unlabelled`, '1') } }),
      source(`${P}-bomb`, true, { binaryData: { 'cm.yaml.gz': bomb.toString('base64') } }),
    ];
    const list = { apiVersion: 'v1', kind: 'List', items: sources.map((t) => JSON.parse(t) as unknown) };
    await kubectl(s.kcp, ['apply', '--server-side', '-f', '-'], JSON.stringify(list));
    const sr = {
      apiVersion: 'operator.kyma-project.io/v1alpha1',
      kind: 'SyncResource',
      metadata: { name: P, namespace: s.ns },
      spec: {
        kyma: 'kyma-2',
        items: [
          { name: 'crd', strategy: 'CreateAndSync', resourceFrom: ref(`${P}-crd`, 'crd.yaml.gz') },
          { name: 'text', strategy: 'CreateAndSync', resourceFrom: ref(`${P}-text`, 'cm.yaml') },
          { name: 'unlabelled', strategy: 'CreateAndSync', resourceFrom: ref(`${P}-unlabelled`, 'cm.yaml') },
          { name: 'missing', strategy: 'CreateAndSync', resourceFrom: ref(`${P}-absent`, 'cm.yaml') },
          { name: 'no-key', strategy: 'CreateAndSync', resourceFrom: ref(`${P}-text`, 'other.yaml') },
          { name: 'bomb', strategy: 'CreateAndSync', resourceFrom: ref(`${P}-bomb`, 'cm.yaml.gz') },
        ],
      },
    };
    await kubectl(s.kcp, ['apply', '-f', '-'], JSON.stringify(sr));
    const done = await waitSr(
      s,
      P,
      (x) =>
        // Created, or Unchanged when the sources' own events (created just before) ran it once more.
        expect(
          x?.status?.items?.map((i) => `${i.name}:${i.reason === 'Unchanged' ? 'Created' : i.reason}`),
        ).toEqual([
          'crd:Created',
          'text:Created',
          'unlabelled:ResourceSourceRejected',
          'missing:ResourceSourceNotFound',
          'no-key:ResourceSourceNotFound',
          'bomb:ResourceSourceTooLarge',
        ]),
      90_000,
    );
    const item = (n: string) => done?.status?.items?.find((i) => i.name === n);
    expect(item('unlabelled')?.message).toBe(
      `ConfigMap ${s.ns}/${P}-unlabelled is not a sync source: it needs the label ${SYNC_SOURCE_LABEL}="true"`,
    );
    expect(item('missing')?.message).toBe(
      `ConfigMap ${s.ns}/${P}-absent (resourceFrom.configMapKeyRef) does not exist`,
    );
    expect(item('bomb')?.message).toMatch(
      /key cm\.yaml\.gz is more than 2097152 bytes, over the limit of 2097152/,
    );
    expect(done?.status?.state).toBe('Error');
    // The CRD is established in the SKR; nothing was written for the refused items.
    const skr = s.skr[1]!;
    expect(
      JSON.parse(await kubectl(skr, ['get', 'crd', `bigs.${group}`, '-o', 'json'])).spec.versions[0].schema
        .openAPIV3Schema.properties.spec.properties.f399.description,
    ).toHaveLength(1000);
    for (const name of ['unlabelled', 'bomb']) {
      expect(
        await kubectl(skr, ['get', 'configmap', `${P}-${name}`, '-n', 'default', '--ignore-not-found']),
      ).toBe('');
    }
    // A new text in the ConfigMap reaches the SKR through its event alone.
    await kubectl(
      s.kcp,
      ['apply', '--server-side', '-f', '-'],
      source(`${P}-text`, true, { data: { 'cm.yaml': cm(`${P}-text`, '2') } }),
    );
    await eventually(
      async () => {
        const live = JSON.parse(
          await kubectl(skr, ['get', 'configmap', `${P}-text`, '-n', 'default', '-o', 'json']),
        );
        expect(live.data).toEqual({ version: '2' });
      },
      60_000,
      500,
    );
    // Labelling the refused source brings its item in, again by the event.
    await kubectl(s.kcp, ['label', 'configmap', `${P}-unlabelled`, '-n', s.ns, `${SYNC_SOURCE_LABEL}=true`]);
    await waitSr(
      s,
      P,
      // Created, or already Unchanged when a later run (the SKR source's) reported it before this read.
      (x) =>
        expect(x?.status?.items?.find((i) => i.name === 'unlabelled')).toMatchObject({
          state: 'Ready',
          reason: expect.stringMatching(/^(Created|Unchanged)$/),
        }),
      60_000,
    );
    // Deleting the SyncResource deletes the CRD it shipped.
    await kubectl(s.kcp, ['delete', 'syncresource', P, '-n', s.ns, '--wait=false']);
    await eventually(
      async () => {
        expect(await kubectl(skr, ['get', 'crd', `bigs.${group}`, '--ignore-not-found'])).toBe('');
      },
      90_000,
      1000,
    );
  });
});
