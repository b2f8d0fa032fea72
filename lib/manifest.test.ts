import { describe, expect, it } from 'vitest';
import { parseManifest } from './manifest.ts';

const ok =
  'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns, resourceVersion: "5", uid: x}\ndata: {k: v}\n';

describe('parseManifest', () => {
  it('parses one object and drops server-populated metadata', () => {
    const o = parseManifest(ok, 'resource', 1000);
    expect(o).toEqual({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'a', namespace: 'ns' },
      data: { k: 'v' },
    });
  });

  it('returns a frozen object: a run that needs a change makes a copy (the desired body is shared by the decisions of a run)', () => {
    const o = parseManifest(ok, 'resource', 1000);
    expect(() => {
      (o.data as Record<string, string>).k = 'changed';
    }).toThrow(TypeError);
    expect(() => {
      o.metadata.namespace = 'other';
    }).toThrow(TypeError);
    expect(parseManifest(ok, 'resource', 1000)).toEqual(o);
  });

  it.each([
    ['several documents', `${ok}---\n${ok}`, 'resource holds 2 documents; an item takes exactly one object'],
    ['no object', '# nothing\n', 'resource holds no object'],
    ['a sequence', '- a\n- b\n', 'resource is a sequence, not a mapping'],
    ['a scalar', 'hello', 'resource is a string, not a mapping'],
    ['no apiVersion', 'kind: ConfigMap\nmetadata: {name: a}\n', 'resource has no apiVersion'],
    ['no kind', 'apiVersion: v1\nmetadata: {name: a}\n', 'resource has no kind'],
    ['no metadata', 'apiVersion: v1\nkind: ConfigMap\n', 'resource has no metadata'],
    [
      'no name',
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: a-}\n',
      'resource has no metadata.name',
    ],
    [
      'a List kind',
      'apiVersion: v1\nkind: List\nmetadata: {name: x}\nitems: [{apiVersion: v1, kind: Secret}]\n',
      'resource is a List; an item takes exactly one object, not a list',
    ],
    [
      'the managed-by label',
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {kcp-sync.kyma-project.io/managed-by: x}}\n',
      'resource sets metadata.labels["kcp-sync.kyma-project.io/managed-by"], which only the controller may set',
    ],
    [
      'the new owner annotation',
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, annotations: {kcp-sync.kyma-project.io/owned-by: kcp-system/other}}\n',
      'resource sets metadata.annotations["kcp-sync.kyma-project.io/owned-by"], which only the controller may set',
    ],
    [
      'the owner annotation',
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, annotations: {operator.kyma-project.io/owned-by: kcp-system/other}}\n',
      'resource sets metadata.annotations["operator.kyma-project.io/owned-by"], which only the controller may set',
    ],
    ['oversize text', ok + '#'.repeat(1000), /^resource is 1\d{3} bytes, over the limit of 1000$/],
    ['broken YAML', 'a: [1, 2\n', /^resource is not valid YAML: /],
  ])('rejects %s', (_, text, message) => {
    expect(() => parseManifest(text, 'resource', 1000)).toThrow(message);
  });

  it('rejects a billion-laughs text at its first alias, fast and in bounded memory', () => {
    const lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (let i = 1; i < 20; i++) {
      const prev = String.fromCharCode(96 + i);
      const cur = String.fromCharCode(97 + i);
      lines.push(`${cur}: &${cur} [${Array(9).fill(`*${prev}`).join(',')}]`);
    }
    const bomb = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n${lines.join('\n')}\n`;
    const before = process.memoryUsage().heapUsed;
    expect(() => parseManifest(bomb, 'resource', 1_000_000)).toThrow(/^resource is not valid YAML: .*alias/i);
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(50 * 1024 * 1024);
  });

  it("takes Kyma's own managed-by label like any other label (the product's marks have keys of their own)", () => {
    const text =
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {operator.kyma-project.io/managed-by: kyma}}\n';
    expect(parseManifest(text, 'resource', 1000).metadata.labels).toEqual({
      'operator.kyma-project.io/managed-by': 'kyma',
    });
  });

  it('reads scalars as kubectl does (YAML 1.1 as go-yaml v2 resolves it)', () => {
    const text =
      'apiVersion: v1\nkind: X\nmetadata: {name: a}\nspec: {mode: 0400, common: 0644, links: yes, flag: on, count: 1_000, day: 2001-12-14, t: 1:30}\n';
    expect(parseManifest(text, 'resource', 1000).spec).toEqual({
      mode: 256,
      common: 420,
      links: true,
      flag: true,
      count: 1000,
      day: '2001-12-14',
      t: '1:30',
    });
  });

  it('rejects deep nesting without overflowing the stack', () => {
    const deep = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: ${'['.repeat(10_000)}${']'.repeat(10_000)}\n`;
    expect(() => parseManifest(deep, 'resource', 1_000_000)).toThrow(
      /^resource is not valid YAML: .*(depth|nest)/i,
    );
  });
});
