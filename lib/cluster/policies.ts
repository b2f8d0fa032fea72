// policies.ts reads the SyncPolicies from the KCP and admits a SyncResource's run under
// them (policy/tenancy.ts has the rules). Read afresh for every run of a team's
// SyncResource: a policy narrowed or removed holds from the next run on, never later.
import type { Config } from '../config.ts';
import { KubeApiError, TerminalError } from '../kube/errors.ts';
import type { KcpStore } from '../kcp.ts';
import type { SyncResource } from '../model.ts';
import type { Cluster } from '../kube/objects.ts';
import {
  governance,
  governedNamespaces,
  isControlPlane,
  kymaHome,
  kymaRefusal,
  SYNC_POLICY_PATH,
  type SyncPolicy,
} from '../policy/tenancy.ts';
import type { Lookups } from './resolve.ts';

/**
 * unbound tells whether err is the KCP refusing the product in a team namespace the
 * operator has not bound it in (docs/user/operating.md "Team namespaces"): none of its
 * business, and no reason to retry.
 */
export const unbound = (config: Config, namespace: string, err: unknown): boolean =>
  !isControlPlane(namespace, config) && err instanceof KubeApiError && err.code === 403;

/** getIfBound reads a SyncResource (at no older version than notOlderThan: KcpStore.get); one where the product is not bound is none. */
export function getIfBound(
  store: KcpStore,
  config: Config,
  ref: { namespace: string; name: string },
  notOlderThan?: string,
): Promise<SyncResource | undefined> {
  return store.get(ref.namespace, ref.name, notOlderThan).catch((err: unknown) => {
    if (unbound(config, ref.namespace, err)) return undefined;
    throw err;
  });
}

/** readPolicies lists every SyncPolicy (a cluster has few; one page). */
export async function readPolicies(kcp: Cluster): Promise<SyncPolicy[]> {
  const list = await kcp.client.call<{ items: SyncPolicy[] | null }>('GET', SYNC_POLICY_PATH);
  return list.items ?? [];
}

/**
 * holderNamespaces are the namespaces whose SyncResources may name an object in an SKR:
 * the control-plane ones and every team namespace one policy governs (policies read now).
 */
export async function holderNamespaces(
  policies: () => Promise<SyncPolicy[]>,
  config: Config,
): Promise<string[]> {
  return [...config.controlPlaneNamespaces, ...governedNamespaces(await policies(), config)];
}

/** policiesOnce reads the SyncPolicies at most once for one run (admission and holders share the read). */
export function policiesOnce(kcp: Cluster): () => Promise<SyncPolicy[]> {
  let read: Promise<SyncPolicy[]> | undefined;
  return () => (read ??= readPolicies(kcp));
}

/**
 * admit returns the policy under which a SyncResource of namespace targeting kyma is acted
 * on (undefined in a control-plane namespace: the global rules alone), or fails with
 * NotPermitted: no policy or two govern the namespace, or its policy does not allow the
 * Kyma as it is labelled now. fresh reads the Kyma afresh (apply-items, before any write).
 */
export async function admit(
  policies: () => Promise<SyncPolicy[]>,
  lookups: Lookups,
  config: Config,
  namespace: string,
  kyma: string,
  fresh = false,
): Promise<SyncPolicy | undefined> {
  if (isControlPlane(namespace, config)) return undefined;
  const g = governance(namespace, await policies(), config);
  if (g.kind === 'refused') throw new TerminalError(g.why, 'NotPermitted');
  if (g.kind === 'control-plane') return undefined;
  const k = await lookups.kyma(kymaHome(namespace, config), kyma, fresh);
  const why = kymaRefusal(g.policy, { name: kyma, labels: k.metadata.labels });
  if (why) throw new TerminalError(why, 'NotPermitted');
  return g.policy;
}
