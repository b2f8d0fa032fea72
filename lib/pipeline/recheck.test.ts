// The recheck schedule: a function of the time since a SyncResource started progressing
// and of the tick's period alone, so that no check needs a write to be remembered.
import { describe, expect, it } from 'vitest';
import { recheckDue } from './resync.ts';

const dueTicks = (tickS: number, untilS: number, phaseS = 0) => {
  const out: number[] = [];
  for (let t = phaseS; t <= untilS; t += tickS) if (recheckDue(t, tickS)) out.push(t);
  return out;
};

describe('recheckDue', () => {
  it('checks at 2, 5, 10 and 20 s, then every 30 s, once each, whatever the tick', () => {
    expect(dueTicks(1, 140)).toEqual([2, 5, 10, 20, 50, 80, 110, 140]);
    // A 5 s tick folds 2 and 5 into one check.
    expect(dueTicks(5, 140)).toEqual([5, 10, 20, 50, 80, 110, 140]);
    // Ticks out of phase with the start: each check falls in exactly one tick's interval.
    expect(dueTicks(5, 140, 3.5)).toEqual([3.5, 8.5, 13.5, 23.5, 53.5, 83.5, 113.5]);
  });
  it('is never due before the object started, and settles into 30 s however long it takes', () => {
    expect(recheckDue(-1, 5)).toBe(false);
    // 20 s + 30 s × 116 = 3,500 s.
    expect(dueTicks(5, 3_620, 3_500)).toEqual([3_500, 3_530, 3_560, 3_590, 3_620]);
  });
});
