import { describe, expect, it } from 'vitest';
import type { ClusterResolved } from './events/contract.ts';
import { mergeRequests } from './pipeline/apply-items.ts';
import { runPriority } from './pipeline/requests.ts';
import { KeyedQueue, Priority, PriorityGate, yieldToUrgent } from './concurrency.ts';
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

  it('runs at the higher priority of the two: an edit over a deletion over bulk work', () => {
    const edit = { ...req(2, 'watch'), urgent: true };
    const deletion = { ...req(3, 'watch'), urgent: true, deleting: true };
    const bulk = req(1, 'watch');
    const priority = (r: ClusterResolved) => runPriority(r.urgent, r.deleting);
    expect(priority(mergeRequests(bulk, bulk))).toBe(Priority.bulk);
    expect(mergeRequests(bulk, bulk)).not.toHaveProperty('urgent');
    expect(priority(mergeRequests(bulk, deletion))).toBe(Priority.deletion);
    expect(priority(mergeRequests(deletion, bulk))).toBe(Priority.deletion);
    // The newest identity is the deletion's; the run is the edit's priority.
    expect(mergeRequests(edit, deletion)).toMatchObject({ generation: 3, urgent: true });
    expect(mergeRequests(edit, deletion)).not.toHaveProperty('deleting');
    expect(priority(mergeRequests(deletion, edit))).toBe(Priority.edit);
  });
});

describe('PriorityGate', () => {
  const tick = () => new Promise((r) => setImmediate(r));

  it('bounds tasks in progress; each priority above bulk exceeds the limit by one more headroom and starts first, each in order', async () => {
    const gate = new PriorityGate(2, { braked: 1 });
    const started: string[] = [];
    let active = 0;
    let peak = 0;
    const releases = new Map<string, () => void>();
    const task = (name: string, priority: Priority) =>
      gate.run(priority, async () => {
        started.push(name);
        peak = Math.max(peak, ++active);
        await new Promise<void>((r) => releases.set(name, r));
        active--;
        return name;
      });
    const all = [
      task('b1', Priority.bulk),
      task('b2', Priority.bulk),
      task('b3', Priority.bulk),
      task('b4', Priority.bulk),
      task('d1', Priority.deletion),
      task('d2', Priority.deletion),
      task('e1', Priority.edit),
      task('e2', Priority.edit),
    ];
    await tick();
    // Bulk to the limit (2), a deletion one above it, an edit one above that.
    expect(started).toEqual(['b1', 'b2', 'd1', 'e1']);
    expect(gate.waiting).toBe(4);
    for (const name of ['b1', 'e1', 'e2', 'b2', 'd1', 'd2', 'b3', 'b4']) {
      await tick();
      releases.get(name)!();
    }
    expect(await Promise.all(all)).toEqual(['b1', 'b2', 'b3', 'b4', 'd1', 'd2', 'e1', 'e2']);
    // e2 took b1's place; d2 waited for the edits, b3 and b4 for the deletions.
    expect(started).toEqual(['b1', 'b2', 'd1', 'e1', 'e2', 'd2', 'b3', 'b4']);
    expect(peak).toBe(4);
  });

  it('brakes lower priorities while a higher one waits or runs: an edit passes a mass deletion, which passes bulk', async () => {
    const gate = new PriorityGate(4, { braked: 1 });
    const releases = new Map<string, () => void>();
    const started: string[] = [];
    const task = (name: string, priority: Priority) =>
      gate.run(
        priority,
        () =>
          new Promise<void>((r) => {
            started.push(name);
            releases.set(name, r);
          }),
      );
    const all = ['n1', 'n2', 'n3', 'n4'].map((n) => task(n, Priority.bulk));
    await tick();
    all.push(task('d1', Priority.deletion), task('e1', Priority.edit));
    await tick();
    // Both started above the limit, without waiting for n1..n4.
    expect(started).toEqual(['n1', 'n2', 'n3', 'n4', 'd1', 'e1']);
    all.push(task('d2', Priority.deletion), task('n5', Priority.bulk), task('n6', Priority.bulk));
    for (const n of ['n1', 'n2', 'n3', 'n4']) releases.get(n)!();
    await tick();
    // e1 runs: no deletion or bulk task starts while 2 (above braked = 1) are running.
    expect(started).toEqual(['n1', 'n2', 'n3', 'n4', 'd1', 'e1']);
    releases.get('e1')!();
    await tick();
    // The deletions run: d2 starts, bulk still waits.
    expect(started).toEqual(['n1', 'n2', 'n3', 'n4', 'd1', 'e1', 'd2']);
    releases.get('d1')!();
    releases.get('d2')!();
    await tick();
    expect(started).toEqual(['n1', 'n2', 'n3', 'n4', 'd1', 'e1', 'd2', 'n5', 'n6']);
    releases.get('n5')!();
    releases.get('n6')!();
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
    const bulk = gate.run(Priority.bulk, async () => {
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
    const urgent = gate.run(Priority.edit, async () => {
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

  it("holds a deletion's requests while an edit runs, and bulk requests until the deletion is done too", async () => {
    const gate = new PriorityGate(4, { braked: 1 });
    const steps: string[] = [];
    let go!: () => void;
    const mayGo = new Promise<void>((r) => (go = r));
    let editDone!: () => void;
    let deletionDone!: () => void;
    const bulk = gate.run(Priority.bulk, async () => {
      await mayGo;
      await yieldToUrgent();
      steps.push('bulk request');
    });
    const deletion = gate.run(Priority.deletion, async () => {
      await mayGo;
      await yieldToUrgent();
      steps.push('deletion request');
      await new Promise<void>((r) => (deletionDone = r));
    });
    await tick();
    const edit = gate.run(Priority.edit, async () => {
      expect(yieldToUrgent()).toBeUndefined();
      go();
      await new Promise<void>((r) => (editDone = r));
      steps.push('edit done');
    });
    for (let i = 0; i < 5; i++) await tick();
    expect(steps).toEqual([]);
    editDone();
    await edit;
    for (let i = 0; i < 5; i++) await tick();
    expect(steps).toEqual(['edit done', 'deletion request']);
    deletionDone();
    await Promise.all([deletion, bulk]);
    expect(steps).toEqual(['edit done', 'deletion request', 'bulk request']);
  });

  it('never holds a request outside a gate, in a gate without brake, or longer than its limit', async () => {
    expect(yieldToUrgent()).toBeUndefined();
    const open = new PriorityGate(2, { braked: 2, headroom: Infinity });
    let release!: () => void;
    const urgent = open.run(Priority.edit, () => new Promise<void>((r) => (release = r)));
    await open.run(Priority.bulk, async () => expect(yieldToUrgent()).toBeUndefined());
    release();
    await urgent;
    const braking = new PriorityGate(2, { braked: 1 });
    let urgentRuns!: () => void;
    const running = new Promise<void>((r) => (urgentRuns = r));
    const held = braking.run(Priority.bulk, async () => {
      await running;
      const t0 = performance.now();
      await braking.aboveDone(Priority.bulk, 30);
      return performance.now() - t0;
    });
    const long = braking.run(
      Priority.deletion,
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
