// findings.ts turns what the SKR source judged (judge.ts) into posts: a finding is posted
// once per mark and object, coalesced per SyncResource (coalesce.ts): an object gone or
// drifted at once, health after a short delay (it waits for the status a run in flight is
// about to write), one event naming at most MAX_CHANGES objects. A finding that waited
// and no longer holds when its turn comes (the object was seen as wanted since: the run
// of the post before put it back) is dropped: of objects deleted together, only those
// deleted after that run read them cost a second run.
import type { CloudEvent } from 'cloudevents';
import {
  aheadOf,
  EventTypes,
  makeEvent,
  type ReportedHealth,
  type SkrChange,
  type SkrChanged,
  type SkrHealth,
} from '../events/contract.ts';
import type { Health } from '../model.ts';
import type { KubeObject } from '../kube/objects.ts';
import type { Logger } from '../pipeline/deps.ts';
import { Coalescer } from './coalesce.ts';
import { judge, type Change, type Holder, type Verdict } from './judge.ts';
import type { Entry, SrView } from './view.ts';

/** MAX_CHANGES bounds the objects one event names (the run reads them all anyway). */
const MAX_CHANGES = 16;

/**
 * Delays before a quiet SyncResource's finding is posted: none for an object gone or
 * drifted (a watching controller reacts at once; what is found meanwhile waits
 * coalesce.ts's gap), and health waits for the status a run in flight is about to write.
 */
const DELAY_MS: Record<Change, number> = { gone: 0, drift: 0, health: 150 };

/**
 * GONE_WHILE_DELETING_MS is how long an object gone waits for a SyncResource being deleted:
 * its deletion run deleted it and is about to remove the finalizer, and a SyncResource gone
 * by then is posted nothing (post). One whose deletion waits for the object (finalizers in
 * the SKR) is posted that much later.
 */
export const GONE_WHILE_DELETING_MS = 1_000;

/** Finding is one change of one object for one SyncResource, as posted; a health change judged from the object carries its health. */
export interface Finding extends SkrChange {
  key: string;
  /** mark is the verdict's (judge.ts): what was found, posted once. */
  mark: string;
  health?: Health;
}

/** FindingsOptions are what findings need: the views, whether a finding still holds at post time, where posts go. */
export interface FindingsOptions {
  view: (sr: string) => SrView | undefined;
  /** stillHolds tells at post time whether a finding holds (a health finding the status caught up with does not). */
  stillHolds: (sr: string, f: Finding) => boolean;
  emit(event: CloudEvent<unknown>): Promise<void>;
  log: Logger;
  stats: { findings: number; posts: number };
}

/** Findings posts each SyncResource's findings. */
export class Findings {
  /** posted remembers the last mark posted per SyncResource and object: the same finding is posted once. */
  private readonly posted = new Map<string, string>();
  private readonly coalescer: Coalescer<Finding>;
  private readonly opts: FindingsOptions;

  constructor(opts: FindingsOptions) {
    this.opts = opts;
    this.coalescer = new Coalescer<Finding>({
      post: (key, findings) => this.post(key, findings),
      keep: (key, f) => {
        const pk = `${key}|${f.key}`;
        // Gone or drifted, then seen as wanted (or found anew): this finding is done.
        if (f.change !== 'health' && this.posted.get(pk) !== f.mark) return false;
        if (opts.stillHolds(key, f)) return true;
        this.posted.delete(pk);
        return false;
      },
    });
  }

  /** consider judges object o (undefined: gone) for holder h: a finding, or what was posted for it forgotten. */
  consider(h: Holder, e: Entry, o: KubeObject | undefined, ours: boolean): void {
    const v = judge(h, o, ours);
    if (!v) {
      this.posted.delete(`${h.sr}|${e.key}`);
      return;
    }
    this.found(h.sr, e, v, h.deleting && v.change === 'gone' ? GONE_WHILE_DELETING_MS : undefined);
  }

  /** found posts a finding for SyncResource sr after delayMs, unless the same mark was posted for its object already. */
  found(sr: string, e: Entry, v: Verdict, delayMs = DELAY_MS[v.change]): void {
    const pk = `${sr}|${e.key}`;
    if (this.posted.get(pk) === v.mark) return;
    this.posted.set(pk, v.mark);
    this.opts.stats.findings++;
    this.coalescer.add(
      sr,
      {
        key: e.key,
        apiVersion: e.apiVersion,
        kind: e.kind,
        ...(e.namespace ? { namespace: e.namespace } : {}),
        name: e.name,
        change: v.change,
        mark: v.mark,
        ...(v.health ? { health: v.health } : {}),
      },
      delayMs,
    );
  }

  /** forget drops what was posted for a SyncResource that is gone. */
  forget(sr: string): void {
    for (const k of [...this.posted.keys()]) if (k.startsWith(`${sr}|`)) this.posted.delete(k);
  }

  stop(): void {
    this.coalescer.stop();
  }

  /**
   * post sends a SyncResource's findings: only health read from objects of a SyncResource in
   * sync whose items take kstatus's rules and copy no feedback is a report (skr.health,
   * written without a run); anything else asks for a run (skr.changed).
   */
  private async post(key: string, findings: Finding[]): Promise<void> {
    const view = this.opts.view(key);
    if (!view) return;
    // One change per object (the latest), at most MAX_CHANGES.
    const latest = [...new Map(findings.map((f) => [f.key, f])).values()].slice(0, MAX_CHANGES);
    const who = {
      namespace: view.namespace,
      name: view.name,
      uid: view.uid,
      kyma: view.kyma.split('/')[1]!,
      ...(view.version ? { resourceVersion: view.version } : {}),
    };
    const report = reportable(view, latest);
    const event = report
      ? makeEvent('skr-source', EventTypes.skrHealth, { ...who, objects: report } satisfies SkrHealth)
      : makeEvent('skr-source', EventTypes.skrChanged, {
          ...who,
          changes: latest.map(({ key: _k, mark: _m, health: _h, ...c }) => c),
          ...aheadOf(view.entries),
        } satisfies SkrChanged);
    await this.opts.emit(event);
    this.opts.stats.posts++;
    this.opts.log.info(
      {
        syncResource: key,
        cluster: who.kyma,
        changes: latest.map(
          (c) =>
            `${c.change}${report ? `:${c.health!.status}` : ''} ${c.kind} ${c.namespace ? `${c.namespace}/` : ''}${c.name}`,
        ),
      },
      report ? 'SKR health reported' : 'SKR changed',
    );
  }
}

/** reportable is the findings as a health report, when view may take one (view.ts inSync, runRead). */
function reportable(view: SrView, findings: Finding[]): ReportedHealth[] | undefined {
  if (!view.inSync) return undefined;
  const out: ReportedHealth[] = [];
  for (const { key, change, mark: _m, health, ...id } of findings) {
    const item = view.items.get(view.entries.find((e) => e.key === key)?.item ?? '');
    if (change !== 'health' || !health || !item || item.runRead || item.strategy === 'Delete')
      return undefined;
    out.push({ ...id, health });
  }
  return out;
}
