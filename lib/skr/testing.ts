// testing.ts builds the SKR source's views and inventory entries for its unit tests
// (findings.test.ts, watch.test.ts): a ConfigMap entry, and the view of a SyncResource in
// kcp-system on kyma-1 that holds the entries given, each under an item of its name.
import { objectKey, type Strategy } from '../model.ts';
import { gkOf, type Entry, type SrView } from './view.ts';

/** testEntry is the inventory entry of ConfigMap namespace/name, under item name. */
export const testEntry = (name: string, namespace: string): Entry => ({
  key: objectKey({ apiVersion: 'v1', kind: 'ConfigMap', namespace, name }),
  gk: gkOf('v1', 'ConfigMap'),
  apiVersion: 'v1',
  kind: 'ConfigMap',
  namespace,
  name,
  item: name,
});

/** testView is the view of SyncResource kcp-system/name holding entries (a CreateAndSync item each, none while deleting). */
export const testView = (
  name: string,
  opts: { deleting?: boolean; inSync?: boolean; entries?: Entry[] } = {},
): SrView => {
  const entries = opts.entries ?? [];
  const strategy: Strategy = 'CreateAndSync';
  return {
    key: `kcp-system/${name}`,
    namespace: 'kcp-system',
    name,
    uid: `uid-${name}`,
    kyma: 'kcp-system/kyma-1',
    manager: `kcp-sync-resource/kcp-system/${name}`,
    deleting: opts.deleting === true,
    claimed: true,
    state: opts.inSync === true ? 'Ready' : 'Processing',
    inSync: opts.inSync === true,
    items: new Map(opts.deleting ? [] : entries.map((e) => [e.item, { strategy }])),
    health: new Map(),
    reasons: new Map(),
    entries,
  };
};
