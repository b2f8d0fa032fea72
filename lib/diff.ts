// diff.ts tells, per item, what a reconcile of a SyncResource would do in a cluster,
// without writing: the engine's own parsing, kind resolution, reads and decisions
// (engine/plan.ts, engine/decide.ts), and a server-side dry-run apply with the product's
// field manager for the fields it would own, shown as a unified diff. Secret values are
// masked. With the inventory of the SyncResource it previews (a preview in the KCP,
// pipeline/preview.ts), what a run would prune is shown too.
import { createTwoFilesPatch } from 'diff';
import { dump } from 'js-yaml';
import type { Config } from './config.ts';
import { decide, type Decision } from './engine/decide.ts';
import { itemFailure, sameValues } from './engine/execute.ts';
import { observe } from './engine/observe.ts';
import {
  isResolved,
  parseItems,
  resolveKind,
  type PlanItem,
  type ResolvedItem,
  type ResourceTexts,
} from './engine/plan.ts';
import { mergeFields, ownedFields, project } from './fields.ts';
import { applyObject, type Cluster, type KubeObject } from './kube/objects.ts';
import { describeId } from './manifest.ts';
import { objectKey, type SyncResource } from './model.ts';
import { ADOPTION_REFUSAL, type SyncPolicy } from './policy/tenancy.ts';
import { fieldConflicts, heldElsewhere, OwnedFieldConflict, writerOf, type Writer } from './engine/share.ts';

/** Outcome is what a reconcile would do to an item's object. */
export type Outcome =
  | 'create'
  | 'update'
  | 'adopt'
  | 'delete'
  | 'prune'
  | 'unchanged'
  | 'conflict'
  | 'restricted'
  | 'not found'
  | 'error';

/** ItemDiff is one item's outcome, with the product's reason and message where it has one. */
export interface ItemDiff {
  item: string;
  outcome: Outcome;
  object?: string;
  reason?: string;
  message?: string;
  /** diff is a unified diff of the fields the product owns (Secret values masked). */
  diff?: string;
}

/** CHANGES are the outcomes that change the cluster. */
export const CHANGES: ReadonlySet<Outcome> = new Set(['create', 'update', 'adopt', 'delete', 'prune']);

/** DiffOptions are what a preview in the KCP knows besides the items. */
export interface DiffOptions {
  /** texts are the resourceFrom items' texts (read in the KCP); without them such items are errors. */
  texts?: ResourceTexts;
  /** as is the SyncResource the items are previewed as: its field manager, and its inventory for what would be pruned. */
  as?: SyncResource;
}

/** diffSyncResource computes every item's outcome for sr in the cluster skr; nothing is written. */
export async function diffSyncResource(
  sr: SyncResource,
  skr: Cluster,
  config: Config,
  policy?: SyncPolicy,
  opts: DiffOptions = {},
): Promise<ItemDiff[]> {
  const w = writerOf(opts.as ?? sr, config);
  const plan = parseItems(sr.spec.items ?? [], config, opts.texts);
  const out: ItemDiff[] = [];
  for (const parsed of plan) {
    const object = parsed.id ? describeId(parsed.id) : undefined;
    const base = { item: parsed.item.name, ...(object ? { object } : {}) };
    let p: PlanItem = parsed;
    try {
      p = await resolveKind(parsed, plan, skr, config, policy);
      out.push({ ...base, ...(await itemOutcome(p, skr, w, policy)) });
    } catch (err) {
      const r = itemFailure(p, err);
      out.push({ ...base, outcome: 'error', reason: r.reason, message: r.message });
    }
  }
  return [...out, ...pruned(plan, opts.as)];
}

type Found = Omit<ItemDiff, 'item' | 'object'>;

/** itemOutcome is what a run would do to one item's object. */
async function itemOutcome(
  p: PlanItem,
  skr: Cluster,
  w: Writer,
  policy: SyncPolicy | undefined,
): Promise<Found> {
  if (!isResolved(p)) {
    const done = p.done ?? { reason: 'InvalidManifest', message: 'the item names no object' };
    const refused = done.reason === 'Restricted' || done.reason === 'NotPermitted';
    return { outcome: refused ? 'restricted' : 'error', reason: done.reason, message: done.message };
  }
  const live = await observe(skr, p);
  // Under a policy, an object the product did not create is never adopted.
  if (policy && decide(p, live, { writer: w }).adopt === true)
    return { outcome: 'restricted', reason: 'NotPermitted', message: ADOPTION_REFUSAL };
  if (!(p.item.dataFrom && p.object)) return outcomeOf(p, live, w, skr);
  // Values by reference live in the KCP: compared as they are in the cluster, never shown.
  const asLive = {
    ...p,
    object: { ...p.object, data: { ...(live?.data as Record<string, string> | undefined) } },
  };
  const note = `data comes from Secret ${p.item.dataFrom.secretRef.name} in the KCP by reference; values are not compared`;
  const o = await outcomeOf(asLive, live, w, skr);
  return { ...o, message: o.message ? `${o.message}; ${note}` : note };
}

/** pruned is what the previewed SyncResource (as) holds and no item names any more: its run would prune it. */
function pruned(plan: readonly PlanItem[], as: SyncResource | undefined): ItemDiff[] {
  const named = new Set(plan.flatMap((p) => (p.id ? [objectKey(p.id)] : [])));
  return (as?.status?.synced ?? [])
    .filter((e) => !named.has(objectKey(e)))
    .map((e) => ({
      item: e.item,
      outcome: 'prune',
      object: describeId(e),
      message: e.adopted
        ? 'no item names it: it would be released (it existed before), never deleted'
        : 'no item names it: it would be deleted, or released where another SyncResource still names it',
    }));
}

/** outcomeOf is what the decision for p on live comes to; creates and updates are dry-run applied and shown as a diff. */
async function outcomeOf(
  p: ResolvedItem,
  live: KubeObject | undefined,
  w: Writer,
  skr: Cluster,
): Promise<Found> {
  const d = decide(p, live, { writer: w });
  const statusOnly = (): Found =>
    d.status
      ? { outcome: 'update', message: `the status of ${describeId(p.id)} would be written` }
      : { outcome: 'unchanged' };
  if (d.done) {
    const outcome: Outcome =
      d.done.reason === 'Conflict' ? 'conflict' : d.done.reason === 'NotFound' ? 'not found' : 'unchanged';
    return { outcome, reason: d.done.reason, message: d.done.message };
  }
  switch (d.op) {
    case 'delete':
      return { outcome: 'delete', message: `${describeId(p.id)} would be deleted` };
    case 'adopt':
      return {
        outcome: 'adopt',
        message: `${describeId(p.id)} exists and would be taken on (our label only)`,
      };
    case 'create':
    case 'update':
      return applyOutcome(p, live, d, w, skr, statusOnly);
    case 'unchanged':
    case 'ignore':
    case 'none':
      return statusOnly();
  }
}

/**
 * applyOutcome dry-runs a create or update. Without force first, as the engine applies: a
 * field another SyncResource holds with another value is a conflict. As the engine
 * decides, an update whose values are there already (defaults, quantities as the server
 * writes them) is no change.
 */
async function applyOutcome(
  p: ResolvedItem,
  live: KubeObject | undefined,
  d: Decision & { op: 'create' | 'update' },
  w: Writer,
  skr: Cluster,
  statusOnly: () => Found,
): Promise<Found> {
  try {
    await applyObject(skr, p.info, d.desired, w.manager, undefined, true, false);
  } catch (err) {
    const conflicts = fieldConflicts(err);
    const held = conflicts && heldElsewhere(conflicts, w, live);
    if (held?.length)
      return { outcome: 'conflict', reason: 'Conflict', message: new OwnedFieldConflict(p.id, held).message };
  }
  const after = await applyObject(skr, p.info, d.desired, w.manager, undefined, true);
  if (d.op === 'update' && !d.adopt && !d.release && live && sameValues(after, live, w.manager))
    return statusOnly();
  const fields = mergeFields(ownedFields(live, w.manager), ownedFields(after, w.manager));
  const outcome: Outcome = d.op === 'create' ? 'create' : d.adopt ? 'adopt' : 'update';
  const [before, next] = secretValues(
    p,
    live,
    d.desired,
    live ? project(live, fields) : undefined,
    project(after, fields),
  );
  return { outcome, diff: unified(p, before, next) };
}

/**
 * secretValues adds a Secret's values to both sides: the server turns stringData into data
 * and tracks no field of it, so the keys the manifest sets are compared as data (masked later).
 */
function secretValues(
  p: PlanItem,
  live: KubeObject | undefined,
  desired: KubeObject,
  before: unknown,
  after: unknown,
): [unknown, unknown] {
  if (!(p.info?.apiVersion === 'v1' && p.info.kind === 'Secret')) return [before, after];
  const want: Record<string, string> = { ...(desired.data as Record<string, string> | undefined) };
  for (const [k, v] of Object.entries((desired.stringData ?? {}) as Record<string, string>))
    want[k] = Buffer.from(String(v)).toString('base64');
  const had = (live?.data ?? {}) as Record<string, string>;
  const b = { ...(before as Record<string, unknown> | undefined) };
  const a = { ...(after as Record<string, unknown> | undefined) };
  const keys = Object.keys(want);
  if (keys.some((k) => had[k] !== undefined))
    b.data = Object.fromEntries(keys.filter((k) => had[k] !== undefined).map((k) => [k, had[k]]));
  if (keys.length > 0) a.data = want;
  delete a.stringData;
  return [live ? b : undefined, a];
}

function unified(p: ResolvedItem, before: unknown, after: unknown): string {
  const secret = p.info?.apiVersion === 'v1' && p.info.kind === 'Secret';
  const [b, a] = secret ? mask(before, after) : [before, after];
  const text = (v: unknown) => (v === undefined ? '' : dump(v, { sortKeys: true, lineWidth: -1 }));
  const name = describeId(p.id);
  return createTwoFilesPatch(
    `${name} (live)`,
    `${name} (after apply)`,
    text(b),
    text(a),
    undefined,
    undefined,
    { context: 3 },
  );
}

/** mask replaces Secret values: equal ones by "***", changed ones by "*** (changed)" on the side after. */
function mask(before: unknown, after: unknown): [unknown, unknown] {
  const maps = (v: unknown) => (v ?? {}) as Record<string, Record<string, unknown> | undefined>;
  const b = structuredClone(maps(before));
  const a = structuredClone(maps(after));
  for (const field of ['data', 'stringData']) {
    const old = b[field] ?? {};
    const now = a[field] ?? {};
    for (const k of Object.keys(now))
      now[k] = old[k] !== undefined && old[k] === now[k] ? '***' : '*** (changed)';
    for (const k of Object.keys(old)) old[k] = '***';
  }
  return [before === undefined ? undefined : b, after === undefined ? undefined : a];
}
