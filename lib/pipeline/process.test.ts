import { afterEach, describe, expect, it, vi } from 'vitest';
import { Echoes } from './process.ts';

afterEach(() => {
  vi.useRealTimers();
});

describe('Echoes', () => {
  it('takes a watch event for a requested run of the same uid and generation as its echo, for REQUESTED_MS', () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    const e = new Echoes();
    expect(e.wasRequested('ns/a', 'u1', 1)).toBe(false);
    e.requested('ns/a', 'u1', 1);
    expect(e.wasRequested('ns/a', 'u1', 1)).toBe(true);
    expect(e.wasRequested('ns/a', 'u1', 2)).toBe(false); // an edit
    expect(e.wasRequested('ns/a', 'u2', 1)).toBe(false); // recreated under the same name
    expect(e.wasRequested('ns/b', 'u1', 1)).toBe(false);
    vi.advanceTimersByTime(Echoes.REQUESTED_MS);
    expect(e.wasRequested('ns/a', 'u1', 1)).toBe(false);
  });

  it('takes a watch event after a run that left everything Ready as its echo, for READY_MS; a run that did not forgets it', () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    const e = new Echoes();
    e.leftReady('ns/a', 'u1', 3, true);
    expect(e.isReadyEcho('ns/a', 'u1', 3)).toBe(true);
    expect(e.isReadyEcho('ns/a', 'u1', 4)).toBe(false);
    e.leftReady('ns/a', 'u1', 3, false);
    expect(e.isReadyEcho('ns/a', 'u1', 3)).toBe(false);
    e.leftReady('ns/a', 'u1', 3, true);
    vi.advanceTimersByTime(Echoes.READY_MS);
    expect(e.isReadyEcho('ns/a', 'u1', 3)).toBe(false);
  });
});
