import { describe, expect, it } from 'vitest';
import { matches, triggerMatches } from './filters.ts';

const ev = { type: 'dev.knative.apiserver.ref.update', kind: 'SyncResource', source: 'https://x' };

describe('trigger filters', () => {
  it.each([
    [{ exact: { type: 'dev.knative.apiserver.ref.update' } }, true],
    [{ exact: { type: 'dev.knative.apiserver.ref.add' } }, false],
    [{ exact: { missing: 'x' } }, false],
    [{ prefix: { type: 'dev.knative.apiserver.ref.' } }, true],
    [{ suffix: { type: '.update' } }, true],
    [{ suffix: { type: '.delete' } }, false],
    [{ all: [{ prefix: { type: 'dev.' } }, { exact: { kind: 'SyncResource' } }] }, true],
    [{ all: [{ prefix: { type: 'dev.' } }, { exact: { kind: 'Kyma' } }] }, false],
    [{ any: [{ exact: { kind: 'Kyma' } }, { exact: { kind: 'SyncResource' } }] }, true],
    [{ any: [{ exact: { kind: 'Kyma' } }, { exact: { kind: 'Secret' } }] }, false],
    [{ not: { exact: { type: 'dev.knative.apiserver.ref.delete' } } }, true],
    [{ not: { exact: { kind: 'SyncResource' } } }, false],
  ])('%j -> %s', (f, want) => {
    expect(matches(f, ev)).toBe(want);
  });

  it('uses filters over attributes, and all of the filters', () => {
    expect(triggerMatches({ attributes: { kind: 'Kyma' } }, ev)).toBe(false);
    expect(triggerMatches({ attributes: { kind: 'SyncResource', type: ev.type } }, ev)).toBe(true);
    expect(
      triggerMatches({ attributes: { kind: 'Kyma' }, filters: [{ exact: { kind: 'SyncResource' } }] }, ev),
    ).toBe(true);
    expect(
      triggerMatches({ filters: [{ exact: { kind: 'SyncResource' } }, { exact: { source: 'nope' } }] }, ev),
    ).toBe(false);
    expect(triggerMatches({}, ev)).toBe(true);
  });
});
