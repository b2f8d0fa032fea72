// config.ts: the product's configuration, parsed once at start-up from the
// environment into a typed, validated object that is passed down.
import { isDnsLabel } from './policy/identity.ts';

/** Config configures the engine and the functions. */
export interface Config {
  /** fieldManager prefixes the field manager of each SyncResource in SKRs (engine/share.ts managerOf); earlier versions wrote with it alone. */
  fieldManager: string;
  /** defaultNamespace receives namespaced objects that name no namespace. */
  defaultNamespace: string;
  /** restrictedKinds lists "apiVersion/Kind" (e.g. "v1/Secret") that may never be synced. */
  restrictedKinds: string[];
  /** protectedNamespaces are SKR namespaces in which nothing is created, changed or deleted. */
  protectedNamespaces: string[];
  /** controlPlaneNamespaces are the only namespaces whose SyncResources are acted on. */
  controlPlaneNamespaces: string[];
  /** maxManifestBytes caps the size of one item's text. */
  maxManifestBytes: number;
  /** maxReferencedManifestBytes caps the text a resourceFrom item takes from a ConfigMap (decompressed). */
  maxReferencedManifestBytes: number;
  /** allowInsecureKubeconfigs lets kubeconfigs skip TLS verification (never in production). */
  allowInsecureKubeconfigs: boolean;
  /**
   * clusterQps and clusterBurst rate-limit requests to each SKR, kcpQps and kcpBurst to
   * the KCP, per process; 0 turns the client-side limit off and leaves it to the API
   * server's priority and fairness (as controller-runtime does by default).
   */
  clusterQps: number;
  clusterBurst: number;
  kcpQps: number;
  kcpBurst: number;
  /** crdWaitMs bounds how long one run waits for a CRD it applied to be established. */
  crdWaitMs: number;
  /** applyConcurrency bounds parallel object operations within one SyncResource. */
  applyConcurrency: number;
  /** reconcileConcurrency bounds the runs (apply-items) and status writes (write-status) one process does at a time. */
  reconcileConcurrency: number;
  /** maxClusterClients bounds the SKR clients one process keeps; the least recently used is retired beyond it. */
  maxClusterClients: number;
  /** warmClusterClients bounds the SKR clients whose idle connections stay open, most recently used first. */
  warmClusterClients: number;
}

/** defaults are the documented defaults of Config. */
export const defaults: Config = {
  fieldManager: 'kcp-sync-resource',
  defaultNamespace: 'default',
  restrictedKinds: ['v1/Secret'],
  protectedNamespaces: ['kube-system', 'kube-public', 'kube-node-lease'],
  controlPlaneNamespaces: ['kcp-system'],
  maxManifestBytes: 262_144,
  maxReferencedManifestBytes: 2_097_152,
  allowInsecureKubeconfigs: false,
  clusterQps: 0,
  clusterBurst: 0,
  kcpQps: 0,
  kcpBurst: 0,
  crdWaitMs: 10_000,
  applyConcurrency: 8,
  reconcileConcurrency: 8,
  maxClusterClients: 1_000,
  warmClusterClients: 128,
};

/** ConfigError says which variable is wrong. */
export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

const list = (v: string): string[] =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

function int(env: Record<string, string | undefined>, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min)
    throw new ConfigError(name, `must be an integer >= ${min}, got "${raw}"`);
  return n;
}

function bool(env: Record<string, string | undefined>, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === 'false') return raw === 'true';
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

/** parseConfig reads SYNC_* variables (see README) over the defaults. */
export function parseConfig(env: Record<string, string | undefined> = process.env): Config {
  const restricted =
    env.SYNC_RESTRICTED_KINDS !== undefined ? list(env.SYNC_RESTRICTED_KINDS) : defaults.restrictedKinds;
  for (const k of restricted) {
    if (!/^([a-z0-9.-]+\/)?v[0-9a-z]+\/[A-Za-z0-9]+$/.test(k)) {
      throw new ConfigError('SYNC_RESTRICTED_KINDS', `"${k}" is not apiVersion/Kind such as v1/Secret`);
    }
  }
  const protectedNs =
    env.SYNC_PROTECTED_NAMESPACES !== undefined
      ? list(env.SYNC_PROTECTED_NAMESPACES)
      : defaults.protectedNamespaces;
  for (const ns of protectedNs) {
    if (!isDnsLabel(ns))
      throw new ConfigError('SYNC_PROTECTED_NAMESPACES', `"${ns}" is not a namespace name`);
  }
  const namespaces = env.SYNC_CONTROL_PLANE_NAMESPACES
    ? list(env.SYNC_CONTROL_PLANE_NAMESPACES)
    : defaults.controlPlaneNamespaces;
  if (namespaces.length === 0)
    throw new ConfigError('SYNC_CONTROL_PLANE_NAMESPACES', 'must name at least one namespace');
  return {
    fieldManager: env.SYNC_FIELD_MANAGER || defaults.fieldManager,
    defaultNamespace: env.SYNC_DEFAULT_NAMESPACE || defaults.defaultNamespace,
    restrictedKinds: restricted,
    protectedNamespaces: protectedNs,
    controlPlaneNamespaces: namespaces,
    maxManifestBytes: int(env, 'SYNC_MAX_MANIFEST_BYTES', defaults.maxManifestBytes, 1),
    maxReferencedManifestBytes: int(
      env,
      'SYNC_MAX_REFERENCED_MANIFEST_BYTES',
      defaults.maxReferencedManifestBytes,
      1,
    ),
    allowInsecureKubeconfigs: bool(env, 'SYNC_ALLOW_INSECURE_KUBECONFIGS', defaults.allowInsecureKubeconfigs),
    clusterQps: int(env, 'SYNC_CLUSTER_QPS', defaults.clusterQps, 0),
    clusterBurst: int(env, 'SYNC_CLUSTER_BURST', defaults.clusterBurst, 0),
    kcpQps: int(env, 'SYNC_KCP_QPS', defaults.kcpQps, 0),
    kcpBurst: int(env, 'SYNC_KCP_BURST', defaults.kcpBurst, 0),
    crdWaitMs: int(env, 'SYNC_CRD_WAIT_MS', defaults.crdWaitMs, 0),
    applyConcurrency: int(env, 'SYNC_APPLY_CONCURRENCY', defaults.applyConcurrency, 1),
    reconcileConcurrency: int(env, 'SYNC_RECONCILE_CONCURRENCY', defaults.reconcileConcurrency, 1),
    maxClusterClients: int(env, 'SYNC_MAX_CLUSTER_CLIENTS', defaults.maxClusterClients, 1),
    warmClusterClients: int(env, 'SYNC_WARM_CLUSTER_CLIENTS', defaults.warmClusterClients, 1),
  };
}
