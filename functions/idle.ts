// idle.ts gives memory back once a function has nothing to do. V8 keeps the heap a burst
// of work grew (new space, old-space pages) for as long as the process lives, and Knative
// keeps an idle function's process for minutes: a full collection that reduces the
// footprint (V8's "last resort", what a low-memory notification does), run once when no
// delivery has been in flight for a moment, gives most of that back (`npm run bench --
// --cost`, RSS at rest). It runs at most once per busy period, never while a delivery is
// in flight, and costs a few ms of CPU.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Gc = (opts: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/** IDLE_MS is how long a function has had no delivery in flight before it collects. */
export const IDLE_MS = 2_000;

/** GROWN is how much the heap may grow while idle before it is collected again. */
const GROWN = 2 * 1024 * 1024;

/** IdleCollector counts deliveries in flight and collects once they have stopped for IDLE_MS. */
export class IdleCollector {
  private inFlight = 0;
  private dirty = true;
  private timer: NodeJS.Timeout | undefined;
  private readonly gc: Gc;
  private readonly idleMs: number;
  /** collections counts the collections run (tests). */
  collections = 0;

  private busy: () => boolean = () => false;

  constructor(idleMs = IDLE_MS) {
    this.idleMs = idleMs;
    const exposed = (globalThis as { gc?: Gc }).gc;
    if (exposed) this.gc = exposed;
    else {
      // As Node's documentation of v8.setFlagsFromString shows: the gc function of a new context.
      setFlagsFromString('--expose-gc');
      this.gc = runInNewContext('gc') as Gc;
    }
    this.arm();
  }

  /**
   * alsoWaitFor adds work that is not a delivery: posts a step makes after it answered
   * (fan-outs, resolve-cluster's result), which Knative's channel-based Broker holds until
   * the pipeline behind them has run. Their answers allocate too; collecting before they
   * are done left a few MiB more at rest (RSS at rest, `npm run bench -- --cost`).
   */
  alsoWaitFor(busy: () => boolean): void {
    this.busy = busy;
  }

  /** run wraps one delivery. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    this.inFlight++;
    this.dirty = true;
    clearTimeout(this.timer);
    try {
      return await work();
    } finally {
      if (--this.inFlight === 0) this.arm();
    }
  }

  /**
   * arm collects once no delivery has been in flight and no other work been pending
   * (alsoWaitFor) for idleMs; what runs after that (a timer, a late answer) may allocate,
   * so the heap is looked at again a few times and collected again if that grew it.
   */
  private arm(passes = 3, after = 0): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (this.inFlight > 0) return;
      if (this.busy()) {
        this.dirty = true;
        return this.arm(passes, after);
      }
      const used = process.memoryUsage().heapUsed;
      if (this.dirty || used > after + GROWN) {
        this.dirty = false;
        this.gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
        this.collections++;
      }
      if (passes > 1) this.arm(passes - 1, process.memoryUsage().heapUsed);
    }, this.idleMs).unref();
  }
}
