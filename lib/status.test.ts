// The status a run's result computes to, with health: Ready only when applied and healthy.
import { describe, expect, it } from 'vitest';
import type { ApplyResult, ItemResult } from './engine/result.ts';
import type { HealthStatus } from './model.ts';
import { computeStatus, isMoving } from './status.ts';

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
