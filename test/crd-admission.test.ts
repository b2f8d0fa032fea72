// The SyncResource CRD rejects at admission what can be rejected there, with a
// readable message, and accepts the examples of the spec and the seed discussion.
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { load, loadAll } from 'js-yaml';
import type { KubeApiError } from '../lib/kube/errors.ts';
import { describe, expect, it } from 'vitest';
import { resourcePath } from '../lib/kube/discovery.ts';
import { mustFind, type KubeObject } from '../lib/kube/objects.ts';
import { cluster } from './helpers.ts';
import { applyObjects } from '../infra/kcp-setup.ts';
const cm = 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\n';

function syncResource(spec: unknown): KubeObject {
  return {
    apiVersion: 'operator.kyma-project.io/v1alpha1',
    kind: 'SyncResource',
    metadata: { name: 'admission', namespace: 'kcp-system' },
    spec,
  } as KubeObject;
}

/** dryRunCreate creates obj with dryRun=All and returns what the server would store. */
async function dryRunCreate(obj: KubeObject): Promise<KubeObject> {
  const c = await cluster('kcp');
  const info = await mustFind(c, obj.apiVersion, obj.kind);
  return c.client.call<KubeObject>('POST', resourcePath(info, obj.metadata.namespace), {
    body: obj,
    query: { dryRun: 'All' },
  });
}

/** rejection dry-run creates obj and returns the API server's message, or "accepted". */
async function rejection(obj: KubeObject): Promise<string> {
  try {
    await dryRunCreate(obj);
    return 'accepted';
  } catch (err) {
    return (err as KubeApiError).status?.message ?? String(err);
  }
}

const item = (over: Record<string, unknown> = {}) => ({
  name: 'a',
  strategy: 'CreateAndSync',
  resource: cm,
  ...over,
});

const invalid: [string, unknown, RegExp][] = [
  ['no spec', undefined, /spec: Required value/],
  ['missing spec.kyma', { items: [item()] }, /spec\.kyma: Required value/],
  [
    'kyma not a DNS name',
    { kyma: 'Kyma_1', items: [item()] },
    /spec\.kyma: Invalid value: "Kyma_1": spec\.kyma in body should match/,
  ],
  ['missing items', { kyma: 'kyma-1' }, /spec\.items: Required value/],
  [
    'unknown strategy',
    { kyma: 'k', items: [item({ strategy: 'Sync' })] },
    /spec\.items\[0\]\.strategy: Unsupported value: "Sync": supported values: "CreateAndSync", "CreateAndIgnore", "Delete", "UpdateAndDelete"/,
  ],
  [
    'missing strategy',
    { kyma: 'k', items: [{ name: 'a', resource: cm }] },
    /spec\.items\[0\]\.strategy: Required value/,
  ],
  [
    'duplicate item names',
    { kyma: 'k', items: [item(), item()] },
    /spec\.items\[1\]: Duplicate value: .*"name":"a"/,
  ],
  [
    'empty item name',
    { kyma: 'k', items: [item({ name: '' })] },
    /spec\.items\[0\]\.name: Invalid value: "": spec\.items\[0\]\.name in body should be at least 1 chars long/,
  ],
  [
    'item name not a DNS name',
    { kyma: 'k', items: [item({ name: 'My Item' })] },
    /spec\.items\[0\]\.name: Invalid value: "My Item": spec\.items\[0\]\.name in body should match/,
  ],
  [
    'neither resource nor subresource',
    { kyma: 'k', items: [{ name: 'a', strategy: 'CreateAndSync' }] },
    /spec\.items\[0\]: Invalid value: "object": an item needs a resource, a resourceFrom or a subresource/,
  ],
  [
    'Delete with a subresource',
    { kyma: 'k', items: [item({ strategy: 'Delete', subresource: cm })] },
    /spec\.items\[0\]: Invalid value: "object": an item with strategy Delete cannot carry a subresource/,
  ],
  [
    'oversize resource text',
    { kyma: 'k', items: [item({ resource: cm + '#'.repeat(262_144) })] },
    /spec\.items\[0\]\.resource: Too long: may not be (more|longer) than 262144/,
  ],
  [
    'oversize subresource text',
    { kyma: 'k', items: [item({ subresource: '#'.repeat(65_537) })] },
    /spec\.items\[0\]\.subresource: Too long: may not be (more|longer) than 65536/,
  ],
  [
    'empty resource text',
    { kyma: 'k', items: [item({ resource: '' })] },
    /spec\.items\[0\]\.resource: Invalid value: "": spec\.items\[0\]\.resource in body should be at least 1 chars long/,
  ],
  [
    'unknown deletionPolicy',
    { kyma: 'k', deletionPolicy: 'Keep', items: [item()] },
    /spec\.deletionPolicy: Unsupported value: "Keep": supported values: "Delete", "Orphan"/,
  ],
  [
    'resource and resourceFrom',
    { kyma: 'k', items: [item({ resourceFrom: { configMapKeyRef: { name: 'big', key: 'crd.yaml' } } })] },
    /an item takes its text from resource or from resourceFrom, not both/,
  ],
  [
    'resourceFrom without a key',
    {
      kyma: 'k',
      items: [{ name: 'a', strategy: 'CreateAndSync', resourceFrom: { configMapKeyRef: { name: 'big' } } }],
    },
    /spec\.items\[0\]\.resourceFrom\.configMapKeyRef\.key: Required value/,
  ],
  [
    'resourceFrom with a key that is no ConfigMap key',
    {
      kyma: 'k',
      items: [
        {
          name: 'a',
          strategy: 'CreateAndSync',
          resourceFrom: { configMapKeyRef: { name: 'big', key: '../x' } },
        },
      ],
    },
    /resourceFrom\.configMapKeyRef\.key in body should match/,
  ],
  [
    'unknown onImmutableChange',
    { kyma: 'k', items: [item({ onImmutableChange: 'Replace' })] },
    /spec\.items\[0\]\.onImmutableChange: Unsupported value: "Replace": supported values: "Fail", "Recreate"/,
  ],
  [
    'Recreate on an item that is not CreateAndSync',
    { kyma: 'k', items: [item({ strategy: 'UpdateAndDelete', onImmutableChange: 'Recreate' })] },
    /onImmutableChange Recreate needs strategy CreateAndSync/,
  ],
  [
    'suspend not a boolean',
    { kyma: 'k', suspend: 'yes', items: [item()] },
    /spec\.suspend: Invalid value: "string": spec\.suspend in body must be of type boolean/,
  ],
  [
    'too many items',
    { kyma: 'k', items: Array.from({ length: 101 }, (_, i) => item({ name: `i${i}` })) },
    /spec\.items: Too many: 101: must have at most 100 items/,
  ],
];

describe('SyncResource CRD admission', () => {
  it.each(invalid)('rejects %s', async (_, spec, message) => {
    expect(await rejection(syncResource(spec))).toMatch(message);
  });

  it('defaults deletionPolicy to Delete', async () => {
    const created = await dryRunCreate(syncResource({ kyma: 'kyma-1', items: [item()] }));
    expect((created.spec as { deletionPolicy: string }).deletionPolicy).toBe('Delete');
  });

  const examples = join(import.meta.dirname, '..', 'examples');
  it.each(['design-example.yaml', 'seed-scenario.yaml', 'nfs.yaml', 'nfs-delete.yaml'])(
    'accepts examples/%s',
    async (file) => {
      const obj = load(await readFile(join(examples, file), 'utf8')) as KubeObject;
      expect(await rejection(obj)).toBe('accepted');
    },
  );

  it('accepts every example in the repository', async () => {
    const files = (await readdir(examples)).filter((f) => f.endsWith('.yaml'));
    expect(files.length).toBeGreaterThanOrEqual(4);
    for (const f of files) {
      const docs = loadAll(await readFile(join(examples, f), 'utf8')) as KubeObject[];
      const srs = docs.filter((d) => d.kind === 'SyncResource');
      expect(srs.length, f).toBeGreaterThan(0);
      // A team's example lives in a namespace of its own (created by the example).
      const namespaces = docs.filter((d) => d.kind === 'Namespace');
      if (namespaces.length > 0) await applyObjects(await cluster('kcp'), namespaces);
      for (const obj of srs) expect(await rejection(obj), f).toBe('accepted');
    }
  });

  it('accepts the example of DESIGN.md section 2 verbatim', async () => {
    const design = await readFile(join(import.meta.dirname, '..', '..', 'shared', 'DESIGN.md'), 'utf8');
    const block = /```yaml\n([\s\S]*?)```/.exec(design)?.[1];
    expect(block).toContain('kind: SyncResource');
    const obj = load(block!) as KubeObject & { status?: unknown };
    delete obj.status; // status is written through its subresource, not on create
    expect(await rejection(obj)).toBe('accepted');
  });
});
