// objects.ts: verbs on arbitrary objects (get, server-side apply, delete, list),
// addressed through a RestMapper.
import { PatchType, type CallOptions, type KubeClient } from './client.ts';
import { resourcePath, type ResourceInfo, type RestMapper } from './discovery.ts';
import { isNotFound } from './errors.ts';
import type { KubeObject } from './types.ts';
import type { ObjectId } from '../model.ts';
import { checkReadIdentity, deleteOptionsFor } from '../policy/rules.ts';

export type { KubeObject } from './types.ts';

/** Cluster bundles a client with its RestMapper: everything needed to act on one cluster. */
export interface Cluster {
  client: KubeClient;
  mapper: RestMapper;
  /** lists, when present, serves recent snapshots to confirm objects are unchanged (a ListCache). */
  lists?: Snapshots;
}

/**
 * confirmingWrites wraps a cluster so that confirm runs (once) before its first request
 * that may write (every method but GET; dry runs change nothing), and a write waits for it
 * and fails with it.
 */
export function confirmingWrites(skr: Cluster, confirm: () => Promise<void>): Cluster {
  let confirmed: Promise<void> | undefined;
  const target = skr.client;
  return withCall(skr, (method, path, opts) =>
    mayWrite(method, opts)
      ? (confirmed ??= confirm()).then(() => target.call(method, path, opts))
      : target.call(method, path, opts),
  );
}

/** mayWrite: every method but GET may write; a dry run changes nothing. */
const mayWrite = (method: string, opts?: CallOptions): boolean =>
  method !== 'GET' && opts?.query?.dryRun === undefined;

/** withCall is skr with its client's call replaced, every other member of the client as it is. */
function withCall(
  skr: Cluster,
  call: (method: string, path: string, opts?: CallOptions) => Promise<unknown>,
): Cluster {
  const client = new Proxy(skr.client, {
    get: (t, prop) => {
      if (prop === 'call') return call;
      const v = Reflect.get(t, prop, t) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  return { ...skr, client };
}

/**
 * ReadsAhead are GETs of objects a run is likely to read (those an event names), made
 * while the run reads what tells it which objects it needs (its SyncResource): the
 * answers, by request path, once each object's kind is resolved.
 */
export interface ReadsAhead {
  cluster: Cluster;
  answers: Promise<Map<string, Promise<unknown>>>;
}

/**
 * readAhead starts a GET of each object named in c (the caller bounds them); an object of a
 * kind c does not serve, or a namespaced one named without a namespace, is left out. Nothing
 * waits for the answers and no failure surfaces here: the run that uses one (usingReadsAhead)
 * gets it as it would have got its own.
 */
export function readAhead(c: Cluster, ids: readonly ObjectId[]): ReadsAhead {
  const started = ids.map(async (id) => {
    const info = await c.mapper.find(id.apiVersion, id.kind);
    if (!info || (info.namespaced && !id.namespace)) return undefined;
    const path = resourcePath(info, info.namespaced ? id.namespace : undefined, id.name);
    const answer = c.client.call('GET', path);
    answer.catch(() => {});
    return [path, answer] as const;
  });
  const answers = Promise.all(started.map((p) => p.catch(() => undefined))).then(
    (entries) => new Map(entries.filter((e) => e !== undefined)),
  );
  return { cluster: c, answers };
}

/**
 * usingReadsAhead wraps a cluster so that its first GET of a path read ahead takes that
 * read's answer instead of asking again, until the first write through it: every read
 * after that is asked anew, so a run never decides on a state older than its own writes.
 * A read ahead that failed other than with NotFound is asked again.
 */
export function usingReadsAhead(skr: Cluster, ahead: ReadsAhead): Cluster {
  const target = skr.client;
  let answers: ReadsAhead['answers'] | undefined = ahead.answers;
  return withCall(skr, async (method, path, opts) => {
    if (mayWrite(method, opts)) answers = undefined;
    // A GET made before any write may take an answer asked for before it too.
    const at = method === 'GET' && opts === undefined ? answers : undefined;
    const ready = at && (await at);
    const answer = ready?.get(path);
    if (!answer) return target.call(method, path, opts);
    ready!.delete(path);
    return answer.catch((err: unknown) => {
      if (isNotFound(err)) throw err;
      return target.call(method, path, opts);
    });
  });
}

/** Snapshots serve an object as a recent list saw it, no older than since (ms since the epoch). */
export interface Snapshots {
  get(
    info: ResourceInfo,
    namespace: string | undefined,
    name: string,
    since?: number,
  ): Promise<KubeObject | undefined>;
}

/** UnknownKindError says the cluster does not serve apiVersion/kind. */
export class UnknownKindError extends Error {
  constructor(apiVersion: string, kind: string) {
    super(`the cluster does not serve kind ${kind} in ${apiVersion}`);
    this.name = 'UnknownKindError';
  }
}

/** mustFind resolves a kind or throws UnknownKindError. */
export async function mustFind(c: Cluster, apiVersion: string, kind: string): Promise<ResourceInfo> {
  const info = await c.mapper.find(apiVersion, kind);
  if (!info) throw new UnknownKindError(apiVersion, kind);
  return info;
}

/**
 * getObject reads an object, or returns undefined when it does not exist. What comes
 * back must be exactly that object (checkReadIdentity), else IdentityMismatchError.
 */
export async function getObject(
  c: Cluster,
  info: ResourceInfo,
  namespace: string | undefined,
  name: string,
): Promise<KubeObject | undefined> {
  let o: KubeObject;
  try {
    o = await c.client.call<KubeObject>('GET', resourcePath(info, namespace, name));
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
  checkReadIdentity(info.kind, info.namespaced ? namespace : undefined, name, o);
  return o;
}

/** applyObject server-side-applies obj as fieldManager (forced unless force is false); subresource "status" writes the status; dryRun changes nothing. */
export async function applyObject(
  c: Cluster,
  info: ResourceInfo,
  obj: KubeObject,
  fieldManager: string,
  subresource?: 'status',
  dryRun = false,
  force = true,
): Promise<KubeObject> {
  return c.client.call<KubeObject>(
    'PATCH',
    resourcePath(info, obj.metadata.namespace, obj.metadata.name, subresource),
    {
      query: { fieldManager, force, ...(dryRun ? { dryRun: 'All' } : {}) },
      body: obj,
      contentType: PatchType.apply,
    },
  );
}

/**
 * Deletion is what a delete came to: the object removed (deleted), not there to begin with
 * (absent), or asked to go without the answer saying it went (requested: finalizers or a
 * grace period may hold it, and kinds whose store answers with the object say nothing).
 */
export type Deletion = 'deleted' | 'absent' | 'requested';

/**
 * deleteObject deletes one named object with background propagation, on the condition
 * that it is still the object read (its uid). The API server answers a delete that removed
 * the object with a Status of success naming its uid, so that a client can tell it from
 * one still waiting for finalizers: that answer is 'deleted', and needs no read to confirm.
 */
export async function deleteObject(c: Cluster, info: ResourceInfo, live: KubeObject): Promise<Deletion> {
  const body = deleteOptionsFor(info.kind, live);
  try {
    const answer = await c.client.call<{ kind?: string; status?: string; details?: { uid?: string } }>(
      'DELETE',
      resourcePath(info, live.metadata.namespace, live.metadata.name),
      { body },
    );
    const removed =
      answer?.kind === 'Status' && answer.status === 'Success' && answer.details?.uid === live.metadata.uid;
    return removed ? 'deleted' : 'requested';
  } catch (err) {
    if (isNotFound(err)) return 'absent';
    throw err;
  }
}

/** listObjects lists a kind, following continue tokens, with optional selectors (and headers: a metadata-only list). */
export async function listObjects<T = KubeObject>(
  c: Pick<Cluster, 'client'>,
  info: ResourceInfo,
  opts: { namespace?: string; labelSelector?: string; limit?: number; headers?: Record<string, string> } = {},
  view: (o: KubeObject) => T = (o) => o as T,
): Promise<T[]> {
  const out: T[] = [];
  let cont: string | undefined;
  do {
    const page = await c.client.call<{ items: KubeObject[] | null; metadata: { continue?: string } }>(
      'GET',
      resourcePath(info, opts.namespace),
      {
        query: { labelSelector: opts.labelSelector, limit: opts.limit ?? 500, continue: cont },
        ...(opts.headers ? { headers: opts.headers } : {}),
      },
    );
    for (const item of page.items ?? [])
      out.push(view({ ...item, apiVersion: info.apiVersion, kind: info.kind }));
    cont = page.metadata.continue || undefined;
  } while (cont);
  return out;
}
