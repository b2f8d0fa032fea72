// API server messages as an item's status quotes them.
import { describe, expect, it } from 'vitest';
import { stableMessage } from './items.ts';

describe('stableMessage', () => {
  it('sorts an "errors:" list the API server builds from a Go map (its order changes per request), and leaves the rest', () => {
    const a = 'failed to create typed patch object (ns/x; apps/v1, Kind=Deployment): errors:\n  .metadata.labels.l: expected string\n  .metadata.annotations.a: expected string';
    const b = 'failed to create typed patch object (ns/x; apps/v1, Kind=Deployment): errors:\n  .metadata.annotations.a: expected string\n  .metadata.labels.l: expected string';
    expect(stableMessage(a)).toBe(b);
    expect(stableMessage(b)).toBe(b);
    expect(stableMessage(`${a}\nnext line`)).toBe(`${b}\nnext line`);
    expect(stableMessage('field is immutable')).toBe('field is immutable');
  });
});
