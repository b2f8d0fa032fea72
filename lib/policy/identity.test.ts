import { describe, expect, it } from 'vitest';
import {
  checkPath,
  parseApiVersion,
  UnsafePathError,
  validateKind,
  validateName,
  validateNamespace,
} from './identity.ts';

// Look-alikes: Cyrillic "о", fullwidth solidus, division slash, a zero-width space.
const lookAlikes = ['cоnfig', 'a／b', 'a∕b', 'a\u200bb'];

describe('identity rules', () => {
  it('accepts identities Kubernetes accepts', () => {
    expect(parseApiVersion('v1')).toEqual({ group: '', version: 'v1' });
    expect(parseApiVersion('apps/v1')).toEqual({ group: 'apps', version: 'v1' });
    expect(parseApiVersion('operator.kyma-project.io/v1beta2')).toEqual({
      group: 'operator.kyma-project.io',
      version: 'v1beta2',
    });
    for (const k of ['ConfigMap', 'SomeModule', 'My-Kind']) expect(() => validateKind(k)).not.toThrow();
    for (const n of ['a', 'config.v1', 'system:controller:x', 'A_b', 'x@y', 'a'.repeat(253)])
      expect(() => validateName(n)).not.toThrow();
    for (const ns of ['default', 'kyma-system', 'a1']) expect(() => validateNamespace(ns)).not.toThrow();
  });

  it.each([
    '',
    '.',
    '..',
    '../api/v1',
    'v1/',
    '/v1',
    'apps/v1/x',
    'apps//v1',
    'Apps/v1',
    'apps/V1',
    'apps/1',
    'a%2Fb/v1',
    'apps/v1?x',
    'apps/v1#',
    ' v1',
    'v1 ',
    ...lookAlikes.map((l) => `${l}/v1`),
  ])('refuses apiVersion %j', (v) => expect(() => parseApiVersion(v)).toThrow(/apiVersion/));

  it.each([
    '',
    '.',
    '..',
    'Config/Map',
    'Config%4D',
    'Config Map',
    'ConfigMap?',
    '#',
    '-Kind',
    '1Kind',
    ...lookAlikes,
  ])('refuses kind %j', (k) => expect(() => validateKind(k)).toThrow(/kind/));

  it.each([
    '',
    '.',
    '..',
    'a/b',
    '../b',
    'a%2Fb',
    '%2e%2e',
    'a?b',
    'a#b',
    'a b',
    'a\tb',
    'a\nb',
    'x'.repeat(254),
    ...lookAlikes,
  ])('refuses name %j', (n) => expect(() => validateName(n)).toThrow(/metadata\.name/));

  it.each(['', '.', '..', 'a/b', 'A', 'a_b', 'a.b', '%2e', 'a b', 'x'.repeat(64), ...lookAlikes])(
    'refuses namespace %j',
    (n) => expect(() => validateNamespace(n)).toThrow(/metadata\.namespace/),
  );
});

describe("checkPath (the client's second line of defence)", () => {
  it('lets paths of valid segments through', () => {
    for (const p of [
      '/api/v1',
      '/api/v1/namespaces/default/configmaps/x',
      '/apis/rbac.authorization.k8s.io/v1/clusterroles/system:x',
      '/apis/a.io/v1/ns/x/status',
    ]) {
      expect(() => checkPath(p)).not.toThrow();
    }
  });

  it.each([
    '/api/v1/namespaces/default/configmaps/.',
    '/api/v1/namespaces/default/configmaps/..',
    '/api/v1/namespaces//configmaps',
    '/api/v1/namespaces/default/configmaps/',
    '/api/v1/namespaces/a%2Fb/configmaps',
    '/api/v1/configmaps/x?watch=1',
    '/api/v1/configmaps/x#y',
    '/api/v1/configmaps/a b',
    '/api/v1/configmaps/a\tb',
    '/api/v1/configmaps/cоnfig',
    'api/v1',
    '',
  ])('refuses %j', (p) => expect(() => checkPath(p)).toThrow(UnsafePathError));
});
