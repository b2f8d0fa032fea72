// The status a run's result computes to, with health: Ready only when applied and healthy.
import { describe, expect, it } from 'vitest';
import type { ApplyResult, ItemResult } from './engine/result.ts';
import type { HealthStatus, SyncResource } from './model.ts';
import { computeStatus, isMoving, reportedResult, sameStatus } from './status.ts';

const now = new Date('2026-12-02T00:00:00Z');
const item = (name: string, status?: HealthStatus, reason?: string): ItemResult => ({
  name,
  state: 'Ready',
  reason: 'Unchanged',
  message: 'resource has been synced',
  object: `Deployment ns/${name}`,
  ...(status ? { health: { status, message: `${name} is ${status}`, ...(reason ? { reason } : {}) } } : {}),
});
const run = (items: ItemResult[], extra: Partial<ApplyResult> = {}): ApplyResult => ({
  generation: 1,
  observedAt: now.toISOString(),
  items,
  changes: [],
  inventory: [],
  pending: [],
  ...extra,
});
const summary = (r: ApplyResult) => {
  const s = computeStatus(r, undefined, now);
  return {
    state: s.state,
    conditions: s.conditions!.map((c) => `${c.type}=${c.status}/${c.reason}`),
    moving: isMoving(s),
  };
};

describe('computeStatus with health', () => {
  it.each([
    [
      'every object healthy',
      [item('a', 'Current'), item('b')],
      'Ready',
      ['Resources=True/Ready', 'Healthy=True/Healthy', 'Progressing=False/Settled'],
      false,
    ],
    [
      'one rolling out',
      [item('a', 'Current'), item('b', 'InProgress')],
      'Processing',
      ['Resources=True/Ready', 'Healthy=False/Progressing', 'Progressing=True/Progressing'],
      true,
    ],
    [
      'one failed, one rolling out',
      [item('a', 'Failed', 'ProgressDeadlineExceeded'), item('b', 'InProgress')],
      'Error',
      ['Resources=True/Ready', 'Healthy=False/Unhealthy', 'Progressing=True/Progressing'],
      true,
    ],
    [
      'a module with a warning',
      [item('a', 'Current', 'Warning')],
      'Warning',
      ['Resources=True/Ready', 'Healthy=False/Degraded', 'Progressing=False/Settled'],
      false,
    ],
  ] as const)('%s', (_t, items, state, conditions, moving) => {
    expect(summary(run([...items]))).toEqual({ state, conditions, moving });
  });

  it('names the failed object and why', () => {
    const s = computeStatus(
      run([item('a', 'Failed', 'ProgressDeadlineExceeded'), item('b', 'Current')]),
      undefined,
      now,
    );
    expect(s.conditions![1]!.message).toBe(
      '1 of 2 objects are unhealthy: Deployment ns/a: ProgressDeadlineExceeded: a is Failed',
    );
  });

  it('says nothing is on its way when nothing can move by itself: suspended, or the SKR unreachable', () => {
    const previous = computeStatus(run([item('a', 'InProgress')]), undefined, now);
    expect(isMoving(previous)).toBe(true);
    expect(isMoving(computeStatus(run([], { suspended: true }), previous, now))).toBe(false);
    expect(
      isMoving(
        computeStatus(
          run([], { clusterError: { reason: 'ClusterUnreachable', message: 'down', transient: true } }),
          previous,
          now,
        ),
      ),
    ).toBe(false);
  });

  it('bounds what an event claims: long health messages and too many feedback values', () => {
    const long = {
      ...item('a', 'Current'),
      feedback: Array.from({ length: 20 }, (_, i) => ({ name: `f${i}`, value: 'x'.repeat(5000) })),
    };
    long.health!.message = 'y'.repeat(5000);
    const s = computeStatus(run([long]), undefined, now);
    expect(s.items![0]!.health!.message.length).toBe(1024);
    expect(s.items![0]!.feedback).toHaveLength(8);
    expect(s.items![0]!.feedback![0]!.value!.length).toBe(1024);
  });
});

describe('reportedResult: a health report written without a run', () => {
  const entry = (item: string, kind = 'Deployment') => ({
    item,
    apiVersion: 'apps/v1',
    kind,
    namespace: 'ns',
    name: item,
  });
  const live = (
    items: ItemResult[],
    result: Partial<ApplyResult> = {},
    spec: Partial<SyncResource['spec']> = {},
  ) => {
    const r = run(items, { inventory: items.map((i) => entry(i.name)), ...result });
    const status = computeStatus(r, undefined, now);
    return {
      apiVersion: 'operator.kyma-project.io/v1alpha1',
      kind: 'SyncResource',
      metadata: { name: 'sr', namespace: 'ns', uid: 'u', generation: 1, resourceVersion: '7' },
      spec: {
        kyma: 'k',
        items: items.map((i) => ({ name: i.name, strategy: 'CreateAndSync' as const })),
        ...spec,
      },
      status: { ...status, synced: r.inventory },
    } satisfies SyncResource;
  };
  const report = (name: string, status: HealthStatus) => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    namespace: 'ns',
    name,
    health: { status, message: `${name} is ${status}` },
  });
  const later = new Date(now.getTime() + 1000);

  it('is the status a run finding the same would compute: nothing reported, nothing to write', () => {
    const sr = live([{ ...item('a', 'Current'), reason: 'Created' }, item('b', 'InProgress')]);
    const r = reportedResult(sr, [], later);
    if (typeof r === 'string') throw new Error(r);
    expect(sameStatus(sr.status, computeStatus(r, sr.status, later))).toBe(true);
  });

  it('moves the reported health only: Processing to Ready, each reason kept', () => {
    const sr = live([{ ...item('a', 'Current'), reason: 'Created' }, item('b', 'InProgress')]);
    expect(sr.status.state).toBe('Processing');
    const r = reportedResult(sr, [report('b', 'Current')], later);
    if (typeof r === 'string') throw new Error(r);
    const next = computeStatus(r, sr.status, later);
    expect(next.state).toBe('Ready');
    expect(next.items!.map((i) => [i.name, i.reason, i.health?.status])).toEqual([
      ['a', 'Created', 'Current'],
      ['b', 'Unchanged', 'Current'],
    ]);
    // The next run records a's reason as Unchanged: one write, as after any creation
    // (the benchmark's no-op resync is the second tick for that reason).
    const rerun = computeStatus(run([item('a', 'Current'), item('b', 'Current')]), next, later);
    expect(sameStatus({ ...sr.status, ...next }, rerun)).toBe(false);
    expect(rerun.items!.map((i) => i.reason)).toEqual(['Unchanged', 'Unchanged']);
  });

  it.each([
    [
      'a status of an older generation (a run is due)',
      (sr: SyncResource) => ({ ...sr, metadata: { ...sr.metadata, generation: 2 } }),
    ],
    [
      'a SyncResource being deleted',
      (sr: SyncResource) => ({ ...sr, metadata: { ...sr.metadata, deletionTimestamp: 'now' } }),
    ],
    ['a suspended SyncResource', (sr: SyncResource) => ({ ...sr, spec: { ...sr.spec, suspend: true } })],
    [
      'an item not applied (Resources False)',
      (sr: SyncResource) =>
        live([
          item('b', 'InProgress'),
          { ...item('c'), state: 'Error' as const, reason: 'ApplyFailed' as const },
        ]),
    ],
    [
      'an object no inventory entry names',
      (sr: SyncResource) => ({ ...sr, status: { ...sr.status!, synced: [] } }),
    ],
    [
      'an item with feedback of its own',
      (sr: SyncResource) => ({
        ...sr,
        spec: {
          ...sr.spec,
          items: [{ ...sr.spec.items[0]!, feedback: [{ name: 'r', jsonPath: '.status.replicas' }] }],
        },
      }),
    ],
    [
      'an item with health rules of its own',
      (sr: SyncResource) => ({
        ...sr,
        spec: { ...sr.spec, items: [{ ...sr.spec.items[0]!, health: { current: 'true' } }] },
      }),
    ],
  ])('refuses a report for %s', (_what, change) => {
    const sr = change(live([item('b', 'InProgress')]));
    expect(typeof reportedResult(sr, [report('b', 'Current')], later)).toBe('string');
  });
});
