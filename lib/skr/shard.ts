// shard.ts shares the Kymas among the SKR source's replicas: each replica holds a Lease of
// its own in the control-plane namespace, renewed every third of its duration; the
// replicas whose Lease is current are the members, and each Kyma goes to one member by
// rendezvous hashing (adding or losing a replica moves only that replica's share). A
// replica that dies stops renewing: once its Lease has expired, the others take its Kymas.
// A replica that joins (or comes back after its Lease expired) takes its share only once
// every other member's Lease lists it among the members that member sees: by then that
// member has given the share up, so no Kyma has two replicas posting for it, and what
// changed in between is posted by the new owner as it takes the Kyma (changes.ts).
// Each Lease says how many Kymas its replica watches (kubectl get leases -l ...).
import { createHash } from 'node:crypto';
import type { KubeClient } from '../kube/client.ts';
import { KubeApiError } from '../kube/errors.ts';
import type { Logger } from '../pipeline/deps.ts';

/** MEMBER_LABEL marks the SKR source's Leases. */
export const MEMBER_LABEL = 'kcp-sync.kyma-project.io/skr-source';
/** WATCHING_ANNOTATION on a Lease says what its replica watches. */
export const WATCHING_ANNOTATION = 'kcp-sync.kyma-project.io/watching';
/** MEMBERS_ANNOTATION on a Lease lists the members its replica sees (comma-separated). */
export const MEMBERS_ANNOTATION = 'kcp-sync.kyma-project.io/members';

type Lease = {
  metadata: { name: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; renewTime?: string };
};

/** ownerOf picks the member that watches kyma: the highest hash of member and Kyma. */
export function ownerOf(kyma: string, members: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestHash = '';
  for (const m of members) {
    const h = createHash('sha256').update(`${m}\n${kyma}`).digest('hex');
    if (best === undefined || h > bestHash) {
      best = m;
      bestHash = h;
    }
  }
  return best;
}

/** microTime renders a Lease time (six fractional digits). */
const microTime = (ms: number): string => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

/** MembershipOptions name the replica and where its Lease lives. */
export interface MembershipOptions {
  kcp: KubeClient;
  namespace: string;
  identity: string;
  leaseSeconds?: number;
  /** onChange is told the members seen and whether this replica takes its share of them yet. */
  onChange(members: string[], active: boolean): void;
  /** watching says what to write in the Lease's annotation. */
  watching(): string;
  log: Logger;
}

/** Membership keeps this replica's Lease and follows the others'. */
export class Membership {
  private readonly opts: MembershipOptions;
  private readonly path: string;
  private members: string[] = [];
  /** active: every other member has seen this one (it takes its share). */
  private active = false;
  /** renewed is when this replica's Lease was last written (0: never). */
  private renewed = 0;
  private timer?: NodeJS.Timeout;
  private stopped = false;

  constructor(opts: MembershipOptions) {
    this.opts = opts;
    this.path = `/apis/coordination.k8s.io/v1/namespaces/${opts.namespace}/leases`;
  }

  private get seconds(): number {
    return this.opts.leaseSeconds ?? 10;
  }

  private get name(): string {
    return `sync-skr-source-${this.opts.identity}`.slice(0, 253).replace(/[^a-z0-9.-]/g, '-');
  }

  /** start renews once (so the replica is a member before it watches), then keeps renewing. */
  async start(): Promise<void> {
    await this.tick();
    const loop = async () => {
      if (this.stopped) return;
      await this.tick().catch((err: unknown) =>
        this.opts.log.warn({ error: String(err) }, 'lease renewal failed'),
      );
      if (!this.stopped) this.timer = setTimeout(() => void loop(), (this.seconds * 1000) / 3);
    };
    this.timer = setTimeout(() => void loop(), (this.seconds * 1000) / 3);
  }

  /** current lists the members as last seen, and whether this replica takes its share. */
  current(): { members: string[]; active: boolean } {
    return { members: this.members, active: this.active };
  }

  /** renew writes this replica's Lease: a server-side apply creates or renews it in one request. */
  private async renew(now: number): Promise<void> {
    const body = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: this.name,
        labels: { [MEMBER_LABEL]: 'member' },
        annotations: {
          [WATCHING_ANNOTATION]: this.opts.watching(),
          [MEMBERS_ANNOTATION]: this.members.join(','),
        },
      },
      spec: {
        holderIdentity: this.opts.identity,
        leaseDurationSeconds: this.seconds,
        renewTime: microTime(now),
      },
    };
    await this.opts.kcp.call('PATCH', `${this.path}/${this.name}`, {
      body,
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: 'kcp-sync-skr-source', force: true },
    });
    this.renewed = now;
  }

  private async tick(): Promise<void> {
    const ttl = this.seconds * 1000;
    // A replica whose own Lease expired (a pause, a partition) was given up by the others:
    // it joins again, as a new replica does. Checked after each request, which may have
    // waited (or failed) past the Lease's end.
    const lapsed = (since: number) => {
      if (!this.active || Date.now() - since <= ttl) return;
      this.active = false;
      this.opts.log.warn({ members: this.members }, 'SKR source Lease expired: joining again');
      this.opts.onChange(this.members, false);
    };
    const last = this.renewed;
    lapsed(last);
    await this.renew(Date.now());
    lapsed(last);
    const now = Date.now();
    const list = await this.opts.kcp.call<{ items: Lease[] }>('GET', this.path, {
      query: { labelSelector: `${MEMBER_LABEL}=member` },
    });
    const live: string[] = [];
    let seenByAll = true;
    for (const l of list.items) {
      const renewed = Date.parse(l.spec?.renewTime ?? '');
      const ttlOf = (l.spec?.leaseDurationSeconds ?? this.seconds) * 1000;
      const who = l.spec?.holderIdentity;
      if (!who || Number.isNaN(renewed)) continue;
      if (who === this.opts.identity) live.push(who);
      else if (now - renewed <= ttlOf) {
        live.push(who);
        // A Lease of a version that lists no members counts as having seen this one.
        const seen = l.metadata.annotations?.[MEMBERS_ANNOTATION];
        if (seen !== undefined && !seen.split(',').includes(this.opts.identity)) seenByAll = false;
      } else if (now - renewed > 6 * ttlOf) {
        // Long gone: removed, guarded by the version read (a replica back meanwhile keeps its own).
        await this.opts.kcp
          .call('DELETE', `${this.path}/${l.metadata.name}`, {
            body: {
              kind: 'DeleteOptions',
              apiVersion: 'v1',
              preconditions: { resourceVersion: l.metadata.resourceVersion },
            },
          })
          .catch(() => {});
      }
    }
    lapsed(this.renewed);
    live.sort();
    const membersChanged = live.join(',') !== this.members.join(',');
    // Once active, a replica stays so while it renews: the members that join wait for it.
    const active = this.active || seenByAll;
    if (!membersChanged && active === this.active) return;
    this.members = live;
    this.active = active;
    this.opts.log.info({ members: live, active }, 'SKR source members');
    // The share changes before the Lease says so: a replica waiting for this one to see it
    // takes its share only after this one gave it up.
    this.opts.onChange(live, active);
    if (membersChanged) await this.renew(Date.now());
  }

  /** stop deletes this replica's Lease, so the others take its Kymas at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.opts.kcp.call('DELETE', `${this.path}/${this.name}`).catch((err: unknown) => {
      if (!(err instanceof KubeApiError && err.code === 404)) throw err;
    });
  }
}
