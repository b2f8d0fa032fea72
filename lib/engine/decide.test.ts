// decide, cell by cell of the strategies table (docs/user/api.md "The resource and its
// strategies"): each strategy against each state its object can be in, with nothing read
// or written. What each cell then does to the SKR is the engine tests' (test/engine-*.ts).
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../config.ts';
import type { KubeObject } from '../kube/objects.ts';
import {
  HASH_ANNOTATION,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  type InventoryEntry,
  type SyncResource,
} from '../model.ts';
import { appliedDigest } from './drift.ts';
import { decide, desiredObject, manifestDigest } from './decide.ts';
import { parseItems, type ResolvedItem } from './plan.ts';
import { writerOf } from './share.ts';

const config = parseConfig({});
const sr = { metadata: { namespace: 'kcp-system', name: 'm' } } as SyncResource;
const writer = writerOf(sr, config);
const manifest = 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: ns}\ndata: {k: v}\n';

function item(strategy: string): ResolvedItem {
  const [p] = parseItems([{ name: 'x', strategy, resource: manifest } as never], config);
  return {
    ...p!,
    info: { apiVersion: 'v1', kind: 'ConfigMap', resource: 'configmaps', namespaced: true, hasStatus: false },
  } as ResolvedItem;
}

/** liveAs is the object as the server holds it after manager applied data (its managedFields say so). */
function liveAs(
  manager: string,
  data: Record<string, string>,
  extra: Partial<KubeObject['metadata']> = {},
): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'x',
      namespace: 'ns',
      uid: 'u1',
      resourceVersion: '7',
      labels: manager === writer.manager ? { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE } : {},
      managedFields: [
        {
          manager,
          operation: 'Apply',
          apiVersion: 'v1',
          fieldsType: 'FieldsV1',
          fieldsV1: {
            'f:data': Object.fromEntries(Object.keys(data).map((k) => [`f:${k}`, {}])),
            ...(manager === writer.manager
              ? { 'f:metadata': { 'f:labels': { [`f:${MANAGED_BY_LABEL}`]: {} } } }
              : {}),
          },
        },
      ],
      ...extra,
    },
    data,
  };
}

type State = { live?: KubeObject; entry?: (p: ResolvedItem, live?: KubeObject) => InventoryEntry };
const entryOf =
  (over: Partial<InventoryEntry> = {}) =>
  (p: ResolvedItem, live?: KubeObject): InventoryEntry => ({
    item: 'x',
    apiVersion: 'v1',
    kind: 'ConfigMap',
    namespace: 'ns',
    name: 'x',
    manifest: manifestDigest(desiredObject(p as ResolvedItem & { object: KubeObject })),
    ...(live ? { digest: appliedDigest(live, writer.manager) } : {}),
    ...over,
  });

const ours = liveAs(writer.manager, { k: 'v' });
const states: Record<string, State> = {
  absent: {},
  'ours, as applied': { live: ours, entry: entryOf() },
  'ours, a field of ours changed in the SKR': {
    live: ours,
    entry: entryOf({ digest: 'not-what-we-applied' }),
  },
  'ours, the manifest changed': { live: ours, entry: entryOf({ manifest: 'an-older-manifest' }) },
  "someone else's, existing before": { live: liveAs('kubectl', { k: 'theirs' }) },
  'being deleted': {
    live: liveAs('kubectl', { k: 'theirs' }, { deletionTimestamp: '2026-12-04T00:00:00Z' }),
  },
  // What UpdateAndDelete keeps in sync carries the digest of the manifest it applied (it keeps no inventory).
  'updated by UpdateAndDelete, as applied': { live: updated({ k: 'v' }) },
  'updated by UpdateAndDelete, changed in the SKR': { live: updated({ k: 'edited' }) },
};

/** updated is an object UpdateAndDelete applied the manifest to (the digest annotation), with data as it is now. */
function updated(data: Record<string, string>): KubeObject {
  const desired = desiredObject(item('UpdateAndDelete') as ResolvedItem & { object: KubeObject });
  const live = liveAs(writer.manager, data);
  live.metadata.labels = {};
  live.metadata.annotations = { [HASH_ANNOTATION]: desired.metadata.annotations![HASH_ANNOTATION]! };
  return live;
}

/** what summarizes a decision: the operation, or the reason of a settled one, and its flags. */
const what = (strategy: string, state: State): string => {
  const p = item(strategy);
  const d = decide(p, state.live, { writer, ...(state.entry ? { entry: state.entry(p, state.live) } : {}) });
  if (d.done) return `${d.done.state}/${d.done.reason}`;
  const flags = (['adopt', 'drift', 'record', 'release'] as const).filter((f) => d[f] === true);
  return [d.op, ...flags].join('+');
};

// Rows: strategies; columns: the states above, in order. Flags: record (into the inventory
// before the write), adopt (it existed before: released, never deleted), drift (a
// correction), release (our marks taken off: a strategy that does not own it).
const table: Record<string, string[]> = {
  CreateAndSync: [
    'create+record',
    'unchanged',
    'update+drift',
    'update',
    'update+adopt+record',
    'update+adopt+record',
    'update+adopt+record',
    'update+adopt+record',
  ],
  CreateAndIgnore: [
    'create+record',
    'ignore',
    'ignore',
    'ignore',
    'adopt+adopt+record',
    'adopt+adopt+record',
    'adopt+adopt+record',
    'adopt+adopt+record',
  ],
  Delete: [
    'Ready/Deleted',
    'delete',
    'delete',
    'delete',
    'delete',
    'Deleting/DeletionInProgress',
    'delete',
    'delete',
  ],
  UpdateAndDelete: [
    'Ready/NotFound',
    'update+release',
    'update+release',
    'update+release',
    'update',
    'Deleting/DeletionInProgress',
    'unchanged',
    'update+drift',
  ],
};

describe('decide', () => {
  for (const [strategy, row] of Object.entries(table)) {
    it.each(Object.keys(states).map((s, i) => [s, row[i]!] as const))(
      `${strategy}, %s: %s`,
      (state, want) => {
        expect(what(strategy, states[state]!)).toBe(want);
      },
    );
  }
});
