// run.ts holds what the files of one run share: its collaborators (ReconcileDeps), the
// SyncResource, inventory and writer it acts as (Run), and how a KCP request fails it.
import type { Config } from '../config.ts';
import type { Cluster } from '../kube/objects.ts';
import { TransientError } from '../kube/errors.ts';
import type { KcpStore } from '../kcp.ts';
import type { FreshReads } from '../memo.ts';
import type { HolderView, SyncResource } from '../model.ts';
import type { SyncPolicy } from '../policy/tenancy.ts';
import type { RetryReason } from '../reasons.ts';
import type { Inventory } from './inventory.ts';
import type { ResourceSourceReader, SourceReader } from './sources.ts';
import { holdersOf, writerOf, type Holders, type Writer } from './share.ts';

/** ReconcileDeps are the engine's collaborators, resolved by the caller. */
export interface ReconcileDeps {
  skr: Cluster;
  kcp: KcpStore;
  config: Config;
  now?: () => Date;
  /**
   * snapshots lets unchanged objects be confirmed from the cluster's shared LIST
   * snapshots (a resync burst); other runs (new or edited SyncResources) read each object.
   */
  snapshots?: boolean;
  /** snapshotsSince (epoch ms): snapshots taken before it confirm nothing (a resync must see drift made before it began). */
  snapshotsSince?: number;
  /** sources reads the source Secrets of dataFrom items (KCP); without it such items fail. */
  sources?: SourceReader;
  /** resourceSources reads the texts of resourceFrom items (KCP ConfigMaps); without it such items fail. */
  resourceSources?: ResourceSourceReader;
  /**
   * policy is the SyncPolicy a team's SyncResource runs under (policy/tenancy.ts): every
   * item is checked on it after discovery, and so is every object it would prune; absent in
   * a control-plane namespace (the global rules alone) and for a deletion (what the
   * SyncResource created is removed whatever the policy says now).
   */
  policy?: SyncPolicy;
  /**
   * holderNamespaces are the namespaces whose SyncResources may name the same objects
   * (read when a run needs them): the control-plane ones and the governed team namespaces.
   * Default: the control-plane namespaces.
   */
  holderNamespaces?: () => Promise<string[]>;
  /**
   * holdersReads shares the holders reads of concurrent runs in one process (several
   * deletions of one Kyma's SyncResources at once); without it each run reads its own.
   */
  holdersReads?: FreshReads<HolderView[]>;
  /** hooks let tests inject failures between the steps of a run. */
  hooks?: { afterInventoryWrite?: () => Promise<void> };
}

/** Run is what every stage of one run acts as and with. */
export interface Run {
  /** sr is the SyncResource the run acts on, as it began (its claim may still be on its way: deps.skr holds every write back until it is in). */
  readonly sr: SyncResource;
  /** latest is the SyncResource as the run last wrote it: its next KCP write is guarded by that resourceVersion. */
  readonly latest: () => SyncResource;
  readonly deps: ReconcileDeps;
  readonly inventory: Inventory;
  /** writer is who writes in the SKR: the SyncResource's owner key and field manager. */
  readonly writer: Writer;
  /** holders reads (once a run, when needed) which other SyncResources of the Kyma name which objects. */
  readonly holders: () => Promise<Holders>;
}

/** newRun is the Run of sr. */
export const newRun = (
  sr: SyncResource,
  deps: ReconcileDeps,
  inventory: Inventory,
  latest: () => SyncResource,
): Run => ({
  sr,
  latest,
  deps,
  inventory,
  writer: writerOf(sr, deps.config),
  holders: holdersReader(sr, deps),
});

/** holdersReader reads, at most once, the inventories of the other SyncResources of sr's Kyma. */
function holdersReader(sr: SyncResource, deps: ReconcileDeps): () => Promise<Holders> {
  let read: Promise<Holders> | undefined;
  return () =>
    (read ??= inKcp('reading the SyncResources of the Kyma', 'KcpReadFailed', async () => {
      const namespaces = (await deps.holderNamespaces?.()) ?? deps.config.controlPlaneNamespaces;
      const teams = namespaces.filter((ns) => !deps.config.controlPlaneNamespaces.includes(ns));
      const read = () => deps.kcp.holdersForKyma(sr.spec.kyma, namespaces, teams);
      const key = `${sr.spec.kyma}\n${namespaces.join(',')}\n${teams.join(',')}`;
      return holdersOf(sr, await (deps.holdersReads ? deps.holdersReads.get(key, read) : read()));
    }));
}

/** inKcp runs a KCP request whose failure fails the run transiently (it is retried). */
export async function inKcp<T>(what: string, reason: RetryReason, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new TransientError(`${what} in the KCP failed; retry`, reason, err);
  }
}

/** kcpWrite runs a write of the SyncResource in the KCP (see inKcp). */
export const kcpWrite = <T>(fn: () => Promise<T>) => inKcp('writing the SyncResource', 'KcpWriteFailed', fn);
