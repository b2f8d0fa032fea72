// discovery.ts maps apiVersion/kind to REST resources through the API server's
// discovery documents, cached per group-version. A kind missing from the cache
// triggers one refresh of its group-version (a CRD may have just been established).
import type { KubeClient } from './client.ts';
import { KubeApiError } from './errors.ts';
import { parseApiVersion, validateKind } from '../policy/identity.ts';

/** ResourceInfo is what the engine needs to address objects of one kind. */
export interface ResourceInfo {
  apiVersion: string;
  kind: string;
  resource: string;
  namespaced: boolean;
  hasStatus: boolean;
}

interface ApiResourceList {
  resources: { name: string; kind: string; namespaced: boolean }[];
}

type GroupVersion = Map<string, ResourceInfo> | 'absent';

/**
 * Discovery data shared by every client of the process: SKRs of one Kubernetes version
 * (and the same CRDs) serve the same group-versions, so a thousand cached clients hold
 * one copy of each group-version's kinds instead of a thousand. Keyed by content; bounded
 * (beyond it, a client keeps its own copy).
 */
const shared = new Map<string, Map<string, ResourceInfo>>();
const SHARED_MAX = 1_000;

function intern(apiVersion: string, byKind: Map<string, ResourceInfo>): Map<string, ResourceInfo> {
  const key = `${apiVersion} ${JSON.stringify([...byKind.values()])}`;
  const hit = shared.get(key);
  if (hit) return hit;
  if (shared.size < SHARED_MAX) shared.set(key, byKind);
  return byKind;
}

/** RestMapper resolves kinds for one cluster. */
export class RestMapper {
  private readonly client: KubeClient;
  private readonly cache = new Map<string, { at: number; gv: GroupVersion }>();
  private readonly missTtlMs: number;
  private readonly now: () => number;

  constructor(client: KubeClient, opts: { missTtlMs?: number; now?: () => number } = {}) {
    this.client = client;
    this.missTtlMs = opts.missTtlMs ?? 2_000;
    this.now = opts.now ?? Date.now;
  }

  /** find returns the resource for apiVersion/kind, or undefined if the cluster does not serve it. */
  async find(apiVersion: string, kind: string): Promise<ResourceInfo | undefined> {
    // Discovery paths are built from apiVersion: only a valid one is looked up (IdentityError).
    parseApiVersion(apiVersion);
    validateKind(kind);
    const cached = this.cache.get(apiVersion);
    if (cached && cached.gv !== 'absent' && cached.gv.has(kind)) return cached.gv.get(kind);
    // Unknown here: refresh unless we looked very recently.
    if (cached && this.now() - cached.at < this.missTtlMs) return undefined;
    const gv = await this.load(apiVersion);
    this.cache.set(apiVersion, { at: this.now(), gv });
    return gv === 'absent' ? undefined : gv.get(kind);
  }

  /** forget drops what is known about apiVersion, e.g. after its CRD was removed. */
  forget(apiVersion: string): void {
    this.cache.delete(apiVersion);
  }

  private async load(apiVersion: string): Promise<GroupVersion> {
    const path = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    let list: ApiResourceList;
    try {
      list = await this.client.call<ApiResourceList>('GET', path);
    } catch (err) {
      if (err instanceof KubeApiError && (err.code === 404 || err.code === 503)) return 'absent';
      throw err;
    }
    const byKind = new Map<string, ResourceInfo>();
    const withStatus = new Set(
      list.resources.filter((r) => r.name.endsWith('/status')).map((r) => r.name.split('/')[0]),
    );
    for (const r of list.resources) {
      if (r.name.includes('/')) continue;
      byKind.set(r.kind, {
        apiVersion,
        kind: r.kind,
        resource: r.name,
        namespaced: r.namespaced,
        hasStatus: withStatus.has(r.name),
      });
    }
    return intern(apiVersion, byKind);
  }
}

/**
 * resourcePath builds the REST path of a collection or object, optionally a subresource,
 * from validated segments (identity.ts); the client refuses any path with an unsafe one.
 */
export function resourcePath(
  info: ResourceInfo,
  namespace?: string,
  name?: string,
  subresource?: string,
): string {
  const base = info.apiVersion.includes('/') ? `/apis/${info.apiVersion}` : `/api/${info.apiVersion}`;
  const ns = info.namespaced && namespace ? `/namespaces/${namespace}` : '';
  const obj = name ? `/${name}` : '';
  const sub = name && subresource ? `/${subresource}` : '';
  return `${base}${ns}/${info.resource}${obj}${sub}`;
}
