// ownerOf: each Kyma goes to one member, and losing a member moves only its Kymas.
import { describe, expect, it } from 'vitest';
import { ownerOf } from './shard.ts';

describe('ownerOf', () => {
  const kymas = Array.from({ length: 300 }, (_, i) => `kcp-system/kyma-${i}`);
  it('spreads the Kymas over the members', () => {
    const count = new Map<string, number>();
    for (const k of kymas) {
      const m = ownerOf(k, ['a', 'b', 'c'])!;
      count.set(m, (count.get(m) ?? 0) + 1);
    }
    expect([...count.keys()].sort()).toEqual(['a', 'b', 'c']);
    for (const n of count.values()) expect(n).toBeGreaterThan(60);
  });

  it('moves only the Kymas of a member that left', () => {
    for (const k of kymas) {
      const before = ownerOf(k, ['a', 'b', 'c']);
      const after = ownerOf(k, ['a', 'c']);
      if (before !== 'b') expect(after).toBe(before);
      else expect(['a', 'c']).toContain(after);
    }
    expect(ownerOf('x', [])).toBeUndefined();
  });
});
