// reconcile.ts is the engine's one idempotent path: read the SyncResource, make
// the SKR match its items, prune what no item claims, and return the outcome from
// which status is computed. Deletion of the SyncResource runs the same way.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config.ts';
import { applyObject, getObject, mustFind, type Cluster, type KubeObject } from '../kube/objects.ts';
import { isConflict, TransientError } from '../kube/errors.ts';
import type { KcpStore } from '../kcp.ts';
import { FINALIZER, objectKey, type InventoryEntry, type SyncResource } from '../model.ts';
import { installRank, isFoundation } from '../strategies.ts';
import { inSpan, tracer } from '../telemetry.ts';
import { canonical } from '../values.ts';
import { subjectOf } from '../changeset.ts';
import { describeId } from '../manifest.ts';
import { mapLimit } from '../concurrency.ts';
import { entryOf, Inventory, withoutDigests } from './inventory.ts';
import {
  adopted,
  decide,
  execute,
  itemFailure,
  needsHolders,
  observe,
  type DecideContext,
  type Decision,
} from './items.ts';
import { redacted, requestFailure } from '../policy/rules.ts';
import { ADOPTION_REFUSAL, foreignHolders, itemRefusal, type SyncPolicy } from '../policy/tenancy.ts';
import { entryHolders, holdersOf, writerOf, type Holders, type Writer } from './share.ts';
import {
  confirmSources,
  crdProvides,
  fillSources,
  isParsed,
  isResolved,
  markDuplicates,
  parseItems,
  readResourceTexts,
  identityOf,
  resolveKind,
  type ParsedItem,
  type PlanItem,
  type ResolvedItem,
  type ResourceSourceReader,
  type SourceReader,
} from './plan.ts';
import { ClusterUnreachableError, guard } from './unreachable.ts';
import { deleteEntries } from './prune.ts';
import { result, type ApplyResult, type ItemResult } from './result.ts';
import type { RetryReason } from '../reasons.ts';

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
  /** hooks let tests inject failures between the steps of a run. */
  hooks?: { afterInventoryWrite?: () => Promise<void> };
}

/**
 * reconcile applies sr to its SKR. Item problems end up in the result; a cluster
 * that cannot be reached ends up in result.clusterError; KCP failures (including a
 * 409 because sr changed meanwhile) throw a TransientError for the caller to retry.
 */
export async function reconcile(input: SyncResource, deps: ReconcileDeps): Promise<ApplyResult> {
  return (await reconcileRun(input, deps)).result;
}

/** reconcileRun is reconcile that also returns the SyncResource as the run last read or wrote it. */
export async function reconcileRun(
  input: SyncResource,
  deps: ReconcileDeps,
): Promise<{ result: ApplyResult; sr: SyncResource }> {
  const now = deps.now ?? (() => new Date());
  // ref.sr always holds the latest version we wrote: the next write is guarded by its resourceVersion.
  const ref = { sr: input };
  const res: ApplyResult = {
    generation: input.metadata.generation ?? 0,
    observedAt: now().toISOString(),
    items: [],
    changes: [],
    inventory: [],
    pending: [],
  };
  const inventory = new Inventory(input.status?.synced ?? [], async (entries) => {
    ref.sr = await kcpWrite(() =>
      inSpan('write inventory', { 'sync.inventory.size': entries.length }, () =>
        writeInventory(deps.kcp, ref.sr, entries),
      ),
    );
    await deps.hooks?.afterInventoryWrite?.();
  });
  try {
    if (input.metadata.deletionTimestamp) {
      await removeAll(ref, deps, inventory, res);
    } else {
      ref.sr = await kcpWrite(() => deps.kcp.claim(ref.sr));
      // Suspended: no request to the SKR at all. The finalizer still guards the inventory.
      if (input.spec.suspend === true) res.suspended = true;
      else await applyItems(ref.sr, deps, inventory, res);
    }
  } catch (err) {
    if (!(err instanceof ClusterUnreachableError)) throw err;
    res.clusterError = { reason: 'ClusterUnreachable', message: err.message, transient: true };
  }
  res.inventory = [...inventory.entries];
  return { result: res, sr: ref.sr };
}

/**
 * writeInventory writes status.synced guarded by the resourceVersion we read. On a
 * conflict it re-reads: if only other fields changed (the status step wrote), the
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
      if (!isConflict(err) || attempt >= 3) throw err;
      const live = await kcp.get(sr.metadata.namespace!, sr.metadata.name);
      const same =
        live &&
        live.metadata.uid === sr.metadata.uid &&
        live.metadata.generation === sr.metadata.generation &&
        canonical(withoutDigests(live.status?.synced ?? [])) ===
          canonical(withoutDigests(sr.status?.synced ?? []));
      if (!same) throw err;
      sr = { ...sr, metadata: { ...sr.metadata, resourceVersion: live.metadata.resourceVersion } };
    }
  }
}

/** inKcp runs a KCP request whose failure fails the run transiently (it is retried). */
async function inKcp<T>(what: string, reason: RetryReason, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new TransientError(`${what} in the KCP failed; retry`, reason, err);
  }
}

const kcpWrite = <T>(fn: () => Promise<T>) => inKcp('writing the SyncResource', 'KcpWriteFailed', fn);

/** Run is one application of a SyncResource's items, shared by its phases. */
interface Run {
  sr: SyncResource;
  deps: ReconcileDeps;
  inventory: Inventory;
  plan: PlanItem[];
  /** results of the items the run took to the SKR (settled items carry theirs in done). */
  results: Map<PlanItem, ItemResult>;
  /** refused are the keys of objects whose create the SKR refused for good: their write-ahead entries go. */
  refused: Set<string>;
  /** writer is who writes in the SKR: the SyncResource's owner key and field manager. */
  writer: Writer;
  /** holders reads (once a run, when needed) which other SyncResources of the Kyma name which objects. */
  holders: () => Promise<Holders>;
}

/** Step is a resolved item with its live object and what it needs. */
interface Step {
  p: ResolvedItem;
  live: KubeObject | undefined;
  decision: Decision;
}

/**
 * applyItems makes the SKR match sr's items, in phases: plan the items (read, parse, fill
 * values by reference); take them to the SKR stage by stage (installStages); confirm the
 * sources did not change meanwhile; collect the results; prune what no item claims.
 */
async function applyItems(
  sr: SyncResource,
  deps: ReconcileDeps,
  inventory: Inventory,
  res: ApplyResult,
): Promise<void> {
  const run: Run = {
    sr,
    deps,
    inventory,
    plan: await planItems(sr, deps),
    results: new Map(),
    refused: new Set(),
    writer: writerOf(sr, deps.config),
    holders: holdersReader(sr, deps),
  };
  const [foundation, rest, statusOnly] = installStages(run.plan);
  await applyStage(run, foundation);
  await waitForCrds(run.plan, [...rest, ...statusOnly], deps.skr, deps.config);
  await applyStage(run, rest);
  await applyStage(run, statusOnly);
  await confirmSources(run.plan, deps.sources);
  collectResults(run, res);
  await pruneUnclaimed(run, res);
}

/** planItems reads the texts of resourceFrom items, parses every item and fills the values of dataFrom items. */
async function planItems(sr: SyncResource, deps: ReconcileDeps): Promise<PlanItem[]> {
  const { config } = deps;
  const texts = await readResourceTexts(sr.spec.items ?? [], deps.resourceSources, config.applyConcurrency);
  const plan = parseItems(sr.spec.items ?? [], config, texts);
  await fillSources(plan, deps.sources, config.applyConcurrency);
  return plan;
}

/**
 * installStages splits the plan into its stages: Namespaces and CRDs; then every other
 * object; then items that only write a status, so that an object created by another item
 * of this run is there for them.
 */
function installStages(plan: PlanItem[]): [PlanItem[], PlanItem[], PlanItem[]] {
  const foundation = plan.filter((p) => p.id && isFoundation(p.id.kind));
  const statusOnly = plan.filter((p) => !p.object && !foundation.includes(p));
  const rest = plan.filter((p) => !foundation.includes(p) && !statusOnly.includes(p));
  return [foundation, rest, statusOnly];
}

/**
 * applyStage takes one stage's items to the SKR: resolve their kinds, read their objects,
 * decide, rehearse creates refused before, record what will be ours (write-ahead), execute,
 * and record objects found ours but missing from the inventory. A failed request stays on
 * its item (itemFailure); only cluster-level failures end the run.
 */
async function applyStage(run: Run, stage: PlanItem[]): Promise<void> {
  const {
    deps: { skr, config },
    plan,
    inventory,
  } = run;
  await mapLimit(stage, config.applyConcurrency, (p) =>
    resolveKind(p, plan, skr, config, run.deps.policy).catch((err: unknown) => {
      p.done = itemFailure(p, err);
    }),
  );
  markDuplicates(
    plan.filter((p) => p.info),
    config,
  );
  const candidates = stage.filter(isResolved).sort((a, b) => installRank(a.id.kind) - installRank(b.id.kind));
  const steps = await observeAll(run, candidates);
  await rehearseRefusedCreates(run, steps);
  // Write-ahead: every object we are about to stamp as ours is recorded first.
  await inventory.record(
    steps.flatMap(({ p, decision: d }) => (d.record ? [entryOf(p.item.name, p.id, d.adopt)] : [])),
  );
  const done = await mapLimit(steps, config.applyConcurrency, (step) => executeStep(run, step));
  steps.forEach(({ p, decision }, i) => {
    const r = done[i]!;
    run.results.set(p, r);
    // A create the API server refused for good created nothing: its write-ahead entry goes.
    if (decision.op === 'create' && r.reason === 'ApplyFailed' && !r.transient)
      run.refused.add(objectKey(p.id));
  });
}

const contextOf = (run: Run, p: ResolvedItem, holders?: Holders): DecideContext => ({
  writer: run.writer,
  entry: run.inventory.find(p.id),
  holders: holders && entryHolders(holders, p.id),
});

/** holdersReader reads, at most once, the inventories of the other SyncResources of sr's Kyma. */
function holdersReader(sr: SyncResource, deps: ReconcileDeps): () => Promise<Holders> {
  let read: Promise<Holders> | undefined;
  return () =>
    (read ??= inKcp('reading the SyncResources of the Kyma', 'KcpReadFailed', async () => {
      const namespaces = (await deps.holderNamespaces?.()) ?? deps.config.controlPlaneNamespaces;
      const teams = namespaces.filter((ns) => !deps.config.controlPlaneNamespaces.includes(ns));
      return holdersOf(sr, await deps.kcp.listForKyma(sr.spec.kyma, namespaces, teams));
    }));
}

/**
 * observeAll reads each item's live object (or a snapshot that shows nothing to do) and
 * decides what it needs, with the other SyncResources that name it where that matters; an
 * item whose read fails is settled.
 */
async function observeAll(run: Run, items: ResolvedItem[]): Promise<Step[]> {
  const { deps } = run;
  const read = await mapLimit(items, deps.config.applyConcurrency, async (p) => {
    try {
      const ctx = deps.snapshots === false ? undefined : contextOf(run, p);
      return { p, live: await observe(deps.skr, p, ctx, deps.snapshotsSince) };
    } catch (err) {
      p.done = itemFailure(p, err);
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
  return seen.map(({ p, live }) => {
    const ctx = contextOf(run, p, holders);
    const decision = decide(p, live, ctx);
    const refused = policy ? tenancyRefusal(run.sr, decision, ctx) : undefined;
    return {
      p,
      live,
      decision: refused
        ? {
            op: 'none',
            status: false,
            record: false,
            drift: false,
            done: result(p.item.name, 'Error', 'NotPermitted', refused),
          }
        : decision,
    };
  });
}

/**
 * tenancyRefusal: under a policy, a SyncResource never adopts an object the product did
 * not create, and never joins, takes over or deletes one that a SyncResource of another
 * namespace names; says why, or undefined.
 */
function tenancyRefusal(sr: SyncResource, d: Decision, ctx: DecideContext): string | undefined {
  if (d.op === 'none' || d.op === 'create') return undefined;
  const foreign = foreignHolders(
    sr.metadata.namespace ?? '',
    (ctx.holders ?? []).map((h) => h.owner),
  );
  if (foreign && !ctx.entry) return foreign;
  if (d.adopt === true) return ADOPTION_REFUSAL;
  return undefined;
}

/** executeStep carries out one item's decision in its span. */
function executeStep(run: Run, { p, decision }: Step): Promise<ItemResult> {
  return inSpan('apply item', itemAttributes(p), async (span) => {
    let r = await execute(run.deps.skr, p, decision, run.writer, run.deps.config);
    // An adopted object says so on every run, not only the one that adopted it.
    if (r.state === 'Ready' && p.opts.own && keepsAdoption.has(r.reason) && run.inventory.find(p.id)?.adopted)
      r = { ...r, ...adopted(p, r.change) };
    span.setAttributes({ 'sync.item.reason': r.reason, 'sync.item.state': r.state });
    if (r.change?.cause)
      span.setAttributes({
        'sync.drift.paths': r.change.cause.paths,
        'sync.drift.managers': r.change.cause.managers,
      });
    return r;
  });
}

/** collectResults puts every item's result in spec order into res, with no value of a source Secret in it. */
function collectResults(run: Run, res: ApplyResult): void {
  for (const p of run.plan) {
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
    const r = p.done ?? run.results.get(p);
    if (!r) throw new Error(`item ${p.item.name} has no result`);
    // API errors may quote what was sent: no value of a source Secret leaves the run.
    const shown = redacted(r, p.secrets);
    res.items.push(shown);
    if (shown.change) res.changes.push(shown.change);
  }
}

/**
 * pruneUnclaimed deletes what no current item claims (keeping the entries of items whose
 * text cannot be read now) and writes the inventory as the run leaves the SKR.
 */
async function pruneUnclaimed(run: Run, res: ApplyResult): Promise<void> {
  const { plan, inventory, deps } = run;
  // An object is claimed by its item; an item with a resource wins over a status-only one.
  // A duplicate claims nothing: the first item naming an object owns it.
  const claimed = new Map<string, ParsedItem>();
  for (const p of plan.filter(isParsed)) {
    if (p.done?.reason !== 'DuplicateObject' && (p.object || !claimed.has(objectKey(p.id))))
      claimed.set(objectKey(p.id), p);
  }
  const unreadable = new Set(plan.filter((p) => !p.id).map((p) => p.item.name));
  const unclaimed = inventory.entries.filter((e) => !claimed.has(objectKey(e)) && !unreadable.has(e.item));
  // Under a policy, an object outside it is never pruned: it stays, and says why.
  const kept = await outsidePolicy(run, unclaimed);
  const orphans = unclaimed.filter((e) => !kept.has(e));
  const pruned = await deleteEntries(deps.skr, orphans, run.writer, deps.config, run.holders);
  res.changes.push(...pruned.changes);
  res.pending = pruned.pending.map(objectKey);
  res.failed = [...pruned.failed, ...kept.values()];
  const goneKeys = new Set(pruned.gone.map(objectKey));
  const next: InventoryEntry[] = [];
  for (const e of inventory.entries) {
    const key = objectKey(e);
    if (goneKeys.has(key) || run.refused.has(key)) continue;
    const p = claimed.get(key);
    if (p && !p.done && !p.opts.own) {
      // Delete keeps its entry until the object is gone; UpdateAndDelete never owns.
      if (p.opts.remove && run.results.get(p)?.state !== 'Ready') next.push({ ...e, item: p.item.name });
      continue;
    }
    // The digests of what the server holds after this run; an entry whose item wrote nothing keeps its own.
    next.push(p ? { ...e, item: p.item.name, apiVersion: p.id.apiVersion, ...p.applied } : e);
  }
  const recorded = await inventory.settle(next);
  if (recorded.length > 0) res.recorded = recorded;
}

/** outsidePolicy are the entries (with why) a run under a policy may not prune: their kind, scope or namespace is not allowed now. */
async function outsidePolicy(
  run: Run,
  entries: InventoryEntry[],
): Promise<Map<InventoryEntry, { subject: string; message: string }>> {
  const out = new Map<InventoryEntry, { subject: string; message: string }>();
  const policy = run.deps.policy;
  if (!policy) return out;
  for (const e of entries) {
    const info = await guard(() => run.deps.skr.mapper.find(e.apiVersion, e.kind)).catch((err: unknown) => {
      if (err instanceof ClusterUnreachableError) throw err;
      return undefined;
    });
    // A kind the SKR no longer serves has nothing left to prune.
    if (!info) continue;
    const why = itemRefusal(policy, identityOf(e, info), 'CreateAndSync');
    if (why) out.set(e, { subject: subjectOf(e), message: `${describeId(e)} is not pruned: ${why}` });
  }
  return out;
}

function itemAttributes(p: PlanItem): Record<string, string> {
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
async function rehearseRefusedCreates(run: Run, steps: Step[]): Promise<void> {
  const {
    deps: { skr, config },
  } = run;
  const refusedBefore = new Set(
    (run.sr.status?.items ?? []).filter((i) => i.reason === 'ApplyFailed').map((i) => i.name),
  );
  await mapLimit(steps, config.applyConcurrency, async (step) => {
    const d = step.decision;
    if (d.op !== 'create' || !refusedBefore.has(step.p.item.name)) return;
    try {
      await guard(() => applyObject(skr, step.p.info, d.desired, run.writer.manager, undefined, true));
    } catch (err) {
      const r = itemFailure(step.p, err);
      if (!r.transient) step.decision = { op: 'none', status: false, record: false, drift: false, done: r };
    }
  });
}

/** keepsAdoption are the reasons an adopted object's item reports as Adopted. */
const keepsAdoption = new Set(['Unchanged', 'Applied', 'Ignored']);

/**
 * waitForCrds waits (bounded) for CRDs of this SyncResource that later items need: each
 * Established, then its kind in discovery (the API server serves a new group-version a
 * moment after the CRD is Established).
 */
async function waitForCrds(plan: PlanItem[], rest: PlanItem[], skr: Cluster, config: Config): Promise<void> {
  const needed = new Map<PlanItem, { apiVersion: string; kind: string }[]>();
  for (const p of rest) {
    if (p.done || !p.id) continue;
    const crd = crdProvides(plan, p.id.apiVersion, p.id.kind);
    if (crd && !crd.done)
      needed.set(crd, [...(needed.get(crd) ?? []), { apiVersion: p.id.apiVersion, kind: p.id.kind }]);
  }
  if (needed.size === 0) return;
  const info = await guard(() => mustFind(skr, 'apiextensions.k8s.io/v1', 'CustomResourceDefinition'));
  const deadline = Date.now() + config.crdWaitMs;
  for (const [crd, kinds] of needed) {
    let established = false;
    while (!established && Date.now() < deadline) {
      let live: { status?: { conditions?: { type: string; status: string }[] } } | undefined;
      try {
        live = (await guard(() => getObject(skr, info, undefined, crd.object!.metadata.name))) as typeof live;
      } catch (err) {
        // A read the SKR refuses ends the wait: the items that need the CRD report what they find.
        requestFailure(crd.item.name, err);
        break;
      }
      established =
        live?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ?? false;
      if (!established) await sleep(100);
    }
    // What a later item finds here, resolveKind finds too (the mapper caches it); what is still missing it looks up again.
    for (const { apiVersion, kind } of kinds) {
      if (!established) skr.mapper.forget(apiVersion);
      else while (!(await served(skr, apiVersion, kind)) && Date.now() < deadline) await sleep(100);
    }
  }
}

/** served tells whether discovery, read afresh, lists kind; a refusal other than the cluster being unreachable is for resolveKind to report. */
async function served(skr: Cluster, apiVersion: string, kind: string): Promise<boolean> {
  skr.mapper.forget(apiVersion);
  try {
    return (await guard(() => skr.mapper.find(apiVersion, kind))) !== undefined;
  } catch (err) {
    if (err instanceof ClusterUnreachableError) throw err;
    return true;
  }
}

/** removeAll handles a SyncResource being deleted, per its deletionPolicy. */
async function removeAll(
  ref: { sr: SyncResource },
  deps: ReconcileDeps,
  inventory: Inventory,
  res: ApplyResult,
): Promise<void> {
  const sr = ref.sr;
  const policy = sr.spec.deletionPolicy ?? 'Delete';
  res.deleting = { finalizerRemoved: false, policy };
  if (!sr.metadata.finalizers?.includes(FINALIZER)) {
    res.deleting.finalizerRemoved = true;
    return;
  }
  // Suspended means no writes to the SKR, deletion included (as Flux does): the objects
  // stay as they are, marks and all. Lift the suspension first to have them deleted.
  if (sr.spec.suspend === true) {
    res.suspended = true;
    await kcpWrite(() => deps.kcp.removeFinalizer(ref.sr));
    res.deleting.finalizerRemoved = true;
    return;
  }
  // Delete deletes what we created; either policy releases what we adopted.
  const handled = policy === 'Delete' ? [...inventory.entries] : inventory.entries.filter((e) => e.adopted);
  if (handled.length > 0) {
    const out = await deleteEntries(
      deps.skr,
      handled,
      writerOf(sr, deps.config),
      deps.config,
      holdersReader(sr, deps),
    );
    res.changes.push(...out.changes);
    res.pending = out.pending.map(objectKey);
    res.failed = out.failed;
    const gone = new Set(out.gone.map(objectKey));
    await inventory.replace(inventory.entries.filter((e) => !gone.has(objectKey(e))));
    // The finalizer stays until every object is handled; a failure is reported, and the next run tries again.
    if (out.pending.length > 0 || out.failed.length > 0) return;
  }
  await kcpWrite(() => deps.kcp.removeFinalizer(ref.sr));
  res.deleting.finalizerRemoved = true;
}
