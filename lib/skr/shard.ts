// shard.ts shares the Kymas among the SKR source's replicas: each replica holds a Lease of
// its own in the control-plane namespace, renewed every third of its duration; the
// replicas whose Lease is current are the members, and each Kyma goes to one member by
// rendezvous hashing (adding or losing a replica moves only that replica's share). A
// replica that dies stops renewing: once its Lease has expired, the others take its Kymas.
// Each Lease says how many Kymas its replica watches (kubectl get leases -l ...).
import { createHash } from 'node:crypto';
import type { KubeClient } from '../kube/client.ts';
import { KubeApiError } from '../kube/errors.ts';
import type { Logger } from '../pipeline/deps.ts';

/** MEMBER_LABEL marks the SKR source's Leases. */
export const MEMBER_LABEL = 'kcp-sync.kyma-project.io/skr-source';
/** WATCHING_ANNOTATION on a Lease says what its replica watches. */
export const WATCHING_ANNOTATION = 'kcp-sync.kyma-project.io/watching';

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
  onChange(members: string[]): void;
  /** watching says what to write in the Lease's annotation. */
  watching(): string;
  log: Logger;
}

/** Membership keeps this replica's Lease and follows the others'. */
export class Membership {
  private readonly opts: MembershipOptions;
  private readonly path: string;
  private members: string[] = [];
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

  /** current lists the members as last seen. */
  current(): string[] {
    return this.members;
  }

  private async tick(): Promise<void> {
    const now = Date.now();
    const body = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: this.name,
        labels: { [MEMBER_LABEL]: 'member' },
        annotations: { [WATCHING_ANNOTATION]: this.opts.watching() },
      },
      spec: {
        holderIdentity: this.opts.identity,
        leaseDurationSeconds: this.seconds,
        renewTime: microTime(now),
      },
    };
    // A server-side apply creates or renews the Lease in one request.
    await this.opts.kcp.call('PATCH', `${this.path}/${this.name}`, {
      body,
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: 'kcp-sync-skr-source', force: true },
    });
    const list = await this.opts.kcp.call<{ items: Lease[] }>('GET', this.path, {
      query: { labelSelector: `${MEMBER_LABEL}=member` },
    });
    const live: string[] = [];
    for (const l of list.items) {
      const renewed = Date.parse(l.spec?.renewTime ?? '');
      const ttl = (l.spec?.leaseDurationSeconds ?? this.seconds) * 1000;
      const who = l.spec?.holderIdentity;
      if (!who || Number.isNaN(renewed)) continue;
      if (now - renewed <= ttl || who === this.opts.identity) live.push(who);
      else if (now - renewed > 6 * ttl) {
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
    live.sort();
    if (live.join(',') !== this.members.join(',')) {
      this.members = live;
      this.opts.log.info({ members: live }, 'SKR source members');
      this.opts.onChange(live);
    }
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
