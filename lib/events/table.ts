// table.ts describes every event type as it crosses the broker (who sends it, which
// Trigger takes it, what its data holds): docs/contributor/architecture.md's table is
// rendered from it (node infra/docs.ts).
import { ApiServerRefTypes, EventTypes, PING_TYPE, SOURCE_PREFIX } from './contract.ts';

/**
 * EventContract is one event type as it crosses the broker. EVENT_CONTRACT lists every type
 * the product consumes or emits; tests hold it against the constants of contract.ts, the
 * Triggers of knative.yaml and the events a real run sends (test/docs.test.ts, observability).
 */
export interface EventContract {
  type: string;
  /** from names the senders: Knative sources by name, or the product's steps (source /kcp-sync-resource/<step>). */
  from: { sources?: string[]; steps?: string[] };
  /** to names the functions whose Trigger takes the type. */
  to: string[];
  source: string;
  subject: string;
  /** data are the top-level fields of the data; a trailing "?" marks an optional one. */
  data: string[];
  /** what says what the event asks for, in a few words. */
  what: string;
}

const ADAPTERS = ['sync-kymas', 'sync-access-secrets', 'sync-source-secrets', 'sync-source-configmaps'];
const apiServerRef = (type: string): EventContract => ({
  type,
  from: { sources: ADAPTERS },
  to: ['sync-resync', 'sync-resolve-cluster'],
  source: 'the KCP API server URL',
  subject: '/apis/<apiVersion>/namespaces/<ns>/<kind>s/<name>',
  data: ['apiVersion', 'kind', 'name', 'namespace'],
  what: 'a Kyma, access Secret, source Secret or ConfigMap changed (Reference mode: identity only)',
});

export const EVENT_CONTRACT: readonly EventContract[] = [
  ...ApiServerRefTypes.map(apiServerRef),
  {
    type: PING_TYPE,
    from: { sources: ['sync-resync'] },
    to: ['sync-resync'],
    source: '/apis/v1/namespaces/kcp-system/pingsources/<name>',
    subject: 'none',
    data: ['reason'],
    what: 'resync: every SyncResource, by Kyma',
  },
  {
    type: EventTypes.reconcile,
    from: { steps: ['resync', 'resolve-cluster', 'apply-items'] },
    to: ['sync-resolve-cluster'],
    source: `${SOURCE_PREFIX}/<step>`,
    subject: '<namespace>/<name>',
    data: ['namespace', 'name', 'trigger', 'since?'],
    what: 'reconcile one SyncResource',
  },
  {
    type: EventTypes.skrChanged,
    from: { steps: ['skr-source', 'write-status'] },
    to: ['sync-resolve-cluster'],
    source: `${SOURCE_PREFIX}/skr-source`,
    subject: '<namespace>/<name>',
    data: ['namespace', 'name', 'uid', 'kyma', 'changes', 'resourceVersion?', 'ahead?'],
    what: 'objects of one SyncResource gone, drifted or moved in health in its SKR: reconcile it',
  },
  {
    type: EventTypes.skrHealth,
    from: { steps: ['skr-source'] },
    to: ['sync-write-status'],
    source: `${SOURCE_PREFIX}/skr-source`,
    subject: '<namespace>/<name>',
    data: ['namespace', 'name', 'uid', 'kyma', 'objects', 'resourceVersion?'],
    what: 'the health of objects of a SyncResource in sync, as the SKR source read them: write it (or, when its status cannot take it, a run is asked for)',
  },
  {
    type: EventTypes.changed,
    from: { steps: ['skr-source'] },
    to: ['sync-resolve-cluster'],
    source: `${SOURCE_PREFIX}/skr-source`,
    subject: '<namespace>/<name>',
    data: [
      'namespace',
      'name',
      'uid',
      'generation',
      'kyma',
      'resourceVersion?',
      'change?',
      'deleting?',
      'policy?',
      'requested?',
      'ahead?',
    ],
    what: 'a SyncResource is new, edited or being deleted, a run of it was asked for (the reconcile annotation), or the SyncPolicy of its namespace changed: reconcile it (not sent for its own writes)',
  },
  {
    type: EventTypes.reconcileKyma,
    from: { steps: ['resync', 'resolve-cluster'] },
    to: ['sync-resolve-cluster'],
    source: `${SOURCE_PREFIX}/<step>`,
    subject: '<namespace>/<kyma>',
    data: ['namespace', 'name', 'trigger', 'since?'],
    what: 'reconcile every SyncResource of one Kyma',
  },
  {
    type: EventTypes.kymaResolved,
    from: { steps: ['resolve-cluster'] },
    to: ['sync-apply-items'],
    source: `${SOURCE_PREFIX}/resolve-cluster`,
    subject: '<namespace>/<kyma>',
    data: ['namespace', 'name', 'trigger', 'since?', 'secret'],
    what: "the Kyma's access Secret version: apply each of its SyncResources",
  },
  {
    type: EventTypes.clusterResolved,
    from: { steps: ['resolve-cluster'] },
    to: ['sync-apply-items'],
    source: `${SOURCE_PREFIX}/resolve-cluster`,
    subject: '<namespace>/<name>',
    data: [
      'namespace',
      'name',
      'trigger?',
      'uid',
      'generation',
      'kyma',
      'secret',
      'resourceVersion?',
      'urgent?',
      'deleting?',
      'since?',
      'held?',
      'ahead?',
    ],
    what: 'apply one SyncResource with this access Secret version',
  },
  {
    type: EventTypes.itemsApplied,
    from: { steps: ['apply-items', 'resolve-cluster'] },
    to: ['sync-write-status'],
    source: `${SOURCE_PREFIX}/<step>`,
    subject: '<namespace>/<name>',
    data: ['namespace', 'name', 'uid', 'kyma', 'result', 'urgent?', 'seen?', 'status?'],
    what: "a run's outcome (or a resolution failure): write the status",
  },
];
