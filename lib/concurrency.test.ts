import { describe, expect, it } from 'vitest';
import type { ClusterResolved } from './events/contract.ts';
import { mergeRequests } from './pipeline/apply-items.ts';
import { KeyedQueue, PriorityGate, yieldToUrgent } from './concurrency.ts';
import { FreshReads, Memo, TtlMemo } from './memo.ts';

describe('KeyedQueue', () => {
  it('runs one task per key; requests arriving meanwhile share one more run with their values merged', async () => {
    const runs: number[][] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const q = new KeyedQueue<number[], string>(
      async (v) => {
        runs.push(v);
        if (runs.length === 1) await gate;
        return v.join('+');
      },
      (a, b) => [...a, ...b],
    );
    const first = q.run('k', [1]);
    const joined = [q.run('k', [2]), q.run('k', [3]), q.run('other', [9])];
    release();
    expect(await first).toBe('1');
    expect(await Promise.all(joined)).toEqual(['2+3', '2+3', '9']);
    expect(runs).toEqual([[1], [9], [2, 3]]);
    expect(await q.run('k', [4])).toBe('4');
  });
});

describe('mergeRequests', () => {
  const req = (generation: number, trigger: ClusterResolved['trigger'], uid = 'u1'): ClusterResolved => ({
    namespace: 'n',
    name: 's',
    uid,
    generation,
    trigger,
    kyma: 'k',
    secret: { namespace: 'n', name: 'x', uid: 'su', resourceVersion: '1' },
  });

  it('keeps the newest identity and a reconcile request over a watch echo', () => {
    expect(mergeRequests(req(1, 'resync'), req(1, 'watch'))).toMatchObject({
      generation: 1,
      trigger: 'resync',
    });
    expect(mergeRequests(req(2, 'watch'), req(1, 'watch'))).toMatchObject({
      generation: 2,
      trigger: 'watch',
    });
    expect(mergeRequests(req(1, 'kyma'), req(3, 'secret'))).toMatchObject({
      generation: 3,
      trigger: 'secret',
    });
    expect(mergeRequests(req(5, 'watch'), req(1, 'watch', 'u2'))).toMatchObject({ generation: 1, uid: 'u2' });
    // The later fan-out's since wins: its snapshots must be at least that fresh.
    const since = (r: ClusterResolved, at: string) => ({ ...r, since: at });
    expect(
      mergeRequests(
        since(req(1, 'resync'), '2026-01-01T00:00:02.000Z'),
        since(req(1, 'resync'), '2026-01-01T00:00:01.000Z'),
      ).since,
    ).toBe('2026-01-01T00:00:02.000Z');
    expect(mergeRequests(req(1, 'watch'), since(req(1, 'resync'), '2026-01-01T00:00:01.000Z')).since).toBe(
      '2026-01-01T00:00:01.000Z',
    );
    expect(mergeRequests(req(1, 'watch'), req(1, 'watch')).since).toBeUndefined();
    // A merged run reads the SyncResource from etcd, at no version either request saw.
    const at = (r: ClusterResolved, v: string) => ({ ...r, resourceVersion: v });
    expect(mergeRequests(at(req(1, 'watch'), '7'), at(req(2, 'watch'), '9'))).not.toHaveProperty(
      'resourceVersion',
    );
  });

  it('keeps an SKR change conditional on its objects only while every request merged is one', () => {
    const held = (name: string) => ({
      ...req(0, 'skr'),
      held: [{ apiVersion: 'v1', kind: 'ConfigMap', name }],
    });
    expect(mergeRequests(held('a'), held('b')).held?.map((o) => o.name)).toEqual(['a', 'b']);
    expect(mergeRequests(held('a'), held('a')).held?.map((o) => o.name)).toEqual(['a']);
    // Naming more objects than it may, it is not conditional: it runs, reading live state.
    let many: ClusterResolved = held('0');
    for (let i = 1; i <= 64; i++) many = mergeRequests(many, held(String(i)));
    expect(many.held).toBeUndefined();
    expect(mergeRequests(held('a'), req(1, 'watch')).held).toBeUndefined();
    expect(mergeRequests(req(1, 'resync'), held('a')).held).toBeUndefined();
  });
});

describe('PriorityGate', () => {
  it('bounds tasks in progress, gives urgent tasks headroom and starts them first, each class in order', async () => {
    const gate = new PriorityGate(2, { braked: 1 });
    const started: string[] = [];
    let active = 0;
    let peak = 0;
    const releases = new Map<string, () => void>();
    const task = (name: string, urgent: boolean) =>
      gate.run(urgent, async () => {
        started.push(name);
        peak = Math.max(peak, ++active);
        await new Promise<void>((r) => releases.set(name, r));
        active--;
        return name;
      });
    const tick = () => new Promise((r) => setImmediate(r));
    const all = [
      task('b1', false),
      task('b2', false),
      task('b3', false),
      task('b4', false),
      task('u1', true),
      task('u2', true),
    ];
    await tick();
    expect(started).toEqual(['b1', 'b2', 'u1']);
    expect(gate.waiting).toBe(3);
    for (const name of ['b1', 'b2', 'u1', 'u2', 'b3', 'b4']) {
      await tick();
      releases.get(name)!();
    }
    expect(await Promise.all(all)).toEqual(['b1', 'b2', 'b3', 'b4', 'u1', 'u2']);
    expect(started).toEqual(['b1', 'b2', 'u1', 'u2', 'b3', 'b4']);
    expect(peak).toBe(3);
  });
});

describe('PriorityGate brake', () => {
  it('starts other tasks only below the braked limit while an urgent task waits or runs', async () => {
    const gate = new PriorityGate(4, { braked: 1 });
    const releases: (() => void)[] = [];
    const started: string[] = [];
    const task = (name: string, urgent: boolean) =>
      gate.run(
        urgent,
        () =>
          new Promise<void>((r) => {
            started.push(name);
            releases.push(r);
          }),
      );
    const tick = () => new Promise((r) => setImmediate(r));
    const all = ['n1', 'n2', 'n3', 'n4'].map((n) => task(n, false));
    await tick();
    all.push(task('u1', true), task('n5', false), task('n6', false));
    await tick();
    // u1 started above the limit (headroom braked = 1), without waiting for n1..n4.
    expect(started).toEqual(['n1', 'n2', 'n3', 'n4', 'u1']);
    for (const i of [0, 1, 2, 3]) releases[i]!();
    await tick();
    // u1 still runs: no other task starts while 1 (braked) is running.
    expect(started).toEqual(['n1', 'n2', 'n3', 'n4', 'u1']);
    releases[4]!();
    await tick();
    expect(started).toEqual(['n1', 'n2', 'n3', 'n4', 'u1', 'n5', 'n6']);
    for (const r of releases.slice(5)) r();
    await Promise.all(all);
  });
});

describe('yieldToUrgent', () => {
  const tick = () => new Promise((r) => setImmediate(r));

  it('holds the requests of running bulk tasks while an urgent task runs; urgent tasks and shared loads never wait', async () => {
    const gate = new PriorityGate(4, { braked: 1 });
    const memo = new TtlMemo<string>(1_000);
    const steps: string[] = [];
    let finishUrgent!: () => void;
    let startBulk!: () => void;
    const bulkMayGo = new Promise<void>((r) => (startBulk = r));
    const bulk = gate.run(false, async () => {
      await bulkMayGo;
      // A load shared with the urgent task starts here, in the bulk task's context.
      const shared = memo.get('k', async () => {
        await yieldToUrgent();
        steps.push('shared load');
        return 'v';
      });
      await yieldToUrgent();
      steps.push('bulk request');
      return shared;
    });
    await tick();
    const urgent = gate.run(true, async () => {
      expect(yieldToUrgent()).toBeUndefined();
      startBulk();
      await tick();
      const v = await memo.get('k', () => Promise.resolve('other'));
      steps.push(`urgent got ${v}`);
      await new Promise<void>((r) => (finishUrgent = r));
      return v;
    });
    for (let i = 0; i < 5; i++) await tick();
    expect(steps).toEqual(['shared load', 'urgent got v']);
    finishUrgent();
    expect(await urgent).toBe('v');
    expect(await bulk).toBe('v');
    expect(steps).toEqual(['shared load', 'urgent got v', 'bulk request']);
  });

  it('never holds a request outside a gate, in a gate without brake, or longer than its limit', async () => {
    expect(yieldToUrgent()).toBeUndefined();
    const open = new PriorityGate(2, { braked: 2, headroom: Infinity });
    let release!: () => void;
    const urgent = open.run(true, () => new Promise<void>((r) => (release = r)));
    await open.run(false, async () => expect(yieldToUrgent()).toBeUndefined());
    release();
    await urgent;
    const braking = new PriorityGate(2, { braked: 1 });
    let urgentRuns!: () => void;
    const running = new Promise<void>((r) => (urgentRuns = r));
    const held = braking.run(false, async () => {
      await running;
      const t0 = performance.now();
      await braking.urgentDone(30);
      return performance.now() - t0;
    });
    const long = braking.run(
      true,
      () =>
        new Promise<void>((r) => {
          release = r;
          urgentRuns();
        }),
    );
    expect(await held).toBeGreaterThanOrEqual(25);
    release();
    await long;
  });
});

describe('TtlMemo', () => {
  it('shares a load for its TTL, reloads when asked or expired, and keeps only definite failures', async () => {
    let loads = 0;
    const memo = new TtlMemo<number>(50, (err) => (err as Error).message === 'definite');
    const load = () => Promise.resolve(++loads);
    expect(await Promise.all([memo.get('k', load), memo.get('k', load)])).toEqual([1, 1]);
    expect(await memo.get('k', load, true)).toBe(2);
    await new Promise((r) => setTimeout(r, 60));
    expect(await memo.get('k', load)).toBe(3);
    // A value loaded before notBefore is not shared; one loaded at or after it is.
    const later = Date.now() + 1;
    await new Promise((r) => setTimeout(r, 5));
    expect(await memo.get('k', load, false, later)).toBe(4);
    expect(await memo.get('k', load, false, later)).toBe(4);
    const fail = (message: string) => () => Promise.reject(new Error(message));
    await expect(memo.get('t', fail('transient'))).rejects.toThrow('transient');
    expect(await memo.get('t', load)).toBe(5);
    await expect(memo.get('d', fail('definite'))).rejects.toThrow('definite');
    await expect(memo.get('d', load)).rejects.toThrow('definite');
  });

  it('gives a fresh caller a load begun after it asked, shared with the fresh callers meanwhile', async () => {
    const memo = new TtlMemo<number>(1_000);
    let began = 0;
    const pending: (() => void)[] = [];
    const load = () => {
      const n = ++began;
      return new Promise<number>((r) => pending.push(() => r(n)));
    };
    const first = memo.get('k', load, true);
    // Asked while the first load is in flight: not served by it, all by one begun after it.
    const later = [memo.get('k', load, true), memo.get('k', load, true), memo.get('k', load)];
    expect(began).toBe(1);
    pending.shift()!();
    expect(await first).toBe(1);
    await new Promise((r) => setImmediate(r));
    expect(began).toBe(2);
    pending.shift()!();
    expect(await Promise.all(later)).toEqual([2, 2, 2]);
    // Shared for its TTL with who does not ask for fresh.
    expect(await memo.get('k', load)).toBe(2);
    expect(began).toBe(2);
  });
});

describe('Memo', () => {
  it('computes a key once and forgets the least recently used beyond its bound', () => {
    let computed = 0;
    const m = new Memo<string>(2);
    const get = (k: string) => m.get(k, () => `${k}#${++computed}`);
    expect([get('a'), get('b'), get('a')]).toEqual(['a#1', 'b#2', 'a#1']);
    get('c'); // over the bound: b (least recently used) goes
    expect(m.size).toBe(2);
    expect(get('a')).toBe('a#1');
    expect(get('b')).toBe('b#4');
  });
});

describe('FreshReads', () => {
  it('shares a read only among callers that asked before it began: n at once cost two reads', async () => {
    const reads = new FreshReads<number>();
    let began = 0;
    const pending: (() => void)[] = [];
    // Each read resolves when released, to the number of reads begun before it (its "state").
    const read = () => {
      const n = ++began;
      return new Promise<number>((r) => pending.push(() => r(n)));
    };
    const first = reads.get('k', read);
    // Asked while the first read is in flight: these share the next one, begun after them.
    const waiting = [reads.get('k', read), reads.get('k', read), reads.get('k', read)];
    expect(began).toBe(1);
    // Another key reads on its own.
    const other = reads.get('other', read);
    expect(began).toBe(2);
    pending.shift()!();
    expect(await first).toBe(1);
    await new Promise((r) => setTimeout(r, 0));
    expect(began).toBe(3);
    pending.shift()!();
    pending.shift()!();
    expect(await other).toBe(2);
    expect(await Promise.all(waiting)).toEqual([3, 3, 3]);
    // Nothing in flight: the next caller reads afresh, and the key is forgotten after.
    await new Promise((r) => setTimeout(r, 0));
    expect(reads.size).toBe(0);
    const again = reads.get('k', read);
    pending.shift()!();
    expect(await again).toBe(4);
  });

  it('fails those who shared a failed read; the next read starts afresh', async () => {
    const reads = new FreshReads<string>();
    let calls = 0;
    let fail: (err: Error) => void = () => {};
    const failing = () => {
      calls++;
      return new Promise<string>((_, reject) => (fail = reject));
    };
    const first = reads.get('k', failing);
    const joined = reads.get('k', () => {
      calls++;
      return Promise.resolve('fresh');
    });
    fail(new Error('KCP down'));
    await expect(first).rejects.toThrow('KCP down');
    expect(await joined).toBe('fresh');
    expect(calls).toBe(2);
  });
});
