// apply.ts is the apply-items step: cluster resolved in, the engine run against the
// SKR, the outcome out. The kubeconfig is read here, used through the per-process
// client cache, and never leaves this process.
import { findAccessSecret } from '../cluster/resolve.ts';
import { reconcile } from '../engine/reconcile.ts';
import type { ClusterResolved, ItemsApplied } from '../events.ts';
import { TerminalError } from '../kube/errors.ts';
import { Metrics } from '../telemetry.ts';
import { KeyedQueue } from '../util.ts';
import type { Deps } from './deps.ts';
import { failure } from './resolve.ts';

/** ApplyOutcome is what the step replies with; retry asks the broker to redeliver. */
export type ApplyOutcome = { kind: 'applied'; data: ItemsApplied; retry: boolean } | { kind: 'none'; why: string };

const queue = new KeyedQueue<ApplyOutcome>();

// Runs that left a SyncResource fully Ready, by key: a watch event that follows such a
// run for the same generation is the echo of our own writes (finalizer, inventory) and
// needs no second run. Reconcile requests (resync, Kyma or Secret change) always run.
const ECHO_WINDOW_MS = 2_000;
const recent = new Map<string, { uid: string; generation: number; at: number }>();

/**
 * applyStep reconciles the SyncResource named in data. Runs for one SyncResource are
 * serialized in this process, and requests arriving during a run share the next one.
 */
export function applyStep(deps: Deps, data: ClusterResolved): Promise<ApplyOutcome> {
  return queue.run(`${data.namespace}/${data.name}`, () => applyOnce(deps, data));
}

async function applyOnce(deps: Deps, data: ClusterResolved): Promise<ApplyOutcome> {
  const key = `${data.namespace}/${data.name}`;
  const sr = await deps.store.get(data.namespace, data.name);
  if (!sr || sr.metadata.uid !== data.uid) return { kind: 'none', why: 'gone or replaced' };
  const last = recent.get(key);
  if (data.trigger === 'watch' && last && last.uid === sr.metadata.uid && last.generation === sr.metadata.generation &&
    Date.now() - last.at < ECHO_WINDOW_MS && !sr.metadata.deletionTimestamp) {
    return { kind: 'none', why: 'echo of our own writes' };
  }
  let secret;
  try {
    secret = await findAccessSecret(deps.kcp, data.namespace, sr.spec.kyma);
  } catch (err) {
    if (!(err instanceof TerminalError)) throw err;
    return { kind: 'applied', data: failure(sr, err), retry: false };
  }
  let skr;
  try {
    skr = await deps.cache.get(secret, sr.spec.kyma);
  } catch (err) {
    if (!(err instanceof TerminalError)) throw err;
    return { kind: 'applied', data: failure(sr, err), retry: false };
  }
  const result = await reconcile(sr, { skr, kcp: deps.store, config: deps.config });
  if (result.clusterError) {
    // The credential or the trust may have been rotated: connect afresh next time.
    deps.cache.evict(secret);
  }
  const allReady = !result.clusterError && !result.deleting && result.pending.length === 0 && result.items.every((i) => i.state === 'Ready');
  if (allReady) recent.set(key, { uid: sr.metadata.uid!, generation: result.generation, at: Date.now() });
  else recent.delete(key);
  if (recent.size > 50_000) recent.clear();
  const strategies = new Map(sr.spec.items.map((i) => [i.name, i.strategy]));
  for (const i of result.items) Metrics.items.add(1, { strategy: strategies.get(i.name) ?? '', reason: i.reason, state: i.state });
  const drift = result.changes.filter((c) => c.drift).length;
  if (drift > 0) Metrics.driftCorrections.add(drift, { cluster: sr.spec.kyma });
  const out: ItemsApplied = { namespace: data.namespace, name: data.name, uid: data.uid, kyma: sr.spec.kyma, result };
  return { kind: 'applied', data: out, retry: result.clusterError?.transient === true };
}

