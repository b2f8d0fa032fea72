// The SKR source's replicas share the Kymas through their Leases in the real KCP: a
// replica that joins takes its share only once the others have given it up, one that
// leaves has its share taken, and one whose Lease expired while it hung joins again. At no
// moment does a Kyma have two replicas posting for it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../lib/kube/client.ts';
import type { Cluster } from '../lib/kube/objects.ts';
import { Membership, ownerOf } from '../lib/skr/shard.ts';
import { cluster, eventually, uniqueName } from './helpers.ts';

const KYMAS = Array.from({ length: 200 }, (_, i) => `kcp-system/kyma-${i}`);
const quiet = { info: () => {}, warn: () => {}, error: () => {} };

let kcp: Cluster;
const ns = uniqueName('members');

beforeAll(async () => {
  kcp = await cluster('kcp');
  await kcp.client.call('POST', '/api/v1/namespaces', {
    body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
  });
});

afterAll(async () => {
  await kcp.client.call('DELETE', `/api/v1/namespaces/${ns}`).catch(() => {});
});

/** Shares records what each replica takes, in the order the replicas decided it. */
class Shares {
  readonly owned = new Map<string, Set<string>>();
  readonly changes: { replica: string; active: boolean }[] = [];
  /** overlaps counts the moments a Kyma had two replicas, among those not hung. */
  overlaps = 0;
  readonly hung = new Set<string>();

  replica(identity: string, kcpClient: KubeClient, namespace: string): Membership {
    return new Membership({
      kcp: kcpClient,
      namespace,
      identity,
      leaseSeconds: 3,
      log: quiet,
      watching: () => '',
      onChange: (members, active) => {
        // A replica that decides is no longer hung.
        this.hung.delete(identity);
        this.changes.push({ replica: identity, active });
        this.owned.set(
          identity,
          new Set(active ? KYMAS.filter((k) => ownerOf(k, members) === identity) : []),
        );
        this.check();
      },
    });
  }

  check(): void {
    const seen = new Set<string>();
    for (const [who, kymas] of this.owned) {
      if (this.hung.has(who)) continue;
      for (const k of kymas) {
        if (seen.has(k)) this.overlaps++;
        seen.add(k);
      }
    }
  }

  of(identity: string): number {
    return this.owned.get(identity)?.size ?? 0;
  }
}

/** hangable is a client whose requests wait while hung (a replica paused or cut off from the KCP). */
function hangable(client: KubeClient) {
  let release: (() => void) | undefined;
  let gate: Promise<void> = Promise.resolve();
  const wrapped = Object.create(client) as KubeClient;
  wrapped.call = (async (...args: Parameters<KubeClient['call']>) => {
    await gate;
    return client.call(...args);
  }) as KubeClient['call'];
  return {
    client: wrapped,
    hang: () => (gate = new Promise((r) => (release = r))),
    resume: () => release?.(),
  };
}

describe('SKR source membership', () => {
  it('a replica that joins takes its share once the other gave it up; one that leaves has its share taken', async () => {
    const space = `${ns}-a`.slice(0, 63);
    await kcp.client.call('POST', '/api/v1/namespaces', {
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: space } },
    });
    const shares = new Shares();
    const a = shares.replica('a', kcp.client, space);
    const b = shares.replica('b', kcp.client, space);
    try {
      await a.start();
      expect(a.current()).toEqual({ members: ['a'], active: true });
      expect(shares.of('a')).toBe(KYMAS.length);
      await b.start();
      // b sees a, but a has not seen b yet: b waits, a keeps every Kyma.
      expect(b.current()).toEqual({ members: ['a', 'b'], active: false });
      expect(shares.of('b')).toBe(0);
      expect(shares.of('a')).toBe(KYMAS.length);
      await eventually(async () => {
        expect(b.current().active).toBe(true);
        expect(shares.of('a') + shares.of('b')).toBe(KYMAS.length);
      }, 15_000);
      expect(shares.of('a')).toBeGreaterThan(40);
      expect(shares.of('b')).toBeGreaterThan(40);
      // a gave b's share up before b took it.
      const aGave = shares.changes.findIndex((c) => c.replica === 'a' && shares.changes.indexOf(c) > 0);
      const bTook = shares.changes.findIndex((c) => c.replica === 'b' && c.active);
      expect(aGave).toBeGreaterThan(-1);
      expect(aGave).toBeLessThan(bTook);
      // b leaves (its Lease deleted): a takes every Kyma at its next renewal.
      await b.stop();
      shares.owned.delete('b');
      await eventually(async () => expect(shares.of('a')).toBe(KYMAS.length), 15_000);
      expect(shares.overlaps).toBe(0);
    } finally {
      await a.stop();
      await b.stop();
      await kcp.client.call('DELETE', `/api/v1/namespaces/${space}`).catch(() => {});
    }
  }, 60_000);

  it('a replica whose Lease expired while it hung joins again, and takes its share once seen again', async () => {
    const shares = new Shares();
    const hb = hangable(kcp.client);
    const a = shares.replica('a', kcp.client, ns);
    const b = shares.replica('b', hb.client, ns);
    try {
      await a.start();
      await b.start();
      await eventually(async () => {
        expect(b.current().active).toBe(true);
        expect(shares.of('a') + shares.of('b')).toBe(KYMAS.length);
      }, 15_000);
      const bShare = shares.of('b');
      // b hangs: its Lease expires and a takes its Kymas.
      shares.hung.add('b');
      hb.hang();
      await eventually(async () => expect(shares.of('a')).toBe(KYMAS.length), 15_000);
      const before = shares.changes.length;
      hb.resume();
      // Back, b gives its share up at once and takes it again only once a sees it.
      await eventually(async () => {
        expect(b.current().active).toBe(true);
        expect(shares.of('b')).toBe(bShare);
        expect(shares.of('a')).toBe(KYMAS.length - bShare);
      }, 15_000);
      const after = shares.changes.slice(before);
      expect(after[0]).toEqual({ replica: 'b', active: false });
      expect(shares.overlaps).toBe(0);
    } finally {
      hb.resume();
      await a.stop();
      await b.stop();
    }
  }, 60_000);
});
