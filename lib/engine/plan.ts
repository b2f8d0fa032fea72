// plan.ts turns spec items into planned operations: parsed objects with their
// identity, strategy options and REST mapping, or an item result when the item
// cannot be applied (invalid text, restricted kind, unknown kind).
import type { Config } from '../config.ts';
import type { ResourceInfo } from '../kube/discovery.ts';
import type { Cluster, KubeObject } from '../kube/objects.ts';
import { describeId, idOf, ManifestError, parseManifest } from '../manifest.ts';
import { objectKey, type ObjectId, type SyncItem } from '../model.ts';
import { dataFromRefusal, firstClaims, restriction } from '../policy/rules.ts';
import { isDnsSubdomain, parseApiVersion } from '../policy/identity.ts';
import { itemRefusal, type SyncPolicy } from '../policy/tenancy.ts';
import { SourceError } from '../cluster/sources.ts';
import { strategies, type StrategyOptions } from '../strategies.ts';
import { compileFeedback, type FeedbackPath } from '../feedback.ts';
import { compileRules, type CompiledRules } from '../health-rules.ts';
import { inSkr } from './unreachable.ts';
import { result, type ItemResult } from './result.ts';

/**
 * PlanItem is one spec item on its way through a run, in stages: parsed (its text read, so
 * its object's identity is known: ParsedItem), then resolved (its kind mapped to a REST
 * resource in the SKR: ResolvedItem). An item whose outcome is known before it reaches the
 * SKR is settled (done) at whichever stage that happens, and goes no further.
 */
export interface PlanItem {
  readonly item: SyncItem;
  readonly opts: StrategyOptions;
  /** object is the parsed resource (absent for subresource-only items). */
  readonly object?: KubeObject;
  /** status is the parsed subresource text. */
  readonly status?: KubeObject;
  readonly id?: ObjectId;
  readonly info?: ResourceInfo;
  /** done is set once the item's outcome is known without touching the SKR (settle). */
  readonly done?: ItemResult;
  /** secrets are the values a dataFrom item took from its source (base64 and plain), for redaction only. */
  readonly secrets?: readonly string[];
  /** sourceVersion is the resourceVersion of the source Secret a dataFrom item was filled from. */
  readonly sourceVersion?: string;
  /** rules are the item's own health expressions, compiled. */
  readonly rules?: CompiledRules;
  /** feedback are the item's feedback paths, compiled. */
  readonly feedback?: FeedbackPath[];
}

/** ParsedItem is an item whose text was read: the object it names is known. */
export interface ParsedItem extends PlanItem {
  readonly id: ObjectId;
}

/** ResolvedItem is a parsed item whose kind the SKR serves: the engine reads and writes its object (isResolved: and it is not settled). */
export interface ResolvedItem extends ParsedItem {
  readonly info: ResourceInfo;
}

/** settle is p with its outcome known: it goes no further in the run. */
export const settle = <P extends PlanItem>(p: P, done: ItemResult): P => ({ ...p, done });

export const isParsed = (p: PlanItem): p is ParsedItem => p.id !== undefined;
export const isResolved = (p: PlanItem): p is ResolvedItem =>
  p.id !== undefined && p.info !== undefined && p.done === undefined;

/** ResourceTexts are the texts (or the reasons there is none) of the resourceFrom items of a run, by item name. */
export type ResourceTexts = Map<string, string | SourceError>;

const sameId = (a: ObjectId, b: ObjectId) =>
  a.apiVersion === b.apiVersion &&
  a.kind === b.kind &&
  a.name === b.name &&
  (a.namespace ?? '') === (b.namespace ?? '');

/**
 * parseItems parses every item; problems stay on their item. A resourceFrom item takes
 * its text from texts (read in the KCP); without one (offline) it is left unparsed.
 */
export function parseItems(items: SyncItem[], config: Config, texts?: ResourceTexts): PlanItem[] {
  return markDuplicates(
    items.map((item) => parseItem(item, config, texts)),
    config,
  );
}

/** parseItem reads one item's texts: the object it names, its compiled rules, or the reason it cannot be applied. */
function parseItem(item: SyncItem, config: Config, texts: ResourceTexts | undefined): PlanItem {
  const base: PlanItem = { item, opts: strategies[item.strategy] };
  try {
    const text =
      item.resource !== undefined
        ? item.resource
        : item.resourceFrom !== undefined
          ? texts?.get(item.name)
          : undefined;
    if (item.resource === undefined && item.resourceFrom !== undefined) {
      if (text instanceof SourceError)
        return settle(base, result(item.name, 'Error', text.reason, text.message));
      if (text === undefined) {
        const ref = item.resourceFrom.configMapKeyRef;
        return settle(
          base,
          result(
            item.name,
            'Processing',
            'ResourceSourcePending',
            `the text is read from ConfigMap ${ref?.name} key ${ref?.key} in the KCP`,
          ),
        );
      }
    }
    const limit = item.resource !== undefined ? config.maxManifestBytes : config.maxReferencedManifestBytes;
    const object = typeof text === 'string' ? parseManifest(text, 'resource', limit) : undefined;
    const status = item.subresource !== undefined ? parseStatus(item.subresource, object, config) : undefined;
    const obj = object ?? status;
    if (!obj) throw new ManifestError('item has neither resource nor subresource');
    const id = idOf(obj);
    const parsed: ParsedItem = { ...base, id, ...(object ? { object } : {}), ...(status ? { status } : {}) };
    if (item.dataFrom !== undefined) checkDataFrom(parsed);
    const p: ParsedItem = {
      ...parsed,
      ...(item.health !== undefined ? { rules: compileRules(item.health) } : {}),
      ...(item.feedback !== undefined ? { feedback: compileFeedback(item.feedback, id) } : {}),
    };
    const restricted = restriction(id, config, byReference(p));
    return restricted ? settle(p, result(item.name, 'Warning', 'Restricted', restricted)) : p;
  } catch (err) {
    if (!(err instanceof ManifestError)) throw err;
    return settle(base, result(item.name, 'Error', 'InvalidManifest', err.message));
  }
}

/** parseStatus reads a subresource text: it must have a status, and name the item's object if it has one. */
function parseStatus(text: string, object: KubeObject | undefined, config: Config): KubeObject {
  const status = parseManifest(text, 'subresource', config.maxManifestBytes);
  if (status.status === undefined) throw new ManifestError('subresource has no status');
  if (object && !sameId(idOf(object), idOf(status)))
    throw new ManifestError(
      `subresource names ${describeId(idOf(status))} but resource names ${describeId(idOf(object))}`,
    );
  return status;
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

/** byReference tells whether p is a v1 Secret whose values come by reference (dataFrom): the one Secret that is not restricted. */
const byReference = (p: PlanItem): boolean =>
  p.item.dataFrom !== undefined && p.object?.apiVersion === 'v1' && p.object.kind === 'Secret';

/** crdProvides returns the CRD item of plan that defines apiVersion/kind, if any. */
export function crdProvides(
  plan: readonly PlanItem[],
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
 * markDuplicates settles every item that names an object an earlier item already names
 * (DuplicateObject): the first in spec order owns it. Items that only write a status are
 * compared among themselves (they may name an object another item creates). It runs on the
 * parsed items, and again (among: the resolved ones) once discovery has settled their
 * namespaces (a cluster-scoped object loses the namespace its manifest gave it).
 */
export function markDuplicates(
  plan: readonly PlanItem[],
  config: Config,
  among: (p: PlanItem) => boolean = () => true,
): PlanItem[] {
  const named = plan.filter(
    (p): p is ParsedItem => among(p) && p.id !== undefined && p.done?.reason !== 'DuplicateObject',
  );
  const keys = named.map((p) => ({
    name: p.item.name,
    key: `${p.object ? 'object' : 'status'} ${objectKey({ ...p.id, namespace: p.id.namespace ?? config.defaultNamespace })}`,
  }));
  const duplicates = new Map<PlanItem, string>();
  for (const [i, owner] of firstClaims(keys)) duplicates.set(named[i]!, owner);
  return plan.map((p) => {
    const owner = duplicates.get(p);
    return owner === undefined || !isParsed(p)
      ? p
      : settle(
          p,
          result(
            p.item.name,
            'Error',
            'DuplicateObject',
            `${describeId(p.id)} is already named by item ${owner}; an object belongs to one item`,
          ),
        );
  });
}

/**
 * resolveKind maps an item to its REST resource and settles its namespace: a namespaced
 * object without one gets the default; a cluster-scoped one with one loses it (kubectl and
 * the API server ignore it: upstream manifests carry one, e.g. a ClusterRoleBinding
 * rendered into a namespace). A kind the SKR does not serve is an error, unless a CRD item
 * of the same SyncResource defines it (then the item waits for it).
 */
export async function resolveKind(
  p: PlanItem,
  plan: readonly PlanItem[],
  skr: Cluster,
  config: Config,
  policy?: SyncPolicy,
): Promise<PlanItem> {
  if (p.done || !isParsed(p)) return p;
  const info = await inSkr(() => skr.mapper.find(p.id.apiVersion, p.id.kind));
  if (!info) {
    const crd = crdProvides(plan, p.id.apiVersion, p.id.kind);
    return settle(
      p,
      crd
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
          ),
    );
  }
  const namespace = info.namespaced ? p.id.namespace || config.defaultNamespace : undefined;
  const r: ResolvedItem =
    namespace === p.id.namespace ? { ...p, info } : { ...inNamespace(p, namespace), info };
  // The namespace is settled only now (defaulted): check it again.
  const restricted = restriction(r.id, config, byReference(r));
  if (restricted) return settle(r, result(p.item.name, 'Warning', 'Restricted', restricted));
  // A team's SyncResource: its policy, on the kind and scope discovery gave (never the manifest's).
  const refused = policy ? itemRefusal(policy, identityOf(r.id, info), p.item.strategy) : undefined;
  return refused ? settle(r, result(p.item.name, 'Error', 'NotPermitted', refused)) : r;
}

/** inNamespace is p with its object, status and identity in namespace (undefined: cluster-scoped). */
function inNamespace<P extends ParsedItem>(p: P, namespace: string | undefined): P {
  const move = (o: KubeObject): KubeObject => {
    const { namespace: _, ...metadata } = o.metadata;
    return { ...o, metadata: namespace === undefined ? metadata : { ...metadata, namespace } };
  };
  const { namespace: _, ...id } = p.id;
  return {
    ...p,
    id: namespace === undefined ? id : { ...id, namespace },
    ...(p.object ? { object: move(p.object) } : {}),
    ...(p.status ? { status: move(p.status) } : {}),
  };
}

/** identityOf is what a policy is checked on: group and kind as discovery serves them, scope and settled namespace. */
export const identityOf = (id: ObjectId, info: Pick<ResourceInfo, 'namespaced' | 'kind'>) => ({
  group: parseApiVersion(id.apiVersion).group,
  kind: info.kind,
  name: id.name,
  namespace: id.namespace,
  namespaced: info.namespaced,
});
