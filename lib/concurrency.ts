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

// The gate task an async context runs in, so that its API requests can yield.
const running = new AsyncLocalStorage<{ gate: PriorityGate; urgent: boolean }>();

/**
 * yieldToUrgent is called before each API request: a request of a bulk task waits
 * while urgent tasks wait or run in its (braking) gate, so runs already in progress
 * stop competing with an edit between their requests, not only new runs. Undefined
 * when there is nothing to wait for.
 */
export function yieldToUrgent(): Promise<void> | undefined {
  const task = running.getStore();
  return task && !task.urgent ? task.gate.urgentDone() : undefined;
}

/**
 * PriorityGate admits at most limit tasks at a time; waiting tasks start in order,
 * urgent ones before the rest (controller-runtime's priority queue does the same for a
 * workqueue). Urgent tasks may exceed the limit by headroom (default: braked), so they
 * never wait for a bulk task to finish. While urgent tasks wait or run, the gate brakes
 * the rest: other tasks are only started while fewer than braked are running, and the
 * API requests of those running wait (yieldToUrgent), so an edit does not compete with
 * a full bulk of new SyncResources or a resync for the API servers. braked = limit
 * turns the brake off.
 */
export class PriorityGate {
  private readonly limit: number;
  private readonly headroom: number;
  private readonly braked: number;
  private active = 0;
  private urgentActive = 0;
  private readonly urgent: (() => void)[] = [];
  private readonly normal: (() => void)[] = [];
  private readonly yielding: (() => void)[] = [];

  constructor(limit: number, opts: { braked?: number; headroom?: number } = {}) {
    this.limit = limit;
    this.braked = opts.braked ?? Math.max(1, Math.floor(limit / 8));
    this.headroom = opts.headroom ?? this.braked;
  }

  /** waiting is the number of tasks not started yet. */
  get waiting(): number {
    return this.urgent.length + this.normal.length;
  }

  async run<T>(urgent: boolean, task: () => Promise<T>): Promise<T> {
    await new Promise<void>((start) => {
      (urgent ? this.urgent : this.normal).push(start);
      this.pump();
    });
    try {
      return await running.run({ gate: this, urgent }, task);
    } finally {
      this.active--;
      if (urgent) this.urgentActive--;
      this.pump();
    }
  }

  /**
   * urgentDone resolves once no urgent task waits or runs, or after maxWaitMs (so that
   * bulk work never starves); undefined if none does or the gate does not brake.
   */
  urgentDone(maxWaitMs = 1_000): Promise<void> | undefined {
    if (this.braked >= this.limit || this.urgentActive + this.urgent.length === 0) return undefined;
    return new Promise((resume) => {
      const timer = setTimeout(resume, maxWaitMs);
      this.yielding.push(() => {
        clearTimeout(timer);
        resume();
      });
    });
  }

  private pump(): void {
    while (this.urgent.length > 0 && this.active < this.limit + this.headroom) {
      this.active++;
      this.urgentActive++;
      this.urgent.shift()!();
    }
    const calm = this.urgentActive + this.urgent.length === 0;
    if (calm) for (const resume of this.yielding.splice(0)) resume();
    const cap = calm ? this.limit : this.braked;
    while (this.normal.length > 0 && this.active < cap) {
      this.active++;
      this.normal.shift()!();
    }
  }
}

/** detached runs fn outside any gate task: work shared by several tasks must not yield to urgent work that may wait for it. */
export const detached = <T>(fn: () => T): T => running.exit(fn);
