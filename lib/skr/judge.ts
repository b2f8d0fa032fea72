// judge.ts decides, for one SKR object and one SyncResource that holds it, whether what the
// SKR source saw asks for a run of that SyncResource: the object is gone, a field its field
// manager owns was changed by someone else (drift), or its health is not what the
// SyncResource's status says. Pure: the inputs come from the KCP (inventory, spec, status)
// and from the watched object; nothing the SKR user writes names the SyncResource.
import { appliedDigest } from '../engine/drift.ts';
import { managedFieldsOf } from '../fields.ts';
import { healthOf } from '../health.ts';
import type { CompiledRules } from '../health-rules.ts';
import type { KubeObject } from '../kube/objects.ts';
import type { Health, HealthStatus, State, Strategy } from '../model.ts';

/** Holder is one SyncResource's claim on a watched object, as the KCP says it. */
export interface Holder {
  /** sr is "<namespace>/<name>". */
  sr: string;
  /** manager is the SyncResource's field manager in the SKR. */
  manager: string;
  /** strategy is the strategy of the object's item; undefined once the item left the spec (the object is being pruned). */
  strategy?: Strategy;
  /** digest is the inventory's digest of what the manager owned right after its last apply. */
  digest?: string;
  /** health is the item's health as the status reports it (undefined: not reported). */
  health?: HealthStatus;
  /** itemReason is the item's reason in the status: drift of an item in Conflict (another SyncResource holds the field) is the resync's. */
  itemReason?: string;
  /** rules are the item's own health rules, compiled. */
  rules?: CompiledRules;
  /** state is the SyncResource's state. */
  state?: State;
  deleting: boolean;
}

/** Change is what a watch saw: the object gone, a field of ours changed by another, health moved. */
export type Change = 'gone' | 'drift' | 'health';

/** Verdict is a change and its mark: the same mark for the same (SyncResource, object) is posted once. */
export interface Verdict {
  change: Change;
  mark: string;
  /** health is the object's health as read, for a health change judged from the object. */
  health?: Health;
}

/**
 * ourStamp is what the product's field managers (`<prefix>/<namespace>/<name>`) last did to
 * obj: their managedFields times. A holder's own write is an event whose stamp moved its
 * manager's time (ownWrite).
 */
export function ourStamp(obj: KubeObject, prefix: string): string {
  let out = '';
  for (const m of managedFieldsOf(obj))
    if (m.manager?.startsWith(`${prefix}/`) && !m.subresource) out += `${m.manager}@${m.time ?? ''};`;
  return out;
}

/** ownWrite tells whether manager's time moved from stamp before to stamp now (it wrote the object). */
export function ownWrite(before: string | undefined, now: string, manager: string): boolean {
  if (before === undefined) return false;
  const at = (stamp: string) => {
    const i = stamp.indexOf(`${manager}@`);
    return i < 0 ? '' : stamp.slice(i, stamp.indexOf(';', i));
  };
  return at(before) !== at(now);
}

/** INTERNED bounds the distinct healths kept for sharing (messages repeat: "Deployment is available. Replicas: 1"). */
const INTERNED = 10_000;
const interned = new Map<string, Health>();

/**
 * healthSeen is obj's health by kstatus's rules, one shared object per distinct health: a
 * watched object keeps it (watch.ts Seen) at the cost of a reference, so that a health the
 * status has not caught up with can be reported with its message (findings.ts).
 */
export function healthSeen(obj: KubeObject): Health {
  const h = healthRead(obj);
  const key = `${h.status}\n${h.reason ?? ''}\n${h.message}`;
  const known = interned.get(key);
  if (known) return known;
  if (interned.size >= INTERNED) interned.clear();
  interned.set(key, h);
  return h;
}

/** healthRead is obj's health by the holder's rules (kstatus's by default), as a run would read it. */
function healthRead(obj: KubeObject, rules?: CompiledRules): Health {
  try {
    return healthOf(obj, rules);
  } catch {
    return { status: 'Unknown', message: 'its health rules could not be evaluated' };
  }
}

/**
 * judge decides for one holder. obj is the live object (undefined: gone); ours says the
 * event is the holder's own write (ownWrite), so it is no drift.
 */
export function judge(h: Holder, obj: KubeObject | undefined, ours: boolean): Verdict | undefined {
  if (!obj) {
    // Gone: a deleting SyncResource waits for it, an item in the spec wants it back, and a
    // prune still in progress (the status not settled) finishes. A prune done needs nothing.
    const wanted = h.deleting || h.strategy !== undefined || (h.state !== 'Ready' && h.state !== undefined);
    return wanted ? { change: 'gone', mark: 'gone' } : undefined;
  }
  if (h.deleting || h.strategy === undefined) return undefined;
  if (!ours && h.strategy === 'CreateAndSync' && h.digest !== undefined && h.itemReason !== 'Conflict') {
    // The digest of what we own does not tell one taken value from the next (a field taken is
    // no longer ours): each version of the object is a finding of its own.
    if (appliedDigest(obj, h.manager) !== h.digest)
      return { change: 'drift', mark: `drift:${obj.metadata.resourceVersion ?? ''}` };
  }
  if (h.health !== undefined) {
    const now = healthRead(obj, h.rules);
    if (now.status !== h.health) return { change: 'health', mark: `health:${now.status}`, health: now };
  }
  return undefined;
}
