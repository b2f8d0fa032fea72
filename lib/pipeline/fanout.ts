// fanout.ts runs the fan-outs (resync tick, Kyma or Secret change), and resolve-cluster's
// post of its result, behind the request that asked for them. Knative's default Broker
// (channel based) holds each post until the whole pipeline behind the posted event has
// run, so a handler that posted its thousands of reconcile requests before answering
// would hold the PingSource or the ApiServerSource adapter for all of them, past its
// timeout, and be redelivered while the first fan-out still runs. The handler does its own work (the list), answers, and
// the posts go on here: one fan-out per key at a time, a request arriving meanwhile
// runs it once more afterwards (coalesced). A fan-out cut short (the process ends, the
// broker stays unreachable after retries) is caught up by the next resync tick.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Priority } from '../concurrency.ts';
import type { FanOut } from './process.ts';
import type { Deps, Logger } from './deps.ts';

const ATTEMPTS = 3;

/** post sends event through the process's bound of posts in flight; those above bulk go first and may exceed it. */
export function post(deps: Deps, event: Parameters<Deps['send']>[0], priority: Priority): Promise<void> {
  return deps.process.posts.run(priority, () => deps.send(event));
}

type Job = () => Promise<number>;

/**
 * background runs job (which posts and returns how many) after the caller answered; a
 * job for a key that is running is coalesced into one more run after it.
 */
export function background(
  deps: Deps,
  log: Logger,
  key: string,
  job: Job,
  opts: { quiet?: boolean } = {},
): void {
  const jobs = deps.process.fanOuts;
  const current = jobs.get(key);
  if (current) {
    current.again = job;
    return;
  }
  const entry: FanOut = { done: Promise.resolve() };
  jobs.set(key, entry);
  entry.done = (async () => {
    let next: Job | undefined = job;
    while (next) {
      entry.again = undefined;
      await runOnce(log, key, next, opts.quiet === true);
      next = entry.again;
    }
    jobs.delete(key);
  })();
}

async function runOnce(log: Logger, key: string, job: Job, quiet: boolean): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      const sent = await job();
      if (!quiet) log.info({ fanout: key, sent }, 'fan-out done');
      return;
    } catch (err) {
      if (attempt >= ATTEMPTS) {
        log.error(
          { fanout: key, err: err instanceof Error ? err.message : String(err) },
          'fan-out given up; the next resync catches up',
        );
        return;
      }
      await sleep(500 * 2 ** (attempt - 1));
    }
  }
}

/** fanoutsDone resolves when every fan-out of deps has finished (tests, shutdown). */
export async function fanoutsDone(deps: Deps): Promise<void> {
  for (;;) {
    const jobs = [...deps.process.fanOuts.values()];
    if (jobs.length === 0) return;
    await Promise.all(jobs.map((j) => j.done));
  }
}
