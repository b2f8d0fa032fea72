// stage.ts takes one install stage of a run's items to the SKR: resolve their kinds, read
// their objects, decide, rehearse creates refused before, record what will be ours
// (write-ahead), execute. It returns the plan as the stage left it and each item's outcome.
import { applyObject, type KubeObject } from '../kube/objects.ts';
import { objectKey } from '../model.ts';
import { installRank } from '../strategies.ts';
import { inSpan } from '../telemetry.ts';
import { mapLimit } from '../concurrency.ts';
import { entryOf } from './inventory.ts';
import {
  decide,
  needsHolders,
  settled,
  tenancyRefusal,
  type DecideContext,
  type Decision,
} from './decide.ts';
import { adopted, execute, itemFailure, type Executed } from './execute.ts';
import { observe } from './observe.ts';
import { isResolved, markDuplicates, resolveKind, settle, type PlanItem, type ResolvedItem } from './plan.ts';
import { entryHolders, type Holders } from './share.ts';
import { inSkr } from './unreachable.ts';
import { result } from './result.ts';
import type { Run } from './run.ts';

/** StageResult is what a stage did: the plan with its items resolved or settled, and the outcomes of those it took to the SKR. */
export interface StageResult {
  plan: PlanItem[];
  executed: Map<string, Executed>;
  /** refused are the keys of objects whose create the SKR refused for good: their write-ahead entries go. */
  refused: string[];
}

/** Step is a resolved item with its live object and what it needs. */
interface Step {
  readonly p: ResolvedItem;
  readonly live: KubeObject | undefined;
  readonly decision: Decision;
}

/**
 * applyStage takes the items named in stage to the SKR. A failed request stays on its item
 * (itemFailure); only cluster-level failures end the run.
 */
export async function applyStage(
  run: Run,
  plan: readonly PlanItem[],
  stage: ReadonlySet<string>,
): Promise<StageResult> {
  const { skr, config, policy } = run.deps;
  const resolved = await mapLimit(plan, config.applyConcurrency, (p) =>
    stage.has(p.item.name)
      ? resolveKind(p, plan, skr, config, policy).catch((err: unknown) => settle(p, itemFailure(p, err)))
      : Promise.resolve(p),
  );
  let next = markDuplicates(resolved, config, (p) => p.info !== undefined);
  const candidates = next
    .filter((p) => stage.has(p.item.name))
    .filter(isResolved)
    .sort((a, b) => installRank(a.id.kind) - installRank(b.id.kind));
  const { steps, failed } = await observeAll(run, candidates);
  next = next.map((p) => failed.get(p.item.name) ?? p);
  const rehearsed = await rehearseRefusedCreates(run, steps);
  // Write-ahead: every object we are about to stamp as ours is recorded first.
  await run.inventory.record(
    rehearsed.flatMap(({ p, decision: d }) => (d.record ? [entryOf(p.item.name, p.id, d.adopt)] : [])),
  );
  const done = await mapLimit(rehearsed, config.applyConcurrency, (step) => executeStep(run, step));
  const executed = new Map<string, Executed>();
  const refused: string[] = [];
  rehearsed.forEach(({ p, decision }, i) => {
    const e = done[i]!;
    executed.set(p.item.name, e);
    // A create the API server refused for good created nothing: its write-ahead entry goes.
    if (decision.op === 'create' && e.result.reason === 'ApplyFailed' && !e.result.transient)
      refused.push(objectKey(p.id));
  });
  return { plan: next, executed, refused };
}

const contextOf = (run: Run, p: ResolvedItem, holders?: Holders): DecideContext => ({
  writer: run.writer,
  entry: run.inventory.find(p.id),
  holders: holders && entryHolders(holders, p.id),
});

/**
 * observeAll reads each item's live object (or a snapshot that shows nothing to do) and
 * decides what it needs, with the other SyncResources that name it where that matters; an
 * item whose read fails is settled (failed).
 */
async function observeAll(
  run: Run,
  items: ResolvedItem[],
): Promise<{ steps: Step[]; failed: Map<string, PlanItem> }> {
  const { deps } = run;
  const failed = new Map<string, PlanItem>();
  const read = await mapLimit(items, deps.config.applyConcurrency, async (p) => {
    try {
      const ctx = deps.snapshots === false ? undefined : contextOf(run, p);
      return { p, live: await observe(deps.skr, p, ctx, deps.snapshotsSince) };
    } catch (err) {
      failed.set(p.item.name, settle(p, itemFailure(p, err)));
      return undefined;
    }
  });
  const seen = read.filter((s) => s !== undefined);
  // Under a policy, who else names an object is needed for every object not ours yet.
  const policy = deps.policy;
  const holders = seen.some(
    ({ p, live }) =>
      needsHolders(p, live, run.inventory.find(p.id)) ||
      (policy !== undefined && live !== undefined && !run.inventory.find(p.id)),
  )
    ? await run.holders()
    : undefined;
  const steps = seen.map(({ p, live }) => {
    const ctx = contextOf(run, p, holders);
    const decision = decide(p, live, ctx);
    const refused = policy ? tenancyRefusal(run.sr.metadata.namespace ?? '', decision, ctx) : undefined;
    return {
      p,
      live,
      decision: refused ? settled(result(p.item.name, 'Error', 'NotPermitted', refused)) : decision,
    };
  });
  return { steps, failed };
}

/** executeStep carries out one item's decision in its span. */
function executeStep(run: Run, { p, decision }: Step): Promise<Executed> {
  return inSpan('apply item', itemAttributes(p), async (span) => {
    const e = await execute(run.deps.skr, p, decision, run.writer);
    let r = e.result;
    // An adopted object says so on every run, not only the one that adopted it.
    if (r.state === 'Ready' && p.opts.own && keepsAdoption.has(r.reason) && run.inventory.find(p.id)?.adopted)
      r = { ...r, ...adopted(p, r.change) };
    span.setAttributes({ 'sync.item.reason': r.reason, 'sync.item.state': r.state });
    if (r.change?.cause)
      span.setAttributes({
        'sync.drift.paths': r.change.cause.paths,
        'sync.drift.managers': r.change.cause.managers,
      });
    return { ...e, result: r };
  });
}

/** keepsAdoption are the reasons an adopted object's item reports as Adopted. */
const keepsAdoption = new Set(['Unchanged', 'Applied', 'Ignored']);

/** itemAttributes are an item's span attributes. */
export function itemAttributes(p: PlanItem): Record<string, string> {
  return {
    'sync.item': p.item.name,
    'sync.item.strategy': p.item.strategy,
    ...(p.id ? { 'sync.object': `${p.id.kind}/${p.id.namespace ?? ''}/${p.id.name}` } : {}),
  };
}

/**
 * rehearseRefusedCreates dry-runs the creates of items whose last run the SKR refused
 * (ApplyFailed): one refused again fails now, before its write-ahead inventory entry is
 * written and removed again, so a permanently refused item costs no KCP writes per run.
 */
async function rehearseRefusedCreates(run: Run, steps: Step[]): Promise<Step[]> {
  const { skr, config } = run.deps;
  const refusedBefore = new Set(
    (run.sr.status?.items ?? []).filter((i) => i.reason === 'ApplyFailed').map((i) => i.name),
  );
  return mapLimit(steps, config.applyConcurrency, async (step) => {
    const d = step.decision;
    if (d.op !== 'create' || !refusedBefore.has(step.p.item.name)) return step;
    try {
      await inSkr(() => applyObject(skr, step.p.info, d.desired, run.writer.manager, undefined, true));
      return step;
    } catch (err) {
      const r = itemFailure(step.p, err);
      return r.transient ? step : { ...step, decision: settled(r) };
    }
  });
}
