// plan.ts turns spec items into planned operations: parsed objects with their
// identity, strategy options and REST mapping, or an item result when the item
// cannot be applied (invalid text, restricted kind, unknown kind).
import type { Config } from '../config.ts';
import type { ResourceInfo } from '../kube/discovery.ts';
import type { Cluster, KubeObject } from '../kube/objects.ts';
import { describeId, idOf, ManifestError, parseManifest } from '../manifest.ts';
import { objectKey, type ObjectId, type SyncItem } from '../model.ts';
import { isDnsSubdomain } from '../policy/identity.ts';
import { dataFromRefusal, firstClaims, restriction, secretValues } from '../policy/rules.ts';
import { parseApiVersion } from '../policy/identity.ts';
import { itemRefusal, type SyncPolicy } from '../policy/tenancy.ts';
import { SourceError } from '../cluster/sources.ts';
import { TransientError } from '../kube/errors.ts';
import { mapLimit } from '../concurrency.ts';
import { strategies, type StrategyOptions } from '../strategies.ts';
import { compileFeedback, type FeedbackPath } from '../feedback.ts';
import { compileRules, type CompiledRules } from '../health.ts';
import { guard } from './unreachable.ts';
import { result, type ItemResult } from './result.ts';

/**
 * PlanItem is one spec item on its way through a run, in stages: parsed (its text read, so
 * its object's identity is known: ParsedItem), then resolved (its kind mapped to a REST
 * resource in the SKR: ResolvedItem). An item whose outcome is known before it reaches the
 * SKR is settled (done) at whichever stage that happens, and goes no further.
 */
export interface PlanItem {
  item: SyncItem;
  opts: StrategyOptions;
  /** object is the parsed resource (absent for subresource-only items). */
  object?: KubeObject;
  /** status is the parsed subresource text. */
  status?: KubeObject;
  id?: ObjectId;
  info?: ResourceInfo;
  /** done is set once the item's outcome is known without touching the SKR. */
  done?: ItemResult;
  /** applied holds the digests of the object (and status) as the server holds them after this run (drift.ts). */
  applied?: { digest?: string; statusDigest?: string; manifest?: string };
  /** secrets are the values a dataFrom item took from its source (base64 and plain), for redaction only. */
  secrets?: string[];
  /** sourceVersion is the resourceVersion of the source Secret a dataFrom item was filled from. */
  sourceVersion?: string;
  /** rules are the item's own health expressions, compiled. */
  rules?: CompiledRules;
  /** feedback are the item's feedback paths, compiled. */
  feedback?: FeedbackPath[];
}

/** ParsedItem is an item whose text was read: the object it names is known. */
export interface ParsedItem extends PlanItem {
  id: ObjectId;
}

/** ResolvedItem is a parsed item whose kind the SKR serves: the engine reads and writes its object (isResolved: and it is not settled). */
export interface ResolvedItem extends ParsedItem {
  info: ResourceInfo;
}

export const isParsed = (p: PlanItem): p is ParsedItem => p.id !== undefined;
export const isResolved = (p: PlanItem): p is ResolvedItem =>
  p.id !== undefined && p.info !== undefined && p.done === undefined;

/** SourceReader returns the data and resourceVersion of the source Secret name for this SyncResource, or throws a SourceError. */
export type SourceReader = (name: string) => Promise<{ data: Record<string, string>; version: string }>;

const sameId = (a: ObjectId, b: ObjectId) =>
  a.apiVersion === b.apiVersion &&
  a.kind === b.kind &&
  a.name === b.name &&
  (a.namespace ?? '') === (b.namespace ?? '');

/** ResourceSourceReader returns the text a resourceFrom item names, or throws a SourceError. */
export type ResourceSourceReader = (name: string, key: string) => Promise<string>;

/** ResourceTexts are the texts (or the reasons there is none) of the resourceFrom items of a run, by item name. */
export type ResourceTexts = Map<string, string | SourceError>;

/** readResourceTexts reads the text of every resourceFrom item; a failure to read the KCP is the run's (transient). */
export async function readResourceTexts(
  items: SyncItem[],
  read: ResourceSourceReader | undefined,
  concurrency: number,
): Promise<ResourceTexts> {
  const texts: ResourceTexts = new Map();
  await mapLimit(
    items.filter((i) => i.resourceFrom !== undefined && i.resource === undefined),
    concurrency,
    async (i) => {
      const { name, key } = i.resourceFrom!.configMapKeyRef;
      if (!read)
        return void texts.set(
          i.name,
          new SourceError(`ConfigMap ${name} (resourceFrom) cannot be read here`, 'ResourceSourceNotFound'),
        );
      try {
        texts.set(i.name, await read(name, key));
      } catch (err) {
        if (!(err instanceof SourceError)) throw err;
        texts.set(i.name, err);
      }
    },
  );
  return texts;
}

/**
 * parseItems parses every item; problems stay on their item. A resourceFrom item takes
 * its text from texts (read in the KCP); without one (offline) it is left unparsed.
 */
export function parseItems(items: SyncItem[], config: Config, texts?: ResourceTexts): PlanItem[] {
  const plan = items.map((item) => {
    const p: PlanItem = { item, opts: strategies[item.strategy] };
    try {
      if (item.resource !== undefined)
        p.object = parseManifest(item.resource, 'resource', config.maxManifestBytes);
      else if (item.resourceFrom !== undefined) {
        const text = texts?.get(item.name);
        if (text instanceof SourceError) {
          p.done = result(item.name, 'Error', text.reason, text.message);
          return p;
        }
        if (text === undefined) {
          const ref = item.resourceFrom.configMapKeyRef;
          p.done = result(
            item.name,
            'Processing',
            'ResourceSourcePending',
            `the text is read from ConfigMap ${ref?.name} key ${ref?.key} in the KCP`,
          );
          return p;
        }
        p.object = parseManifest(text, 'resource', config.maxReferencedManifestBytes);
      }
      if (item.subresource !== undefined) {
        p.status = parseManifest(item.subresource, 'subresource', config.maxManifestBytes);
        if (p.status.status === undefined) throw new ManifestError('subresource has no status');
        if (p.object && !sameId(idOf(p.object), idOf(p.status))) {
          throw new ManifestError(
            `subresource names ${describeId(idOf(p.status))} but resource names ${describeId(idOf(p.object))}`,
          );
        }
      }
      const obj = p.object ?? p.status;
      if (!obj) throw new ManifestError('item has neither resource nor subresource');
      p.id = idOf(obj);
      if (item.dataFrom !== undefined) checkDataFrom(p);
      if (item.health !== undefined) p.rules = compileRules(item.health);
      if (item.feedback !== undefined) p.feedback = compileFeedback(item.feedback, p.id);
      const restricted = restriction(p.id, config, byReference(p));
      if (restricted) p.done = result(item.name, 'Warning', 'Restricted', restricted);
    } catch (err) {
      if (!(err instanceof ManifestError)) throw err;
      p.done = result(item.name, 'Error', 'InvalidManifest', err.message);
    }
    return p;
  });
  markDuplicates(plan, config);
  return plan;
}

/**
 * checkDataFrom enforces where values by reference may go (dataFromRefusal) and that the
 * reference names a Secret.
 */
function checkDataFrom(p: PlanItem): void {
  const refused = dataFromRefusal(p.object, p.status !== undefined);
  if (refused) throw new ManifestError(refused);
  const name = (p.item.dataFrom as { secretRef?: { name?: unknown } } | null)?.secretRef?.name;
  if (typeof name !== 'string' || !isDnsSubdomain(name))
    throw new ManifestError('dataFrom.secretRef.name must name a Secret (a lowercase RFC 1123 subdomain)');
}

/**
 * fillSources gives every dataFrom item its source Secret's data; a source that is missing
 * or may not ship here settles the item (SecretSourceNotFound, SecretSourceRejected) before
 * anything is read or written in the SKR. A failure to read is the run's (transient).
 */
export async function fillSources(
  plan: PlanItem[],
  read: SourceReader | undefined,
  concurrency: number,
): Promise<void> {
  await mapLimit(
    plan.filter((p) => !p.done && p.item.dataFrom !== undefined),
    concurrency,
    async (p) => {
      const name = p.item.dataFrom!.secretRef.name;
      if (!read) {
        p.done = result(
          p.item.name,
          'Error',
          'SecretSourceNotFound',
          `Secret ${name} (dataFrom.secretRef) cannot be read here`,
        );
        return;
      }
      try {
        const { data, version } = await read(name);
        p.object = { ...p.object!, data };
        p.sourceVersion = version;
        p.secrets = secretValues(data);
      } catch (err) {
        if (!(err instanceof SourceError)) throw err;
        p.done = result(p.item.name, 'Error', err.reason, err.message);
      }
    },
  );
}

/**
 * confirmSources re-reads the source of every dataFrom item this run wrote and fails the
 * run (transient: it is redelivered) if one changed meanwhile. Two runs of one
 * SyncResource may overlap (two replicas): one that read a source before a rotation and
 * wrote after the other wrote the new value must not be the last word.
 */
export async function confirmSources(plan: PlanItem[], read: SourceReader | undefined): Promise<void> {
  for (const p of plan) {
    if (p.sourceVersion === undefined || !read) continue;
    const name = p.item.dataFrom!.secretRef.name;
    const now = await read(name).then(
      (s) => s.version,
      (err: unknown) => (err instanceof SourceError ? undefined : Promise.reject(err)),
    );
    if (now !== p.sourceVersion)
      throw new TransientError(
        `Secret ${name} (dataFrom.secretRef) changed while this run applied it; retry`,
        'SecretSourceChanged',
      );
  }
}

/** byReference tells whether p is a v1 Secret whose values come by reference (dataFrom): the one Secret that is not restricted. */
const byReference = (p: PlanItem): boolean =>
  p.item.dataFrom !== undefined && p.object?.apiVersion === 'v1' && p.object.kind === 'Secret';

/**
 * markDuplicates makes every item that names an object an earlier item already names an
 * Error (DuplicateObject): the first in spec order owns it. Items that only write a status
 * are compared among themselves (they may name an object another item creates). It runs
 * on the parsed items, and again once discovery has settled their namespaces (a
 * cluster-scoped object loses the namespace its manifest gave it).
 */
export function markDuplicates(plan: PlanItem[], config: Config): void {
  const named = plan.filter(
    (p): p is ParsedItem => p.id !== undefined && p.done?.reason !== 'DuplicateObject',
  );
  const keys = named.map((p) => ({
    name: p.item.name,
    key: `${p.object ? 'object' : 'status'} ${objectKey({ ...p.id, namespace: p.id.namespace ?? config.defaultNamespace })}`,
  }));
  for (const [i, owner] of firstClaims(keys)) {
    const p = named[i]!;
    p.done = result(
      p.item.name,
      'Error',
      'DuplicateObject',
      `${describeId(p.id)} is already named by item ${owner}; an object belongs to one item`,
    );
  }
}

/** crdProvides returns the CRD item of plan that defines apiVersion/kind, if any. */
export function crdProvides(
  plan: PlanItem[],
  apiVersion: string,
  kind: string,
): (PlanItem & { object: KubeObject }) | undefined {
  const [group, version] = apiVersion.split('/');
  return plan.find((p): p is PlanItem & { object: KubeObject } => {
    if (p.object?.kind !== 'CustomResourceDefinition') return false;
    const spec = p.object.spec as
      { group?: string; names?: { kind?: string }; versions?: { name?: string }[] } | undefined;
    return (
      spec?.group === group &&
      spec?.names?.kind === kind &&
      (spec?.versions ?? []).some((v) => v.name === version)
    );
  });
}

/**
 * resolveKind maps an item to its REST resource and settles its namespace: a
 * namespaced object without one gets the default; a cluster-scoped one with one is
 * an error. A kind the SKR does not serve is an error, unless a CRD item of the same
 * SyncResource defines it (then the item waits for it).
 */
export async function resolveKind(
  p: PlanItem,
  plan: PlanItem[],
  skr: Cluster,
  config: Config,
  policy?: SyncPolicy,
): Promise<void> {
  if (p.done || !isParsed(p)) return;
  const info = await guard(() => skr.mapper.find(p.id.apiVersion, p.id.kind));
  if (!info) {
    const crd = crdProvides(plan, p.id.apiVersion, p.id.kind);
    p.done = crd
      ? result(
          p.item.name,
          'Processing',
          'WaitingForCRD',
          `waiting for CustomResourceDefinition ${crd.object.metadata.name} to be established`,
        )
      : result(
          p.item.name,
          'Error',
          'UnknownKind',
          `the SKR does not serve kind ${p.id.kind} in ${p.id.apiVersion}`,
        );
    return;
  }
  p.info = info;
  if (info.namespaced && !p.id.namespace) {
    p.id.namespace = config.defaultNamespace;
    const ns = (o: KubeObject) => ({ ...o, metadata: { ...o.metadata, namespace: config.defaultNamespace } });
    if (p.object) p.object = ns(p.object);
    if (p.status) p.status = ns(p.status);
  } else if (!info.namespaced && p.id.namespace) {
    // kubectl and the API server ignore the namespace of a cluster-scoped object (upstream
    // manifests carry one, e.g. a ClusterRoleBinding rendered into a namespace): so do we.
    delete p.id.namespace;
    const clusterScoped = (o: KubeObject) => {
      const { namespace: _, ...metadata } = o.metadata;
      return { ...o, metadata };
    };
    if (p.object) p.object = clusterScoped(p.object);
    if (p.status) p.status = clusterScoped(p.status);
  }
  // The namespace is settled only now (defaulted): check it again.
  const restricted = restriction(p.id, config, byReference(p));
  if (restricted) p.done = result(p.item.name, 'Warning', 'Restricted', restricted);
  // A team's SyncResource: its policy, on the kind and scope discovery gave (never the manifest's).
  const refused =
    policy && !p.done ? itemRefusal(policy, identityOf(p.id, info), p.item.strategy) : undefined;
  if (refused) p.done = result(p.item.name, 'Error', 'NotPermitted', refused);
}

/** identityOf is what a policy is checked on: group and kind as discovery serves them, scope and settled namespace. */
export const identityOf = (id: ObjectId, info: Pick<ResourceInfo, 'namespaced' | 'kind'>) => ({
  group: parseApiVersion(id.apiVersion).group,
  kind: info.kind,
  name: id.name,
  namespace: id.namespace,
  namespaced: info.namespaced,
});
