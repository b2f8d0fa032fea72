// concurrency.ts: how work is run side by side: bounded maps, a per-key queue (a
// controller's workqueue), and the priority gate that lets an edit overtake bulk work,
// with the hook (yieldToUrgent) that the pipeline gives its API clients.
import { AsyncLocalStorage } from 'node:async_hooks';

/** mapLimit maps items through fn with at most limit calls in flight, keeping order. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/**
 * KeyedQueue runs at most one task per key at a time (a controller's workqueue
 * semantics): a request that arrives while its key runs waits for one more run, which
 * every request arriving meanwhile shares (their values merged), so bursts of events
 * for one object collapse.
 */
export class KeyedQueue<V, T> {
  private readonly slots = new Map<
    string,
    { current: Promise<T>; next?: { value: V; result: Promise<T> } }
  >();
  private readonly work: (value: V) => Promise<T>;
  private readonly merge: (queued: V, incoming: V) => V;

  constructor(work: (value: V) => Promise<T>, merge: (queued: V, incoming: V) => V) {
    this.work = work;
    this.merge = merge;
  }

  /** run works on value for key now, or joins the run queued behind the current one. */
  run(key: string, value: V): Promise<T> {
    const slot = this.slots.get(key);
    if (!slot) return this.start(key, value);
    if (slot.next) {
      slot.next.value = this.merge(slot.next.value, value);
      return slot.next.result;
    }
    const next = { value } as { value: V; result: Promise<T> };
    const settle = () => undefined;
    next.result = slot.current.then(settle, settle).then(() => this.start(key, next.value));
    slot.next = next;
    return next.result;
  }

  private start(key: string, value: V): Promise<T> {
    const current = this.work(value).finally(() => {
      const slot = this.slots.get(key);
      if (slot && slot.current === current && !slot.next) this.slots.delete(key);
    });
    this.slots.set(key, { current });
    return current;
  }
}

/**
 * Priority orders a gate's work: an edit (of a SyncResource or of its objects in the SKR, or
 * a run asked for: someone waits for it) before a deletion, and a deletion before bulk work
 * (creations, resyncs, fan-outs). A mass deletion is a burst of deletions; an edit made
 * meanwhile passes it, as it passes a bulk create.
 */
export const Priority = { bulk: 0, deletion: 1, edit: 2 } as const;
export type Priority = (typeof Priority)[keyof typeof Priority];
const LEVELS = 3;

// The gate task an async context runs in, so that its API requests can yield.
const running = new AsyncLocalStorage<{ gate: PriorityGate; priority: Priority }>();

/**
 * yieldToUrgent is called before each API request: a request of a task waits while tasks
 * of a higher priority wait or run in its (braking) gate, so runs already in progress stop
 * competing with an edit between their requests, not only new runs. Undefined when there
 * is nothing to wait for.
 */
export function yieldToUrgent(): Promise<void> | undefined {
  const task = running.getStore();
  return task ? task.gate.aboveDone(task.priority) : undefined;
}

/**
 * PriorityGate admits at most limit tasks at a time; waiting tasks start in order, those
 * of a higher priority first (controller-runtime's priority queue does the same for a
 * workqueue). Each priority above bulk may exceed the limit by one more headroom (default:
 * braked), so an edit never waits for a deletion or bulk task to finish, nor a deletion
 * for a bulk task. While tasks of a higher priority wait or run, the gate brakes the rest:
 * they are only started while fewer than braked are running, and the API requests of
 * those running wait (yieldToUrgent), so an edit does not compete with a full bulk of new
 * SyncResources, a resync or a mass deletion for the API servers. braked = limit turns
 * the brake off.
 */
export class PriorityGate {
  private readonly limit: number;
  private readonly headroom: number;
  private readonly braked: number;
  private active = 0;
  /** By priority: the tasks running, those waiting to start, and those yielding (aboveDone). */
  private readonly activeAt: number[] = Array(LEVELS).fill(0);
  private readonly queues: (() => void)[][] = Array.from({ length: LEVELS }, () => []);
  private readonly yielding: (() => void)[][] = Array.from({ length: LEVELS }, () => []);

  constructor(limit: number, opts: { braked?: number; headroom?: number } = {}) {
    this.limit = limit;
    this.braked = opts.braked ?? Math.max(1, Math.floor(limit / 8));
    this.headroom = opts.headroom ?? this.braked;
  }

  /** waiting is the number of tasks not started yet. */
  get waiting(): number {
    return this.queues.reduce((n, q) => n + q.length, 0);
  }

  async run<T>(priority: Priority, task: () => Promise<T>): Promise<T> {
    await new Promise<void>((start) => {
      this.queues[priority]!.push(start);
      this.pump();
    });
    try {
      return await running.run({ gate: this, priority }, task);
    } finally {
      this.active--;
      this.activeAt[priority]!--;
      this.pump();
    }
  }

  /**
   * aboveDone resolves once no task of a higher priority than priority waits or runs, or
   * after maxWaitMs (so that lower work never starves); undefined if none does or the gate
   * does not brake.
   */
  aboveDone(priority: Priority, maxWaitMs = 1_000): Promise<void> | undefined {
    if (this.braked >= this.limit || this.calm(priority)) return undefined;
    return new Promise((resume) => {
      const timer = setTimeout(resume, maxWaitMs);
      this.yielding[priority]!.push(() => {
        clearTimeout(timer);
        resume();
      });
    });
  }

  /** calm tells whether no task of a higher priority than priority waits or runs. */
  private calm(priority: number): boolean {
    for (let p = priority + 1; p < LEVELS; p++)
      if (this.activeAt[p]! + this.queues[p]!.length > 0) return false;
    return true;
  }

  private pump(): void {
    for (let p = LEVELS - 1; p >= 0; p--) {
      const calm = this.calm(p);
      if (calm) for (const resume of this.yielding[p]!.splice(0)) resume();
      const room = p === Priority.bulk ? this.limit : this.limit + this.headroom * p;
      const cap = calm ? room : Math.min(room, this.braked);
      const queue = this.queues[p]!;
      while (queue.length > 0 && this.active < cap) {
        this.active++;
        this.activeAt[p]!++;
        queue.shift()!();
      }
    }
  }
}

/** detached runs fn outside any gate task: work shared by several tasks must not yield to urgent work that may wait for it. */
export const detached = <T>(fn: () => T): T => running.exit(fn);
