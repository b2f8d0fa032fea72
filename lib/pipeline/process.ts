// process.ts is what one function process keeps between deliveries, in one object built
// at setup (Deps.process): the echo filter, the gates that order its work, the queue of
// runs per SyncResource, the holders reads shared by runs at once and the fan-outs in
// progress. Nothing else in the pipeline keeps state across deliveries; a new process (a
// cold start, another replica) starts empty, and what it does not know costs a read,
// never a wrong decision.
import { KeyedQueue, PriorityGate } from '../concurrency.ts';
import { FreshReads } from '../memo.ts';
import type { HolderView } from '../model.ts';

/**
 * Echoes recognizes the watch events of the product's own writes, by SyncResource
 * (namespace/name), uid and generation, without a KCP request:
 * - requested: resolve-cluster asked for a run of this generation; until its status is
 *   written, a watch event for the same generation is the echo of that run's writes
 *   (finalizer, inventory);
 * - ready: apply-items left the SyncResource Ready for this generation; a watch event
 *   for it soon after is the echo of that run's writes.
 */
export class Echoes {
  /** REQUESTED_MS is how long a requested run explains watch events (the run and its status step). */
  static readonly REQUESTED_MS = 10_000;
  /** READY_MS is how long a run that left everything Ready explains watch events. */
  static readonly READY_MS = 2_000;
  private readonly requests = new Map<string, Mark>();
  private readonly ready = new Map<string, Mark>();

  /** requested records that a run of uid at generation was requested now. */
  requested(key: string, uid: string, generation: number): void {
    remember(this.requests, key, { uid, generation, at: performance.now() });
  }

  /** wasRequested tells whether a run of uid at generation was requested within REQUESTED_MS. */
  wasRequested(key: string, uid: string | undefined, generation: number | undefined): boolean {
    return within(this.requests.get(key), uid, generation, Echoes.REQUESTED_MS);
  }

  /** leftReady records (ready) or forgets (not ready) a run that left uid at generation Ready. */
  leftReady(key: string, uid: string, generation: number, ready: boolean): void {
    if (ready) remember(this.ready, key, { uid, generation, at: performance.now() });
    else this.ready.delete(key);
  }

  /** isReadyEcho tells whether a run of uid at generation left it Ready within READY_MS. */
  isReadyEcho(key: string, uid: string, generation: number): boolean {
    return within(this.ready.get(key), uid, generation, Echoes.READY_MS);
  }
}

interface Mark {
  uid: string;
  generation: number;
  at: number;
}

/** MAX_MARKS bounds each record: forgetting only costs a run that an echo would have saved. */
const MAX_MARKS = 50_000;

function remember(map: Map<string, Mark>, key: string, mark: Mark): void {
  if (map.size >= MAX_MARKS) map.clear();
  map.set(key, mark);
}

function within(
  m: Mark | undefined,
  uid: string | undefined,
  generation: number | undefined,
  ms: number,
): boolean {
  return m !== undefined && m.uid === uid && m.generation === generation && performance.now() - m.at < ms;
}

/** FanOut is one fan-out in progress, and the one more run asked for meanwhile. */
export interface FanOut {
  again?: () => Promise<number>;
  done: Promise<void>;
}

/**
 * RESOLUTIONS bounds the resolutions that come in bulk (creations, resync and rotation
 * fan-out) started at a time; changes of existing SyncResources start at once. Twelve
 * keep apply-items fed under load; a burst then waits here, where an edit passes it,
 * instead of at the KCP, where an edit's read would compete with all of it at once.
 */
const RESOLUTIONS = 12;

/**
 * POSTS bounds the posts of one process held by the broker at once: each is a request in
 * flight at the next step until its run is done, and a bulk create of thousands would
 * otherwise put thousands in flight there at once (memory). Urgent posts (an edit) pass
 * the bound.
 */
const POSTS = 32;

/** ProcessState is one function process's state between deliveries. */
export class ProcessState {
  readonly echoes = new Echoes();
  /** runs bounds the runs in progress (apply-items) or status writes (write-status); urgent ones first. */
  readonly runs: PriorityGate;
  /** resolutions bounds resolve-cluster's bulk resolutions; changes start at once. */
  readonly resolutions = new PriorityGate(RESOLUTIONS, { braked: RESOLUTIONS, headroom: Infinity });
  /** posts bounds this process's posts held by the broker. */
  readonly posts = new PriorityGate(POSTS, { braked: POSTS, headroom: Infinity });
  /** holders shares the holders reads of runs in progress at once (apply-items; engine/run.ts). */
  readonly holders = new FreshReads<HolderView[]>();
  /** fanOuts are the fan-outs in progress, by key (fanout.ts). */
  readonly fanOuts = new Map<string, FanOut>();
  private runQueue: unknown;

  constructor(opts: { reconcileConcurrency: number }) {
    this.runs = new PriorityGate(opts.reconcileConcurrency);
  }

  /** queue is the process's one queue of runs per SyncResource (apply-items), made on first use. */
  queue<V, T>(make: () => KeyedQueue<V, T>): KeyedQueue<V, T> {
    return (this.runQueue ??= make()) as KeyedQueue<V, T>;
  }
}
