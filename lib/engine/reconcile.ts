// reconcile.ts is the engine's one idempotent path, and only orchestrates it: read the
// SyncResource, claim it, take its items to the SKR stage by stage (plan.ts, stage.ts,
// crds.ts), prune what no item claims (prune.ts), and return the outcome from which status
// is computed. Deletion of the SyncResource runs the same way (delete.ts).
import { lostRace } from '../kube/errors.ts';
import { confirmingWrites } from '../kube/objects.ts';
import type { KcpStore } from '../kcp.ts';
import type { InventoryEntry, SyncResource } from '../model.ts';
import { isFoundation } from '../strategies.ts';
import { inSpan, tracer } from '../telemetry.ts';
import { canonical } from '../values.ts';
import { redacted } from '../policy/rules.ts';
import { Inventory, withoutDigests } from './inventory.ts';
import { parseItems, type PlanItem } from './plan.ts';
import { confirmSources, fillSources, readResourceTexts } from './sources.ts';
import { waitForCrds } from './crds.ts';
import { removeAll } from './delete.ts';
import type { Executed } from './execute.ts';
import { pruneUnclaimed } from './prune.ts';
import { ClusterUnreachableError } from './unreachable.ts';
import type { ApplyResult } from './result.ts';
import { kcpWrite, newRun, type ReconcileDeps, type Run } from './run.ts';
import { applyStage, itemAttributes } from './stage.ts';

export type { ReconcileDeps } from './run.ts';

/**
 * reconcile applies sr to its SKR. Item problems end up in the result; a cluster
 * that cannot be reached ends up in result.clusterError; KCP failures (including a
 * 409 because sr changed meanwhile) throw a TransientError for the caller to retry.
 */
export async function reconcile(input: SyncResource, deps: ReconcileDeps): Promise<ApplyResult> {
  return (await reconcileRun(input, deps)).result;
}

/**
 * reconcileRun is reconcile that also returns the SyncResource as the run last read or
 * wrote it, and whether it is gone (a deletion run removed the last finalizer).
 */
export async function reconcileRun(
  input: SyncResource,
  deps: ReconcileDeps,
): Promise<{ result: ApplyResult; sr: SyncResource; gone: boolean }> {
  const now = deps.now ?? (() => new Date());
  // latest always holds the latest version we wrote: the next write is guarded by its resourceVersion.
  let latest = input;
  const base: ApplyResult = {
    generation: input.metadata.generation ?? 0,
    observedAt: now().toISOString(),
    items: [],
    changes: [],
    inventory: [],
    pending: [],
  };
  // The claim goes out with the run's first reads; every write, the inventory's and the
  // SKR's (confirmingWrites), waits for it, and a lost claim is the run's failure.
  let claim: Promise<void> = Promise.resolve();
  const inventory = new Inventory(input.status?.synced ?? [], async (entries) => {
    await claim;
    latest = await kcpWrite(() =>
      inSpan('write inventory', { 'sync.inventory.size': entries.length }, () =>
        writeInventory(deps.kcp, latest, entries),
      ),
    );
    await deps.hooks?.afterInventoryWrite?.();
  });
  let res = base;
  let gone = false;
  try {
    if (input.metadata.deletionTimestamp) {
      const { gone: removed, ...done } = await removeAll(newRun(latest, deps, inventory, () => latest));
      gone = removed === true;
      res = { ...base, ...done };
    } else {
      claim = kcpWrite(() => deps.kcp.claim(input)).then((sr) => void (latest = sr));
      // A run that fails before it writes still answers for its claim (finally, below).
      claim.catch(() => {});
      // Suspended: no request to the SKR at all. The finalizer still guards the inventory.
      if (input.spec.suspend === true) res = { ...base, suspended: true };
      else {
        const claimed = { ...deps, skr: confirmingWrites(deps.skr, () => claim) };
        res = { ...base, ...(await applyItems(newRun(input, claimed, inventory, () => latest))) };
      }
    }
  } catch (err) {
    if (!(err instanceof ClusterUnreachableError)) throw err;
    res = { ...base, clusterError: { reason: 'ClusterUnreachable', message: err.message, transient: true } };
  } finally {
    await claim;
  }
  return { result: { ...res, inventory: [...inventory.entries] }, sr: latest, gone };
}

/**
 * writeInventory writes status.synced guarded by the resourceVersion we read. When another
 * write came first it re-reads: if only other fields changed (the status step wrote), the
 * inventory we built on still holds and the write is retried; otherwise the run fails
 * transiently and starts over from fresh state.
 */
async function writeInventory(
  kcp: KcpStore,
  sr: SyncResource,
  entries: InventoryEntry[],
): Promise<SyncResource> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await kcp.writeInventory(sr, entries);
    } catch (err) {
      if (!lostRace(err) || attempt >= 3) throw err;
      const live = await kcp.get(sr.metadata.namespace!, sr.metadata.name);
      const same =
        live &&
        live.metadata.uid === sr.metadata.uid &&
        live.metadata.generation === sr.metadata.generation &&
        canonical(withoutDigests(live.status?.synced ?? [])) ===
          canonical(withoutDigests(sr.status?.synced ?? []));
      if (!same) throw err;
      // The write goes on from the live object: its resourceVersion, and its status as it is now.
      sr = live;
    }
  }
}

/**
 * applyItems makes the SKR match the run's items, in phases: plan the items (read, parse,
 * fill values by reference); take them to the SKR stage by stage (installStages); confirm
 * the sources did not change meanwhile; collect the results; prune what no item claims.
 */
async function applyItems(run: Run): Promise<Partial<ApplyResult>> {
  const { deps } = run;
  let plan = await planItems(run.sr, deps);
  const executed = new Map<string, Executed>();
  const refused = new Set<string>();
  const [foundation, rest, statusOnly] = installStages(plan);
  for (const stage of [foundation, rest, statusOnly]) {
    // Later stages' kinds may come from a CRD of an earlier one.
    if (stage === rest) await waitForCrds(plan, new Set([...rest, ...statusOnly]), deps.skr, deps.config);
    const done = await applyStage(run, plan, stage);
    plan = done.plan;
    for (const [name, e] of done.executed) executed.set(name, e);
    for (const key of done.refused) refused.add(key);
  }
  await confirmSources(plan, deps.sources);
  const items = collectResults(plan, executed);
  const pruned = await pruneUnclaimed(run, plan, executed, refused);
  return {
    items,
    changes: [...items.flatMap((r) => (r.change ? [r.change] : [])), ...pruned.changes],
    pending: pruned.pending,
    failed: pruned.failed,
    ...(pruned.recorded.length > 0 ? { recorded: pruned.recorded } : {}),
  };
}

/** planItems reads the texts of resourceFrom items, parses every item and fills the values of dataFrom items. */
async function planItems(sr: SyncResource, deps: ReconcileDeps): Promise<PlanItem[]> {
  const { config } = deps;
  const texts = await readResourceTexts(sr.spec.items ?? [], deps.resourceSources, config.applyConcurrency);
  return fillSources(parseItems(sr.spec.items ?? [], config, texts), deps.sources, config.applyConcurrency);
}

/**
 * installStages splits the plan's item names into its stages: Namespaces and CRDs; then
 * every other object; then items that only write a status, so that an object created by
 * another item of this run is there for them.
 */
function installStages(plan: readonly PlanItem[]): [Set<string>, Set<string>, Set<string>] {
  const foundation = plan.filter((p) => p.id && isFoundation(p.id.kind));
  const statusOnly = plan.filter((p) => !p.object && !foundation.includes(p));
  const rest = plan.filter((p) => !foundation.includes(p) && !statusOnly.includes(p));
  const names = (ps: PlanItem[]) => new Set(ps.map((p) => p.item.name));
  return [names(foundation), names(rest), names(statusOnly)];
}

/** collectResults is every item's result in spec order, with no value of a source Secret in it. */
function collectResults(plan: readonly PlanItem[], executed: ReadonlyMap<string, Executed>) {
  return plan.map((p) => {
    // Items settled without touching the SKR get their span too: one span per item.
    if (p.done)
      tracer
        .startSpan('apply item', {
          attributes: {
            ...itemAttributes(p),
            'sync.item.reason': p.done.reason,
            'sync.item.state': p.done.state,
          },
        })
        .end();
    const r = p.done ?? executed.get(p.item.name)?.result;
    if (!r) throw new Error(`item ${p.item.name} has no result`);
    // API errors may quote what was sent: no value of a source Secret leaves the run.
    return redacted(r, p.secrets);
  });
}
