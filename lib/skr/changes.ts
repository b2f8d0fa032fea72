// changes.ts is the source of SyncResource changes: from the SyncResources the source
// already lists and watches in the KCP, it posts one syncresource.changed event when a
// SyncResource needs a run (new and not settled, its spec edited, its deletion begun)
// and none for the product's own writes (claim, inventory, status), which change neither
// its generation nor its deletion. So the echo of a write costs no delivery and no KCP
// request, and an edit is posted ahead of bulk creations: a run's worth of posts may wait,
// a change never does.
import { setTimeout as sleep } from 'node:timers/promises';
import type { CloudEvent } from 'cloudevents';
import { PriorityGate } from '../concurrency.ts';
import { aheadOf, EventTypes, makeEvent, type SyncResourceChanged } from '../events/contract.ts';
import { RECONCILE_ANNOTATION, settled, type SyncResource } from '../model.ts';
import type { Logger } from '../pipeline/deps.ts';
import { runPriority } from '../pipeline/requests.ts';

/** Seen is what the source keeps of a SyncResource to tell a change from an echo. */
export interface Seen {
  uid: string;
  generation: number;
  deleting: boolean;
  /** kyma is "<namespace>/<kyma>": which replica posts for it. */
  kyma: string;
  /** settled: nothing to do until it changes (model.ts). */
  settled: boolean;
  /** reconciled: a status was written for some generation (a run now is a change, ahead of bulk). */
  reconciled: boolean;
  /** requested is RECONCILE_ANNOTATION's value: a new one asks for a run. */
  requested?: string;
  /** version is its resourceVersion as last listed or watched (posted: the run reads at no older one). */
  version?: string;
}

/** seenOf is what changed() compares; home is where its Kyma is (policy/tenancy.ts kymaHome). */
export const seenOf = (sr: SyncResource, home: string = sr.metadata.namespace ?? ''): Seen => ({
  uid: sr.metadata.uid ?? '',
  generation: sr.metadata.generation ?? 0,
  deleting: sr.metadata.deletionTimestamp !== undefined,
  kyma: `${home}/${sr.spec?.kyma ?? ''}`,
  settled: settled(sr),
  reconciled: sr.status?.observedGeneration !== undefined,
  ...(sr.metadata.annotations?.[RECONCILE_ANNOTATION] !== undefined
    ? { requested: sr.metadata.annotations[RECONCILE_ANNOTATION] }
    : {}),
  ...(sr.metadata.resourceVersion ? { version: sr.metadata.resourceVersion } : {}),
});

/**
 * changed decides whether sr, as listed or watched, needs a run, given what was seen of it
 * before (undefined: nothing, or another object of that name): 'new' for one never
 * reconciled (bulk), 'change' for an edit or a deletion of one that was, or a new value of
 * RECONCILE_ANNOTATION (ahead of bulk), undefined for an update that changes neither its generation nor its deletion (the
 * product's own writes, a label) or a SyncResource first seen settled.
 */
export function changed(
  before: Seen | undefined,
  sr: SyncResource,
  home?: string,
): 'new' | 'change' | 'request' | undefined {
  const now = seenOf(sr, home);
  if (!before || before.uid !== now.uid) {
    if (now.settled) return undefined;
    return now.reconciled || now.deleting ? 'change' : 'new';
  }
  if (now.deleting && !before.deleting) return 'change';
  if (now.generation !== before.generation) return 'change';
  if (now.requested !== undefined && now.requested !== before.requested) return 'request';
  return undefined;
}

/**
 * POSTS bounds the posts in flight: the channel-based Broker holds each until the run
 * behind it is done, so posts go several at a time, and a change passes the bound.
 */
const POSTS = 16;

/** LATELY is how many of the last posts /watches lists (the order the source took them in). */
const LATELY = 100;

/**
 * withRetries retries a post with exponential back-off (50 ms doubling, at most 5 s apart,
 * about 30 s in all): longer than the ApiServerSource adapter's 1.5 s, since a change
 * given up here waits for the next resync tick.
 */
export async function withRetries(post: () => Promise<void>, base = 50): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await post();
    } catch (err) {
      if (attempt >= 10) throw err;
      await sleep(Math.min(base * 2 ** attempt, base * 100));
    }
  }
}

/**
 * Changes posts syncresource.changed events for the SyncResources of the Kymas this replica
 * owns (shard.ts). A Kyma it comes to own (its start, a takeover) has its unsettled
 * SyncResources posted then: what changed while no replica owned it is not lost.
 */
export class Changes {
  private readonly seen = new Map<string, Seen>();
  private readonly posts = new PriorityGate(POSTS, { braked: POSTS, headroom: Infinity });
  private owns: (kyma: string) => boolean = () => false;
  private readonly emit: (event: CloudEvent<unknown>) => Promise<void>;
  private readonly log: Logger;
  /** counters for metrics and tests; lately: the last SyncResources whose posts started, oldest first (at most LATELY). */
  readonly stats = { posted: 0, echoes: 0, lately: [] as string[] };

  /** home says where the Kyma of a SyncResource of a namespace is (policy/tenancy.ts kymaHome). */
  private readonly home: (namespace: string) => string;

  constructor(
    emit: (event: CloudEvent<unknown>) => Promise<void>,
    log: Logger,
    home: (namespace: string) => string = (ns) => ns,
  ) {
    this.emit = emit;
    this.log = log;
    this.home = home;
  }

  /** shard sets which Kymas ("<namespace>/<kyma>") this replica posts for; those it did not own before have their unsettled SyncResources posted. */
  shard(owns: (kyma: string) => boolean): void {
    const before = this.owns;
    this.owns = owns;
    for (const [key, s] of this.seen)
      if (!s.settled && owns(s.kyma) && !before(s.kyma)) this.offer(key, s, s.reconciled || s.deleting);
  }

  /** put takes a SyncResource as listed or watched. */
  put(sr: SyncResource): void {
    const key = `${sr.metadata.namespace}/${sr.metadata.name}`;
    const home = this.home(sr.metadata.namespace ?? '');
    const verdict = changed(this.seen.get(key), sr, home);
    const now = seenOf(sr, home);
    this.seen.set(key, now);
    if (!verdict) this.stats.echoes++;
    else
      this.offer(key, now, verdict !== 'new', {
        ...(verdict === 'request' ? { requested: true } : {}),
        ...aheadOf(sr.status?.synced),
      });
  }

  /** drop forgets a SyncResource that is gone. */
  drop(key: string): void {
    this.seen.delete(key);
  }

  /**
   * rerun posts every SyncResource of namespace: the policy that governs it was created,
   * changed or deleted, so a team waiting for its policy sees its SyncResources proceed (or
   * told why not) without touching them. A fan-out, as a Kyma's or Secret's change is: bulk
   * work, behind edits and deletions (a namespace of thousands must not hold them up).
   */
  rerun(namespace: string): void {
    for (const [key, s] of this.seen)
      if (key.startsWith(`${namespace}/`)) this.offer(key, s, false, { policy: true });
  }

  /** offer posts a change of key; why says, for a run at a generation already run, what asked for it, and what to read ahead. */
  private offer(
    key: string,
    s: Seen,
    change: boolean,
    why: Pick<SyncResourceChanged, 'policy' | 'requested' | 'ahead'> = {},
  ): void {
    if (!this.owns(s.kyma)) return;
    const [namespace, name] = key.split('/') as [string, string];
    const data: SyncResourceChanged = {
      namespace,
      name,
      uid: s.uid,
      generation: s.generation,
      kyma: s.kyma.slice(s.kyma.indexOf('/') + 1),
      ...(s.version ? { resourceVersion: s.version } : {}),
      ...(change ? { change: true } : {}),
      ...(s.deleting ? { deleting: true } : {}),
      ...why,
    };
    const event = makeEvent('skr-source', EventTypes.changed, data);
    void this.posts
      .run(runPriority(change, s.deleting), async () => {
        // A post that waited while the Kyma went to another replica is that replica's: it
        // posts what is not settled when it takes the Kyma over (shard), this one no more.
        if (!this.owns(s.kyma)) return false;
        this.stats.lately.push(key);
        if (this.stats.lately.length > LATELY) this.stats.lately.shift();
        await withRetries(() => this.emit(event));
        return true;
      })
      .then(
        (sent) => void (sent && this.stats.posted++),
        (err: unknown) =>
          // The resync tick catches up a change whose post failed.
          this.log.warn(
            { syncResource: key, error: err instanceof Error ? err.message : String(err) },
            'SyncResource change not posted',
          ),
      );
  }
}
